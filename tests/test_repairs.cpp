// Repair-conditioned training sets (`ptxbench repairs`): selection of failed
// student turns (caps, strata, seed, coverage), then the fake OpenAI server
// (tests/fake_openai_server.py) playing both the student (demo-P) and a
// teacher that fixes some failure categories and not others, through the real
// HTTP client and the real CPU stages (ptxas). GPU stages are a stand-in that
// gives each reference solution or probe the outcome its
// tasks/solutions/<task>/expected.json states, so correctness and target
// execution differ as they would on a GPU. Then the export's repair pairs,
// the dataset card, the report, and resume after SIGKILL.
#define DOCTEST_CONFIG_IMPLEMENT_WITH_MAIN
#include <doctest/doctest.h>

#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fmt/core.h>
#include <chrono>
#include <cstdlib>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <thread>

#include "agent/conversation.hpp"
#include "agent/repair_selection.hpp"
#include "agent/run_config.hpp"
#include "agent/runner.hpp"
#include "evaluator/candidate.hpp"
#include "support/support.hpp"
#include "traces/export.hpp"
#include "traces/record.hpp"
#include "traces/report.hpp"
#include "util/files.hpp"

using namespace ptxbench;
namespace fs = std::filesystem;
using Json = nlohmann::json;

namespace {

using test::ScratchDir;
using FakeServer = test::FakeOpenAiServer;

const fs::path kSource = fs::path(PTXBENCH_TEST_DATA).parent_path().parent_path();

/// The outcome expected.json gives the reference solution or probe whose kernel this is; null when none.
Json expected_outcome(const std::string &task_id, const std::string &kernel_source) {
  const fs::path dir = kSource / "tasks" / "solutions" / task_id;
  std::ifstream in(dir / "expected.json");
  if (!in) return nullptr;
  const Json expected = Json::parse(in);
  for (const auto &[folder, outcome] : expected.items()) {
    auto text = util::read_file(dir / folder / "response.md");
    if (!text) continue;
    auto parsed = evaluator::parse_response(*text);
    if (parsed && parsed->kernel_source == kernel_source) return outcome;
  }
  return nullptr;
}

/// GPU stages stand-in: the outcome expected.json states (an unknown kernel is incorrect).
void expected_gpu_stages(evaluator::CompiledCandidate &c, const tasks::Task &task,
                         const evaluator::EvaluatorSettings &) {
  const Json outcome = expected_outcome(task.id, c.response.kernel_source);
  auto &v = c.verdict;
  const std::string status = outcome.is_object() ? outcome.value("status", "incorrect") : "incorrect";
  const bool correct = outcome.is_object() && outcome.value("correct", false);
  v.correctness.status = correct
                             ? evaluator::Status::ok
                             : evaluator::status_from_string(status).value_or(evaluator::Status::incorrect);
  v.axes.correct = correct;
  if (correct) {
    v.execution.status = evaluator::Status::ok;
    v.timing.status = evaluator::Status::ok;
    v.axes.targets_executed = outcome.value("targets_executed", false);
    v.axes.speedup = 1.1;
  }
  v.finalize_status();
}

agent::RunServices services_with_expected_gpu() {
  agent::RunServices s = agent::RunServices::defaults();
  s.gpu_unavailable_reason = [](const evaluator::EvaluatorSettings &) { return std::string(); };
  s.probe_environment = [](const evaluator::EvaluatorSettings &) { return Json{{"device_count", 1}}; };
  s.gpu_stages = expected_gpu_stages;
  return s;
}

/// The real HTTP client, each request held back a while: a run slow enough to be killed mid-way.
class DelayedClient : public llm::ChatClient {
 public:
  explicit DelayedClient(std::unique_ptr<llm::ChatClient> inner) : inner_(std::move(inner)) {}
  util::Expected<llm::ChatResponse, llm::ChatError> complete(const llm::ChatRequest &r) override {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    return inner_->complete(r);
  }
  void cancel() override { inner_->cancel(); }

