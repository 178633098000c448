// The execution axis on the CPU: FLOPs of MMA opcodes, the worker's join of
// per-PC counts with the SASS listing (work_flops, work_share), and the
// evaluator's targets_executed decision with min_target_work_share. The SASS
// opcodes of the committed wgmma/mma.sync solutions are checked through a real
// ptxas + disassembler run when both exist here.
#define DOCTEST_CONFIG_IMPLEMENT_WITH_MAIN
#include <doctest/doctest.h>

#include <cmath>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "evaluator/compile.hpp"
#include "evaluator/detail/execution_axis.hpp"
#include "evaluator/evaluator.hpp"
#include "evaluator/protocol/matrix_work.hpp"
#include "evaluator/sass.hpp"
#include "evaluator/target_work.hpp"
#include "evaluator/worker/detail/execution_figures.hpp"
#include "evaluator/worker/detail/speed_of_light.hpp"
#include "tasks/task.hpp"
#include "util/files.hpp"
#include "util/int_expr.hpp"
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
  // A lower threshold setting lets the same counts pass the work-share rule: the setting decides, not a
  // constant. The FFMA loop doing the GEMM beside the wgmma is still work outside the target, which the
  // redundant-work rule refuses unless it is switched off.
  const ev::RedundantWorkPolicy off{100.0, true};
  CHECK(ev::detail::targets_executed_axis(ok_execution(f_wgmma), true, 0.0, 0.0, off).value == true);
  const auto ffma = ev::detail::targets_executed_axis(ok_execution(f_wgmma), true, 0.0);
  CHECK(ffma.value == false);
  REQUIRE(ffma.shortfalls.size() == 1);
  CHECK(ffma.shortfalls[0].find("fp32 fma (FFMA)") != std::string::npos);
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
TEST_CASE(
    "committed GEMM and attention solutions: every tensor-core opcode in their SASS has a known shape") {
  const auto ptxas = ev::find_ptxas();
  const auto dis = ev::find_disassembler();
  // A missing tool fails the case (scripts/install_deps.sh installs them) rather than passing it unrun.
  REQUIRE_MESSAGE(ptxas, "no ptxas found: install the CUDA toolkit (scripts/install_deps.sh)");
  REQUIRE_MESSAGE(dis, "no cuobjdump/nvdisasm found: install one (scripts/install_deps.sh)");
  struct Solution {
    const char *folder, *opcode;
    double flops;
    int threads;
    int count;  // static count of that opcode in the SASS, or -1 for "any"
  };
  const double hgmma128 = 2.0 * 64 * 128 * 16;
  for (const Solution &s :
       {Solution{"gemm_n7168_k5120/wgmma_tma", "HGMMA.64x256x16.F32.BF16", 2.0 * 64 * 256 * 16, 128, -1},
        Solution{"gemm_n7168_k5120/mma_sync", "HMMA.16816.F32.BF16", 2.0 * 16 * 8 * 16, 32, -1},
        // Attention forward: 8 Q·Kᵀ wgmmas for the first tile, 8 in the loop, 8 P·V (A from registers).
        Solution{"mha_fwd_d128/wgmma_tma", "HGMMA.64x128x16.F32.BF16", hgmma128, 128, 24},
        Solution{"mha_fwd_d128_causal/wgmma_tma", "HGMMA.64x128x16.F32.BF16", hgmma128, 128, 24},
        // The dead-branch probe keeps all 24 in the SASS (executed 0 times on a GPU).
        Solution{"mha_fwd_d128/probe_dead_wgmma", "HGMMA.64x128x16.F32.BF16", hgmma128, 128, 24},
        // Attention backward: Sᵀ, dPᵀ (key blocks) and S, dP (query blocks), 8 each, as 64x64 tiles; dV, dK
        // (key blocks) and dQ (query blocks), 4 k-steps each for the bf16 hi and lo terms, as 64x128 tiles.
        Solution{"mha_bwd_d128/wgmma", "HGMMA.64x64x16.F32.BF16", 2.0 * 64 * 64 * 16, 128, 32},
        Solution{"mha_bwd_d128/wgmma", "HGMMA.64x128x16.F32.BF16", hgmma128, 128, 24},
        Solution{"mha_bwd_d128_causal/wgmma", "HGMMA.64x64x16.F32.BF16", 2.0 * 64 * 64 * 16, 128, 32},
        Solution{"mha_bwd_d128_causal/wgmma", "HGMMA.64x128x16.F32.BF16", hgmma128, 128, 24}}) {
    CAPTURE(s.folder);
    const fs::path ptx_path = fs::path(PTXBENCH_SOURCE_DIR) / "tasks/solutions" / s.folder / "kernel.ptx";
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
      if (i.opcode != s.opcode) continue;
      ++mmas;
      const auto w = wd::mma_work(i.opcode);
      REQUIRE_MESSAGE(w.has_value(), i.opcode);
      CHECK(w->flops_per_op == s.flops);
      CHECK(w->threads_per_op == s.threads);
    }
    CHECK(mmas > 0);
    if (s.count >= 0) CHECK(mmas == s.count);
  }
  // The half-share probe: 16 HGMMA (Q·Kᵀ) beside 128 HMMA (P·V: 8 k-steps x 16 n-tiles per warp).
  const auto ptx = ptxbench::util::read_file(fs::path(PTXBENCH_SOURCE_DIR) /
                                             "tasks/solutions/mha_fwd_d128/probe_pv_mma_sync/kernel.ptx");
  REQUIRE(ptx.has_value());
  ptxbench::util::TempDir dir("ptxbench-test");
  const auto run = ev::run_ptxas(*ptxas, *ptx, "sm_90a", dir.path(), {});
  REQUIRE((run.has_value() && run->ok));
  const auto text = ev::disassemble_cubin(*dis, dir.path() / "kernel.cubin", {});
  REQUIRE(text.has_value());
  int hgmma = 0, hmma = 0;
  for (const auto &i : ev::parse_sass_listing(*text).instructions) {
    hgmma += i.opcode == "HGMMA.64x128x16.F32.BF16";
    hmma += i.opcode == "HMMA.16816.F32.BF16";
  }
  CHECK(hgmma == 16);
  CHECK(hmma == 128);
}

