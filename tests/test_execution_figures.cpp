// The execution axis on the CPU: FLOPs of MMA opcodes, the worker's join of
// per-PC counts with the SASS listing (work_flops, work_share), and the
// evaluator's targets_executed decision with min_target_work_share. The SASS
// opcodes of the committed wgmma/mma.sync solutions are checked through a real
// ptxas + disassembler run when both exist here.
#define DOCTEST_CONFIG_IMPLEMENT_WITH_MAIN
#include <doctest/doctest.h>

#include <filesystem>
#include <string>
#include <vector>

#include "evaluator/compile.hpp"
#include "evaluator/detail/execution_axis.hpp"
#include "evaluator/sass.hpp"
#include "evaluator/worker/detail/execution_figures.hpp"
#include "util/files.hpp"
#include "util/strings.hpp"

namespace fs = std::filesystem;
namespace ev = ptxbench::evaluator;
namespace wd = ptxbench::worker::detail;
using nlohmann::json;
using ptxbench::worker::SassInstruction;
using ptxbench::worker::TargetSpec;

namespace {

SassInstruction inst(std::uint32_t offset, const std::string &opcode) {
  return SassInstruction{"gemm", offset, opcode, opcode.substr(0, opcode.find('.'))};
}

// A wgmma + TMA GEMM kernel's listing: 4 HGMMA per k-step, a TMA load, FFMA in the epilogue.
std::vector<SassInstruction> wgmma_listing() {
  return {inst(0x00, "UTMALDG.2D"),
          inst(0x10, "WARPGROUP.ARRIVE"),
          inst(0x20, "HGMMA.64x256x16.F32.BF16"),
          inst(0x30, "HGMMA.64x256x16.F32.BF16"),
          inst(0x40, "HGMMA.64x256x16.F32.BF16"),
          inst(0x50, "HGMMA.64x256x16.F32.BF16"),
          inst(0x60, "FFMA"),
          inst(0x70, "EXIT")};
}

const std::vector<TargetSpec> kGemmTargets = {{"wgmma", {"HGMMA"}}, {"tma_load", {"UTMALDG"}}};

const json &target(const json &figures, const std::string &name) {
  for (const auto &t : figures["targets"])
    if (t["name"] == name) return t;
  FAIL("no target " << name);
  static const json none;
  return none;
}

// The error of an Expected, "" when it holds a value (doctest builds messages even for passing checks under
// -s).
template <typename E>
std::string error_of(const E &e) {
  return e.has_value() ? std::string() : std::string(e.error());
}

ev::StageResult ok_execution(const json &figures) {
  ev::StageResult s;
  s.status = ev::Status::ok;
  s.figures = figures;
  return s;
}

}  // namespace

TEST_CASE("mma_work: FLOPs and threads per MMA from the SASS opcode's shape") {
  const auto check = [](const std::string &opcode, double flops, int threads) {
    const auto w = wd::mma_work(opcode);
    REQUIRE_MESSAGE(w.has_value(), opcode);
    CHECK_MESSAGE(w->flops_per_op == flops, opcode);
    CHECK_MESSAGE(w->threads_per_op == threads, opcode);
  };
  // Warpgroup MMAs (wgmma): MxNxK in the opcode, 128 threads per MMA.
  check("HGMMA.64x256x16.F32.BF16", 2.0 * 64 * 256 * 16, 128);
  check("HGMMA.64x8x8.F32.TF32", 2.0 * 64 * 8 * 8, 128);
  check("QGMMA.64x128x32.F32.E4M3.E4M3", 2.0 * 64 * 128 * 32, 128);
  check("IGMMA.64x8x32.S8.S8", 2.0 * 64 * 8 * 32, 128);
  // Warp MMAs (mma.sync): compact m16n8kK spelling, 32 threads per MMA.
  check("HMMA.16816.F32.BF16", 2.0 * 16 * 8 * 16, 32);
  check("HMMA.1688.F32.TF32", 2.0 * 16 * 8 * 8, 32);
  check("HMMA.16816.F32", 2.0 * 16 * 8 * 16, 32);  // how ptxas lowers fp8 mma.sync m16n8k32 on sm_90 (x2)
  check("IMMA.16832.S8.S8", 2.0 * 16 * 8 * 32, 32);
  check("DMMA.8x8x4", 2.0 * 8 * 8 * 4, 32);
  check("DMMA.884", 2.0 * 8 * 8 * 4, 32);
  // Sparse forms skip half of the products.
  check("HMMA.SP.16832.F32.BF16", 16.0 * 8 * 32, 32);
  // Not MMAs, or MMAs whose shape is not in the opcode.
  CHECK_FALSE(wd::mma_work("FFMA").has_value());
  CHECK_FALSE(wd::mma_work("WARPGROUP.ARRIVE").has_value());
  CHECK_FALSE(wd::mma_work("UTMALDG.2D").has_value());
  CHECK_FALSE(wd::mma_work("UTCHMMA.2CTA").has_value());
  CHECK_FALSE(wd::mma_work("HGMMA.F32.BF16").has_value());
  CHECK_FALSE(wd::mma_work("HGMMA.64x256.F32").has_value());
  CHECK_FALSE(wd::mma_work("HMMA.32816.F32").has_value());
  CHECK_FALSE(wd::mma_work("").has_value());
}

