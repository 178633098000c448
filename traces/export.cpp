#include "traces/export.hpp"

#include <algorithm>
#include <random>
#include <set>

#include <fmt/core.h>
#include <nlohmann/json.hpp>

#include "traces/detail/export_examples.hpp"
#include "traces/detail/repair_view.hpp"
#include "traces/detail/run_view.hpp"
#include "traces/outcome.hpp"
#include "traces/profile_facts.hpp"
#include "traces/repairs.hpp"
#include "util/enum_names.hpp"
#include "util/files.hpp"

namespace ptxbench::traces {

using detail::Example;
using detail::Json;
using detail::Message;

namespace {
// The names the CLI accepts and the dataset card writes.
constexpr util::EnumName<ExportFormat> kFormatNames[] = {{ExportFormat::messages, "messages"},
                                                         {ExportFormat::sharegpt, "sharegpt"},
                                                         {ExportFormat::repair_pairs, "repair-pairs"},
                                                         {ExportFormat::improve_pairs, "improve-pairs"}};
constexpr util::EnumName<ExportUnit> kUnitNames[] = {{ExportUnit::turn, "turn"},
                                                     {ExportUnit::trajectory, "trajectory"}};
constexpr util::EnumName<ReasoningMode> kReasoningNames[] = {
    {ReasoningMode::inline_think, "inline"}, {ReasoningMode::field, "field"}, {ReasoningMode::drop, "drop"}};
}  // namespace

std::optional<ExportFormat> export_format_from_string(std::string_view s) {
  return util::enum_from_string(kFormatNames, s);
}

std::optional<ExportUnit> export_unit_from_string(std::string_view s) {
  return util::enum_from_string(kUnitNames, s);
}

std::optional<ReasoningMode> reasoning_mode_from_string(std::string_view s) {
  return util::enum_from_string(kReasoningNames, s);
}

std::string_view to_string(ExportFormat f) {
  return util::enum_to_string(kFormatNames, f);
}

namespace {

std::string_view to_string(ExportUnit u) {
  return util::enum_to_string(kUnitNames, u);
}
std::string_view to_string(ReasoningMode m) {
  return util::enum_to_string(kReasoningNames, m);
}

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
  if (!contains(f.statuses, status_of(*e.target))) return "status";
  if (f.correct && correct_of(*e.target) != *f.correct) return "correct";
  if (f.targets_executed && targets_executed_of(*e.target) != *f.targets_executed) return "executed";
  if (f.generalizes && generalizes_of(*e.target) != *f.generalizes) return "generalizes";
  if (f.min_speedup) {
    auto s = speedup_of(*e.target);
    // A suspicious timing (faster than the speed-of-light floor) is never a fast example.
    if (!s || *s < *f.min_speedup || status_of(*e.target) != "ok") return "min_speedup";
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
            {"target_status", status_of(*e.target)},
            {"kernel_hash", detail::kernel_hash_of(*e.target)},
            {"token_count", e.token_count},
            {"token_count_exact", e.token_count_exact},
            {"chars", e.chars},
            {"reasoning", to_string(o.reasoning)},
            {"loss_on", e.loss_on},
            {"loss_message_indices", e.loss_messages}};
  if (o.format == ExportFormat::messages || o.format == ExportFormat::sharegpt) m["unit"] = to_string(o.unit);
  auto opt = [](auto v) { return v ? Json(*v) : Json(nullptr); };
  m["correct"] = opt(correct_of(*e.target));
  m["targets_executed"] = opt(targets_executed_of(*e.target));
  m["speedup"] = opt(speedup_of(*e.target));
  m["generalizes"] = opt(generalizes_of(*e.target));
  // What the profile stage measured (null when not profiled): the bound unit and its % of peak, the tensor
  // pipe's share and the library's figure for it.
  auto add_profile = [&](const std::string &prefix, const TurnRecord &record) {
    const AttemptProfile p = attempt_profile_of(record);
    m[prefix + "bound_unit"] = p.bound_unit.empty() ? Json(nullptr) : Json(p.bound_unit);
    m[prefix + "bound_unit_pct"] = opt(p.bound_value);
    m[prefix + "tensor_pipe_pct"] = opt(p.tensor_pct);
    m[prefix + "library_tensor_pipe_pct"] = opt(p.library_tensor_pct);
  };
  add_profile("", *e.target);
  if (e.source && o.format == ExportFormat::improve_pairs) {
    m["source_speedup"] = opt(speedup_of(*e.source));
    add_profile("source_", *e.source);
  }
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
    const Json *repairs = detail::object_field(run.run.config, "repairs");
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
  if (f.generalizes) settings.push_back(fmt::format("generalizes = {}", *f.generalizes));
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
  for (const auto &t : index.trajectories) detail::build_examples(t, options, counts, examples);

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
