// Hidden helper subcommands run as children of ptxbench itself:
// `ptxbench internal nvrtc --arch sm_90a` reads CUDA source on stdin and writes
// PTX on stdout (the compiler log on stderr; exit 1 when it does not compile),
// so that NVRTC never runs inside the evaluating process.
#include <iostream>
#include <iterator>
#include <memory>
#include <string>

#include <fmt/core.h>
#include <CLI/CLI.hpp>

#include "cli/cli.hpp"
#include "evaluator/compile.hpp"

namespace ptxbench::cli {
namespace {

struct NvrtcOptions {
  std::string arch = "sm_90a";
};

int run_nvrtc(const NvrtcOptions &options) {
  std::string source((std::istreambuf_iterator<char>(std::cin)), std::istreambuf_iterator<char>());
  auto ptx = evaluator::nvrtc_compile_in_process(source, options.arch);
  if (!ptx) {
    fmt::print(stderr, "{}\n", ptx.error());
    return 1;
  }
  fmt::print("{}", *ptx);
  return kExitOk;
}

}  // namespace

void register_internal_commands(CLI::App &app, Action &action) {
  auto options = std::make_shared<NvrtcOptions>();
  CLI::App *internal = app.add_subcommand("internal", "");  // empty description: hidden from --help
  internal->group("");
  internal->require_subcommand(1);
  CLI::App *nvrtc = internal->add_subcommand("nvrtc", "CUDA source on stdin -> PTX on stdout (NVRTC child)");
  nvrtc->add_option("--arch", options->arch, "Target architecture, e.g. sm_90a")->capture_default_str();
  nvrtc->callback([&action, options] { action.run = [options] { return run_nvrtc(*options); }; });
}

}  // namespace ptxbench::cli
