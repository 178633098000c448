#include "agent/repair_selection.hpp"

#include <algorithm>
#include <mutex>
#include <random>
#include <set>
#include <tuple>

#include <fmt/core.h>

#include "agent/prompt_builder.hpp"
#include "evaluator/verdict.hpp"
#include "tasks/task.hpp"
#include "traces/outcome.hpp"
#include "util/files.hpp"

namespace ptxbench::agent {

namespace fs = std::filesystem;
using Json = nlohmann::json;

nlohmann::json RepairSelectionSettings::to_json() const {
  return {{"cap_per_category", cap_per_category},
          {"cap_per_task", cap_per_task},
          {"max_seeds", max_seeds},
          {"seed", seed},
          {"categories", categories}};
}

nlohmann::json RepairSeed::to_json() const {
  Json conv = Json::array();
  for (const auto &m : conversation) conv.push_back({{"role", m.role}, {"content", m.content}});
  return {{"id", id},
          {"task_id", task_id},
          {"category", category},
          {"student_run_id", student_run_id},
          {"student_run_dir", student_run_dir},
          {"student_model", student_model},
          {"student_trajectory_id", student_trajectory_id},
          {"student_turn", student_turn},
          {"kernel_hash", kernel_hash},
          {"feedback_source", feedback_source},
          {"conversation", conv}};
}

util::Expected<RepairSeed> RepairSeed::from_json(const nlohmann::json &j) {
  if (!j.is_object()) return util::unexpected(std::string("a seed is not a JSON object"));
  RepairSeed s;
  auto str = [&](const char *key, std::string &out) -> bool {
    auto it = j.find(key);
    if (it == j.end() || !it->is_string()) return false;
    out = it->get<std::string>();
    return true;
  };
  for (auto [key, out] : {std::pair{"id", &s.id},
                          {"task_id", &s.task_id},
                          {"category", &s.category},
                          {"student_run_id", &s.student_run_id},
                          {"student_run_dir", &s.student_run_dir},
                          {"student_model", &s.student_model},
                          {"student_trajectory_id", &s.student_trajectory_id},
                          {"kernel_hash", &s.kernel_hash},
                          {"feedback_source", &s.feedback_source}}) {
    if (!str(key, *out)) return util::unexpected(fmt::format("seed field '{}' missing or not a string", key));
  }
  auto turn = j.find("student_turn");
  if (turn == j.end() || !turn->is_number_integer())
    return util::unexpected(std::string("seed field 'student_turn' missing or not an integer"));
  s.student_turn = turn->get<int>();
  auto conv = j.find("conversation");
  if (conv == j.end() || !conv->is_array() || conv->size() < 3)
    return util::unexpected(std::string("seed field 'conversation' missing or shorter than 3 messages"));
  for (const auto &m : *conv) {
    if (!m.is_object() || !m.contains("role") || !m["role"].is_string() || !m.contains("content") ||
        !m["content"].is_string())
      return util::unexpected(std::string("seed conversation: a message without string role and content"));
    s.conversation.push_back({m["role"].get<std::string>(), m["content"].get<std::string>()});
  }
  if (s.conversation.back().role != "user" || s.conversation[s.conversation.size() - 2].role != "assistant")
    return util::unexpected(std::string("seed conversation must end with the attempt and its feedback"));
  return s;
}

namespace {

std::string string_at(const Json &j, const char *key) {
  auto it = j.find(key);
  return it != j.end() && it->is_string() ? it->get<std::string>() : std::string();
}

/// "" when the turn is a failure to repair, else why not (and `category` is left empty).
std::string classify(const traces::TurnRecord &record, std::string &category) {
  // The failure category as the report and exports count it (traces/outcome.hpp).
  const std::string failure = traces::failure_category_of(record);
  if (failure == "request_failed") return "request failed (no answer)";
  if (failure == "skipped") return "not measured (GPU stages skipped)";
  if (failure == "unknown" || failure.empty()) return "no verdict status";
  if (failure == "ok") {
    // Skipped GPU stages leave a verdict ok with its axes unmeasured: nothing is known to repair.
    if (traces::correct_of(record) == true && traces::targets_executed_of(record) == true)
      return "ok (nothing to repair)";
    return "not measured (GPU stages skipped)";
  }
  if (failure == "targets_not_executed" && traces::correct_of(record) != true)
    return "not measured (GPU stages skipped)";
  category = failure;
  return "";
}

struct Candidate {
  RepairSeed seed;
  std::size_t order = 0;  ///< reading order: run, record
};

}  // namespace

FeedbackRegenerator default_feedback_regenerator() {
  struct Cache {
    std::mutex mutex;
    std::map<std::string, std::optional<PromptBuilder>> prompts;  // prompt dir -> builder
    std::map<std::string, std::vector<tasks::Task>> tasks;        // task dir -> tasks
  };
  auto cache = std::make_shared<Cache>();
  return [cache](const traces::TurnRecord &record,
                 const traces::RunRecord &run) -> std::optional<std::string> {
    std::optional<evaluator::Verdict> decoded = record.decoded_verdict();
    if (!decoded) return std::nullopt;
    std::string prompt_dir = string_at(run.config, "prompt_dir");  // the config stays JSON (RunConfig's)
    std::string task_dir = string_at(run.config, "task_dir");
    if (prompt_dir.empty()) prompt_dir = PromptBuilder::default_dir().string();
    if (task_dir.empty()) task_dir = tasks::default_task_dir().string();
    std::lock_guard lock(cache->mutex);
    auto &builder = cache->prompts[prompt_dir];
    if (!builder) {
      auto loaded = PromptBuilder::load(prompt_dir);
      if (!loaded) return std::nullopt;
      builder.emplace(std::move(*loaded));
    }
    if (!cache->tasks.count(task_dir)) {
      auto loaded = tasks::load_task_dir(task_dir);
      cache->tasks[task_dir] = loaded ? std::move(*loaded) : std::vector<tasks::Task>{};
    }
    const auto &all = cache->tasks[task_dir];
    auto task =
        std::find_if(all.begin(), all.end(), [&](const tasks::Task &t) { return t.id == record.task_id; });
    if (task == all.end()) return std::nullopt;
    const evaluator::Verdict &verdict = *decoded;
    if (record.response && record.response->finish_reason == "length" &&
        verdict.parse.status != evaluator::Status::ok)
      return builder->feedback_unusable_response(
          "your answer was cut off at max_tokens before it was complete; send a shorter one: the kernel and "
          "the manifest, with little prose around them");
    const std::string source = record.candidate ? record.candidate->kernel_source : "";
    const bool cuda = record.candidate && record.candidate->language == "cuda";
    const FeedbackSources sources{source, cuda ? std::string_view() : std::string_view(source), cuda};
    return builder->feedback(*task, verdict, &sources);
  };
}

namespace {

using CoverageRows = std::map<std::pair<std::string, std::string>, RepairCoverageRow>;

RepairCoverageRow &coverage_row(CoverageRows &rows, const std::string &task, const std::string &category) {
  auto &r = rows[{task, category}];
  r.task_id = task;
  r.category = category;
  return r;
}

/// The seed a failed turn makes (conversation, its feedback, where it came from), or nullopt with the
/// reason counted in `r.left_out`.
std::optional<RepairSeed> seed_of_failed_turn(const traces::TurnRecord &record, const traces::LoadedRun &run,
                                              const RepairSelectionSettings &settings,
                                              const FeedbackRegenerator &regenerate, RepairCoverageRow &r) {
  if (!settings.categories.empty() && std::find(settings.categories.begin(), settings.categories.end(),
                                                r.category) == settings.categories.end()) {
    ++r.left_out["category not asked for"];
    return std::nullopt;
  }
  const auto &response = record.response;
  const auto &messages = record.messages;
  if (!response || !messages || messages->empty()) {
    ++r.left_out["request or answer not recorded"];
    return std::nullopt;
  }
  RepairSeed seed;
  for (const auto &m : *messages) {
    if (m.role.empty()) {
      ++r.left_out["request or answer not recorded"];
      return std::nullopt;
    }
    seed.conversation.push_back({m.role, m.content});
  }
  if (seed.conversation.back().role != "user") {
    ++r.left_out["request or answer not recorded"];
    return std::nullopt;
  }
  std::string feedback = record.feedback;
  seed.feedback_source = "recorded";
  if (feedback.empty()) {
    auto rebuilt = regenerate ? regenerate(record, run.run) : std::nullopt;
    if (!rebuilt || rebuilt->empty()) {
      ++r.left_out["no feedback (last turn; could not rebuild it)"];
      return std::nullopt;
    }
    feedback = *rebuilt;
    seed.feedback_source = "regenerated";
  }
  const std::string &content = response->content;
  seed.conversation.push_back({"assistant", content.empty() ? "(empty response)" : content});
  seed.conversation.push_back({"user", feedback});
  return seed;
}

/// Every failed turn of the students that can be a seed, in reading order (run, record); counts the turns
/// that are not failures in `out` and the failures left out in `rows`. Returns the number of records read.
std::size_t read_candidates(const std::vector<traces::LoadedRun> &students,
                            const RepairSelectionSettings &settings, const FeedbackRegenerator &regenerate,
                            RepairSelection &out, CoverageRows &rows, std::vector<Candidate> &candidates) {
  std::size_t records = 0;
  for (const auto &run : students) {
    records += run.turns.size();
    const std::string run_id = run.run.run_id.empty() ? run.dir.filename().string() : run.run.run_id;
    // A turn resume sent again after a request failure has two records: the later one counts.
    std::map<std::pair<std::string, int>, const traces::TurnRecord *> latest;
    for (const auto &r : run.turns) {
      if (!r.has_identity) continue;
      latest[{r.trajectory_id, r.turn}] = &r;
    }
    for (const auto &[key, record_ptr] : latest) {
      const traces::TurnRecord &record = *record_ptr;
      ++out.student_turns;
      std::string category;
      const std::string not_failure = classify(record, category);
      if (!not_failure.empty()) {
        ++out.not_failures[not_failure];
        continue;
      }
      auto &r = coverage_row(rows, record.task_id, category);
      ++r.failed;
      auto seed = seed_of_failed_turn(record, run, settings, regenerate, r);
      if (!seed) continue;
      seed->task_id = record.task_id;
      seed->category = category;
      seed->student_run_id = run_id;
      seed->student_run_dir = run.dir.string();
      seed->student_model = traces::model_label(record);
      seed->student_trajectory_id = key.first;
      seed->student_turn = key.second;
      seed->id = fmt::format("{}/{}/{}", run_id, key.first, key.second);
      if (const auto v = record.decoded_verdict()) seed->kernel_hash = v->kernel_hash;
      if (seed->kernel_hash.empty() && record.candidate) seed->kernel_hash = record.candidate->kernel_hash;
      const std::size_t order = candidates.size();
      candidates.push_back({std::move(*seed), order});
    }
  }
  return records;
}

/// One failed kernel sent twice (a resent attempt, two students agreeing) is one seed: the first read.
void drop_repeated_kernels(std::vector<Candidate> &candidates, CoverageRows &rows) {
  std::set<std::tuple<std::string, std::string, std::string>> seen;
  std::vector<Candidate> unique;
  for (auto &c : candidates) {
    if (!c.seed.kernel_hash.empty() &&
        !seen.insert({c.seed.task_id, c.seed.category, c.seed.kernel_hash}).second) {
      ++coverage_row(rows, c.seed.task_id, c.seed.category).left_out["same failed kernel as another seed"];
      continue;
    }
    unique.push_back(std::move(c));
  }
  candidates = std::move(unique);
}

/// A stratum (task, category, student turn) of candidates, shuffled, and how far it has been drawn from.
struct Stratum {
  std::vector<Candidate *> *items;
  std::string task, category;
  std::size_t taken = 0;
  std::uint64_t rank = 0;
};

/// Strata (task, category, student turn), each shuffled with the recorded seed, then ranked with the same
/// generator (the shuffles come first, so a seed draws the same selection as before).
std::vector<Stratum> shuffled_strata(
    std::vector<Candidate> &candidates, std::uint64_t seed,
    std::map<std::tuple<std::string, std::string, int>, std::vector<Candidate *>> &strata) {
  for (auto &c : candidates) strata[{c.seed.task_id, c.seed.category, c.seed.student_turn}].push_back(&c);
  std::mt19937_64 rng(seed);
  for (auto &[key, bucket] : strata) {
    for (std::size_t i = bucket.size(); i > 1; --i) {  // Fisher-Yates: the same on every platform
      const std::size_t j = static_cast<std::size_t>(rng() % i);
      std::swap(bucket[i - 1], bucket[j]);
    }
  }
  std::vector<Stratum> visit;
  for (auto &[key, bucket] : strata) visit.push_back({&bucket, std::get<0>(key), std::get<1>(key), 0, rng()});
  return visit;
}

/// Strata are drawn from one item at a time: the one drawn from least so far, then the one whose task has
/// the fewest seeds of that category, then whose task has the fewest seeds, then a seeded rank. So every
/// stratum keeps its share, and a category cap is spread over the tasks instead of filled in name order.
std::vector<Candidate *> draw_under_caps(std::vector<Stratum> &visit, const RepairSelectionSettings &settings,
                                         CoverageRows &rows) {
  std::map<std::string, int> per_task, per_category;
  std::map<std::pair<std::string, std::string>, int> per_task_category;
  std::vector<Candidate *> chosen;
  auto priority = [&](const Stratum &st) {
    return std::make_tuple(st.taken, per_task_category[{st.task, st.category}], per_task[st.task], st.rank);
  };
  while (true) {
    Stratum *next = nullptr;
    for (auto &st : visit) {
      if (st.taken >= st.items->size()) continue;
      if (next == nullptr || priority(st) < priority(*next)) next = &st;
    }
    if (next == nullptr) break;
    Candidate *c = (*next->items)[next->taken++];
    auto &r = coverage_row(rows, c->seed.task_id, c->seed.category);
    if (settings.cap_per_category > 0 && per_category[c->seed.category] >= settings.cap_per_category) {
      ++r.left_out[fmt::format("category cap ({})", settings.cap_per_category)];
    } else if (settings.cap_per_task > 0 && per_task[c->seed.task_id] >= settings.cap_per_task) {
      ++r.left_out[fmt::format("task cap ({})", settings.cap_per_task)];
    } else if (settings.max_seeds > 0 && static_cast<int>(chosen.size()) >= settings.max_seeds) {
      ++r.left_out[fmt::format("seed limit ({})", settings.max_seeds)];
    } else {
      ++per_category[c->seed.category];
      ++per_task[c->seed.task_id];
      ++per_task_category[{c->seed.task_id, c->seed.category}];
      ++r.selected;
      chosen.push_back(c);
    }
  }
  return chosen;
}

}  // namespace

util::Expected<RepairSelection> select_repairs(const std::vector<traces::LoadedRun> &students,
                                               const RepairSelectionSettings &settings,
                                               const FeedbackRegenerator &regenerate) {
  RepairSelection out;
  out.settings = settings;
  CoverageRows rows;
  std::vector<Candidate> candidates;
  if (read_candidates(students, settings, regenerate, out, rows, candidates) == 0)
    return util::unexpected(std::string("the student runs hold no turn record"));
  drop_repeated_kernels(candidates, rows);

  std::map<std::tuple<std::string, std::string, int>, std::vector<Candidate *>> strata;
  std::vector<Stratum> visit = shuffled_strata(candidates, settings.seed, strata);
  std::vector<Candidate *> chosen = draw_under_caps(visit, settings, rows);
  std::stable_sort(chosen.begin(), chosen.end(), [](const Candidate *a, const Candidate *b) {
    return std::tie(a->seed.task_id, a->seed.category, a->seed.student_turn) <
           std::tie(b->seed.task_id, b->seed.category, b->seed.student_turn);
  });
  for (Candidate *c : chosen) {
    ++out.selected_by_turn[c->seed.student_turn];
    ++out.selected_by_model[c->seed.student_model];
    out.seeds.push_back(std::move(c->seed));
  }
  for (auto &[key, r] : rows) out.coverage.push_back(std::move(r));
  return out;
}

std::string RepairSelection::table() const {
  std::size_t wt = 4, wc = 8;
  for (const auto &r : coverage) {
    wt = std::max(wt, r.task_id.size());
    wc = std::max(wc, r.category.size());
  }
  std::string out = fmt::format(
      "Repair seeds: {} of {} student turns read (seed {}, cap per category {}, "
      "cap per task {}, limit {})\n",
      seeds.size(), student_turns, settings.seed,
      settings.cap_per_category ? std::to_string(settings.cap_per_category) : "none",
      settings.cap_per_task ? std::to_string(settings.cap_per_task) : "none",
      settings.max_seeds ? std::to_string(settings.max_seeds) : "none");
  out += fmt::format("{:<{}}  {:<{}}  {:>6}  {:>8}  {}\n", "task", wt, "category", wc, "failed", "selected",
                     "left out (why)");
  int failed = 0, selected = 0;
  for (const auto &r : coverage) {
    std::string why;
    for (const auto &[reason, n] : r.left_out)
      why += fmt::format("{}{} {}", why.empty() ? "" : "; ", n, reason);
    out += fmt::format("{:<{}}  {:<{}}  {:>6}  {:>8}  {}\n", r.task_id, wt, r.category, wc, r.failed,
                       r.selected, why.empty() ? "-" : why);
    failed += r.failed;
    selected += r.selected;
  }
  out += fmt::format("{:<{}}  {:<{}}  {:>6}  {:>8}\n", "all", wt, "", wc, failed, selected);
  if (!not_failures.empty()) {
    out += "Not repair candidates:";
    for (const auto &[reason, n] : not_failures) out += fmt::format(" {} {};", n, reason);
    out.back() = '\n';
  }
  if (!selected_by_turn.empty()) {
    out += "Selected by student turn:";
    for (const auto &[turn, n] : selected_by_turn) out += fmt::format(" {}: {};", turn, n);
    out.back() = '\n';
    out += "Selected by student model:";
    for (const auto &[model, n] : selected_by_model) out += fmt::format(" {}: {};", model, n);
    out.back() = '\n';
  }
  return out;
}

nlohmann::json RepairSelection::summary_json() const {
  Json rows = Json::array();
  for (const auto &r : coverage)
    rows.push_back({{"task_id", r.task_id},
                    {"category", r.category},
                    {"failed", r.failed},
                    {"selected", r.selected},
                    {"left_out", r.left_out}});
  Json by_turn = Json::object();
  for (const auto &[turn, n] : selected_by_turn) by_turn[std::to_string(turn)] = n;
  return {{"settings", settings.to_json()},
          {"student_turns", student_turns},
          {"seeds", seeds.size()},
          {"coverage", rows},
          {"not_failures", not_failures},
          {"selected_by_turn", by_turn},
          {"selected_by_model", selected_by_model}};
}

std::string seeds_jsonl(const std::vector<RepairSeed> &seeds) {
  std::string out;
  for (const auto &s : seeds) out += s.to_json().dump(-1, ' ', false, Json::error_handler_t::replace) + "\n";
  return out;
}

util::Expected<std::vector<RepairSeed>> load_repair_seeds(const fs::path &file,
                                                          const std::string &expected_hash) {
  auto text = util::read_file(file, std::size_t{1} << 30);
  if (!text) return util::unexpected(fmt::format("repair seeds {}: {}", file.string(), text.error()));
  if (!expected_hash.empty() && util::fnv1a64_hex(*text) != expected_hash)
    return util::unexpected(
        fmt::format("repair seeds {}: the file changed since the run began (hash {}, "
                    "recorded {})",
                    file.string(), util::fnv1a64_hex(*text), expected_hash));
  std::vector<RepairSeed> seeds;
  std::size_t start = 0;
  int line = 0;
  while (start < text->size()) {
    std::size_t end = text->find('\n', start);
    if (end == std::string::npos) end = text->size();
    ++line;
    const std::string_view view(text->data() + start, end - start);
    start = end + 1;
    if (view.empty()) continue;
    Json j;
    try {
      j = Json::parse(view);
    } catch (const Json::exception &e) {
      return util::unexpected(fmt::format("repair seeds {} line {}: {}", file.string(), line, e.what()));
    }
    auto seed = RepairSeed::from_json(j);
    if (!seed)
      return util::unexpected(fmt::format("repair seeds {} line {}: {}", file.string(), line, seed.error()));
    seeds.push_back(std::move(*seed));
  }
  return seeds;
}

std::vector<llm::ChatMessage> explanation_request(const RepairSeed &seed, const std::string &repair,
                                                  std::string *instruction) {
  static const std::string kInstruction =
      "Explain, as the reasoning you would have written before answering, why the failed attempt failed "
      "(use the feedback) and how the verified repair fixes it: name the specific lines, instructions or "
      "manifest fields that changed and why. Write the reasoning only, in plain prose; do not repeat the "
      "kernel.";
  if (instruction) *instruction = kInstruction;
  std::string task;
  std::string system;
  for (const auto &m : seed.conversation) {
    if (m.role == "system" && system.empty()) system = m.content;
    if (m.role == "user") {
      task = m.content;
      break;
    }
  }
  const auto &attempt = seed.conversation[seed.conversation.size() - 2].content;
  const auto &feedback = seed.conversation.back().content;
  std::vector<llm::ChatMessage> messages;
  if (!system.empty()) messages.push_back({"system", system});
  messages.push_back({"user", fmt::format("{}\n\n## Task\n\n{}\n\n## Failed attempt\n\n{}\n\n## Feedback on "
                                          "it\n\n{}\n\n## Verified repair (correct, target instructions "
                                          "executed)\n\n{}\n",
                                          kInstruction, task, attempt, feedback, repair)});
  return messages;
}

}  // namespace ptxbench::agent