// ---- Attention: FLOP accounting, the half-share rule and the TMA byte-share rule -------------------------

namespace {

// The task's FLOPs for its headline workload, from the task JSON's formula.
double task_flops(const std::string &id) {
  const auto task = ptxbench::tasks::load_task_file(fs::path(PTXBENCH_SOURCE_DIR) / "tasks" / (id + ".json"));
  REQUIRE_MESSAGE(task.has_value(), error_of(task));
  const auto v = ptxbench::util::evaluate_int_expression(task->flops, task->workloads.at(0).symbols);
  REQUIRE_MESSAGE(v.has_value(), error_of(v));
  return static_cast<double>(*v);
}

// The attention wgmma_tma forward's SASS shape: one 64x128x16 HGMMA PC per k-step (8 for S = Q·Kᵀ, 8 for
// O += P·V, issued by the 4 warps of each consumer warpgroup), a UTMALDG for every 64x128 box, FFMA/MUFU
// for the softmax. `pv_opcode` lets a probe move P·V to mma.sync.
std::vector<SassInstruction> attention_listing(const std::string &pv_opcode) {
  std::vector<SassInstruction> l = {inst(0x000, "UTMALDG.3D"), inst(0x010, "LDG.E.128")};
  for (std::uint32_t k = 0; k < 8; ++k) l.push_back(inst(0x100 + 0x10 * k, "HGMMA.64x128x16.F32.BF16"));
  for (std::uint32_t k = 0; k < 8; ++k) l.push_back(inst(0x200 + 0x10 * k, pv_opcode));
  l.push_back(inst(0x300, "MUFU.EX2"));
  return l;
}

const std::vector<TargetSpec> kAttentionTargets = {{"wgmma", {"HGMMA"}}, {"tma_load", {"UTMALDG"}}};

// Per-PC counts of one forward at B=4, H=48, S=4096, D=128 with 128x128 tiles: `tiles` key tiles summed
// over the 6144 blocks, each block's two consumer warpgroups issuing every HGMMA PC once per tile from 4
// warps (32 threads on). P·V on mma.sync: each of the 8 warps runs 16 m16n8k16 per k-step PC instead.
std::vector<wd::PcCount> attention_counts(std::uint64_t tiles, bool pv_on_hmma, std::uint64_t tma_boxes,
                                          std::uint64_t ldg128_threads) {
  std::vector<wd::PcCount> c;
  const std::uint64_t warps = tiles * 2 * 4;
  for (std::uint32_t k = 0; k < 8; ++k) c.push_back({"gemm", 0x100 + 0x10 * k, warps, warps * 32});
  const std::uint64_t pv_warps = pv_on_hmma ? warps * 16 : warps;
  for (std::uint32_t k = 0; k < 8; ++k) c.push_back({"gemm", 0x200 + 0x10 * k, pv_warps, pv_warps * 32});
  c.push_back({"gemm", 0x000, tma_boxes, tma_boxes});
  if (ldg128_threads) c.push_back({"gemm", 0x010, ldg128_threads / 32, ldg128_threads});
  c.push_back({"gemm", 0x300, warps * 64, warps * 64 * 32});
  return c;
}

constexpr std::uint64_t kBlocks = 32 * 192;       // ceil(S/128) x B*H
constexpr double kBoxBytes = 64.0 * 128 * 1 * 2;  // the manifest's box [64, 128, 1] of bf16

}  // namespace

TEST_CASE("attention FLOP accounting: forward 4·B·H·S²·D, causal half of it, backward 2.5x forward") {
  const double fwd = task_flops("mha_fwd_d128"), causal = task_flops("mha_fwd_d128_causal");
  const double bwd = task_flops("mha_bwd_d128"), bwd_causal = task_flops("mha_bwd_d128_causal");
  CHECK(fwd == 4.0 * 4 * 48 * 4096.0 * 4096 * 128);  // two matmuls of 2·S²·D per head
  CHECK(causal == doctest::Approx(fwd / 2));
  CHECK(bwd == doctest::Approx(2.5 * fwd));  // five matmuls against two
  CHECK(bwd_causal == doctest::Approx(bwd / 2));

  // The counts the H200 measured for mha_fwd_d128/wgmma_tma (25165824 HGMMA warp executions): every key
  // tile of every block, 32 per block.
  const json full = wd::execution_figures(attention_listing("HGMMA.64x128x16.F32.BF16"), kAttentionTargets,
                                          attention_counts(kBlocks * 32, false, kBlocks * 130, 0), fwd);
  CHECK(target(full, "wgmma")["warp_executions"] == 25165824);
  CHECK(target(full, "wgmma")["work_share"].get<double>() == doctest::Approx(1.0));
  // Causal with whole 128x128 diagonal tiles: 32·33/2 = 528 tiles per head instead of 512 (measured:
  // 12976128 HGMMA warp executions, work share 1.03125).
  const std::uint64_t causal_tiles = 192 * 528;
  const json tri =
      wd::execution_figures(attention_listing("HGMMA.64x128x16.F32.BF16"), kAttentionTargets,
                            attention_counts(causal_tiles, false, 192 * (2 * 32 + 4 * 528), 0), causal);
  CHECK(target(tri, "wgmma")["warp_executions"] == 12976128);
  CHECK(target(tri, "wgmma")["work_share"].get<double>() == doctest::Approx(528.0 / 512));
  // The full square computed then masked: twice the causal FLOPs.
  const json square = wd::execution_figures(attention_listing("HGMMA.64x128x16.F32.BF16"), kAttentionTargets,
                                            attention_counts(kBlocks * 32, false, kBlocks * 130, 0), causal);
  CHECK(target(square, "wgmma")["work_share"].get<double>() == doctest::Approx(2.0));
  const ev::EvaluatorSettings settings;
  for (const json *f : {&full, &tri, &square})
    CHECK(ev::detail::targets_executed_axis(ok_execution(*f), true, settings.min_target_work_share,
                                            settings.min_tma_byte_share)
              .value == true);
}