 private:
  std::unique_ptr<llm::ChatClient> inner_;
};

agent::RunServices delayed(agent::RunServices s) {
  s.make_client = [](const llm::EndpointConfig &e) -> util::Expected<std::unique_ptr<llm::ChatClient>> {
    auto inner = llm::create_client(e);
    if (!inner) return util::unexpected(inner.error());
    return std::unique_ptr<llm::ChatClient>(new DelayedClient(std::move(*inner)));
  };
  return s;
}

agent::RunOptions quiet() {
  agent::RunOptions o;
  o.progress = agent::ProgressMode::quiet;
  return o;
}

llm::EndpointConfig endpoint(const FakeServer &server, const std::string &model) {
  llm::EndpointConfig e;
  e.name = model;
  e.model = model;
  e.base_url = server.url();
  e.max_in_flight = 2;
  return e;
}

const std::vector<std::string> kTasks = {"gemm_n7168_k5120", "gemm_n4096_k4096"};
const std::set<std::string> kTeacherFixes = {"compile_error", "targets_not_executed"};

/// A weak student (demo-10) on the two GEMM tasks: mostly broken PTX, probes and answers without a kernel.
fs::path run_student(const FakeServer &server, const fs::path &out) {
  agent::RunConfig c;
  c.endpoints = {endpoint(server, "demo-10")};
  c.tasks = kTasks;
  c.samples = 4;
  c.turns = 2;
  c.concurrency.compile_workers = 2;
  c.out_dir = out;
  auto runner = agent::Runner::start(std::move(c), services_with_expected_gpu(), quiet());
  REQUIRE_MESSAGE(runner.has_value(), (runner ? "" : runner.error()));
  const auto result = (*runner)->run();
  REQUIRE(result.end == agent::RunEnd::completed);
  REQUIRE(result.request_failures == 0);
  return out;
}

/// The teacher's run config for a repairs run over `selection`, seeds written beside the run.
agent::RunConfig repairs_config(const FakeServer &server, const std::string &teacher,
                                const agent::RepairSelection &selection, const fs::path &out, int samples,
                                bool synthesize) {
  fs::create_directories(out);
  const std::string text = agent::seeds_jsonl(selection.seeds);
  REQUIRE(util::write_file_atomic(out / "repair_seeds.jsonl", text));
  agent::RunConfig c;
  c.endpoints = {endpoint(server, teacher)};
  std::set<std::string> tasks;
  for (const auto &s : selection.seeds) tasks.insert(s.task_id);
  c.tasks.assign(tasks.begin(), tasks.end());
  c.samples = samples;
  c.turns = 2;
  c.stop = agent::StopTarget{true, true, std::nullopt};
  c.concurrency.compile_workers = 2;
  c.out_dir = out;
  agent::RepairsConfig r;
  r.seeds_file = out / "repair_seeds.jsonl";
  r.seeds_hash = util::fnv1a64_hex(text);
  r.synthesize_reasoning = synthesize;
  r.selection = selection.summary_json();
  c.repairs = r;
  return c;
}

std::vector<traces::LoadedRun> load(const std::vector<fs::path> &dirs) {
  std::vector<traces::LoadedRun> runs;
  for (const auto &d : dirs) {
    auto run = traces::load_run(d);
    REQUIRE(run.has_value());
    runs.push_back(std::move(*run));
  }
  return runs;
}

/// The student's record of (trajectory, turn).
const traces::TurnRecord *student_record(const traces::LoadedRun &student, const std::string &trajectory,
                                         int turn) {
  for (const auto &r : student.turns)
    if (r.trajectory_id == trajectory && r.turn == turn) return &r;
  return nullptr;
}

/// ---- Hand-written student records for the selection unit.
Json student_turn(const std::string &trajectory, const std::string &task, int turn, const std::string &status,
                  std::optional<bool> executed = std::nullopt, const std::string &feedback = "fix it",
                  const std::string &hash = "") {
  Json r = {{"format_version", traces::kFormatVersion},
            {"run_id", "student-run"},
            {"model", "stu"},
            {"variant", nullptr},
            {"task_id", task},
            {"sample", 0},
            {"turn", turn},
            {"trajectory_id", trajectory},
            {"messages", Json::array({{{"role", "system"}, {"content", "SYSTEM"}},
                                      {{"role", "user"}, {"content", "TASK " + task}}})},
            {"feedback", feedback},
            {"stop_reason", feedback.empty() ? "turn_limit" : ""}};
  if (status == "request_failed") {
    r["response"] = nullptr;
    r["verdict"] = nullptr;
    return r;
  }
  r["response"] = {{"content", "ATTEMPT " + trajectory + "@" + std::to_string(turn)}, {"reasoning", ""}};
  Json axes = {{"correct", status == "ok" ? Json(true) : Json(nullptr)},
               {"targets_executed", executed ? Json(*executed) : Json(nullptr)},
               {"speedup", nullptr}};
  r["verdict"] = {{"status", status},
                  {"kernel_hash", hash.empty() ? trajectory + "#" + std::to_string(turn) : hash},
                  {"axes", axes}};
  return r;
}

template <class... Args>
traces::TurnRecord student_record_of(Args &&...args) {
  return traces::TurnRecord::from_json(student_turn(std::forward<Args>(args)...));
}

}  // namespace

