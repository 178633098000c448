// libFuzzer target: the PTX lexer and parser (model output, untrusted).
#include "evaluator/ptx.hpp"
#include "fuzz_common.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t *data, std::size_t size) {
  namespace ev = ptxbench::evaluator;
  const std::string_view text = ptxbench::fuzz::as_text(data, size);
  const auto tokens = ev::lex_ptx(text);
  if (!tokens && (tokens.error().message.empty() || tokens.error().line < 1)) __builtin_trap();
  const auto module = ev::parse_ptx(text);
  if (!module && (module.error().message.empty() || module.error().line < 1)) __builtin_trap();
  if (module) {
    for (const auto &name : module->entry_names())
      if (!module->find_function(name)) __builtin_trap();  // listed entries can be found
    (void)module->instructions_with_prefix("wgmma.mma_async");
  }
  return 0;
}
