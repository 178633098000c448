// libFuzzer target: run-config loading (agent/run_config.hpp) from arbitrary JSON text.
#include <nlohmann/json.hpp>

#include "agent/run_config.hpp"
#include "fuzz_common.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t *data, std::size_t size) {
  const auto j =
      nlohmann::json::parse(ptxbench::fuzz::as_text(data, size), nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return 0;
  const auto config = ptxbench::agent::parse_run_config(j, "fuzz.json", "/nonexistent-fuzz-base");
  if (!config) {
    if (config.error().empty()) __builtin_trap();
    return 0;
  }
  (void)ptxbench::agent::validate(*config);
  (void)config->to_json().dump();
  return 0;
}
