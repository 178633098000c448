// The run configuration: models × tasks × samples × turns, the
// history policy, the stop target, budgets and concurrency. Loaded from JSON
// (unknown fields and bad types are errors naming the JSON path); CLI flags
// override it; written to run.json without secrets (only the names of the
// environment variables that hold keys).
//
// The configuration's fields (RunConfig, Variant, StopTarget, ...) are declared in
// detail/run_config_types.hpp, shared with the runner's state; this header has what reads and checks them.
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "agent/detail/run_config_types.hpp"
#include "agent/shard.hpp"
#include "evaluator/evaluator.hpp"
#include "evaluator/verdict.hpp"
#include "llm_clients/chat_client.hpp"
#include "util/expected.hpp"

namespace ptxbench::agent {

std::string to_string(HistoryPolicy);
std::optional<HistoryPolicy> history_policy_from_string(std::string_view);

/// Parses a config object. `origin` prefixes error paths (e.g. the file name). Relative paths in the
/// config (scripted files, task/prompt dirs, out_dir) are resolved against `base_dir`.
/// Error: every problem, one per line, e.g. "run.json: endpoints[1].max_in_flight: expected an integer >= 1,
/// got \"x\"".
util::Expected<RunConfig> parse_run_config(const nlohmann::json &j, const std::string &origin,
                                           const std::filesystem::path &base_dir);
/// Reads and parses a config file.
util::Expected<RunConfig> load_run_config(const std::filesystem::path &file);
/// Keeps only the named variants (CLI --variant), in the config's order. Error: a name the config lacks.
util::Expected<void> select_variants(RunConfig &config, const std::vector<std::string> &names);

/// Checks cross-field rules (at least one endpoint, unique names, scripted endpoints have a file,
/// samples/turns >= 1). Called after CLI overrides.
util::Expected<void> validate(const RunConfig &config);

/// The embedded default config (examples/default_run.json: the scripted model on built-in tasks):
/// $PTXBENCH_EXAMPLES, <exe>/../share/ptxbench/examples, then the source tree.
std::filesystem::path default_examples_dir();

}  // namespace ptxbench::agent
