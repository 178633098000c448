#include "agent/shard.hpp"

#include <algorithm>
#include <charconv>
#include <numeric>
#include <tuple>

#include <fmt/core.h>

#include "agent/run_config.hpp"
#include "util/enum_names.hpp"
#include "util/files.hpp"

namespace ptxbench::agent {

namespace {

std::optional<int> parse_int(std::string_view s) {
  int value = 0;
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), value);
  if (ec != std::errc() || end != s.data() + s.size() || s.empty()) return std::nullopt;
  return value;
}

std::string escape_part(const std::string &s) {
  std::string out;
  for (char c : s) {
    if (c == ';' || c == '=' || c == '\\') out += '\\';
    out += c;
  }
  return out;
}

}  // namespace

namespace {
constexpr util::EnumName<InFlightScope> kInFlightScopeNames[] = {{InFlightScope::shard, "shard"},
                                                                 {InFlightScope::run, "run"}};
}  // namespace

std::string to_string(InFlightScope scope) {
  return std::string(util::enum_to_string(kInFlightScopeNames, scope));
}

std::optional<InFlightScope> in_flight_scope_from_string(std::string_view s) {
  return util::enum_from_string(kInFlightScopeNames, s);
}

util::Expected<ShardSpec> parse_shard_spec(std::string_view text) {
  const auto slash = text.find('/');
  if (slash == std::string_view::npos)
    return util::unexpected(fmt::format("--shard {}: expected I/N (e.g. 0/4: the first of 4 shards)", text));
  const auto index = parse_int(text.substr(0, slash));
  const auto count = parse_int(text.substr(slash + 1));
  if (!index || !count)
    return util::unexpected(fmt::format("--shard {}: I and N must be integers (e.g. 0/4)", text));
  if (*count < 1 || *count > 100000)
    return util::unexpected(fmt::format("--shard {}: N must be between 1 and 100000", text));
  if (*index < 0 || *index >= *count)
    return util::unexpected(
        fmt::format("--shard {}: I must be between 0 and N-1 = {} (shards count from 0, like Slurm "
                    "array task ids)",
                    text, *count - 1));
  return ShardSpec{*index, *count};
}

std::string to_string(const ShardSpec &spec) {
  return fmt::format("{}/{}", spec.index, spec.count);
}

std::string CellIdentity::key() const {
  std::string out;
  for (const auto &[name, value] : dimensions) {
    if (!out.empty()) out += ';';
    out += escape_part(name) + '=' + escape_part(value);
  }
  return out;
}

CellIdentity trajectory_cell(const std::string &model, const std::string &task_id, int sample,
                             const std::string &variant) {
  CellIdentity cell{{{"model", model}, {"task", task_id}, {"sample", std::to_string(sample)}}};
  if (!variant.empty()) cell.dimensions["variant"] = variant;  // runs without variants keep their split
  return cell;
}

std::vector<int> assign_shards(const std::vector<CellIdentity> &cells, int count) {
  std::vector<std::string> keys;
  keys.reserve(cells.size());
  for (const auto &c : cells) keys.push_back(c.key());
  std::vector<std::string> hashes;  // fixed-width hex: string order is numeric order
  hashes.reserve(keys.size());
  for (const auto &k : keys) hashes.push_back(util::fnv1a64_hex(k));
  std::vector<std::size_t> order(cells.size());
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) {
    return std::tie(hashes[a], keys[a]) < std::tie(hashes[b], keys[b]);
  });
  std::vector<int> shard(cells.size(), 0);
  const int n = std::max(1, count);
  for (std::size_t rank = 0; rank < order.size(); ++rank) shard[order[rank]] = static_cast<int>(rank % n);
  return shard;
}

std::string config_hash(const RunConfig &config) {
  nlohmann::json j = config.to_json();
  j.erase("out_dir");
  if (auto it = j.find("concurrency"); it != j.end() && it->is_object()) {
    it->erase("compile_workers");
    it->erase("gpus");
    it->erase("in_flight_scope");
  }
  if (auto it = j.find("evaluator"); it != j.end() && it->is_object()) {
    it->erase("worker_path");
    it->erase("lock_dir");
    if (auto w = it->find("worker"); w != it->end() && w->is_object()) w->erase("selection_cache_dir");
  }
  if (auto it = j.find("endpoints"); it != j.end() && it->is_array()) {
    for (auto &e : *it) {
      if (e.is_object()) e.erase("max_in_flight");
    }
  }
  // nlohmann's objects are ordered maps: dump() is canonical for equal content.
  return util::fnv1a64_hex(j.dump());
}

int effective_max_in_flight(const RunConfig &config, int endpoint_max) {
  if (!config.shard || config.concurrency.in_flight_scope == InFlightScope::shard) return endpoint_max;
  return std::max(1, endpoint_max / std::max(1, config.shard->count));
}

traces::ShardRecord shard_record(const ShardSpec &spec, const std::string &hash, std::size_t cells,
                                 std::size_t cells_total) {
  return {.index = spec.index,
          .count = spec.count,
          .config_hash = hash,
          .cells = static_cast<std::int64_t>(cells),
          .cells_total = static_cast<std::int64_t>(cells_total),
          .split = "cells ranked by (fnv1a64(identity), identity); rank r -> shard r mod count"};
}

std::optional<ShardSpec> shard_spec_of(const traces::RunRecord &run) {
  if (!run.shard) return std::nullopt;
  return ShardSpec{run.shard->index, run.shard->count};
}

std::uint64_t shard_run_seed(const std::string &run_id) {
  const std::uint64_t seed = util::fnv1a64("run seed " + run_id) & ((std::uint64_t{1} << 53) - 1);
  return seed != 0 ? seed : 1;
}

std::string default_shard_run_id(const RunConfig &config) {
  return "cfg-" + config_hash(config);
}

}  // namespace ptxbench::agent
