// Library selections (the fastest cuBLASLt algorithm, the fastest cuDNN plan)
// kept on disk across worker processes: every candidate runs in a fresh
// worker, but the library's choice for a shape depends only on the shape, the
// GPU, the driver and the library, so it is made once per cache directory.
// One JSON file per key, with a checksum of its value; the environment key
// (GPU UUID, driver, CUDA runtime) is part of every key, and the library key
// names the library version, so a change of any of them misses the cache.
// The library is still timed beside every candidate; only the search is saved.
#pragma once

#include <optional>
#include <string>

#include <nlohmann/json.hpp>

namespace ptxbench::worker {

/// Turns the cache on for this process ("" dir = off). `environment` names the GPU, driver and runtime.
void set_selection_cache(const std::string &dir, const std::string &environment);

/// The stored value of `key`, if present, intact (checksum) and made under the same environment.
std::optional<nlohmann::json> selection_cache_get(const std::string &key);

/// Stores `value` under `key` (atomically: a temporary file renamed over the old one). Failures to
/// write are ignored: the cache only saves time.
void selection_cache_put(const std::string &key, const nlohmann::json &value);

}  // namespace ptxbench::worker
