#include "traces/export.hpp"

#include <algorithm>
#include <random>
#include <set>

#include <fmt/core.h>
#include <nlohmann/json.hpp>

#include "traces/detail/repair_view.hpp"
#include "traces/detail/run_view.hpp"
#include "traces/repairs.hpp"
#include "util/files.hpp"

namespace ptxbench::traces {

using detail::Json;

std::optional<ExportFormat> export_format_from_string(std::string_view s) {
  if (s == "messages") return ExportFormat::messages;
  if (s == "sharegpt") return ExportFormat::sharegpt;
  if (s == "repair-pairs") return ExportFormat::repair_pairs;
  if (s == "improve-pairs") return ExportFormat::improve_pairs;
  return std::nullopt;
}

std::optional<ExportUnit> export_unit_from_string(std::string_view s) {
  if (s == "turn") return ExportUnit::turn;
  if (s == "trajectory") return ExportUnit::trajectory;
  return std::nullopt;
}

std::optional<ReasoningMode> reasoning_mode_from_string(std::string_view s) {
  if (s == "inline") return ReasoningMode::inline_think;
  if (s == "field") return ReasoningMode::field;
  if (s == "drop") return ReasoningMode::drop;
  return std::nullopt;
}

std::string_view to_string(ExportFormat f) {
  switch (f) {
    case ExportFormat::messages:
      return "messages";
    case ExportFormat::sharegpt:
      return "sharegpt";
    case ExportFormat::repair_pairs:
      return "repair-pairs";
    case ExportFormat::improve_pairs:
      return "improve-pairs";
  }
  return "messages";
}

namespace {

std::string_view to_string(ExportUnit u) {
  return u == ExportUnit::turn ? "turn" : "trajectory";
}
std::string_view to_string(ReasoningMode m) {
  return m == ReasoningMode::inline_think ? "inline" : m == ReasoningMode::field ? "field" : "drop";
}

/// Rough token estimate where the endpoint reported no count: one token per 4 characters.
long long estimate_tokens(std::string_view text) {
  return static_cast<long long>((detail::utf8_length(text) + 3) / 4);
}

struct Message {
  std::string role;       ///< system | user | assistant
  std::string content;    ///< final text (reasoning already inlined in inline mode)
  std::string reasoning;  ///< field mode only
};

struct Example {
  const detail::TrajectoryView *trajectory = nullptr;
  const TurnRecord *target = nullptr;
  const TurnRecord *source = nullptr;  ///< the turn before (pairs, per-turn), or turn 0 (trajectory)
  int target_turn = 0;
  std::optional<int> source_turn;
  std::string source_category;
  std::vector<Message> messages;
  std::vector<int> loss_messages;  ///< indices into messages that carry the loss
  std::string loss_on;             ///< "last_message" | "all_assistant"
  std::string dedup_key;
  long long token_count = 0;
  bool token_count_exact = true;
  std::size_t chars = 0;
  const RepairOf *repair = nullptr;  ///< a repairs run's example: the target's repair_of
  std::string reasoning_source;  ///< repairs: teacher | synthesized | none
};

/// The model's answer and reasoning, with an inline <think> block at the start of the
/// answer moved to the reasoning (some servers return reasoning that way).
struct Answer {
  std::string content;
  std::string reasoning;
};

std::optional<Answer> answer_of(const TurnRecord &record) {
  if (!record.response) return std::nullopt;
  Answer a{record.response->content, record.response->reasoning};
  auto start = a.content.find_first_not_of(" \t\r\n");
  if (start != std::string::npos && a.content.compare(start, 7, "<think>") == 0) {
    auto end = a.content.find("</think>", start + 7);
    if (end != std::string::npos) {
      std::string inner = a.content.substr(start + 7, end - start - 7);
      if (a.reasoning.empty()) a.reasoning = inner;
      auto rest = a.content.find_first_not_of(" \t\r\n", end + 8);
      a.content = rest == std::string::npos ? "" : a.content.substr(rest);
    }
  }
  auto trim = [](std::string &s) {
    auto b = s.find_first_not_of(" \t\r\n");
    auto e = s.find_last_not_of(" \t\r\n");
    s = b == std::string::npos ? "" : s.substr(b, e - b + 1);
  };
  trim(a.reasoning);
  return a;
}

Message assistant_message(const Answer &a, ReasoningMode mode) {
  Message m{"assistant", a.content, ""};
  if (!a.reasoning.empty()) {
    if (mode == ReasoningMode::inline_think)
      m.content = "<think>\n" + a.reasoning + "\n</think>\n\n" + a.content;
    if (mode == ReasoningMode::field) m.reasoning = a.reasoning;
  }
  return m;
}

struct Usage {
  std::optional<long long> prompt, completion, reasoning;
};
Usage usage_of(const TurnRecord &record) {
  Usage u;
  if (!record.response) return u;
  const TokenUsage &usage = record.response->usage;
  u.prompt = usage.prompt_tokens;
  u.completion = usage.completion_tokens;
  u.reasoning = usage.reasoning_tokens;
  return u;
}

/// Tokens of the assistant message built from `record`'s answer.
void add_answer_tokens(Example &e, const TurnRecord &record, const Answer &a, ReasoningMode mode) {
  Usage u = usage_of(record);
  if (!u.completion) {
    e.token_count +=
        estimate_tokens(a.content) + (mode == ReasoningMode::drop ? 0 : estimate_tokens(a.reasoning));
    e.token_count_exact = false;
    return;
  }
  long long tokens = *u.completion;
  if (mode == ReasoningMode::drop && !a.reasoning.empty()) {
    if (u.reasoning) {
      tokens -= *u.reasoning;
    } else {
      tokens = estimate_tokens(a.content);
      e.token_count_exact = false;
    }
  }
  e.token_count += std::max(0LL, tokens);
}

std::optional<std::vector<Message>> request_messages(const TurnRecord &record) {
  if (!record.messages) return std::nullopt;
  std::vector<Message> out;
  for (const RecordedMessage &m : *record.messages) out.push_back({m.role, m.content, ""});
  return out;
}

/// Optional system first, then user/assistant alternating, starting with user, ending with assistant.
bool roles_alternate(const std::vector<Message> &messages) {
  std::size_t i = !messages.empty() && messages[0].role == "system" ? 1 : 0;
  if (i >= messages.size()) return false;
  for (std::size_t k = 0; i + k < messages.size(); ++k) {
    if (messages[i + k].role != (k % 2 == 0 ? "user" : "assistant")) return false;
  }
  return messages.back().role == "assistant";
}

std::string answer_key(const TurnRecord &record, const Answer &a) {
  // The task is part of the key: one kernel answered for two tasks is two examples (two prompts).
  std::string h = detail::kernel_hash_of(record);
  return record.task_id + ":" +
         (h.empty() ? "text:" + detail::normalized_kernel_hash(a.content) : h);
}

/// The conversation's opening (system + task): turn 0's request when the trajectory has it,
/// else the first system and first user message of `fallback`'s request.
std::optional<std::vector<Message>> opening_of(const detail::TrajectoryView &t, const TurnRecord &fallback,
                                               bool &from_turn0) {
  const TurnRecord &first = *t.turns.front();
  if (first.turn == 0) {
    auto msgs = request_messages(first);
    if (msgs && !msgs->empty() && msgs->back().role == "user") {
      from_turn0 = true;
      return msgs;
    }
  }
  auto msgs = request_messages(fallback);
  if (!msgs) return std::nullopt;
  std::vector<Message> out;
  for (const auto &m : *msgs) {
    if (m.role == "system" && out.empty()) out.push_back(m);
    if (m.role == "user") {
      out.push_back(m);
      from_turn0 = false;
      return out;
    }
  }
  return std::nullopt;
}

void add_opening_tokens(Example &e, const detail::TrajectoryView &t, const std::vector<Message> &opening,
                        bool from_turn0) {
  Usage u0 = usage_of(*t.turns.front());
  if (from_turn0 && u0.prompt) {
    e.token_count += *u0.prompt;
  } else {
    for (const auto &m : opening) e.token_count += estimate_tokens(m.content);
    e.token_count_exact = false;
  }
}

/// The diagnostics fed back after `source`: its feedback field, else the last user
/// message of the next turn's request.
std::string feedback_between(const TurnRecord &source, const TurnRecord &next) {
  if (!source.feedback.empty()) return source.feedback;
  if (auto msgs = request_messages(next)) {
    for (auto it = msgs->rbegin(); it != msgs->rend(); ++it) {
      if (it->role == "user") return it->content;
    }
  }
  return "";
}

int turn_of(const TurnRecord &record) {
  return record.turn;
}

class Builder {
 public:
  Builder(const ExportOptions &options, ExportCounts &counts) : options_(options), counts_(counts) {}