// ---------------------------------------------------------------- selection

TEST_CASE(
    "selection: failures only, caps per category and per task, strata by turn, recorded seed, coverage") {
  traces::LoadedRun run;
  run.dir = "/runs/student";
  run.run.run_id = "student-run";
  // gemm_a: 5 compile errors over turns 0 and 1, 2 incorrect; gemm_b: 3 compile errors, 1 correct but targets
  // not executed, 1 no_kernel. Plus what is not a failure: ok+executed, skipped GPU, a failed request.
  for (int i = 0; i < 3; ++i)
    run.turns.push_back(student_record_of("stu/gemm_a/" + std::to_string(i), "gemm_a", 0, "compile_error"));
  for (int i = 0; i < 2; ++i)
    run.turns.push_back(student_record_of("stu/gemm_a/" + std::to_string(i), "gemm_a", 1, "compile_error"));
  run.turns.push_back(student_record_of("stu/gemm_a/2", "gemm_a", 1, "incorrect"));
  run.turns.push_back(student_record_of("stu/gemm_a/3", "gemm_a", 0, "incorrect"));
  for (int i = 0; i < 3; ++i)
    run.turns.push_back(student_record_of("stu/gemm_b/" + std::to_string(i), "gemm_b", 0, "compile_error"));
  run.turns.push_back(student_record_of("stu/gemm_b/3", "gemm_b", 0, "ok", false));
  run.turns.push_back(
      student_record_of("stu/gemm_b/4", "gemm_b", 0, "no_kernel", std::nullopt, ""));  // last turn
  run.turns.push_back(student_record_of("stu/gemm_b/5", "gemm_b", 0, "ok", true));
  run.turns.push_back(student_record_of("stu/gemm_b/6", "gemm_b", 0, "skipped"));
  // Without a GPU a compiled kernel's verdict is ok with unmeasured axes: not a failure either.
  Json unmeasured = student_turn("stu/gemm_b/10", "gemm_b", 0, "ok");
  unmeasured["verdict"]["axes"]["correct"] = nullptr;
  run.turns.push_back(traces::TurnRecord::from_json(unmeasured));
  run.turns.push_back(student_record_of("stu/gemm_b/7", "gemm_b", 0, "request_failed"));
  // The same failed kernel twice is one seed.
  run.turns.push_back(student_record_of("stu/gemm_b/8", "gemm_b", 0, "compile_error", std::nullopt, "fix it",
                                        "stu/gemm_b/0#0"));
  // A last turn whose feedback cannot be rebuilt.
  run.turns.push_back(student_record_of("stu/gemm_b/9", "gemm_b", 1, "incorrect", std::nullopt, ""));

  int regenerated = 0;
  agent::FeedbackRegenerator regen = [&](const traces::TurnRecord &record,
                                         const traces::RunRecord &) -> std::optional<std::string> {
    ++regenerated;
    if (record.trajectory_id == "stu/gemm_b/4") return std::string("REBUILT FEEDBACK");
    return std::nullopt;
  };

  SUBCASE("no caps: every failure with a request, an answer and feedback is a seed") {
    auto sel = agent::select_repairs({run}, {}, regen);
    REQUIRE(sel.has_value());
    CHECK(sel->student_turns == 18);
    CHECK(sel->seeds.size() == 12);  // 8 compile errors, 2 incorrect, 1 not executed, 1 no_kernel
    CHECK(regenerated == 2);
    CHECK(sel->not_failures == std::map<std::string, int>{{"not measured (GPU stages skipped)", 2},
                                                          {"ok (nothing to repair)", 1},
                                                          {"request failed (no answer)", 1}});
    std::map<std::string, int> by_category;
    for (const auto &s : sel->seeds) {
      ++by_category[s.category];
      // The conversation: the student's request, its answer, then the feedback.
      REQUIRE(s.conversation.size() == 4);
      CHECK(s.conversation[0].content == "SYSTEM");
      CHECK(s.conversation[2].role == "assistant");
      CHECK(s.conversation[2].content ==
            "ATTEMPT " + s.student_trajectory_id + "@" + std::to_string(s.student_turn));
      CHECK(s.conversation[3].role == "user");
      CHECK(s.id == "student-run/" + s.student_trajectory_id + "/" + std::to_string(s.student_turn));
      if (s.student_trajectory_id == "stu/gemm_b/4") {
        CHECK(s.conversation[3].content == "REBUILT FEEDBACK");
        CHECK(s.feedback_source == "regenerated");
      } else {
        CHECK(s.conversation[3].content == "fix it");
        CHECK(s.feedback_source == "recorded");
      }
    }
    CHECK(by_category ==
          std::map<std::string, int>{
              {"compile_error", 8}, {"incorrect", 2}, {"no_kernel", 1}, {"targets_not_executed", 1}});
    const std::string table = sel->table();
    CHECK(table.find("1 same failed kernel as another seed") != std::string::npos);
    CHECK(table.find("1 no feedback (last turn; could not rebuild it)") != std::string::npos);
    CHECK(table.find("2 not measured (GPU stages skipped)") != std::string::npos);
  }

  SUBCASE("caps: per category, then per task; every stratum keeps its share; the seed decides which") {
    agent::RepairSelectionSettings settings;
    settings.cap_per_category = 4;
    settings.cap_per_task = 5;
    settings.seed = 11;
    auto sel = agent::select_repairs({run}, settings, regen);
    REQUIRE(sel.has_value());
    std::map<std::string, int> per_category, per_task;
    std::map<std::tuple<std::string, std::string, int>, int> per_stratum;
    for (const auto &s : sel->seeds) {
      ++per_category[s.category];
      ++per_task[s.task_id];
      ++per_stratum[{s.task_id, s.category, s.student_turn}];
    }
    for (const auto &[c, n] : per_category) CHECK(n <= 4);
    for (const auto &[t, n] : per_task) CHECK(n <= 5);
    // Round-robin over strata: the compile errors of gemm_a turn 0, gemm_a turn 1 and gemm_b turn 0 each
    // get a seed before any stratum gets a second.
    CHECK(per_stratum[{"gemm_a", "compile_error", 0}] >= 1);
    CHECK(per_stratum[{"gemm_a", "compile_error", 1}] >= 1);
    CHECK(per_stratum[{"gemm_b", "compile_error", 0}] >= 1);
    CHECK(per_category["compile_error"] == 4);
    // The category cap is spread over the tasks: two compile errors each, though gemm_a has more.
    int compile_a = 0, compile_b = 0;
    for (const auto &s : sel->seeds) {
      compile_a += s.category == "compile_error" && s.task_id == "gemm_a";
      compile_b += s.category == "compile_error" && s.task_id == "gemm_b";
    }
    CHECK(compile_a == 2);
    CHECK(compile_b == 2);
    // What the caps left out is counted under its reason.
    int capped = 0;
    for (const auto &row : sel->coverage)
      for (const auto &[why, n] : row.left_out)
        if (why.find("cap") != std::string::npos) capped += n;
    CHECK(capped == 12 - static_cast<int>(sel->seeds.size()));
    CHECK(sel->table().find("category cap (4)") != std::string::npos);
    CHECK(sel->summary_json()["settings"]["seed"] == 11);

    // The same seed gives the same seeds; another seed may pick other compile errors, never more.
    auto again = agent::select_repairs({run}, settings, regen);
    std::vector<std::string> a, b;
    for (const auto &s : sel->seeds) a.push_back(s.id);
    for (const auto &s : again->seeds) b.push_back(s.id);
    CHECK(a == b);
    std::set<std::string> chosen_by_seed;
    for (std::uint64_t seed = 0; seed < 16; ++seed) {
      settings.seed = seed;
      auto other = agent::select_repairs({run}, settings, regen);
      CHECK(other->seeds.size() == sel->seeds.size());
      for (const auto &s : other->seeds) chosen_by_seed.insert(s.id);
    }
    CHECK(chosen_by_seed.size() > sel->seeds.size());
  }

  SUBCASE("only the categories asked for") {
    agent::RepairSelectionSettings settings;
    settings.categories = {"targets_not_executed", "no_kernel"};
    auto sel = agent::select_repairs({run}, settings, regen);
    REQUIRE(sel->seeds.size() == 2);
    CHECK(sel->table().find("category not asked for") != std::string::npos);
  }

  SUBCASE("seeds round-trip through repair_seeds.jsonl; a changed file is refused") {
    auto sel = agent::select_repairs({run}, {}, regen);
    ScratchDir scratch;
    const std::string text = agent::seeds_jsonl(sel->seeds);
    REQUIRE(util::write_file_atomic(scratch.dir / "seeds.jsonl", text));
    auto back = agent::load_repair_seeds(scratch.dir / "seeds.jsonl", util::fnv1a64_hex(text));
    REQUIRE(back.has_value());
    REQUIRE(back->size() == sel->seeds.size());
    CHECK((*back)[0].to_json() == sel->seeds[0].to_json());
    REQUIRE(util::write_file_atomic(scratch.dir / "seeds.jsonl", text + "\n"));
    auto changed = agent::load_repair_seeds(scratch.dir / "seeds.jsonl", util::fnv1a64_hex(text));
    REQUIRE_FALSE(changed.has_value());
    CHECK(changed.error().find("changed since the run began") != std::string::npos);
  }
}