TEST_CASE("percent_text keeps tiny shares visible") {
  CHECK(ptxbench::util::percent_text(1.0) == "100%");
  CHECK(ptxbench::util::percent_text(1.024) == "102%");
  CHECK(ptxbench::util::percent_text(0.5) == "50%");
  CHECK(ptxbench::util::percent_text(0.025) == "2.5%");
  CHECK(ptxbench::util::percent_text(0.0) == "0%");
  CHECK(ptxbench::util::percent_text(1.6e-7) == "under 0.01%");
}

TEST_CASE("execution_figures: a wgmma GEMM whose HGMMAs do all of the FLOPs") {
  // M=256, N=256, K=128 with 128x256 tiles: 2 blocks x 2 consumer warpgroups x 2 k-steps, each
  // HGMMA PC issued by 4 warps of 32 threads: 32 warp executions and 1024 threads per PC.
  const double workload_flops = 2.0 * 256 * 256 * 128;
  std::vector<wd::PcCount> counts;
  for (std::uint32_t pc : {0x20u, 0x30u, 0x40u, 0x50u}) counts.push_back({"gemm", pc, 32, 1024});
  counts.push_back({"gemm", 0x00, 4, 4});  // one elected thread per producer warp issues the TMA
  counts.push_back({"gemm", 0x60, 512, 16384});
  counts.push_back({"other_kernel", 0x20, 99, 3168});  // not the candidate's function: ignored
  const json f = wd::execution_figures(wgmma_listing(), kGemmTargets, counts, workload_flops);
  const json &wgmma = target(f, "wgmma");
  CHECK(wgmma["executed"] == true);
  CHECK(wgmma["warp_executions"] == 128);
  CHECK(wgmma["work_flops"].get<double>() == doctest::Approx(workload_flops));
  CHECK(wgmma["work_share"].get<double>() == doctest::Approx(1.0));
  const json &tma = target(f, "tma_load");
  CHECK(tma["executed"] == true);
  CHECK(tma["work_flops"].is_null());  // TMA has no FLOP meaning
  CHECK(tma["work_share"].is_null());
  CHECK(f["tensor_core_work_share"].get<double>() == doctest::Approx(1.0));
  CHECK(f["workload_flops"].get<double>() == workload_flops);

  const auto axis = ev::detail::targets_executed_axis(ok_execution(f), true, 0.5);
  REQUIRE(axis.value.has_value());
  CHECK(*axis.value);
  CHECK(axis.shortfalls.empty());
}

