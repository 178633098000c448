// Sharding one run over several processes (`ptxbench run --shard I/N`): every
// process started with the same config computes the same split of the run's
// cells (model × task × sample) and runs only its own part, in its own run
// directory. The run id and a hash of the config tie the shards together, so
// reports, exports and `merge` can refuse to mix shards of different runs.
#pragma once

#include <cstddef>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "agent/detail/shard_spec.hpp"
#include "traces/run_record.hpp"
#include "util/expected.hpp"

namespace ptxbench::agent {

struct RunConfig;

std::string to_string(InFlightScope);
std::optional<InFlightScope> in_flight_scope_from_string(std::string_view);

/// "I/N" (e.g. "2/8"); the error says what is wrong.
util::Expected<ShardSpec> parse_shard_spec(std::string_view text);
std::string to_string(const ShardSpec &spec);

/// The identity of one cell: named dimensions. Only the names and values enter the split, never the
/// position of a model or task in the config's lists, so reordering the config keeps the split and a new
/// dimension (e.g. a prompt variant) joins by adding a named entry.
struct CellIdentity {
  std::map<std::string, std::string> dimensions;  ///< e.g. {model: ..., task: ..., sample: "3"}
  /// "model=...;sample=...;task=..." in name order (values with ';', '=' or '\\' escaped).
  std::string key() const;
};
/// The cell of one trajectory; `variant` ("" in a run without variants) joins as one more dimension.
CellIdentity trajectory_cell(const std::string &model, const std::string &task_id, int sample,
                             const std::string &variant = "");

/// The shard of each cell, in input order. Cells are ranked by (FNV-1a 64 of key, key) and rank r goes
/// to shard r mod count: deterministic, independent of list order, and the shards' sizes differ by at
/// most one. The same set of cells gives the same answer in every process.
std::vector<int> assign_shards(const std::vector<CellIdentity> &cells, int count);

/// 16 hex digits over the parts of the config that decide what the cells compute (models, sampling,
/// tasks, turns, history, stop rule, budgets, evaluator settings). Per-process settings are left out:
/// out_dir, compile workers, GPU ordinals, worker and lock paths, requests in flight and their scope.
std::string config_hash(const RunConfig &config);

/// Requests in flight to `endpoint_max` for this process: the endpoint's limit when limits hold per
/// shard (the default); with in_flight_scope "run", the limit divided by the shard count (at least 1).
int effective_max_in_flight(const RunConfig &config, int endpoint_max);

/// run.json's `shard`: {index, count, config_hash, cells, cells_total, split}.
traces::ShardRecord shard_record(const ShardSpec &spec, const std::string &config_hash, std::size_t cells,
                                 std::size_t cells_total);
/// The shard a run.json records (nullopt when the run is not a shard; RunRecord::from_json checked it).
std::optional<ShardSpec> shard_spec_of(const traces::RunRecord &run);

/// The run seed (evaluator::EvaluatorSettings::run_seed) of a shard whose config gives none: a hash of the
/// run id, so every shard of the run fills the same inputs. (`slurm submit` writes a drawn seed into the
/// shards' config instead.) 53 bits, like a drawn seed; never 0.
std::uint64_t shard_run_seed(const std::string &run_id);

/// The default run id of shards started without --run-id: the same in every process with this config.
std::string default_shard_run_id(const RunConfig &config);

}  // namespace ptxbench::agent