  void build(const detail::TrajectoryView &t, std::vector<Example> &out) {
    switch (options_.format) {
      case ExportFormat::messages:
      case ExportFormat::sharegpt:
        if (options_.unit == ExportUnit::turn) {
          per_turn(t, out);
        } else {
          per_trajectory(t, out);
        }
        break;
      case ExportFormat::repair_pairs:
        if (!t.turns.empty() && detail::repair_of(*t.turns.front())) {
          teacher_repair(t, out);
        } else {
          pairs(t, out, false);
        }
        break;
      case ExportFormat::improve_pairs:
        pairs(t, out, true);
        break;
    }
  }

 private:
  void unusable(const std::string &reason) {
    ++counts_.candidates;
    ++counts_.unusable[reason];
  }

  void per_turn(const detail::TrajectoryView &t, std::vector<Example> &out) {
    for (std::size_t i = 0; i < t.turns.size(); ++i) {
      const TurnRecord &record = *t.turns[i];
      auto answer = answer_of(record);
      if (!answer) {
        unusable("no model response (request failed)");
        continue;
      }
      auto msgs = request_messages(record);
      if (!msgs) {
        unusable("request messages missing or not text");
        continue;
      }
      Example e;
      e.trajectory = &t;
      e.target = &record;
      e.target_turn = turn_of(record);
      if (i > 0 && turn_of(*t.turns[i - 1]) == e.target_turn - 1) {
        e.source = t.turns[i - 1];
        e.source_turn = e.target_turn - 1;
        e.source_category = detail::failure_category_of(*e.source);
      } else {
        e.source_category = e.target_turn == 0 ? "first_turn" : "unknown";
      }
      e.messages = std::move(*msgs);
      e.messages.push_back(assistant_message(*answer, options_.reasoning));
      e.loss_on = "last_message";
      e.loss_messages = {static_cast<int>(e.messages.size()) - 1};
      e.dedup_key = answer_key(record, *answer);
      Usage u = usage_of(record);
      if (u.prompt) {
        e.token_count = *u.prompt;
      } else {
        for (std::size_t k = 0; k + 1 < e.messages.size(); ++k)
          e.token_count += estimate_tokens(e.messages[k].content);
        e.token_count_exact = false;
      }
      add_answer_tokens(e, record, *answer, options_.reasoning);
      finish(std::move(e), out);
    }
  }