TEST_CASE("seeded messages: the student's conversation, then the teacher's own attempts under the policy") {
  const std::vector<llm::ChatMessage> seed = {
      {"system", "S"}, {"user", "T"}, {"assistant", "student"}, {"user", "feedback on student"}};
  const std::vector<agent::Attempt> history = {{"teacher 0", "feedback 0"}, {"teacher 1", "feedback 1"}};
  auto full = agent::build_seeded_messages(agent::HistoryPolicy::full, seed, history);
  REQUIRE(full.size() == 8);
  CHECK(full[4].content == "teacher 0");
  CHECK(full[7].content == "feedback 1");
  auto last = agent::build_seeded_messages(agent::HistoryPolicy::last_attempt, seed, history);
  REQUIRE(last.size() == 6);
  CHECK(last[4].content == "teacher 1");
  auto none = agent::build_seeded_messages(agent::HistoryPolicy::none, seed, history);
  REQUIRE(none.size() == 4);
  CHECK(none[3].content == "feedback on student\n\nfeedback 1");
  CHECK(agent::build_seeded_messages(agent::HistoryPolicy::full, seed, {}).size() == 4);
}

// ---------------------------------------------------------------- against the fake server

TEST_CASE(
    "repairs against the fake server: student, teacher loop, export, card, report, resume after SIGKILL") {
  ScratchDir scratch;
  FakeServer server;
  const fs::path student_dir = run_student(server, scratch.dir / "student");
  auto students = load({student_dir});

  agent::RepairSelectionSettings settings;
  settings.cap_per_category = 3;
  settings.seed = 5;
  auto selection = agent::select_repairs(students, settings, agent::default_feedback_regenerator());
  REQUIRE(selection.has_value());
  INFO(selection->table());
  std::set<std::string> categories;
  for (const auto &s : selection->seeds) categories.insert(s.category);
  // The weak student leaves both kinds: failures this teacher fixes and failures it does not.
  bool fixable = false, unfixable = false;
  for (const auto &c : categories) (kTeacherFixes.count(c) ? fixable : unfixable) = true;
  REQUIRE(fixable);
  REQUIRE(unfixable);
  // Last turns carry no feedback in the trace: it was rebuilt from the verdict with the run's templates.
  bool rebuilt = false;
  for (const auto &s : selection->seeds) rebuilt = rebuilt || s.feedback_source == "regenerated";
  CHECK(rebuilt);

  SUBCASE(
      "the teacher's reasoning is kept; fixes reach the target at its first turn, others run to the limit") {
    const std::string teacher = "teacher.compile_error+targets_not_executed";
    auto config = repairs_config(server, teacher, *selection, scratch.dir / "repairs", 2, true);
    auto runner = agent::Runner::start(config, services_with_expected_gpu(), quiet());
    REQUIRE_MESSAGE(runner.has_value(), (runner ? "" : runner.error()));
    const auto result = (*runner)->run();
    REQUIRE(result.end == agent::RunEnd::completed);
    auto repairs = load({scratch.dir / "repairs"});
    const auto &records = repairs[0].turns;
    std::map<std::string, std::vector<const traces::TurnRecord *>> by_trajectory;
    for (const auto &r : records) by_trajectory[r.trajectory_id].push_back(&r);
    CHECK(by_trajectory.size() == selection->seeds.size() * 2);
    int fixed = 0;
    for (auto &[id, turns] : by_trajectory) {
      INFO(id);
      std::sort(turns.begin(), turns.end(),
                [](const traces::TurnRecord *a, const traces::TurnRecord *b) { return a->turn < b->turn; });
      const traces::TurnRecord &first = *turns.front();
      REQUIRE(first.repair_of);
      const traces::RepairOf &of = *first.repair_of;
      // The record names the student run, trajectory and turn it repairs; the category is the student's.
      CHECK(of.student_run_id == students[0].run.run_id);
      const traces::TurnRecord *student =
          student_record(students[0], of.student_trajectory_id, of.student_turn);
      REQUIRE(student != nullptr);
      const std::string category = of.category;
      CHECK(student->verdict["status"] ==
            (category == "targets_not_executed" ? std::string("ok") : category));
      // Turn 0 is sent the student's conversation up to and including the feedback.
      REQUIRE(first.messages);
      const auto &sent = *first.messages;
      REQUIRE(sent.size() == static_cast<std::size_t>(of.seed_messages));
      CHECK(sent[sent.size() - 2].content == student->response->content);
      CHECK(sent.back().role == "user");
      if (kTeacherFixes.count(category)) {
        ++fixed;
        REQUIRE(turns.size() == 1);
        CHECK(first.stop_reason == "target_reached");
        CHECK(first.verdict["axes"]["correct"] == true);
        CHECK(first.verdict["axes"]["targets_executed"] == true);
        CHECK(first.response->reasoning.find(category) != std::string::npos);
        CHECK_FALSE(first.synthesized_reasoning);  // the server sent reasoning: none asked for
      } else {
        // Not fixed: the teacher's own loop goes on with the same feedback machinery, up to T turns.
        REQUIRE(turns.size() == 2);
        CHECK(turns[1]->stop_reason == "turn_limit");
        const auto &again = *turns[1]->messages;
        CHECK(again.size() == sent.size() + 2);
        CHECK(again[sent.size()].content == first.response->content);
        CHECK(again.back().content == first.feedback);
      }
    }
    CHECK(fixed > 0);

    // Export: five-message chats, the teacher's verified repair trained on, with its reasoning.
    traces::ExportOptions o;
    o.format = traces::ExportFormat::repair_pairs;
    auto exported = traces::build_export(repairs, o);
    REQUIRE(exported.has_value());
    // Two samples of one seed give the same fix: the second is a duplicate.
    std::set<std::string> fixed_seeds;
    for (const auto &s : selection->seeds)
      if (kTeacherFixes.count(s.category)) fixed_seeds.insert(s.id);
    REQUIRE(exported->lines.size() == fixed_seeds.size());
    CHECK(exported->counts.duplicates == static_cast<int>(fixed_seeds.size()));
    CHECK(exported->counts.filtered["teacher did not fix it"] ==
          static_cast<int>(2 * (selection->seeds.size() - fixed_seeds.size())));
    for (const auto &line : exported->lines) {
      const Json l = Json::parse(line);
      const Json &m = l["messages"];
      REQUIRE(m.size() == 5);
      CHECK(m[0]["role"] == "system");
      CHECK(m[1]["role"] == "user");
      CHECK(m[2]["role"] == "assistant");
      CHECK(m[3]["role"] == "user");
      const Json &of = l["metadata"]["repair_of"];
      const traces::TurnRecord *student =
          student_record(students[0], of["student_trajectory_id"], of["student_turn"]);
      REQUIRE(student != nullptr);
      CHECK(m[1]["content"] == student->messages->at(1).content);  // the task
      CHECK(m[2]["content"] == student->response->content);        // the failed attempt
      const std::string trained = m[4]["content"];
      CHECK(trained.rfind("<think>\nThe attempt failed with " + of["category"].get<std::string>(), 0) == 0);
      CHECK(trained.find("```ptx") != std::string::npos);
      CHECK(l["metadata"]["reasoning_source"] == "teacher");
      CHECK(l["metadata"]["loss_message_indices"] == Json::array({4}));
      CHECK(l["metadata"]["teacher"] == teacher);
    }
    // The card: balance by task, category, student turn and model; fix rate per category with intervals;
    // what each filter removed.
    const std::string &card = exported->card_markdown;
    INFO(card);
    CHECK(
        card.find("### Written, by student model\n\n| student model | examples |\n|---|---:|\n| demo-10 | " +
                  std::to_string(fixed_seeds.size()) + " |") != std::string::npos);
    CHECK(card.find("### Written, by student turn") != std::string::npos);
    CHECK(card.find("### Selection coverage of") != std::string::npos);
    for (const auto &row : selection->coverage)
      CHECK(card.find(fmt::format("| {} | {} | {} | {} |", row.task_id, row.category, row.failed,
                                  row.selected)) != std::string::npos);
    CHECK(card.find("### Fix rate by failure category") != std::string::npos);
    CHECK(card.find("| teacher did not fix it |") != std::string::npos);
    CHECK(card.find("| duplicates removed | " + std::to_string(fixed_seeds.size()) + " |") !=
          std::string::npos);
    for (const auto &c : categories) {
      int n = 0;
      for (const auto &s : selection->seeds) n += s.category == c ? 2 : 0;
      const int f = kTeacherFixes.count(c) ? n : 0;
      const auto ci = traces::wilson_interval(f, n);
      CHECK(card.find(fmt::format("| {} | {}/{} = {:.0f}% [{:.0f}-{:.0f}%] |", c, f, n, 100.0 * f / n,
                                  100 * ci->lo, 100 * ci->hi)) != std::string::npos);
    }
    CHECK(card.find("| reasoning from the teacher's server | " + std::to_string(fixed) + " |") !=
          std::string::npos);

    // The report of the repairs directory: fix rate per category and per task, tokens per kept example.
    auto report = traces::build_report(repairs);
    REQUIRE(report.has_value());
    REQUIRE(report->repairs.has_value());
    CHECK(report->repairs->all.fixed == fixed);
    CHECK(report->repairs->all.trajectories == static_cast<int>(by_trajectory.size()));
    for (const auto &c : categories)
      CHECK(report->repairs->by_category.at(c).fixed ==
            (kTeacherFixes.count(c) ? report->repairs->by_category.at(c).trajectories : 0));
    CHECK(report->repairs->tokens_per_kept_example().has_value());
    const std::string md = traces::render_markdown(*report);
    CHECK(md.find("## Repairs: the teacher's fix rate") != std::string::npos);
    CHECK(md.find("### Fix rate by task") != std::string::npos);
    CHECK(md.find("| tokens per kept example |") != std::string::npos);
    CHECK(traces::render_csv(*report).count("repairs.csv") == 1);
    const std::string html = traces::render_html(*report);
    CHECK(html.find("<h2>Repairs: the teacher's fix rate</h2>") != std::string::npos);
    CHECK(html.find("<th>failure category</th>") != std::string::npos);
  }

  SUBCASE("a teacher without reasoning: one more request explains each verified repair") {
    const std::string teacher = "teacher-plain.compile_error+targets_not_executed";
    auto config = repairs_config(server, teacher, *selection, scratch.dir / "plain", 1, true);
    config.prices[teacher] = {1.0, 2.0};
    auto runner = agent::Runner::start(config, services_with_expected_gpu(), quiet());
    REQUIRE(runner.has_value());
    REQUIRE((*runner)->run().end == agent::RunEnd::completed);
    auto repairs = load({scratch.dir / "plain"});
    int explained = 0;
    for (const auto &r : repairs[0].turns) {
      CHECK(r.response->reasoning == "");
      if (r.stop_reason == "target_reached") {
        REQUIRE(r.synthesized_reasoning);
        const std::string why = r.synthesized_reasoning->content.value_or("");
        CHECK(why.find("ended in " + r.repair_of->category) != std::string::npos);
        CHECK(r.synthesized_reasoning->usage->completion_tokens.value_or(0) > 0);
        ++explained;
      } else {
        CHECK_FALSE(r.synthesized_reasoning);
      }
    }
    CHECK(explained > 0);
    traces::ExportOptions o;
    o.format = traces::ExportFormat::repair_pairs;
    o.reasoning = traces::ReasoningMode::field;
    auto exported = traces::build_export(repairs, o);
    REQUIRE(exported.has_value());
    REQUIRE(static_cast<int>(exported->lines.size()) == explained);
    for (const auto &line : exported->lines) {
      const Json l = Json::parse(line);
      CHECK(l["metadata"]["reasoning_source"] == "synthesized");
      CHECK(l["messages"][4]["reasoning_content"].get<std::string>().find("The failed attempt ended in") ==
            0);
    }
    CHECK(exported->card_markdown.find("| reasoning synthesized (one more request) | " +
                                       std::to_string(explained) + " |") != std::string::npos);
    // Cost per kept example counts the explanation requests too.
    auto report = traces::build_report(repairs);
    REQUIRE(report->repairs->cost_per_kept_example().has_value());
    long long tokens = 0;
    for (const auto &r : repairs[0].turns) {
      tokens += r.response->usage.total();
      if (r.synthesized_reasoning) tokens += r.synthesized_reasoning->usage->total();
    }
    CHECK(report->repairs->prompt_tokens + report->repairs->completion_tokens == tokens);

    // Without --synthesize-reasoning the repair is kept with no reasoning, and the card says so.
    auto bare = repairs_config(server, teacher, *selection, scratch.dir / "bare", 1, false);
    auto bare_runner = agent::Runner::start(bare, services_with_expected_gpu(), quiet());
    REQUIRE((*bare_runner)->run().end == agent::RunEnd::completed);
    auto bare_export = traces::build_export(load({scratch.dir / "bare"}), o);
    CHECK(bare_export->card_markdown.find("| no reasoning | " + std::to_string(explained) + " |") !=
          std::string::npos);
  }

  SUBCASE("SIGKILL mid-run, then resume: every teacher trajectory once, turns 0..n-1 exactly once") {
    const std::string teacher = "teacher.compile_error";
    const fs::path dir = scratch.dir / "killed";
    auto config = repairs_config(server, teacher, *selection, dir, 2, false);
    const pid_t pid = ::fork();
    REQUIRE(pid >= 0);
    if (pid == 0) {
      auto runner = agent::Runner::start(config, delayed(services_with_expected_gpu()), quiet());
      if (runner) (*runner)->run();
      ::_exit(0);
    }
    // Kill it once a few turns are recorded.
    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(120);
    while (std::chrono::steady_clock::now() < until) {
      auto text = util::read_file(dir / "trajectories.jsonl");
      if (text && std::count(text->begin(), text->end(), '\n') >= 3) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    ::kill(pid, SIGKILL);
    ::waitpid(pid, nullptr, 0);
    auto before = traces::load_run(dir);
    REQUIRE(before.has_value());
    const std::size_t recorded = before->turns.size();
    CHECK(recorded >= 3);
    auto resumed = agent::Runner::resume(dir, services_with_expected_gpu(), quiet());
    REQUIRE_MESSAGE(resumed.has_value(), (resumed ? "" : resumed.error()));
    REQUIRE((*resumed)->run().end == agent::RunEnd::completed);
    auto after = traces::load_run(dir);
    REQUIRE(after.has_value());
    CHECK(after->skipped_partial_lines == 0);
    std::map<std::string, std::vector<int>> turns;
    for (const auto &r : after->turns) turns[r.trajectory_id].push_back(r.turn);
    CHECK(turns.size() == selection->seeds.size() * 2);
    for (auto &[id, t] : turns) {
      INFO(id);
      std::sort(t.begin(), t.end());
      for (std::size_t i = 0; i < t.size(); ++i) CHECK(t[i] == static_cast<int>(i));
    }
    CHECK(after->turns.size() > recorded);
    // A resumed repairs run keeps its repairs config, so the seeds come back from run.json.
    CHECK(after->run.config["repairs"]["seeds_hash"] == config.repairs->seeds_hash);
  }
}