TEST_CASE("half the FLOPs on the target: Q·Kᵀ on wgmma with P·V on mma.sync fails, both sides tested") {
  const ev::EvaluatorSettings settings;
  REQUIRE(settings.min_target_work_share > 0.55);  // the rule: half is not enough...
  REQUIRE(settings.min_target_work_share < 0.95);  // ...and an honest kernel has margin above it
  const double fwd = task_flops("mha_fwd_d128"), causal = task_flops("mha_fwd_d128_causal");
  const auto listing = attention_listing("HMMA.16816.F32.BF16");
  // Measured on the H200 (probe_pv_mma_sync): wgmma 12582912 warp executions, work share 0.5.
  const json half = wd::execution_figures(listing, kAttentionTargets,
                                          attention_counts(kBlocks * 32, true, kBlocks * 130, 0), fwd);
  CHECK(target(half, "wgmma")["warp_executions"] == 12582912);
  CHECK(target(half, "wgmma")["work_share"].get<double>() == doctest::Approx(0.5));
  CHECK(half["tensor_core_work_share"].get<double>() == doctest::Approx(1.0));  // the rest is on HMMA
  auto axis = ev::detail::targets_executed_axis(ok_execution(half), true, settings.min_target_work_share,
                                                settings.min_tma_byte_share);
  CHECK(axis.value == false);
  REQUIRE(axis.shortfalls.size() == 1);
  CHECK(axis.shortfalls[0].find("did 50% of the task's FLOPs") != std::string::npos);
  CHECK(axis.shortfalls[0].find("HMMA") != std::string::npos);
  // Causal, diagonal tiles whole: 528/1024 of the square on wgmma is still about half.
  const json half_causal = wd::execution_figures(listing, kAttentionTargets,
                                                 attention_counts(192 * 528, true, 192 * 2176, 0), causal);
  CHECK(target(half_causal, "wgmma")["work_share"].get<double>() == doctest::Approx(0.515625));
  CHECK(ev::detail::targets_executed_axis(ok_execution(half_causal), true, settings.min_target_work_share)
            .value == false);
  // Just above and below the threshold (shares set through the workload size, which scales the mma.sync
  // share alike: the redundant-work rule is off here, the work-share rule alone is tested).
  const double wgmma_flops = target(half, "wgmma")["work_flops"].get<double>();
  const double t = settings.min_target_work_share;
  const ev::RedundantWorkPolicy off{100.0, true};
  const json above =
      wd::execution_figures(listing, kAttentionTargets,
                            attention_counts(kBlocks * 32, true, kBlocks * 130, 0), wgmma_flops / (t + 0.01));
  const json below =
      wd::execution_figures(listing, kAttentionTargets,
                            attention_counts(kBlocks * 32, true, kBlocks * 130, 0), wgmma_flops / (t - 0.01));
  CHECK(ev::detail::targets_executed_axis(ok_execution(above), true, t, 0.0, off).value == true);
  CHECK(ev::detail::targets_executed_axis(ok_execution(below), true, t, 0.0, off).value == false);
}

TEST_CASE("plain_load_bytes: thread bytes of LDG, LDGSTS and LD by width modifier") {
  CHECK(wd::plain_load_bytes("LDG.E.128") == 16);
  CHECK(wd::plain_load_bytes("LDG.E.128.CONSTANT") == 16);
  CHECK(wd::plain_load_bytes("LDGSTS.E.BYPASS.LTC128B.128") == 16);
  CHECK(wd::plain_load_bytes("LDG.E.64") == 8);
  CHECK(wd::plain_load_bytes("LDG.E") == 4);
  CHECK(wd::plain_load_bytes("LDG.E.U16") == 2);
  CHECK(wd::plain_load_bytes("LDG.E.S8") == 1);
  CHECK(wd::plain_load_bytes("LD.E.64") == 8);
  CHECK_FALSE(wd::plain_load_bytes("LDS.128").has_value());  // shared memory
  CHECK_FALSE(wd::plain_load_bytes("LDSM.16.M88.4").has_value());
  CHECK_FALSE(wd::plain_load_bytes("UTMALDG.3D").has_value());
  CHECK_FALSE(wd::plain_load_bytes("STG.E.128").has_value());
}

