// ptxbench-nvrtc --arch sm_90a: CUDA source on stdin -> PTX on stdout; the compiler log on stderr and
// exit 1 when it does not compile, exit 2 on a usage error. The evaluator starts it with a scrubbed
// environment and bounded time, CPU, memory and output (util::run_process).
#include <cstdio>
#include <iostream>
#include <iterator>
#include <string>
#include <string_view>

#include "evaluator/nvrtc/nvrtc_compile.hpp"

int main(int argc, char **argv) {
  if (argc != 3 || std::string_view(argv[1]) != "--arch") {
    std::fputs("usage: ptxbench-nvrtc --arch <sm_XX[a]>  (CUDA source on stdin, PTX on stdout)\n", stderr);
    return 2;
  }
  const std::string source((std::istreambuf_iterator<char>(std::cin)), std::istreambuf_iterator<char>());
  auto ptx = ptxbench::evaluator::nvrtc_compile_in_process(source, argv[2]);
  if (!ptx) {
    std::fprintf(stderr, "%s\n", ptx.error().c_str());
    return 1;
  }
  std::fwrite(ptx->data(), 1, ptx->size(), stdout);
  return std::fflush(stdout) == 0 ? 0 : 1;
}
