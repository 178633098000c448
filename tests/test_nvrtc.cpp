// The NVRTC child (evaluator/nvrtc/): a CUDA candidate compiles through ptxbench-nvrtc exactly as in
// process, the evaluator finds the child next to the worker, and a hostile compile (huge output, an
// include that never ends, a compile past its time) ends as a value within its limits.
#define DOCTEST_CONFIG_IMPLEMENT_WITH_MAIN
#include <doctest/doctest.h>

#include <chrono>
#include <filesystem>
#include <string>

#include "evaluator/compile.hpp"
#include "evaluator/evaluator.hpp"
#include "evaluator/nvrtc/nvrtc_compile.hpp"
#include "support/support.hpp"
#include "util/files.hpp"

using namespace ptxbench;
using namespace ptxbench::evaluator;
namespace fs = std::filesystem;

namespace {

using test::cpu_settings;
using test::replaced;

const tasks::Task &gemm_task() {
  return test::repo_task("gemm_n7168_k5120");
}

std::string data_file(const std::string &name) {
  return test::test_data(fs::path("evaluator") / name);
}

// PTX without its `.file` lines, which name the folder NVRTC ran in.
std::string without_file_directives(const std::string &ptx) {
  std::string out;
  std::size_t pos = 0;
  while (pos < ptx.size()) {
    std::size_t nl = ptx.find('\n', pos);
    if (nl == std::string::npos) nl = ptx.size();
    const std::string_view line(ptx.data() + pos, nl - pos);
    if (line.find(".file") == std::string_view::npos) out.append(line).push_back('\n');
    pos = nl + 1;
  }
  return out;
}

// The limits the evaluator gives the NVRTC child by default.
util::ProcessLimits nvrtc_limits() {
  const CompileLimits c;
  util::ProcessLimits l;
  l.wall_time = c.nvrtc_wall;
  l.address_space_bytes = c.nvrtc_address_space_bytes;
  l.max_output_bytes = c.max_ptx_bytes;
  return l;
}

}  // namespace

TEST_CASE("nvrtc: CUDA device code compiles to PTX through the ptxbench-nvrtc child, as in process") {
  const auto child = find_nvrtc_child(cpu_settings());
  REQUIRE_MESSAGE(child.has_value(), "build the ptxbench-nvrtc child first");
  CHECK(child->filename() == "ptxbench-nvrtc");
  CHECK(child->parent_path() == find_worker_binary(cpu_settings())->parent_path());  // one locator

  const std::string source = data_file("gemm_tma_wgmma_nvrtc.cu");
  util::TempDir work("nvrtc-test");
  const auto ptx = nvrtc_compile_in_child(*child, source, "sm_90a", work.path(), nvrtc_limits());
  REQUIRE_MESSAGE(ptx.has_value(), ptx.error());
  CHECK(ptx->find(".target sm_90a") != std::string::npos);
  CHECK(ptx->find("wgmma.mma_async") != std::string::npos);
  const auto in_process = nvrtc_compile_in_process(source, "sm_90a");
  REQUIRE_MESSAGE(in_process.has_value(), in_process.error());
  CHECK(without_file_directives(*in_process) == without_file_directives(*ptx));
  const auto broken = nvrtc_compile_in_child(*child, "extern \"C\" __global__ void k() { undefined_call(); }",
                                             "sm_90a", work.path(), nvrtc_limits());
  REQUIRE_FALSE(broken.has_value());
  CHECK(broken.error().find("undefined_call") != std::string::npos);

  Verdict v = evaluate(gemm_task(), data_file("response_cuda_gemm.md"), cpu_settings());
  CHECK_MESSAGE(v.compile.status == Status::ok, v.compile.summary);
  CHECK(v.compile.figures["nvrtc_seconds"].get<double>() > 0);
  CHECK(v.static_checks.figures["targets_in_ptx"]["wgmma"] == true);
  CHECK(v.static_checks.figures["targets_in_ptx"]["tma_load"] == true);

  std::string bad =
      replaced(data_file("response_cuda_gemm.md"), "float s = 0.f;", "float s = undefined_name;");
  Verdict vb = evaluate(gemm_task(), bad, cpu_settings());
  CHECK(vb.status == Status::compile_error);
  CHECK(vb.compile.summary.find("NVRTC: ") == 0);
  CHECK(vb.compile.summary.find("undefined_name") != std::string::npos);
  CHECK(vb.static_checks.summary == "not run: the CUDA source did not compile to PTX");

  EvaluatorSettings missing = cpu_settings();
  missing.nvrtc_child_path = work.path() / "no-such-child";
  Verdict vm = evaluate(gemm_task(), data_file("response_cuda_gemm.md"), missing);
  CHECK(vm.status == Status::compile_error);
  CHECK(vm.compile.summary.find("ptxbench-nvrtc child was not found") != std::string::npos);
}