  void per_trajectory(const detail::TrajectoryView &t, std::vector<Example> &out) {
    const TurnRecord &first = *t.turns.front();
    auto first_answer = answer_of(first);
    if (turn_of(first) != 0 || !first_answer) {
      unusable(turn_of(first) != 0 ? "trajectory has no turn 0 record"
                                   : "no model response (request failed)");
      return;
    }
    bool from_turn0 = false;
    auto opening = opening_of(t, first, from_turn0);
    if (!opening) {
      unusable("request messages missing or not text");
      return;
    }
    Example e;
    e.trajectory = &t;
    e.source = &first;
    e.source_turn = 0;
    e.source_category = detail::failure_category_of(first);
    e.messages = *opening;
    e.loss_on = "all_assistant";
    add_opening_tokens(e, t, *opening, from_turn0);
    std::vector<std::string> keys;
    for (std::size_t i = 0; i < t.turns.size(); ++i) {
      const TurnRecord &record = *t.turns[i];
      auto answer = answer_of(record);
      if (!answer || turn_of(record) != static_cast<int>(i)) break;  // stop at a failed request or a gap
      if (i > 0) {
        std::string fb = feedback_between(*t.turns[i - 1], record);
        e.messages.push_back({"user", fb, ""});
        e.token_count += estimate_tokens(fb);
        e.token_count_exact = false;
      }
      e.messages.push_back(assistant_message(*answer, options_.reasoning));
      e.loss_messages.push_back(static_cast<int>(e.messages.size()) - 1);
      add_answer_tokens(e, record, *answer, options_.reasoning);
      keys.push_back(answer_key(record, *answer));
      e.target = &record;
      e.target_turn = turn_of(record);
    }
    for (const auto &k : keys) e.dedup_key += (e.dedup_key.empty() ? "" : ">") + k;
    finish(std::move(e), out);
  }

