// A shard of a run (ShardSpec) and whom an endpoint's max_in_flight limits when a run is sharded
// (InFlightScope): the two sharding fields of the run configuration (detail/run_config_types.hpp).
// shard.hpp includes this header and has the rest of sharding.
#pragma once

namespace ptxbench::agent {

/// Whom an endpoint's max_in_flight limits when a run is sharded.
enum class InFlightScope {
  shard,  ///< each shard process (N shards send up to N x max_in_flight requests at once)
  run,    ///< the whole run: each of N shards gets max_in_flight / N (at least 1)
};

/// This process's part of a run: shard `index` of `count` (0 <= index < count).
struct ShardSpec {
  int index = 0;
  int count = 1;
  bool operator==(const ShardSpec &) const = default;
};

}  // namespace ptxbench::agent
