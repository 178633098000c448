// TimingPolicy's JSON form, on its own so that what records or reads the policy (the run config, and the
// fuzz build that compiles run_config.cpp without the evaluator) needs nothing else of the evaluator.
#include <nlohmann/json.hpp>

#include "evaluator/evaluator.hpp"

namespace ptxbench::evaluator {

nlohmann::json TimingPolicy::to_json() const {
  return nlohmann::json{{"warmup_launches", warmup_launches},
                        {"min_samples", min_samples},
                        {"target_rel_spread", target_rel_spread},
                        {"min_seconds", min_seconds},
                        {"max_seconds", max_seconds},
                        {"l2_flush_factor", l2_flush_factor},
                        {"input_sets", input_sets},
                        {"reverify_random_launch", reverify_random_launch},
                        {"sol_slack", sol_slack},
                        {"cooldown_ratio", cooldown_ratio},
                        {"cooldown_max_ms", cooldown_max_ms},
                        {"library_preroll", library_preroll},
                        {"reuse_correctness_inputs", reuse_correctness_inputs}};
}

}  // namespace ptxbench::evaluator
