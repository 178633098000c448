// Read-side view of run directories shared by exports and reports: defensive
// field access (records are data from disk: a wrong type reads as absent),
// trajectories grouped and ordered by turn, and per-turn outcome facts.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

namespace ptxbench::traces {
struct LoadedRun;
struct TurnRecord;
}  // namespace ptxbench::traces

namespace ptxbench::traces::detail {

using Json = nlohmann::json;

/// j[key] when j is an object holding key (any type), else nullptr.
const Json *field(const Json &j, std::string_view key);
/// j[key] when it is an object, else nullptr.
const Json *object_field(const Json &j, std::string_view key);
std::optional<std::string> string_field(const Json &j, std::string_view key);
std::optional<double> number_field(const Json &j, std::string_view key);
std::optional<bool> bool_field(const Json &j, std::string_view key);
std::optional<long long> int_field(const Json &j, std::string_view key);

/// One trajectory (model × task × sample of one run), its turn records ordered by turn.
struct TrajectoryView {
  std::size_t run_index = 0;  ///< index into the runs passed in
  std::string run_id;
  std::string model;    ///< model_label(): "<endpoint>" or "<endpoint>@<variant>"
  std::string variant;  ///< the run variant; "" in a run without variants
  std::string task_id;
  int sample = 0;
  std::string trajectory_id;
  std::vector<const TurnRecord *> turns;  ///< sorted by turn, one record per turn index
};

struct RunIndex {
  std::vector<TrajectoryView> trajectories;  ///< ordered by run, model, task, sample
  int usable_records = 0;
  int malformed_records = 0;          ///< missing model/task_id/sample/turn: skipped
  int other_version_records = 0;      ///< format_version != kFormatVersion: skipped
  int duplicate_turn_records = 0;     ///< same trajectory and turn twice: the later one kept
  int skipped_partial_lines = 0;      ///< summed from the loaded runs
  std::vector<std::string> warnings;  ///< loader warnings (prefixed with the run dir) and ours
};

RunIndex index_runs(const std::vector<LoadedRun> &runs);

// ---- Facts about one turn record ----

/// verdict.kernel_hash, else candidate.kernel_hash, else the normalized hash of
/// candidate.kernel_source; "" when there is no kernel.
std::string kernel_hash_of(const TurnRecord &record);

/// Kernel source with // and /* */ comments and all whitespace removed (string and
/// character literals kept verbatim), so reformatting or re-commenting does not change it.
std::string normalize_kernel_source(std::string_view source);
/// FNV-1a 64 hex of normalize_kernel_source.
std::string normalized_kernel_hash(std::string_view source);

/// Number of Unicode code points in UTF-8 text (continuation bytes are not counted).
std::size_t utf8_length(std::string_view text);
/// Text safe to embed in HTML or SVG (& < > " ' escaped).
std::string html_escape(std::string_view text);

}  // namespace ptxbench::traces::detail

namespace ptxbench::traces::detail {
/// The error text when runs hold no usable record: names the runs and the likely reason.
std::string no_usable_records_message(const std::vector<LoadedRun> &runs, const RunIndex &index);
}  // namespace ptxbench::traces::detail
