// Reading sharded runs (`ptxbench run --shard I/N`, `ptxbench slurm submit`):
// the shards of one run live in separate run directories (each run.json has a
// "shard" object {index, count, config_hash, cells, cells_total} and the run's
// shared run_id). Reports, exports and `merge` see the shards of a run as one
// run, and refuse inputs that would mix runs or count a cell twice.
#pragma once

#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "traces/record.hpp"
#include "util/expected.hpp"

namespace ptxbench::traces {

/// A shard's place in its run, read from run.json (nullopt when the run is not a shard).
struct ShardInfo {
  std::string run_id;
  std::string config_hash;
  int index = 0;
  int count = 1;
  int cells = -1;  ///< trajectories this shard owns (-1 when run.json does not say)
};
std::optional<ShardInfo> shard_info(const RunRecord &run);

/// The directories a path stands for: itself when it is a run directory (run.json or
/// trajectories.jsonl), else its subdirectories whose run.json has a "shard" object, in shard order
/// (the top-level directory of `ptxbench slurm submit`). Error when it is neither.
util::Expected<std::vector<std::filesystem::path>> expand_run_dirs(const std::filesystem::path &path);

struct LoadedRuns {
  std::vector<LoadedRun> runs;        ///< one per run: the shards of a run merged into one
  std::vector<std::string> warnings;  ///< missing shards, directories given twice
};

/// Loads run directories for reports and exports. Every path is expanded (expand_run_dirs); a shard
/// without trajectories.jsonl (not started, or owning no cell) counts as a shard with no records.
/// The shards of one run_id become one LoadedRun (dir: their common parent, run: the lowest shard's
/// run.json without `shard`, with `shards` {count, present [{index, dir, records}]} and `config_hash`),
/// records in shard order.
/// Errors: shards of one run with different config hashes or shard counts; one shard index from two
/// directories; one trajectory in two shards; shards of different runs of the same config; the same
/// run id from two directories (a merged directory beside its shards). The same directory given
/// twice is read once.
util::Expected<LoadedRuns> load_runs(const std::vector<std::filesystem::path> &paths);

/// Writes one loaded run as a run directory (run.json + trajectories.jsonl); `out` must not hold a
/// run yet. A merged directory reads like a single-process run and `ptxbench resume` can finish it.
util::Expected<void> write_run(const LoadedRun &run, const std::filesystem::path &out);

}  // namespace ptxbench::traces