  void pairs(const detail::TrajectoryView &t, std::vector<Example> &out, bool improve) {
    for (std::size_t i = 0; i + 1 < t.turns.size(); ++i) {
      const TurnRecord &src = *t.turns[i];
      const TurnRecord &tgt = *t.turns[i + 1];
      if (turn_of(tgt) != turn_of(src) + 1) continue;
      const std::string category = detail::failure_category_of(src);
      bool qualifies = false;
      if (!improve) {
        const bool source_failed = category != "ok" && category != "request_failed" &&
                                   category != "skipped" && category != "unknown";
        // The fixed turn is what the pair trains on: correct, and (unless every turn is wanted) its
        // target instructions executed.
        const bool fixed = detail::correct_of(tgt) == true && detail::status_of(tgt) == "ok" &&
                           (category != "targets_not_executed" || detail::targets_executed_of(tgt) == true) &&
                           (options_.all || detail::targets_executed_of(tgt) == true);
        qualifies = source_failed && fixed;
      } else {
        auto s0 = detail::speedup_of(src), s1 = detail::speedup_of(tgt);
        qualifies = detail::correct_of(src) == true && detail::status_of(src) == "ok" &&
                    detail::correct_of(tgt) == true && detail::status_of(tgt) == "ok" && s0 && s1 &&
                    *s1 >= *s0 * options_.improve_min_gain;
      }
      if (!qualifies) continue;
      auto a0 = answer_of(src), a1 = answer_of(tgt);
      if (!a0 || !a1) {
        unusable("no model response (request failed)");
        continue;
      }
      bool from_turn0 = false;
      auto opening = opening_of(t, src, from_turn0);
      if (!opening) {
        unusable("request messages missing or not text");
        continue;
      }
      Example e;
      e.trajectory = &t;
      e.source = &src;
      e.target = &tgt;
      e.source_turn = turn_of(src);
      e.target_turn = turn_of(tgt);
      e.source_category = category;
      e.messages = *opening;
      add_opening_tokens(e, t, *opening, from_turn0);
      // The failed attempt is context, not a target: its reasoning would teach the failure.
      e.messages.push_back(assistant_message(*a0, ReasoningMode::drop));
      add_answer_tokens(e, src, *a0, ReasoningMode::drop);
      std::string fb = feedback_between(src, tgt);
      e.messages.push_back({"user", fb, ""});
      e.token_count += estimate_tokens(fb);
      e.token_count_exact = false;
      e.messages.push_back(assistant_message(*a1, options_.reasoning));
      add_answer_tokens(e, tgt, *a1, options_.reasoning);
      e.loss_on = "last_message";
      e.loss_messages = {static_cast<int>(e.messages.size()) - 1};
      e.dedup_key = answer_key(src, *a0) + ">" + answer_key(tgt, *a1);
      finish(std::move(e), out);
    }
  }

  /// A repairs run's trajectory: system, task, the student's failed attempt, the feedback on it, and the
  /// teacher's verified repair (with its reasoning, or the synthesized explanation) as the trained turn.
  void teacher_repair(const detail::TrajectoryView &t, std::vector<Example> &out) {
    // A repair is what the run's target says (correct, targets executed, its minimum speedup); --all keeps
    // a correct turn whose targets did not run too.
    const TurnRecord *kept = detail::kept_repair_turn(t, !options_.all);
    if (!kept) {
      ++counts_.candidates;
      ++counts_.filtered["teacher did not fix it"];
      return;
    }
    const RepairOf &repair = *detail::repair_of(*kept);
    auto request = request_messages(*kept);
    const auto seed_messages =
        static_cast<std::size_t>(std::max(0, repair.seed_messages));
    auto answer = answer_of(*kept);
    if (!request || seed_messages < 3 || seed_messages > request->size() || !answer) {
      unusable("repair record without its seeded conversation or answer");
      return;
    }
    Example e;
    e.trajectory = &t;
    e.target = kept;
    e.repair = &repair;
    e.target_turn = turn_of(*kept);
    e.source_turn = repair.student_turn;
    e.source_category = repair.category.empty() ? "?" : repair.category;
    std::optional<Message> system, task;
    for (std::size_t i = 0; i + 2 < seed_messages; ++i) {
      const Message &m = (*request)[i];
      if (m.role == "system" && !system && !task) system = m;
      if (m.role == "user" && !task) task = m;
    }
    const Message &attempt = (*request)[seed_messages - 2];
    const Message &feedback = (*request)[seed_messages - 1];
    if (!task || attempt.role != "assistant" || feedback.role != "user") {
      unusable("repair record without its seeded conversation or answer");
      return;
    }
    e.reasoning_source = detail::repair_reasoning_source(*kept);
    if (answer->reasoning.empty() && e.reasoning_source == "synthesized")
      answer->reasoning = kept->synthesized_reasoning->content.value_or("");
    if (system) e.messages.push_back(*system);
    e.messages.push_back(*task);
    e.messages.push_back(attempt);
    e.messages.push_back(feedback);
    for (const auto &m : e.messages) e.token_count += estimate_tokens(m.content);
    e.token_count_exact = false;
    e.messages.push_back(assistant_message(*answer, options_.reasoning));
    // The synthesized explanation's tokens were not part of the teacher's answer: estimate them.
    if (e.reasoning_source == "synthesized" && options_.reasoning != ReasoningMode::drop) {
      e.token_count += estimate_tokens(answer->content) + estimate_tokens(answer->reasoning);
    } else {
      add_answer_tokens(e, *kept, *answer, options_.reasoning);
    }
    e.loss_on = "last_message";
    e.loss_messages = {static_cast<int>(e.messages.size()) - 1};
    e.dedup_key =
        (repair.seed_id.empty() ? t.trajectory_id : repair.seed_id) + ">" + answer_key(*kept, *answer);
    finish(std::move(e), out);
  }