TEST_CASE(
    "nvrtc: a hostile CUDA candidate is bounded in the child (huge output, endless include or expansion, "
    "time)") {
  const auto child = find_nvrtc_child(cpu_settings());
  REQUIRE_MESSAGE(child.has_value(), "build the ptxbench-nvrtc child first");
  util::TempDir work("nvrtc-hostile");

  // Output past the cap is cut off and refused, never handed to the static stage.
  util::ProcessLimits small = nvrtc_limits();
  small.max_output_bytes = 4096;
  const auto huge =
      nvrtc_compile_in_child(*child, data_file("gemm_tma_wgmma_nvrtc.cu"), "sm_90a", work.path(), small);
  REQUIRE_FALSE(huge.has_value());
  CHECK_MESSAGE(huge.error().find("more than 4096 bytes") != std::string::npos, huge.error());

  // An include of a file that never ends is refused by NVRTC (not a regular file).
  const auto endless =
      nvrtc_compile_in_child(*child, "#include \"/dev/zero\"\nextern \"C\" __global__ void k() {}\n",
                             "sm_90a", work.path(), nvrtc_limits());
  REQUIRE_FALSE(endless.has_value());
  CHECK(endless.error().find("/dev/zero") != std::string::npos);

  // A preprocessor expansion without end (2^40 statements) runs into the child's time or memory limit.
  std::string bomb = "#define A0 x += 1.0f;\n";
  for (int i = 1; i <= 40; ++i)
    bomb +=
        "#define A" + std::to_string(i) + " A" + std::to_string(i - 1) + " A" + std::to_string(i - 1) + "\n";
  bomb += "extern \"C\" __global__ void k(float *o) { float x = 0.f; A40 *o = x; }\n";
  util::ProcessLimits bounded = nvrtc_limits();
  bounded.wall_time = std::chrono::seconds(5);
  bounded.address_space_bytes = 2ull << 30;
  const auto t0 = std::chrono::steady_clock::now();
  const auto expanded = nvrtc_compile_in_child(*child, bomb, "sm_90a", work.path(), bounded);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  REQUIRE_FALSE(expanded.has_value());
  CHECK(seconds < 15);  // the 5 s limit, plus the kill and a loaded machine
  CHECK_MESSAGE((expanded.error().find("NVRTC took longer than 5.0 s") != std::string::npos ||
                 expanded.error().find("NVRTC child was killed") != std::string::npos),
                expanded.error().substr(0, 300));

  // A compile that outlives the wall-clock limit is stopped and said so (the limit is far too short on
  // purpose).
  util::ProcessLimits instant = nvrtc_limits();
  instant.wall_time = std::chrono::milliseconds(1);
  const auto late =
      nvrtc_compile_in_child(*child, data_file("gemm_tma_wgmma_nvrtc.cu"), "sm_90a", work.path(), instant);
  REQUIRE_FALSE(late.has_value());
  CHECK(late.error().find("NVRTC took longer than") != std::string::npos);
}