TEST_CASE("token TMA: Q by TMA with K and V by plain loads fails the TMA target, both sides tested") {
  const ev::EvaluatorSettings settings;
  const double fwd = task_flops("mha_fwd_d128");
  const auto listing = attention_listing("HGMMA.64x128x16.F32.BF16");
  // All of Q, K, V by TMA (measured: 798720 UTMALDG = 130 boxes per block, no plain loads).
  const json all = wd::execution_figures(
      listing, kAttentionTargets, attention_counts(kBlocks * 32, false, kBlocks * 130, 0), fwd, kBoxBytes);
  CHECK(target(all, "tma_load")["byte_share"].get<double>() == 1.0);
  CHECK(all["load_bytes"]["tma"].get<double>() == doctest::Approx(kBlocks * 130 * kBoxBytes));
  CHECK(ev::detail::targets_executed_axis(ok_execution(all), true, settings.min_target_work_share,
                                          settings.min_tma_byte_share)
            .value == true);
  // Q by TMA (2 boxes per block, measured 12288 UTMALDG), K and V by LDG.E.128: 32 tiles x 64 KiB per block.
  const std::uint64_t kv_threads = kBlocks * 32 * 2 * 128 * 16;  // 16-byte chunks of two 32 KiB tiles
  const json token =
      wd::execution_figures(listing, kAttentionTargets,
                            attention_counts(kBlocks * 32, false, kBlocks * 2, kv_threads), fwd, kBoxBytes);
  const double share = target(token, "tma_load")["byte_share"].get<double>();
  CHECK(share == doctest::Approx(2.0 / 130).epsilon(1e-6));  // measured on the H200: 0.0154
  CHECK(target(token, "tma_load")["executed"] == true);      // it ran...
  auto axis = ev::detail::targets_executed_axis(ok_execution(token), true, settings.min_target_work_share,
                                                settings.min_tma_byte_share);
  CHECK(axis.value == false);  // ...but is not how the kernel gets its operands
  REQUIRE(axis.shortfalls.size() == 1);
  CHECK(axis.shortfalls[0].find("target tma_load") != std::string::npos);
  CHECK(axis.shortfalls[0].find("1.5%") != std::string::npos);
  // Both sides of the threshold: plain bytes just under and just over the TMA bytes.
  const double tma_bytes = kBlocks * 130 * kBoxBytes;
  for (const double ratio : {0.9, 1.1}) {
    const auto plain_threads = static_cast<std::uint64_t>(tma_bytes * ratio / 16);
    const json f = wd::execution_figures(listing, kAttentionTargets,
                                         attention_counts(kBlocks * 32, false, kBlocks * 130, plain_threads),
                                         fwd, kBoxBytes);
    CAPTURE(ratio);
    CHECK(
        ev::detail::targets_executed_axis(ok_execution(f), true, settings.min_target_work_share, 0.5).value ==
        (ratio < 1.0));
  }
  // No tensor map in the launch: the share is unknown and never a shortfall.
  const json unknown = wd::execution_figures(
      listing, kAttentionTargets, attention_counts(kBlocks * 32, false, kBlocks * 2, kv_threads), fwd, 0);
  CHECK(target(unknown, "tma_load")["byte_share"].is_null());
  CHECK(ev::detail::targets_executed_axis(ok_execution(unknown), true, 0.75, 0.5).value == true);
}

TEST_CASE(
    "speed of light for attention: the task's real FLOPs at the dense bf16 peak; cuDNN is never suspicious") {
  // The H200 as the worker reads it (device attributes recorded in the verdicts).
  const wd::DeviceRates h200{9, 132, 1'980'000, 3'201'000, 6016};
  const wd::PeakRates peak = wd::peak_rates(h200, ptxbench::worker::ElemType::bf16);
  CHECK(peak.flops_per_s / 1e12 == doctest::Approx(1070.5).epsilon(1e-3));  // 4096 x 132 x 1.98 GHz, dense
  CHECK(wd::peak_rates(h200, ptxbench::worker::ElemType::e4m3).flops_per_s ==
        doctest::Approx(2 * peak.flops_per_s));
  const double bytes = 2.0 * 4 * 4 * 48 * 4096 * 128 + 4.0 * 4 * 48 * 4096;  // the forward task's formula
  struct Case {
    const char *task;
    double floor_ms, cudnn_ms;  // cuDNN SDPA as timed on the H200 (verdicts of mha_*/wgmma_tma)
  };
  const ev::EvaluatorSettings settings;
  for (const Case &c : {Case{"mha_fwd_d128", 1.5406, 2.436}, Case{"mha_fwd_d128_causal", 0.7703, 1.326}}) {
    CAPTURE(c.task);
    const double floor = wd::sol_floor_ms(task_flops(c.task), bytes, peak);
    CHECK(floor == doctest::Approx(c.floor_ms).epsilon(1e-3));  // the figure the H200 verdicts report
    // Compute-bound (9x forward, 4.6x causal): the FLOP term sets the floor, not the bytes.
    CHECK(floor > 4 * 1e3 * bytes / peak.bytes_per_s);
    // cuDNN, and a kernel 1.4x faster than it, stay above the suspicious line.
    CHECK(c.cudnn_ms > settings.timing.sol_slack * floor);
    CHECK(c.cudnn_ms / 1.4 > settings.timing.sol_slack * floor);
  }
  // A causal kernel judged against the full square's FLOPs would have a floor twice as high: the causal
  // task's own formula is what keeps the floor honest.
  CHECK(wd::sol_floor_ms(task_flops("mha_fwd_d128_causal"), bytes, peak) ==
        doctest::Approx(wd::sol_floor_ms(task_flops("mha_fwd_d128"), bytes, peak) / 2).epsilon(1e-3));
}

TEST_CASE("decide_axes: the three axes from one verdict, each nullopt where its stage did not measure") {
  ev::Verdict v;  // every stage skipped
  auto none = ev::detail::decide_axes(v, true, 0.75, 0.5);
  CHECK_FALSE(none.axes.correct.has_value());
  CHECK_FALSE(none.axes.targets_executed.has_value());
  CHECK_FALSE(none.axes.speedup.has_value());

  v.correctness.status = ev::Status::incorrect;
  v.execution = ok_execution(json::object());
  v.timing.status = ev::Status::skipped;
  v.timing.figures["geomean_speedup"] = 2.0;  // not ok: not an axis value
  auto wrong = ev::detail::decide_axes(v, true, 0.75, 0.5);
  CHECK(wrong.axes.correct == false);
  CHECK(wrong.axes.targets_executed == ev::detail::targets_executed_axis(v.execution, true, 0.75, 0.5).value);
  CHECK_FALSE(wrong.axes.speedup.has_value());

  v.correctness.status = ev::Status::ok;
  v.timing.status = ev::Status::ok;
  auto right = ev::detail::decide_axes(v, true, 0.75, 0.5);
  CHECK(right.axes.correct == true);
  CHECK(right.axes.speedup == 2.0);
}

TEST_CASE("decide_axes: the speedup is read through the timing codec; a malformed record measures none") {
  ev::Verdict v;
  v.correctness.status = ev::Status::ok;
  v.timing.status = ev::Status::ok;
  v.timing.figures = {{"geomean_speedup", 1.25}, {"min_speedup", 1.1}, {"workloads", json::array()}};
  CHECK(ev::detail::decide_axes(v, true, 0.75, 0.5).axes.speedup == 1.25);
  v.timing.figures["geomean_speedup"] = "fast";
  CHECK_FALSE(ev::detail::decide_axes(v, true, 0.75, 0.5).axes.speedup.has_value());
  v.timing.figures = {{"policy", json::object()}};  // a fault before the first workload: nothing timed
  CHECK_FALSE(ev::detail::decide_axes(v, true, 0.75, 0.5).axes.speedup.has_value());
}