  void finish(Example e, std::vector<Example> &out) {
    if (!roles_alternate(e.messages)) {
      unusable("roles do not alternate user/assistant");
      return;
    }
    for (const auto &m : e.messages)
      e.chars += detail::utf8_length(m.content) + detail::utf8_length(m.reasoning);
    ++counts_.candidates;
    out.push_back(std::move(e));
  }

  const ExportOptions &options_;
  ExportCounts &counts_;
};

/// The first filter the example fails, or "" when it passes all.
std::string failing_filter(const Example &e, const ExportFilter &f) {
  auto contains = [](const auto &list, const auto &value) {
    return list.empty() || std::find(list.begin(), list.end(), value) != list.end();
  };
  if (!contains(f.tasks, e.trajectory->task_id)) return "task";
  if (!contains(f.models, e.trajectory->model) &&
      !contains(f.models, e.trajectory->model.substr(0, e.trajectory->model.find('@'))))
    return "model";
  if (!contains(f.variants, e.trajectory->variant)) return "variant";
  if (!contains(f.turns, e.target_turn)) return "turn";
  if (!contains(f.statuses, detail::status_of(*e.target))) return "status";
  if (f.correct && detail::correct_of(*e.target) != *f.correct) return "correct";
  if (f.targets_executed && detail::targets_executed_of(*e.target) != *f.targets_executed) return "executed";
  if (f.min_speedup) {
    auto s = detail::speedup_of(*e.target);
    // A suspicious timing (faster than the speed-of-light floor) is never a fast example.
    if (!s || *s < *f.min_speedup || detail::status_of(*e.target) != "ok") return "min_speedup";
  }
  return "";
}

/// Keeps at most `cap` examples per group: within a group, examples are shuffled per target
/// turn (seeded) and taken round-robin over turns, so every turn keeps its share.
template <class KeyFn>
int apply_cap(std::vector<Example *> &items, int cap, std::mt19937_64 &rng, KeyFn key_of) {
  if (cap <= 0) return 0;
  std::map<std::string, std::map<int, std::vector<Example *>>> groups;
  for (Example *e : items) groups[key_of(*e)][e->target_turn].push_back(e);
  std::set<const Example *> keep;
  for (auto &[key, by_turn] : groups) {
    for (auto &[turn, bucket] : by_turn) {
      for (std::size_t i = bucket.size(); i > 1; --i) {  // Fisher-Yates: same result on every platform
        std::size_t j = static_cast<std::size_t>(rng() % i);
        std::swap(bucket[i - 1], bucket[j]);
      }
    }
    int kept = 0;
    for (std::size_t round = 0; kept < cap; ++round) {
      bool any = false;
      for (auto &[turn, bucket] : by_turn) {
        if (round < bucket.size() && kept < cap) {
          keep.insert(bucket[round]);
          ++kept;
          any = true;
        }
      }
      if (!any) break;
    }
  }
  const int before = static_cast<int>(items.size());
  std::erase_if(items, [&](Example *e) { return !keep.count(e); });
  return before - static_cast<int>(items.size());
}

Json metadata_of(const Example &e, const ExportOptions &o) {
  Json m = {{"source", "ptxbench"},
            {"export_format", to_string(o.format)},
            {"run_id", e.trajectory->run_id},
            {"model", e.trajectory->model},
            {"variant", e.trajectory->variant.empty() ? Json(nullptr) : Json(e.trajectory->variant)},
            {"task_id", e.trajectory->task_id},
            {"sample", e.trajectory->sample},
            {"trajectory_id", e.trajectory->trajectory_id},
            {"turn", e.target_turn},
            {"source_turn", e.source_turn ? Json(*e.source_turn) : Json(nullptr)},
            {"source_category", e.source_category},
            {"target_status", detail::status_of(*e.target)},
            {"kernel_hash", detail::kernel_hash_of(*e.target)},
            {"token_count", e.token_count},
            {"token_count_exact", e.token_count_exact},
            {"chars", e.chars},
            {"reasoning", to_string(o.reasoning)},
            {"loss_on", e.loss_on},
            {"loss_message_indices", e.loss_messages}};
  if (o.format == ExportFormat::messages || o.format == ExportFormat::sharegpt) m["unit"] = to_string(o.unit);
  auto opt = [](auto v) { return v ? Json(*v) : Json(nullptr); };
  m["correct"] = opt(detail::correct_of(*e.target));
  m["targets_executed"] = opt(detail::targets_executed_of(*e.target));
  m["speedup"] = opt(detail::speedup_of(*e.target));
  if (e.source && o.format == ExportFormat::improve_pairs)
    m["source_speedup"] = opt(detail::speedup_of(*e.source));
  if (e.repair) {
    m["repair_of"] = e.repair->to_json();
    m["teacher"] = e.trajectory->model;
    m["teacher_turn"] = e.target_turn;
    m["reasoning_source"] = e.reasoning_source;
  }
  return m;
}

std::string render_line(const Example &e, const ExportOptions &o) {
  Json line;
  if (o.format == ExportFormat::sharegpt) {
    Json conversations = Json::array();
    for (const auto &m : e.messages) {
      if (m.role == "system") {
        line["system"] = m.content;
        continue;
      }
      Json turn = {{"from", m.role == "user" ? "human" : "gpt"}, {"value", m.content}};
      if (!m.reasoning.empty()) turn["reasoning_content"] = m.reasoning;
      conversations.push_back(std::move(turn));
    }
    line["conversations"] = std::move(conversations);
  } else {
    Json messages = Json::array();
    for (const auto &m : e.messages) {
      Json msg = {{"role", m.role}, {"content", m.content}};
      if (!m.reasoning.empty()) msg["reasoning_content"] = m.reasoning;
      messages.push_back(std::move(msg));
    }
    line["messages"] = std::move(messages);
  }
  line["metadata"] = metadata_of(e, o);
  // Invalid UTF-8 from a model is replaced rather than aborting the export.
  return line.dump(-1, ' ', false, Json::error_handler_t::replace);
}

std::string count_table(const std::string &title, const std::string &column,
                        const std::map<std::string, int> &m) {
  std::string out = fmt::format("\n### {}\n\n| {} | examples |\n|---|---:|\n", title, column);
  if (m.empty()) out += "| (none) | 0 |\n";
  for (const auto &[k, v] : m) out += fmt::format("| {} | {} |\n", k, v);
  return out;
}

/// The student failures each repairs run chose from, as `ptxbench repairs` recorded them (run.json
/// config.repairs.selection): per task and category, failed turns, seeds selected, and why others were not.
std::string selection_coverage(const std::vector<LoadedRun> &runs) {
  std::string md;
  for (const auto &run : runs) {
    const Json *config = detail::object_field(run.run, "config");
    const Json *repairs = config ? detail::object_field(*config, "repairs") : nullptr;
    const Json *selection = repairs ? detail::object_field(*repairs, "selection") : nullptr;
    const Json *rows = selection ? detail::field(*selection, "coverage") : nullptr;
    if (!rows || !rows->is_array()) continue;
    md += fmt::format("\n### Selection coverage of `{}` (student failures)\n\n", run.dir.string());
    if (const Json *settings = detail::object_field(*selection, "settings"))
      md += fmt::format("Settings: {}.\n\n", settings->dump());
    md += "| task | category | failed | selected | left out (why) |\n|---|---|---:|---:|---|\n";
    for (const Json &row : *rows) {
      std::string why;
      if (const Json *left = detail::object_field(row, "left_out"))
        for (const auto &[reason, n] : left->items())
          why += fmt::format("{}{} {}", why.empty() ? "" : "; ", n.is_number() ? n.dump() : "?", reason);
      md += fmt::format("| {} | {} | {} | {} | {} |\n", detail::string_field(row, "task_id").value_or("?"),
                        detail::string_field(row, "category").value_or("?"),
                        detail::int_field(row, "failed").value_or(0),
                        detail::int_field(row, "selected").value_or(0), why.empty() ? "-" : why);
    }
    if (const Json *not_failures = detail::object_field(*selection, "not_failures")) {
      std::string text;
      for (const auto &[reason, n] : not_failures->items())
        text += fmt::format("{}{} {}", text.empty() ? "" : "; ", n.is_number() ? n.dump() : "?", reason);
      if (!text.empty()) md += "\nStudent turns that were not repair candidates: " + text + ".\n";
    }
  }
  return md;
}

std::string render_card(const std::vector<LoadedRun> &runs, const ExportOptions &o, const ExportCounts &c,
                        const std::vector<std::string> &warnings) {
  std::string md = fmt::format("# PTXBench dataset card\n\nFormat: `{}`", to_string(o.format));
  if (o.format == ExportFormat::messages || o.format == ExportFormat::sharegpt) {
    md += fmt::format(", one example per {}", to_string(o.unit));
  }
  md += fmt::format(". Reasoning: {}.\n\nSources:\n", to_string(o.reasoning));
  for (const auto &r : runs) md += fmt::format("- `{}` ({} records)\n", r.dir.string(), r.turns.size());
  auto join = [](const auto &v) {
    std::string s;
    for (const auto &x : v) s += (s.empty() ? "" : ",") + fmt::format("{}", x);
    return s;
  };
  md += "\nOutcome filter: " + outcome_filter_description(o) + ".\n";
  md += "\nSettings: ";
  std::vector<std::string> settings;
  const ExportFilter f = effective_filter(o);
  if (!f.statuses.empty()) settings.push_back("status in {" + join(f.statuses) + "}");
  if (f.correct) settings.push_back(fmt::format("correct = {}", *f.correct));
  if (f.targets_executed) settings.push_back(fmt::format("targets executed = {}", *f.targets_executed));
  if (f.min_speedup) settings.push_back(fmt::format("speedup >= {}", *f.min_speedup));
  if (!f.tasks.empty()) settings.push_back("tasks {" + join(f.tasks) + "}");
  if (!f.models.empty()) settings.push_back("models {" + join(f.models) + "}");
  if (!f.variants.empty()) settings.push_back("variants {" + join(f.variants) + "}");
  if (!f.turns.empty()) settings.push_back("turns {" + join(f.turns) + "}");
  if (o.balance.cap_per_task) settings.push_back(fmt::format("cap per task {}", o.balance.cap_per_task));
  if (o.balance.cap_per_failure)
    settings.push_back(fmt::format("cap per failure {}", o.balance.cap_per_failure));
  if (o.balance.cap_per_task || o.balance.cap_per_failure)
    settings.push_back(fmt::format("seed {}", o.balance.seed));
  if (o.limits.max_chars) settings.push_back(fmt::format("max chars {}", o.limits.max_chars));
  if (o.limits.max_tokens) settings.push_back(fmt::format("max tokens {}", o.limits.max_tokens));
  if (o.format == ExportFormat::improve_pairs)
    settings.push_back(fmt::format("min gain {}x", o.improve_min_gain));
  settings.push_back(o.deduplicate ? "de-duplicated by normalized kernel hash" : "no de-duplication");
  for (std::size_t i = 0; i < settings.size(); ++i) md += (i ? "; " : "") + settings[i];
  md += "\n";

  int unusable = 0, filtered = 0;
  for (const auto &[k, v] : c.unusable) unusable += v;
  for (const auto &[k, v] : c.filtered) filtered += v;
  md += fmt::format(
      "\n## Counts\n\n| step | examples |\n|---|---:|\n| trajectories read | {} |\n| candidate examples | {} "
      "|\n"
      "| unusable | {} |\n| filtered out | {} |\n| over the length limit | {} |\n| duplicates removed | {} "
      "|\n"
      "| capped (per task) | {} |\n| capped (per failure) | {} |\n| **written** | **{}** |\n",
      c.trajectories, c.candidates, unusable, filtered, c.too_long, c.duplicates, c.capped_by_task,
      c.capped_by_failure, c.written);
  if (!c.unusable.empty()) md += count_table("Unusable, by reason", "reason", c.unusable);
  if (!c.filtered.empty()) md += count_table("Filtered out, by first failing filter", "filter", c.filtered);
  md += count_table("Written, by task", "task", c.by_task);
  md += count_table("Written, by source failure category", "category", c.by_source_category);
  md += "\n### Written, by target turn\n\n| turn | examples |\n|---|---:|\n";
  if (c.by_turn.empty()) md += "| (none) | 0 |\n";
  for (const auto &[t, v] : c.by_turn) md += fmt::format("| {} | {} |\n", t, v);
  md += count_table("Written, by model", "model", c.by_model);
  if (o.format == ExportFormat::repair_pairs && has_repairs(runs)) {
    // Examples from repairs runs: the student side of the balance and the teacher's fix rate.
    md += count_table("Written, by student model", "student model", c.by_student_model);
    md += "\n### Written, by student turn\n\n| student turn | examples |\n|---|---:|\n";
    if (c.by_student_turn.empty()) md += "| (none) | 0 |\n";
    for (const auto &[t, v] : c.by_student_turn) md += fmt::format("| {} | {} |\n", t, v);
    md += count_table("Written, by reasoning source", "reasoning", c.by_reasoning_source);
    md += selection_coverage(runs);
    md += render_repairs_markdown(summarize_repairs(runs, prices_of_runs(runs)), "##");
  }
  if (!warnings.empty()) {
    md += "\n## Warnings\n\n";
    for (const auto &w : warnings) md += "- " + w + "\n";
  }
  return md;
}

}  // namespace

ExportFilter effective_filter(const ExportOptions &options) {
  ExportFilter f = options.filter;
  const bool whole_turns =
      options.format == ExportFormat::messages || options.format == ExportFormat::sharegpt;
  const bool caller_outcome = !f.statuses.empty() || f.correct || f.targets_executed || f.min_speedup;
  if (whole_turns && !options.all && !caller_outcome) {
    f.statuses = {"ok"};  // a suspicious timing is not a kernel to learn from, even when correct
    f.correct = true;
    f.targets_executed = true;
  }
  return f;
}

std::string outcome_filter_description(const ExportOptions &options) {
  const ExportFilter f = effective_filter(options);
  const bool caller_outcome = !options.filter.statuses.empty() || options.filter.correct ||
                              options.filter.targets_executed || options.filter.min_speedup;
  switch (options.format) {
    case ExportFormat::messages:
    case ExportFormat::sharegpt:
      if (options.all) return "every target turn (--all): incorrect and non-executing kernels included";
      if (caller_outcome) return "the outcome filters given (see Settings); the default filter did not apply";
      return f.correct && f.targets_executed
                 ? "default: only target turns with status ok that are correct and whose target "
                   "instructions executed (--all keeps every turn)"
                 : "";
    case ExportFormat::repair_pairs:
      return options.all ? "fixed turns correct (--all: target execution not required)"
                         : "default: fixed turns correct and their target instructions executed (--all drops "
                           "the execution requirement)";
    case ExportFormat::improve_pairs:
      return "both turns correct with status ok, the later one faster by the min gain";
  }
  return "";
}

util::Expected<ExportResult> build_export(const std::vector<LoadedRun> &runs, const ExportOptions &options) {
  detail::RunIndex index = detail::index_runs(runs);
  if (index.usable_records == 0) return util::unexpected(detail::no_usable_records_message(runs, index));
  ExportResult result;
  ExportCounts &counts = result.counts;
  counts.trajectories = static_cast<int>(index.trajectories.size());
  result.warnings = index.warnings;
  if (index.skipped_partial_lines) {
    result.warnings.push_back(
        fmt::format("{} partial or unreadable line(s) skipped", index.skipped_partial_lines));
  }

  std::vector<Example> examples;
  Builder builder(options, counts);
  for (const auto &t : index.trajectories) builder.build(t, examples);

  const ExportFilter filter = effective_filter(options);
  std::vector<Example *> kept;
  std::set<std::string> seen;
  for (Example &e : examples) {
    std::string failed = failing_filter(e, filter);
    if (!failed.empty()) {
      ++counts.filtered[failed];
      continue;
    }
    if ((options.limits.max_chars && e.chars > options.limits.max_chars) ||
        (options.limits.max_tokens && e.token_count > static_cast<long long>(options.limits.max_tokens))) {
      ++counts.too_long;
      continue;
    }
    if (options.deduplicate && !seen.insert(e.dedup_key).second) {
      ++counts.duplicates;
      continue;
    }
    kept.push_back(&e);
  }
  std::mt19937_64 rng(options.balance.seed);
  counts.capped_by_task = apply_cap(kept, options.balance.cap_per_task, rng,
                                    [](const Example &e) { return e.trajectory->task_id; });
  counts.capped_by_failure = apply_cap(kept, options.balance.cap_per_failure, rng,
                                       [](const Example &e) { return e.source_category; });

  for (const Example *e : kept) {
    result.lines.push_back(render_line(*e, options));
    ++counts.written;
    ++counts.by_task[e->trajectory->task_id];
    ++counts.by_model[e->trajectory->model];
    if (e->repair) {
      ++counts.by_student_model[e->repair->student_model.empty() ? "?" : e->repair->student_model];
      ++counts.by_student_turn[e->source_turn.value_or(0)];
      ++counts.by_reasoning_source[e->reasoning_source];
    }
    ++counts.by_source_category[e->source_category];
    ++counts.by_turn[e->target_turn];
  }
  result.card_markdown = render_card(runs, options, counts, result.warnings);
  return result;
}

}  // namespace ptxbench::traces