TEST_CASE("execution_figures: one HGMMA executed once while FFMA does the GEMM") {
  // The adversarial case target_once_work_elsewhere at its smallest workload (M=3000, N=K=4096):
  // one warpgroup runs one m64n8k16 wgmma.
  const double workload_flops = 2.0 * 3000 * 4096 * 4096;
  const std::vector<SassInstruction> listing = {inst(0x00, "FFMA"), inst(0x10, "HGMMA.64x8x16.F32.BF16"),
                                                inst(0x20, "LDS"), inst(0x30, "EXIT")};
  const std::vector<wd::PcCount> counts = {{"gemm", 0x00, 3'000'000'000ull, 96'000'000'000ull},
                                           {"gemm", 0x10, 4, 128},
                                           {"gemm", 0x20, 400'000'000ull, 12'800'000'000ull}};
  const json f = wd::execution_figures(listing, kGemmTargets, counts, workload_flops);
  const json &wgmma = target(f, "wgmma");
  CHECK(wgmma["executed"] == true);  // it ran...
  CHECK(wgmma["work_flops"].get<double>() == 2.0 * 64 * 8 * 16);
  CHECK(wgmma["work_share"].get<double>() < 0.01);  // ...but did almost none of the work
  CHECK(target(f, "tma_load")["present_in_sass"] == false);

  // With only the wgmma target (no TMA to fail on), the work share alone fails the axis.
  const json f_wgmma = wd::execution_figures(listing, {{"wgmma", {"HGMMA"}}}, counts, workload_flops);
  const auto axis = ev::detail::targets_executed_axis(ok_execution(f_wgmma), true, 0.5);
  REQUIRE(axis.value.has_value());
  CHECK_FALSE(*axis.value);
  REQUIRE(axis.shortfalls.size() == 1);
  const std::string &line = axis.shortfalls[0];
  CHECK(line.find("target wgmma: executed, but its instructions did under 0.01% of the task's FLOPs") !=
        std::string::npos);
  CHECK(line.find("top opcodes FFMA 3e+09") != std::string::npos);
  CHECK(line.find("at least 50% of the work") != std::string::npos);
  // A lower threshold setting lets the same counts pass: the setting decides, not a constant.
  CHECK(ev::detail::targets_executed_axis(ok_execution(f_wgmma), true, 0.0).value == true);
}

TEST_CASE("execution_figures: predicated-off MMAs do no work and do not count as executed") {
  const std::vector<wd::PcCount> counts = {{"gemm", 0x20, 4, 0}, {"gemm", 0x60, 100, 3200}};
  const json f = wd::execution_figures(wgmma_listing(), kGemmTargets, counts, 1e6);
  const json &wgmma = target(f, "wgmma");
  CHECK(wgmma["warp_executions"] == 4);
  CHECK(wgmma["threads_on"] == 0);
  CHECK(wgmma["executed"] == false);
  CHECK(wgmma["work_flops"].get<double>() == 0.0);
  CHECK(wgmma["work_share"].get<double>() == 0.0);
  const auto axis = ev::detail::targets_executed_axis(ok_execution(f), true, 0.5);
  CHECK(axis.value == false);
  CHECK(axis.shortfalls.empty());  // not executed at all: the executed flag already says so
}

TEST_CASE("execution_figures: mma.sync HMMA work share, full and partial") {
  // M=N=K=64: 2·64³ FLOPs = 128 m16n8k16 MMAs of 4096 FLOPs, each one warp (32 threads).
  const double workload_flops = 2.0 * 64 * 64 * 64;
  const std::vector<SassInstruction> listing = {inst(0x00, "HMMA.16816.F32.BF16"),
                                                inst(0x10, "HMMA.16816.F32.BF16"), inst(0x20, "FFMA")};
  const std::vector<TargetSpec> targets = {{"mma", {"HMMA"}}};
  const json full = wd::execution_figures(
      listing, targets, {{"gemm", 0x00, 64, 2048}, {"gemm", 0x10, 64, 2048}}, workload_flops);
  CHECK(target(full, "mma")["work_share"].get<double>() == doctest::Approx(1.0));
  // A quarter of the MMAs (the rest of the products done elsewhere).
  const json part = wd::execution_figures(
      listing, targets, {{"gemm", 0x00, 32, 1024}, {"gemm", 0x20, 999, 31968}}, workload_flops);
  CHECK(target(part, "mma")["work_share"].get<double>() == doctest::Approx(0.25));
  const auto axis = ev::detail::targets_executed_axis(ok_execution(part), true, 0.5);
  CHECK(axis.value == false);
  REQUIRE(axis.shortfalls.size() == 1);
  CHECK(axis.shortfalls[0].find("did 25% of the task's FLOPs") != std::string::npos);
  // Some threads of a warp predicated off: work counts by threads on, not by warp issues.
  const json half_on = wd::execution_figures(listing, targets, {{"gemm", 0x00, 128, 2048}}, workload_flops);
  CHECK(target(half_on, "mma")["work_share"].get<double>() == doctest::Approx(0.5));
}

TEST_CASE("execution_figures: unknown work leaves work_share null, never a false shortfall") {
  // Unknown workload size.
  const std::vector<wd::PcCount> counts = {{"gemm", 0x20, 4, 128}};
  const json no_size = wd::execution_figures(wgmma_listing(), kGemmTargets, counts, 0);
  CHECK(target(no_size, "wgmma")["work_flops"].get<double>() == 2.0 * 64 * 256 * 16);
  CHECK(target(no_size, "wgmma")["work_share"].is_null());
  CHECK(no_size["tensor_core_work_share"].is_null());
  // A tcgen05 MMA: the shape lives in a runtime descriptor, not the opcode.
  const std::vector<SassInstruction> listing = {inst(0x00, "UTCHMMA.2CTA"), inst(0x10, "FFMA")};
  const json tc = wd::execution_figures(listing, {{"tcgen05_mma", {"UTCHMMA"}}}, {{"gemm", 0x00, 1, 1}}, 1e9);
  CHECK(target(tc, "tcgen05_mma")["executed"] == true);
  CHECK(target(tc, "tcgen05_mma")["work_share"].is_null());
  const auto axis = ev::detail::targets_executed_axis(ok_execution(tc), true, 0.5);
  CHECK(axis.value == true);
  // An executed HGMMA whose shape cannot be read: named, and the share stays unknown.
  const std::vector<SassInstruction> odd = {inst(0x00, "HGMMA.F32.BF16")};
  const json f = wd::execution_figures(odd, kGemmTargets, {{"gemm", 0x00, 4, 128}}, 1e9);
  CHECK(target(f, "wgmma")["work_share"].is_null());
  CHECK(target(f, "wgmma")["work_unknown_opcodes"] == json::array({"HGMMA.F32.BF16"}));
}

TEST_CASE("targets_executed_axis: not measured when the stage did not run or there are no targets") {
  const json f = wd::execution_figures(wgmma_listing(), kGemmTargets, {{"gemm", 0x20, 4, 128}}, 1e6);
  ev::StageResult skipped = ok_execution(f);
  skipped.status = ev::Status::skipped;
  CHECK_FALSE(ev::detail::targets_executed_axis(skipped, true, 0.5).value.has_value());
  CHECK_FALSE(ev::detail::targets_executed_axis(ok_execution(f), false, 0.5).value.has_value());
  CHECK_FALSE(ev::detail::targets_executed_axis(ok_execution(json::object()), true, 0.5).value.has_value());
}

// The opcodes ptxas really emits for the committed solutions, read by our parser.
TEST_CASE("committed GEMM solutions: every tensor-core opcode in their SASS has a known shape") {
  const auto ptxas = ev::find_ptxas();
  const auto dis = ev::find_disassembler();
  if (!ptxas || !dis) {
    MESSAGE("no ptxas or disassembler here: skipping the live SASS check");
    return;
  }
  struct Solution {
    const char *folder, *opcode;
    double flops;
    int threads;
  };
  for (const Solution &s : {Solution{"wgmma_tma", "HGMMA.64x256x16.F32.BF16", 2.0 * 64 * 256 * 16, 128},
                            Solution{"mma_sync", "HMMA.16816.F32.BF16", 2.0 * 16 * 8 * 16, 32}}) {
    CAPTURE(s.folder);
    const fs::path ptx_path =
        fs::path(PTXBENCH_SOURCE_DIR) / "tasks/solutions/gemm_n7168_k5120" / s.folder / "kernel.ptx";
    const auto ptx = ptxbench::util::read_file(ptx_path);
    REQUIRE_MESSAGE(ptx.has_value(), error_of(ptx));
    ptxbench::util::TempDir dir("ptxbench-test");
    const auto run = ev::run_ptxas(*ptxas, *ptx, "sm_90a", dir.path(), {});
    REQUIRE_MESSAGE(run.has_value(), error_of(run));
    REQUIRE_MESSAGE(run->ok, run->failure);
    const auto text = ev::disassemble_cubin(*dis, dir.path() / "kernel.cubin", {});
    REQUIRE_MESSAGE(text.has_value(), error_of(text));
    int mmas = 0;
    for (const auto &i : ev::parse_sass_listing(*text).instructions) {
      if (i.family != "HGMMA" && i.family != "HMMA") continue;
      ++mmas;
      CHECK(i.opcode == s.opcode);
      const auto w = wd::mma_work(i.opcode);
      REQUIRE_MESSAGE(w.has_value(), i.opcode);
      CHECK(w->flops_per_op == s.flops);
      CHECK(w->threads_per_op == s.threads);
    }
    CHECK(mmas > 0);
  }
}
