#include "traces/shards.hpp"

#include <algorithm>
#include <fstream>
#include <map>
#include <set>

#include <fmt/core.h>

#include "util/files.hpp"

namespace ptxbench::traces {

namespace fs = std::filesystem;
using Json = nlohmann::json;

namespace {

/// A directory's run.json, or nullopt when it is missing or unreadable (load_run says why).
std::optional<RunRecord> read_run_json(const fs::path &dir) {
  std::ifstream in(dir / "run.json", std::ios::binary);
  if (!in) return std::nullopt;
  try {
    auto record = RunRecord::from_json(Json::parse(in));
    if (record) return std::move(*record);
  } catch (const Json::exception &) {
  }
  return std::nullopt;
}

bool is_run_dir(const fs::path &dir) {
  std::error_code ec;
  return fs::exists(dir / "trajectories.jsonl", ec) || fs::exists(dir / "run.json", ec);
}

fs::path canonical_or_absolute(const fs::path &p) {
  std::error_code ec;
  fs::path c = fs::weakly_canonical(p, ec);
  if (ec) c = fs::absolute(p, ec);
  return c;
}

/// A shard directory read whole: load_run, or an empty run when it has run.json but no records yet.
util::Expected<LoadedRun> load_shard_or_run(const fs::path &dir) {
  std::error_code ec;
  if (!fs::exists(dir / "trajectories.jsonl", ec)) {
    if (auto record = read_run_json(dir); record && shard_info(*record)) {
      LoadedRun run;
      run.dir = dir;
      run.run = std::move(*record);
      return run;
    }
  }
  return load_run(dir);
}

std::string describe_shard_set(const std::set<int> &present, int count) {
  std::vector<int> missing;
  for (int i = 0; i < count; ++i) {
    if (!present.count(i)) missing.push_back(i);
  }
  std::string out;
  for (std::size_t i = 0; i < missing.size() && i < 20; ++i)
    out += (i ? ", " : "") + std::to_string(missing[i]);
  if (missing.size() > 20) out += fmt::format(" and {} more", missing.size() - 20);
  return out;
}

}  // namespace

std::optional<ShardInfo> shard_info(const RunRecord &run) {
  if (!run.shard) return std::nullopt;  // RunRecord::from_json checked index and count
  const ShardRecord &s = *run.shard;
  return ShardInfo{run.run_id, s.config_hash, s.index, s.count, static_cast<int>(s.cells.value_or(-1))};
}

util::Expected<std::vector<fs::path>> expand_run_dirs(const fs::path &path) {
  std::error_code ec;
  if (!fs::is_directory(path, ec)) {
    return util::unexpected(
        fmt::format("{}: not a run directory (does not exist or is not a directory)", path.string()));
  }
  if (is_run_dir(path)) return std::vector<fs::path>{path};
  std::vector<std::pair<int, fs::path>> shards;
  for (fs::directory_iterator it(path, ec), end; !ec && it != end; it.increment(ec)) {
    if (!it->is_directory(ec)) continue;
    auto record = read_run_json(it->path());
    if (!record) continue;
    if (auto info = shard_info(*record)) shards.emplace_back(info->index, it->path());
  }
  if (shards.empty()) {
    return util::unexpected(
        fmt::format("{}: neither a run directory (run.json, trajectories.jsonl) nor a directory of shards "
                    "(subdirectories whose run.json has a \"shard\" object)",
                    path.string()));
  }
  std::sort(shards.begin(), shards.end());
  std::vector<fs::path> out;
  for (auto &[index, dir] : shards) out.push_back(dir);
  return out;
}

namespace {

/// The directories the paths stand for (a top-level directory for its shards), each once.
util::Expected<std::vector<fs::path>> run_dirs_of(const std::vector<fs::path> &paths,
                                                  std::vector<std::string> &warnings) {
  std::vector<fs::path> dirs;
  std::set<fs::path> seen;
  for (const auto &p : paths) {
    auto expanded = expand_run_dirs(p);
    if (!expanded) return util::unexpected(expanded.error());
    for (const auto &d : *expanded) {
      if (!seen.insert(canonical_or_absolute(d)).second) {
        warnings.push_back(fmt::format("{} is given more than once; read once", d.string()));
        continue;
      }
      dirs.push_back(d);
    }
  }
  return dirs;
}

struct ShardGroup {
  std::string config_hash;
  int count = 0;
  std::map<int, LoadedRun> shards;  ///< index -> shard
};

/// The runs read, in the order given: shards grouped by run id, unsharded runs as they are.
struct Grouping {
  std::map<std::string, ShardGroup> groups;              ///< run id -> its shards
  std::vector<std::pair<std::string, LoadedRun>> plain;  ///< (run id, run) of unsharded runs, in order
  std::vector<std::string> order;                        ///< "g:<run id>" or "p:<index>"
};

util::Expected<void> add_shard(Grouping &out, const ShardInfo &info, LoadedRun run) {
  auto [it, inserted] = out.groups.try_emplace(info.run_id);
  ShardGroup &g = it->second;
  if (inserted) {
    g.config_hash = info.config_hash;
    g.count = info.count;
    out.order.push_back("g:" + info.run_id);
  } else if (g.config_hash != info.config_hash || g.count != info.count) {
    const LoadedRun &first = g.shards.begin()->second;
    return util::unexpected(fmt::format(
        "{} and {} are shards of run {} with different configs (config hash {} of {} shards vs {} of "
        "{}); they cannot be combined",
        first.dir.string(), run.dir.string(), info.run_id, g.config_hash, g.count, info.config_hash,
        info.count));
  }
  if (auto dup = g.shards.find(info.index); dup != g.shards.end()) {
    return util::unexpected(
        fmt::format("shard {}/{} of run {} is in two directories ({} and {}); its cells would count twice",
                    info.index, info.count, info.run_id, dup->second.dir.string(), run.dir.string()));
  }
  g.shards.emplace(info.index, std::move(run));
  return {};
}

util::Expected<Grouping> group_runs(const std::vector<fs::path> &dirs) {
  Grouping out;
  for (const auto &dir : dirs) {
    auto run = load_shard_or_run(dir);
    if (!run) return util::unexpected(run.error());
    auto info = shard_info(run->run);
    if (!info) {
      out.order.push_back(fmt::format("p:{}", out.plain.size()));
      out.plain.emplace_back(run->run.run_id, std::move(*run));
      continue;
    }
    if (auto ok = add_shard(out, *info, std::move(*run)); !ok) return util::unexpected(ok.error());
  }
  // Shards of different runs with one config: almost always a mix-up (a shard relaunched by hand
  // under another run id), and their cells would overlap.
  std::map<std::string, std::string> run_of_hash;
  for (const auto &[run_id, g] : out.groups) {
    auto [it, inserted] = run_of_hash.emplace(g.config_hash, run_id);
    if (!inserted) {
      return util::unexpected(fmt::format(
          "shards of two different runs of the same config (config hash {}): run {} ({}) and run {} "
          "({}); give the shards of one run (or `ptxbench merge` each run first)",
          g.config_hash, it->second, out.groups[it->second].shards.begin()->second.dir.string(), run_id,
          g.shards.begin()->second.dir.string()));
    }
  }
  return out;
}

/// The shards of one run as one run; a trajectory in two shards is an error.
util::Expected<LoadedRun> merge_shards(const std::string &run_id, ShardGroup &g,
                                       std::vector<std::string> &warnings) {
  LoadedRun merged;
  merged.run = g.shards.begin()->second.run;
  merged.run.shard.reset();
  merged.run.config_hash = g.config_hash;
  MergedShards shard_list{.count = g.count};
  std::map<std::string, fs::path> owner;  ///< trajectory id -> shard dir
  std::set<fs::path> parents;
  std::set<int> present;
  for (auto &[index, shard] : g.shards) {
    present.insert(index);
    parents.insert(canonical_or_absolute(shard.dir).parent_path());
    shard_list.present.push_back({.index = index,
                                  .dir = shard.dir.string(),
                                  .records = static_cast<std::int64_t>(shard.turns.size())});
    std::set<std::string> own;
    for (const auto &r : shard.turns)
      if (!r.trajectory_id.empty()) own.insert(r.trajectory_id);
    for (const auto &id : own) {
      auto [it, inserted] = owner.emplace(id, shard.dir);
      if (!inserted) {
        return util::unexpected(
            fmt::format("trajectory {} of run {} is in two shards ({} and {}); its turns would count twice",
                        id, run_id, it->second.string(), shard.dir.string()));
      }
    }
    for (auto &r : shard.turns) merged.turns.push_back(std::move(r));
    merged.skipped_partial_lines += shard.skipped_partial_lines;
    for (const auto &w : shard.warnings) merged.warnings.push_back(shard.dir.string() + ": " + w);
  }
  merged.run.shards = std::move(shard_list);
  merged.dir = parents.size() == 1 ? *parents.begin() : g.shards.begin()->second.dir;
  if (static_cast<int>(present.size()) < g.count) {
    warnings.push_back(fmt::format("run {}: shards {} of {} are missing; its counts cover {} shard(s)",
                                   run_id, describe_shard_set(present, g.count), g.count, present.size()));
  }
  return merged;
}

}  // namespace

util::Expected<LoadedRuns> load_runs(const std::vector<fs::path> &paths) {
  LoadedRuns result;
  auto dirs = run_dirs_of(paths, result.warnings);
  if (!dirs) return util::unexpected(dirs.error());
  auto grouping = group_runs(*dirs);
  if (!grouping) return util::unexpected(grouping.error());
  std::map<std::string, std::string> dir_of_run;  ///< run id -> directory, to refuse a run read twice
  auto claim = [&](const std::string &run_id, const fs::path &dir) -> util::Expected<void> {
    if (run_id.empty()) return {};
    auto [it, inserted] = dir_of_run.emplace(run_id, dir.string());
    if (!inserted) {
      return util::unexpected(fmt::format(
          "run {} is in both {} and {} (e.g. a merged directory beside its shards); its cells would "
          "count twice",
          run_id, it->second, dir.string()));
    }
    return {};
  };
  for (const auto &key : grouping->order) {
    if (key.rfind("p:", 0) == 0) {
      auto &[run_id, run] = grouping->plain[std::stoul(key.substr(2))];
      if (auto ok = claim(run_id, run.dir); !ok) return util::unexpected(ok.error());
      result.runs.push_back(std::move(run));
      continue;
    }
    const std::string run_id = key.substr(2);
    auto merged = merge_shards(run_id, grouping->groups[run_id], result.warnings);
    if (!merged) return util::unexpected(merged.error());
    if (auto ok = claim(run_id, merged->dir); !ok) return util::unexpected(ok.error());
    result.runs.push_back(std::move(*merged));
  }
  return result;
}

util::Expected<void> write_run(const LoadedRun &run, const fs::path &out) {
  std::error_code ec;
  if (fs::exists(out / "trajectories.jsonl", ec)) {
    return util::unexpected(
        fmt::format("{} already holds a run (trajectories.jsonl); choose another directory", out.string()));
  }
  fs::create_directories(out, ec);
  if (ec) return util::unexpected(fmt::format("cannot create {}: {}", out.string(), ec.message()));
  std::string jsonl;
  for (const auto &r : run.turns)
    jsonl += r.to_json().dump(-1, ' ', false, Json::error_handler_t::replace) + "\n";
  if (auto ok = util::write_file_atomic(out / "trajectories.jsonl", jsonl); !ok)
    return util::unexpected(ok.error());
  if (auto ok = util::write_file_atomic(out / "run.json", run.run.to_json().dump(2) + "\n"); !ok)
    return util::unexpected(ok.error());
  return {};
}

}  // namespace ptxbench::traces
