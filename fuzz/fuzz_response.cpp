// libFuzzer target: the response parser (fences, last-block rule, size and binary limits).
#include "evaluator/candidate.hpp"
#include "fuzz_common.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t *data, std::size_t size) {
  namespace ev = ptxbench::evaluator;
  ev::ParseLimits limits;
  limits.max_response_bytes = 64u << 10;  // small limits so the fuzzer reaches the "too large" paths
  limits.max_kernel_bytes = 16u << 10;
  limits.max_manifest_bytes = 4u << 10;
  const auto parsed = ev::parse_response(ptxbench::fuzz::as_text(data, size), limits);
  if (parsed) {
    // What the parser returns must lie within the limits and the input.
    if (parsed->kernel_source.size() > limits.max_kernel_bytes || parsed->kernel_source.size() > size)
      __builtin_trap();
    if (parsed->manifest_text.size() > limits.max_manifest_bytes) __builtin_trap();
  } else if (parsed.error().message.empty()) {
    __builtin_trap();  // every rejection explains itself
  }
  return 0;
}