TEST_CASE("plan_instrumentation: no target in the SASS means no instrumented launch and a false axis") {
  const std::vector<SassInstruction> ffma_only = {inst(0x00, "LDG.E.128"), inst(0x10, "FFMA"),
                                                  inst(0x20, "STG.E"), inst(0x30, "EXIT")};
  // A naive kernel, correct, however fast: nothing to count, the axis is decided from the listing.
  const wd::FeedbackBudgets budgets{250.0, 2000.0};
  const auto none = wd::plan_instrumentation(ffma_only, kGemmTargets, true, 1.0, budgets);
  CHECK(none.decision == wd::Instrumentation::no_target_in_sass);
  CHECK(none.absent_targets == std::vector<std::string>{"wgmma", "tma_load"});
  const json f = wd::uncounted_figures(ffma_only, kGemmTargets, "why");
  CHECK(f["instrumented"] == false);
  CHECK(target(f, "wgmma")["warp_executions"] == 0);
  CHECK(target(f, "wgmma")["present_in_sass"] == false);
  const auto axis = ev::detail::targets_executed_axis(ok_execution(f), true, 0.75, 0.5);
  REQUIRE(axis.value.has_value());
  CHECK_FALSE(*axis.value);
  // Every target present and the kernel correct: the counts decide the axis, so they are always taken,
  // however long the instrumented launch.
  CHECK(wd::plan_instrumentation(wgmma_listing(), kGemmTargets, true, 1e6, budgets).decision ==
        wd::Instrumentation::count);
  // Incorrect: counted only within the feedback budget (both sides).
  CHECK(wd::plan_instrumentation(wgmma_listing(), kGemmTargets, false, 200.0, budgets).decision ==
        wd::Instrumentation::count);
  CHECK(wd::plan_instrumentation(wgmma_listing(), kGemmTargets, false, 300.0, budgets).decision ==
        wd::Instrumentation::over_feedback_budget);
  // One target missing: the axis is false already; the rest is counted only within its budget (a dead
  // wgmma beside mma.sync, 200 x 1.8 ms, is; a naive kernel's 5 s are not), and the uncounted present
  // target reads as not measured (null), never as 0 executions.
  std::vector<SassInstruction> no_tma = wgmma_listing();
  no_tma.erase(no_tma.begin());
  const auto partial = wd::plan_instrumentation(no_tma, kGemmTargets, true, 5000.0, budgets);
  CHECK(partial.decision == wd::Instrumentation::over_feedback_budget);
  CHECK(partial.absent_targets == std::vector<std::string>{"tma_load"});
  CHECK(wd::plan_instrumentation(no_tma, kGemmTargets, true, 360.0, budgets).decision ==
        wd::Instrumentation::count);
  const json pf = wd::uncounted_figures(no_tma, kGemmTargets, "why");
  CHECK(target(pf, "wgmma")["warp_executions"].is_null());
  CHECK(target(pf, "tma_load")["warp_executions"] == 0);
  const auto paxis = ev::detail::targets_executed_axis(ok_execution(pf), true, 0.75, 0.5);
  REQUIRE(paxis.value.has_value());
  CHECK_FALSE(*paxis.value);
}

TEST_CASE("decide_generalization: hidden workloads beside the axes, each way a hidden shape can fail") {
  namespace d = ev::detail;
  ev::Verdict v;
  v.correctness.status = ev::Status::ok;
  // No hidden workloads: no result at all (the verdict JSON carries null).
  CHECK_FALSE(d::decide_generalization(v, 0, {}, true).has_value());
  // Switched off, or wrong on the shown workloads: not checked, with the reason.
  auto off = d::decide_generalization(v, 2, {}, false);
  REQUIRE(off.has_value());
  CHECK_FALSE(off->value.has_value());
  CHECK(off->reason.find("check is off") != std::string::npos);
  v.correctness.status = ev::Status::incorrect;
  auto wrong = d::decide_generalization(v, 2, {}, true);
  CHECK_FALSE(wrong->value.has_value());
  CHECK(wrong->reason == "not checked: the kernel is not correct on the shown workloads");
  v.correctness.status = ev::Status::ok;
  // The stage's rows: one right, one wrong with its first mismatch.
  v.generalization.status = ev::Status::incorrect;
  v.generalization.figures = {
      {"workloads", json::array({{{"name", "M=77"}, {"kind", "ok"}},
                                 {{"name", "M=8200"},
                                  {"kind", "incorrect"},
                                  {"mismatches", 57344},
                                  {"output_elements", 58777600},
                                  {"first_mismatch", {{"tensor", "C"}, {"index", {8192, 0}}}}}})}};
  auto g = d::decide_generalization(v, 2, {}, true);
  REQUIRE(g->value.has_value());
  CHECK_FALSE(*g->value);
  CHECK(g->passed == 1);
  CHECK(g->total == 2);
  REQUIRE(g->failed.size() == 1);
  CHECK(g->failed[0].workload == "M=8200");
  CHECK(g->failed[0].kind == "incorrect");
  CHECK(g->failed[0].summary == "57344 of 58777600 output elements wrong");
  CHECK(g->first_mismatch["index"] == json({8192, 0}));
  // A manifest that does not resolve at a hidden shape, and a fault in the workload in progress.
  v.generalization.status = ev::Status::runtime_error;
  v.generalization.summary = "the kernel faulted: an illegal memory access";
  v.generalization.figures = {{"workloads", json::array({{{"name", "a"}, {"kind", "ok"}}})},
                              {"in_progress", "b"}};
  auto f = d::decide_generalization(
      v, 3, {{"c", "grid[0]: 7 is not a multiple of the cluster's x dimension 2"}}, true);
  CHECK(f->value == false);
  CHECK(f->passed == 1);
  CHECK(f->total == 3);
  REQUIRE(f->failed.size() == 2);
  CHECK(f->failed[0].kind == "bad_manifest");
  CHECK(f->failed[1].workload == "b");
  CHECK(f->failed[1].kind == "runtime_error");
  // All right: true; the verdict JSON carries it and reads it back.
  v.generalization.status = ev::Status::ok;
  v.generalization.figures = {
      {"workloads", json::array({{{"name", "a"}, {"kind", "ok"}}, {{"name", "b"}, {"kind", "ok"}}})}};
  v.generalizes = d::decide_generalization(v, 2, {}, true);
  CHECK(v.generalizes->value == true);
  const json j = v.to_json();
  CHECK(j["generalizes"]["value"] == true);
  CHECK(j["stages"].contains("generalization"));
  const ev::Verdict back = ev::Verdict::from_json(j);
  REQUIRE(back.generalizes.has_value());
  CHECK(back.generalizes->passed == 2);
  CHECK(back.generalizes->total == 2);
  // A verdict of a task without hidden workloads has no stage and a null result.
  ev::Verdict plain;
  CHECK(plain.to_json()["generalizes"].is_null());
  CHECK_FALSE(plain.to_json()["stages"].contains("generalization"));
  CHECK_FALSE(ev::Verdict::from_json(plain.to_json()).generalizes.has_value());
}

