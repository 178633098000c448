#include "traces/detail/export_examples.hpp"

#include <algorithm>

#include "traces/detail/repair_view.hpp"
#include "traces/export.hpp"
#include "traces/outcome.hpp"
#include "util/think_tags.hpp"

namespace ptxbench::traces::detail {

namespace {

/// Rough token estimate where the endpoint reported no count: one token per 4 characters.
long long estimate_tokens(std::string_view text) {
  return static_cast<long long>((utf8_length(text) + 3) / 4);
}

/// The model's answer and reasoning, with an inline <think> block at the start of the
/// answer moved to the reasoning (some servers return reasoning that way).
struct Answer {
  std::string content;
  std::string reasoning;
};

std::optional<Answer> answer_of(const TurnRecord &record) {
  if (!record.response) return std::nullopt;
  Answer a{record.response->content, record.response->reasoning};
  // Records from clients that left <think> blocks in the content: split as the chat clients do.
  if (a.content.find("think>") != std::string::npos) {
    util::ThinkSplit split = util::split_think_tags(a.content);
    a.content = std::move(split.content);
    if (a.reasoning.empty()) a.reasoning = std::move(split.reasoning);
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
  std::string h = kernel_hash_of(record);
  return record.task_id + ":" + (h.empty() ? "text:" + normalized_kernel_hash(a.content) : h);
}

/// The conversation's opening (system + task): turn 0's request when the trajectory has it,
/// else the first system and first user message of `fallback`'s request.
std::optional<std::vector<Message>> opening_of(const TrajectoryView &t, const TurnRecord &fallback,
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

void add_opening_tokens(Example &e, const TrajectoryView &t, const std::vector<Message> &opening,
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

  void build(const TrajectoryView &t, std::vector<Example> &out) {
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
        if (!t.turns.empty() && repair_of(*t.turns.front())) {
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

  void per_turn(const TrajectoryView &t, std::vector<Example> &out) {
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
        e.source_category = failure_category_of(*e.source);
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

  void per_trajectory(const TrajectoryView &t, std::vector<Example> &out) {
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
    e.source_category = failure_category_of(first);
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

  void pairs(const TrajectoryView &t, std::vector<Example> &out, bool improve) {
    for (std::size_t i = 0; i + 1 < t.turns.size(); ++i) {
      const TurnRecord &src = *t.turns[i];
      const TurnRecord &tgt = *t.turns[i + 1];
      if (turn_of(tgt) != turn_of(src) + 1) continue;
      const std::string category = failure_category_of(src);
      bool qualifies = false;
      if (!improve) {
        const bool source_failed = category != "ok" && category != "request_failed" &&
                                   category != "skipped" && category != "unknown";
        // The fixed turn is what the pair trains on: correct, and (unless every turn is wanted) its
        // target instructions executed.
        const bool fixed = correct_of(tgt) == true && status_of(tgt) == "ok" &&
                           (category != "targets_not_executed" || targets_executed_of(tgt) == true) &&
                           (options_.all || targets_executed_of(tgt) == true);
        qualifies = source_failed && fixed;
      } else {
        auto s0 = speedup_of(src), s1 = speedup_of(tgt);
        qualifies = correct_of(src) == true && status_of(src) == "ok" && correct_of(tgt) == true &&
                    status_of(tgt) == "ok" && s0 && s1 && *s1 >= *s0 * options_.improve_min_gain;
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
  void teacher_repair(const TrajectoryView &t, std::vector<Example> &out) {
    // A repair is what the run's target says (correct, targets executed, its minimum speedup); --all keeps
    // a correct turn whose targets did not run too.
    const TurnRecord *kept = kept_repair_turn(t, !options_.all);
    if (!kept) {
      ++counts_.candidates;
      ++counts_.filtered["teacher did not fix it"];
      return;
    }
    const RepairOf &repair = *repair_of(*kept);
    auto request = request_messages(*kept);
    const auto seed_messages = static_cast<std::size_t>(std::max(0, repair.seed_messages));
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
    e.reasoning_source = repair_reasoning_source(*kept);
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
    for (const auto &m : e.messages) e.chars += utf8_length(m.content) + utf8_length(m.reasoning);
    ++counts_.candidates;
    out.push_back(std::move(e));
  }

  const ExportOptions &options_;
  ExportCounts &counts_;
};

}  // namespace

void build_examples(const TrajectoryView &t, const ExportOptions &options, ExportCounts &counts,
                    std::vector<Example> &out) {
  Builder(options, counts).build(t, out);
}

}  // namespace ptxbench::traces::detail
