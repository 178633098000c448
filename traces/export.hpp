// Training-set exports from run directories: chat
// `messages` (TRL/axolotl), ShareGPT (LLaMA-Factory), repair pairs and
// improve pairs, with filters on the target turn, seeded per-task and
// per-failure caps stratified by turn, normalized-kernel de-duplication,
// length limits and a dataset card.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "traces/record.hpp"
#include "util/expected.hpp"

namespace ptxbench::traces {

enum class ExportFormat {
  messages,       ///< {"messages":[{role, content}], "metadata":{...}}
  sharegpt,       ///< {"conversations":[{from, value}], "system": ..., "metadata":{...}}
  repair_pairs,   ///< messages: system, task, failed attempt, diagnostics, fixed attempt
  improve_pairs,  ///< messages: system, task, correct-but-slower attempt, diagnostics, faster attempt
};
enum class ExportUnit {
  turn,        ///< one example per turn: the request as sent plus the model's answer
  trajectory,  ///< one example per trajectory: task, then attempt / feedback alternating
};
enum class ReasoningMode {
  inline_think,  ///< "<think>\n…\n</think>\n\n" before the answer
  field,         ///< the assistant message's "reasoning_content"
  drop,          ///< removed (an inline <think> block at the start of the answer too)
};

std::optional<ExportFormat> export_format_from_string(std::string_view);
std::optional<ExportUnit> export_unit_from_string(std::string_view);
std::optional<ReasoningMode> reasoning_mode_from_string(std::string_view);
std::string_view to_string(ExportFormat);

/// Conditions on the target turn (the turn whose answer the example trains on).
struct ExportFilter {
  std::vector<std::string> statuses;  ///< verdict status in this set ("request_failed" for none); empty = any
  std::optional<bool> correct;        ///< axes.correct must equal this (null never matches)
  std::optional<bool> targets_executed;  ///< axes.targets_executed must equal this (null never matches)
  std::optional<double> min_speedup;     ///< axes.speedup ≥ this (ratio library/candidate time), status ok
  /// verdict.generalizes.value must equal this (null never matches: a task without hidden workloads, or
  /// a kernel not checked on them)
  std::optional<bool> generalizes;
  std::vector<std::string> tasks;     ///< task ids; empty = all
  std::vector<std::string> models;    ///< model (endpoint) names, or model@variant labels; empty = all
  std::vector<std::string> variants;  ///< run variants; empty = all
  std::vector<int> turns;             ///< target turn indices (0-based); empty = all
};

struct ExportBalance {
  int cap_per_task = 0;     ///< examples kept per task; 0 = no cap
  int cap_per_failure = 0;  ///< examples kept per source failure category; 0 = no cap
  std::uint64_t seed = 0;   ///< seeds which examples a cap keeps (round-robin over target turns)
};

struct ExportLimits {
  std::size_t max_chars = 0;  ///< characters (code points) of all message text incl. kept reasoning; 0 = none
  std::size_t max_tokens = 0;  ///< metadata.token_count (endpoint usage counts); 0 = none
};

struct ExportOptions {
  ExportFormat format = ExportFormat::messages;
  ExportUnit unit = ExportUnit::turn;  ///< messages and sharegpt only; pairs are always two turns
  ReasoningMode reasoning = ReasoningMode::inline_think;
  ExportFilter filter;
  ExportBalance balance;
  ExportLimits limits;
  double improve_min_gain = 1.05;  ///< improve-pairs: target speedup / source speedup ≥ this (ratio)
  bool deduplicate = true;         ///< drop examples whose normalized kernel hash key was seen
  /// Keep every target turn whatever its outcome. Without it: messages and sharegpt keep only target
  /// turns with status ok that are correct and whose target instructions executed, unless the filter names
  /// its own outcome condition (statuses, correct, targets_executed, min_speedup); repair pairs' fixed turns
  /// must also have executed their targets.
  bool all = false;
};

/// The outcome filter the export applies: options.filter, plus status ok, correct and targets executed for
/// messages and sharegpt when neither `all` nor an outcome condition of the caller's was given.
ExportFilter effective_filter(const ExportOptions &options);
/// One sentence naming the outcome filter that applied (printed in the dataset card).
std::string outcome_filter_description(const ExportOptions &options);

/// What happened to every candidate example; the dataset card prints these.
struct ExportCounts {
  int trajectories = 0;
  int candidates = 0;                   ///< examples built before filters
  std::map<std::string, int> unusable;  ///< reason -> examples that could not be built
  std::map<std::string, int> filtered;  ///< filter name -> examples removed (first failing filter)
  int too_long = 0;
  int duplicates = 0;
  int capped_by_task = 0;
  int capped_by_failure = 0;
  int written = 0;
  std::map<std::string, int> by_task, by_source_category, by_model;
  std::map<int, int> by_turn;  ///< target turn -> written examples
  // Examples from repairs runs (`ptxbench repairs`): the student side and where the reasoning came from.
  std::map<std::string, int> by_student_model;
  std::map<int, int> by_student_turn;
  std::map<std::string, int> by_reasoning_source;  ///< teacher | synthesized | none
};

struct ExportResult {
  std::vector<std::string> lines;  ///< JSONL lines, without the trailing '\n'
  std::string card_markdown;       ///< the dataset card
  ExportCounts counts;
  std::vector<std::string> warnings;  ///< from loading (partial lines, other versions, ...)
};

/// Builds the dataset. Error only when the runs hold no usable turn record at all
/// (every run empty, or only records of another format version).
util::Expected<ExportResult> build_export(const std::vector<LoadedRun> &runs, const ExportOptions &options);

}  // namespace ptxbench::traces