// ---- Redundant work: a target whose work is done again outside it (issue 35) ----------------------------

namespace {

// A listing committed under tests/data/execution (make_listings.sh: ptxas + nvdisasm of a committed
// kernel), parsed as the evaluator parses a candidate's.
std::vector<SassInstruction> committed_listing(const std::string &name) {
  const auto text = ptxbench::util::read_file(fs::path(PTXBENCH_TEST_DATA) / "execution" / (name + ".sass"));
  REQUIRE_MESSAGE(text.has_value(), error_of(text));
  auto listing = ev::parse_sass_listing(*text).instructions;
  REQUIRE(!listing.empty());
  return listing;
}

// Per-PC counts of one launch on a real listing, modelled from the kernel's design: each MMA family named
// in `shares` does that share of `workload_flops`, spread evenly over its PCs; every other instruction
// runs as often as the first family's average PC, all 32 threads on. These kernels' k-loops are unrolled,
// so that rate is the main loop's: set-up and epilogue instructions counted at it over-count the FMA-pipe
// work an honest kernel does, the side that could make an honest kernel fail.
std::vector<wd::PcCount> modeled_counts(const std::vector<SassInstruction> &listing, double workload_flops,
                                        const std::vector<std::pair<std::string, double>> &shares) {
  std::map<std::string, int> pcs;
  for (const auto &i : listing)
    if (wd::mma_work(i.opcode)) ++pcs[i.family];
  double loop_warps = 0;
  std::map<std::string, double> share_of;
  for (const auto &[family, share] : shares) share_of[family] = share;
  std::vector<wd::PcCount> counts;
  for (const auto &i : listing) {
    const auto work = wd::mma_work(i.opcode);
    if (!work || !share_of.count(i.family)) continue;
    const double flops_per_warp = 32.0 / work->threads_per_op * work->flops_per_op;
    const auto warps = static_cast<std::uint64_t>(
        std::llround(share_of[i.family] * workload_flops / pcs[i.family] / flops_per_warp));
    if (i.family == shares.front().first && loop_warps == 0) loop_warps = static_cast<double>(warps);
    counts.push_back({i.function, i.offset, warps, warps * 32});
  }
  const auto rest = static_cast<std::uint64_t>(loop_warps);
  for (const auto &i : listing)
    if (!wd::mma_work(i.opcode)) counts.push_back({i.function, i.offset, rest, rest * 32});
  return counts;
}

std::vector<std::string> matching(const std::vector<std::string> &lines, const std::string &text) {
  std::vector<std::string> out;
  for (const auto &l : lines)
    if (l.find(text) != std::string::npos) out.push_back(l);
  return out;
}

const std::string kRepeated = "multiply-add instructions outside the targets did";

}  // namespace

TEST_CASE("fma_flops_per_thread: FMA-pipe opcodes and their FLOPs per thread") {
  CHECK(wd::fma_flops_per_thread("FFMA") == 2);
  CHECK(wd::fma_flops_per_thread("FFMA.FTZ.RZ") == 2);
  CHECK(wd::fma_flops_per_thread("DFMA") == 2);
  CHECK(wd::fma_flops_per_thread("HFMA2") == 4);
  CHECK(wd::fma_flops_per_thread("HFMA2.MMA") == 4);
  CHECK(wd::fma_flops_per_thread("HFMA2.BF16_V2") == 4);
  CHECK_FALSE(wd::fma_flops_per_thread("FMUL").has_value());
  CHECK_FALSE(wd::fma_flops_per_thread("FADD").has_value());
  CHECK_FALSE(wd::fma_flops_per_thread("IMAD").has_value());
  CHECK_FALSE(wd::fma_flops_per_thread("HMMA.16816.F32.BF16").has_value());
  CHECK(wd::is_matrix_target({"wgmma", {"HGMMA"}}));
  CHECK(wd::is_matrix_target({"tcgen05_mma", {"UTCHMMA", "UTCQMMA"}}));
  CHECK_FALSE(wd::is_matrix_target({"tma_load", {"UTMALDG"}}));
  CHECK(ev::family_words("HMMA") == "mma.sync (HMMA)");
  CHECK(ev::family_words("FFMA") == "fp32 fma (FFMA)");
  CHECK(ev::family_words("XYZ") == "XYZ");
}

TEST_CASE("redundant work: the decoy (wgmma discarded beside mma.sync doing the GEMM) fails, on its SASS") {
  const ev::EvaluatorSettings settings;
  const auto listing = committed_listing("decoy_wgmma_discarded");
  // Its SASS: per 64-wide K slice 4 HGMMA.64x128x16 per warpgroup and 64 HMMA.16816 per warp.
  int hgmma = 0, hmma = 0;
  for (const auto &i : listing) {
    hgmma += i.opcode == "HGMMA.64x128x16.F32.BF16";
    hmma += i.opcode == "HMMA.16816.F32.BF16";
  }
  CHECK(hgmma == 4);
  CHECK(hmma == 64);
  // M=3000 (the instrumented, smaller workload) in 128-row tiles: both do 3072/3000 of the FLOPs.
  const double flops = 2.0 * 3000 * 4096 * 4096, tiles = 3072.0 / 3000;
  const json f = wd::execution_figures(listing, kGemmTargets,
                                       modeled_counts(listing, flops, {{"HGMMA", tiles}, {"HMMA", tiles}}),
                                       flops, 64.0 * 128 * 2);
  CHECK(target(f, "wgmma")["executed"] == true);
  CHECK(target(f, "wgmma")["matrix_target"] == true);
  CHECK(target(f, "wgmma")["work_share"].get<double>() == doctest::Approx(tiles).epsilon(1e-4));
  CHECK(target(f, "tma_load")["matrix_target"] == false);
  CHECK(target(f, "tma_load")["byte_share"].get<double>() == 1.0);
  const auto work = ptxbench::protocol::matrix_work_from_figures(f);
  REQUIRE(work.has_value());
  CHECK(work->target_share == doctest::Approx(tiles).epsilon(1e-4));
  CHECK(work->non_target_tensor_share == doctest::Approx(tiles).epsilon(1e-4));
  // The epilogue's 64 FFMA (acc + zero * wgmma), counted here at the loop's rate: an upper bound.
  CHECK(work->fma_share < 0.05);
  REQUIRE(!work->families.empty());
  CHECK(work->families[0].family == "HMMA");
  CHECK(work->families[0].unit == "tensor");

  // Counting executions alone (the rule off), it passes: what issue 35 found.
  const ev::RedundantWorkPolicy off{100.0, true};
  CHECK(ev::detail::targets_executed_axis(ok_execution(f), true, settings.min_target_work_share,
                                          settings.min_tma_byte_share, off)
            .value == true);
  // With the rule: not executed, one shortfall a model can act on.
  const auto axis = ev::detail::targets_executed_axis(ok_execution(f), true, settings.min_target_work_share,
                                                      settings.min_tma_byte_share, settings.redundant_work);
  CHECK(axis.value == false);
  REQUIRE(axis.shortfalls.size() == 1);
  const std::string &line = axis.shortfalls[0];
  CHECK(line.find("target wgmma did 102% of the task's FLOPs, but " + kRepeated) != std::string::npos);
  CHECK(line.find("of them as well (mma.sync (HMMA) 102%, fp32 fma (FFMA)") != std::string::npos);
  CHECK(line.find("enough to compute the outputs without the target") != std::string::npos);
  CHECK(line.find("multiplied by 0") != std::string::npos);
  CHECK(line.find("at or under 25% of the task's FLOPs") != std::string::npos);
}

TEST_CASE("redundant work: honest kernels pass (wgmma alone, causal, backward at 150%), on their SASS") {
  const ev::EvaluatorSettings settings;
  const auto judge = [&](const json &f) {
    return ev::detail::targets_executed_axis(ok_execution(f), true, settings.min_target_work_share,
                                             settings.min_tma_byte_share, settings.redundant_work);
  };
  // Attention forward on wgmma alone: its softmax arithmetic is the only multiply-add work beside it.
  const auto fwd = committed_listing("mha_fwd_d128_wgmma_tma");
  for (const auto &[task, share] :
       {std::pair<std::string, double>{"mha_fwd_d128", 1.0}, {"mha_fwd_d128_causal", 528.0 / 512}}) {
    CAPTURE(task);
    const double flops = task_flops(task);
    const json f = wd::execution_figures(fwd, kAttentionTargets,
                                         modeled_counts(fwd, flops, {{"HGMMA", share}}), flops, kBoxBytes);
    const auto work = ptxbench::protocol::matrix_work_from_figures(f);
    REQUIRE(work.has_value());
    CHECK(work->non_target_tensor_share == 0.0);
    CHECK(work->fma_share < 0.05);
    const auto axis = judge(f);
    CHECK(axis.value == true);
    CHECK(axis.shortfalls.empty());
  }
  // Backward recomputing the scores on wgmma: 150% of the task's FLOPs on the target, nothing outside.
  const auto bwd = committed_listing("mha_bwd_d128_wgmma");
  const double bwd_flops = task_flops("mha_bwd_d128");
  const json b = wd::execution_figures(
      bwd, kAttentionTargets, modeled_counts(bwd, bwd_flops, {{"HGMMA", 1.5}}), bwd_flops, kBoxBytes);
  CHECK(target(b, "wgmma")["work_share"].get<double>() == doctest::Approx(1.5).epsilon(1e-3));
  const auto work = ptxbench::protocol::matrix_work_from_figures(b);
  REQUIRE(work.has_value());
  CHECK(work->fma_share < 0.05);
  const auto axis = judge(b);
  CHECK(axis.value == true);
  CHECK(axis.shortfalls.empty());
}

TEST_CASE("redundant work: one matmul on wgmma and the other on mma.sync is the work-share rule's case") {
  const ev::EvaluatorSettings settings;
  const auto listing = committed_listing("mha_fwd_d128_probe_pv_mma_sync");
  const double flops = task_flops("mha_fwd_d128");
  const json f = wd::execution_figures(listing, kAttentionTargets,
                                       modeled_counts(listing, flops, {{"HGMMA", 0.5}, {"HMMA", 0.5}}), flops,
                                       kBoxBytes);
  const auto work = ptxbench::protocol::matrix_work_from_figures(f);
  REQUIRE(work.has_value());
  CHECK(work->target_share + work->non_target_tensor_share == doctest::Approx(1.0).epsilon(1e-3));
  const auto axis = ev::detail::targets_executed_axis(ok_execution(f), true, settings.min_target_work_share,
                                                      settings.min_tma_byte_share, settings.redundant_work);
  CHECK(axis.value == false);
  REQUIRE(axis.shortfalls.size() == 1);  // the work share, not a decoy
  CHECK(axis.shortfalls[0].find("did 50% of the task's FLOPs") != std::string::npos);
  CHECK(matching(axis.shortfalls, kRepeated).empty());
}

TEST_CASE("redundant work: both sides of max_non_target_share, FMA-pipe work, unknown sizes and shapes") {
  const ev::EvaluatorSettings settings;
  REQUIRE(settings.redundant_work.max_non_target_share ==
          doctest::Approx(1.0 - settings.min_target_work_share));
  const auto listing = committed_listing("decoy_wgmma_discarded");
  const double flops = 2.0 * 3000 * 4096 * 4096;
  const auto judge = [&](double hmma_share, const ev::RedundantWorkPolicy &policy) {
    const json f = wd::execution_figures(
        listing, kGemmTargets, modeled_counts(listing, flops, {{"HGMMA", 1.0}, {"HMMA", hmma_share}}), flops,
        64.0 * 128 * 2);
    return ev::detail::targets_executed_axis(ok_execution(f), true, settings.min_target_work_share,
                                             settings.min_tma_byte_share, policy);
  };
  // A fifth of the FLOPs again on mma.sync passes; three tenths (a partial decoy) fails, worded as work
  // moved or repeated, not as enough to do the task alone.
  CHECK(judge(0.2, settings.redundant_work).value == true);
  const auto partial = judge(0.3, settings.redundant_work);
  CHECK(partial.value == false);
  REQUIRE(partial.shortfalls.size() == 1);
  CHECK(partial.shortfalls[0].find("(mma.sync (HMMA) 30%") != std::string::npos);
  CHECK(partial.shortfalls[0].find("part of the task's matmuls runs on other units") != std::string::npos);
  // The threshold is the setting's.
  CHECK(judge(0.3, {0.35, true}).value == true);

  // A discarded wgmma beside the GEMM on FFMA (CUDA cores): FMA-pipe work counts unless switched off.
  std::vector<SassInstruction> ffma = {inst(0x00, "HGMMA.64x128x16.F32.BF16"), inst(0x10, "FFMA"),
                                       inst(0x20, "EXIT")};
  // wgmma: 1e6 FLOPs exactly; FFMA: 2 FLOPs per thread on, as many as the task's.
  const double w = 2.0 * 64 * 128 * 16 * 4;
  const std::vector<wd::PcCount> counts = {
      {"gemm", 0x00, 16, 512},
      {"gemm", 0x10, static_cast<std::uint64_t>(w / 64), static_cast<std::uint64_t>(w / 2)}};
  const json f = wd::execution_figures(ffma, {{"wgmma", {"HGMMA"}}}, counts, w);
  CHECK(target(f, "wgmma")["work_share"].get<double>() == 1.0);
  CHECK(f["matrix_work"]["fma_share"].get<double>() == doctest::Approx(1.0));
  const auto on_ffma = ev::detail::targets_executed_axis(ok_execution(f), true, 0.75, 0.5, {});
  CHECK(on_ffma.value == false);
  REQUIRE(on_ffma.shortfalls.size() == 1);
  CHECK(on_ffma.shortfalls[0].find("(fp32 fma (FFMA) 100%)") != std::string::npos);
  CHECK(ev::detail::targets_executed_axis(ok_execution(f), true, 0.75, 0.5, {0.25, false}).value == true);

  // Unknown workload FLOPs: every share 0, never a shortfall.
  const json unknown = wd::execution_figures(ffma, {{"wgmma", {"HGMMA"}}}, counts, 0);
  CHECK(unknown["matrix_work"]["workload_flops"].get<double>() == 0.0);
  CHECK(ev::detail::targets_executed_axis(ok_execution(unknown), true, 0.75, 0.5, {}).value == true);
  // An older verdict without the record: the rule does not apply.
  json old = f;
  old.erase("matrix_work");
  for (auto &t : old["targets"]) t.erase("matrix_target");
  CHECK(ev::detail::targets_executed_axis(ok_execution(old), true, 0.75, 0.5, {}).value == true);
  // A malformed record fails closed, naming the field.
  json bad = f;
  bad["matrix_work"]["fma_share"] = "most";
  const auto malformed = ev::detail::targets_executed_axis(ok_execution(bad), true, 0.75, 0.5, {});
  CHECK(malformed.value == false);
  REQUIRE(malformed.shortfalls.size() == 1);
  CHECK(malformed.shortfalls[0].find("matrix_work.fma_share") != std::string::npos);

  // A tcgen05 target (shape not in the opcode, share unknown) beside the GEMM on mma.sync.
  const std::vector<SassInstruction> tc = {inst(0x00, "UTCHMMA.2CTA"), inst(0x10, "HMMA.16816.F32.BF16")};
  const json t = wd::execution_figures(tc, {{"tcgen05_mma", {"UTCHMMA"}}},
                                       {{"gemm", 0x00, 1, 1}, {"gemm", 0x10, 1024, 32768}}, 1024 * 4096.0);
  CHECK(t["matrix_work"]["non_target_tensor_share"].get<double>() == doctest::Approx(1.0));
  CHECK(t["matrix_work"]["unknown_opcodes"].empty());  // the target's own opcode is not listed
  const auto tc_axis = ev::detail::targets_executed_axis(ok_execution(t), true, 0.75, 0.5, {});
  CHECK(tc_axis.value == false);
  REQUIRE(tc_axis.shortfalls.size() == 1);
  CHECK(tc_axis.shortfalls[0].find("target tcgen05_mma executed, but " + kRepeated + " 100%") !=
        std::string::npos);
}
