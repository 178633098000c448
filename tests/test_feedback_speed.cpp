// Feedback on speed: timing figures, resources, the hardware profile beside the library's, PC samples and
// their hot lines, from hand-made verdicts and from profile stages a worker wrote (tests/data/profile).
#define DOCTEST_CONFIG_IMPLEMENT_WITH_MAIN
#include <doctest/doctest.h>

#include <string>

#include "evaluator/protocol/profile.hpp"
#include "tests/prompt_fixtures.hpp"
#include "tests/support/support.hpp"
#include "util/files.hpp"

using namespace ptxbench;
using namespace ptxbench::test;

TEST_CASE("feedback: speed, slow and fast, with times, TFLOP/s, registers and spills") {
  auto task = load_task("gemm_n7168_k5120");
  std::string slow = builder().feedback(task, with_gpu_results(0.85, 320000));
  CHECK_HAS(slow, "Correct and every target instruction executed, but slower than cuBLASLt");
  CHECK_HAS(slow,
            "M=8192: yours 0.9 ms (668.1 TFLOP/s, 68% of the 989.4 TFLOP/s dense tensor-core peak), cuBLASLt "
            "0.765 ms (567.9 TFLOP/s), speedup 0.850x");
  CHECK_HAS(slow, "SM clock right after the timed launches: 1980 MHz.");
  CHECK_HAS(slow, "physical floor 0.608 ms");
  CHECK_HAS(slow, "Geomean speedup 0.850x, min 0.850x.");
  CHECK_HAS(slow, "168 registers/thread, spills 16 B stored / 24 B loaded");
  CHECK_HAS(slow, "Tensor-core instructions are 42.0% of executed instructions.");

  std::string fast = builder().feedback(task, with_gpu_results(1.25, 320000));
  CHECK_HAS(fast, "faster than cuBLASLt");
  CHECK_HAS(fast, "speedup 1.250x");
}

TEST_CASE("feedback: timing read through the protocol's codec: a recorded record, a far-stopped interval") {
  auto task = load_task("gemm_n7168_k5120");
  Verdict v = with_gpu_results(0.9482, 320000);
  auto text = ptxbench::util::read_file(std::filesystem::path(PTXBENCH_TEST_DATA) / "timing" /
                                        "gemm_h200_timing_figures.json");
  REQUIRE(text.has_value());
  v.timing.figures = json::parse(*text);
  std::string f = builder().feedback(task, v);
  CHECK_HAS(f, "M=8192: yours 0.7718 ms (712.3 TFLOP/s, 67% of the ");
  CHECK_HAS(f, "cuBLASLt 0.7318 ms (751.2 TFLOP/s), speedup 0.948x; physical floor 0.5135 ms");
  CHECK_HAS(f, "Geomean speedup 0.948x, min 0.948x.");
  CHECK(f.find("timed only until") == std::string::npos);  // stopped by the settled ratio
  CHECK_HAS(f, "Timing (median, cold L2):\n");             // no card named: none recorded
  v.environment["gpu_name"] = "NVIDIA H200";
  CHECK_HAS(builder().feedback(task, v), "Timing on NVIDIA H200 (median, cold L2):\n");

  // Far below the library: the interval is stated; an unbounded one (fewer than 2 pairs) is not.
  v.timing.figures["workloads"][0]["stopped_by"] = "far_from_library";
  v.timing.figures["workloads"][0]["speedup_ci95"] = json::array({0.11, 0.16});
  v.timing.figures["workloads"][0]["samples"] = 3;
  CHECK_HAS(builder().feedback(task, v),
            "timed only until clearly far below cuBLASLt (speedup between 0.11x and 0.16x at 95% confidence, "
            "3 timed launches)");
  v.timing.figures["workloads"][0]["speedup_ci95"] = json::array({0.0, nullptr});
  CHECK(builder().feedback(task, v).find("timed only until") == std::string::npos);

  // A record not of the protocol's form gives no timing rows rather than made-up ones.
  v.timing.figures["workloads"][0]["stopped_by"] = "patience";
  f = builder().feedback(task, v);
  CHECK(f.find("yours 0.7718 ms") == std::string::npos);
  CHECK(f.find("Geomean speedup") == std::string::npos);
}

TEST_CASE("feedback: the hardware profile replaces fixed tips; absent, skipped and measured read apart") {
  auto task = load_task("gemm_n7168_k5120");
  Verdict v = with_gpu_results(0.85, 320000);
  // No profile stage (GPU stages off, or a verdict from before the stage): no section at all.
  CHECK_FALSE(has(builder().feedback(task, v), "Hardware profile"));
  v.profiling.status = Status::skipped;
  v.profiling.summary =
      "not profiled: its 178 ms launch, replayed once per profiler pass (9 passes), does not fit the 1 s "
      "profile budget";
  CHECK_HAS(builder().feedback(task, v),
            "Hardware profile: not profiled: its 178 ms launch, replayed once per profiler pass (9 passes), "
            "does not fit "
            "the 1 s profile budget");
  // The stage as the worker wrote it on an H200 for the wgmma+TMA reference GEMM.
  v.profiling = nlohmann::json::parse(test::test_data("profile/gemm_wgmma_tma_stage.json"))
                    .get<evaluator::StageResult>();
  const std::string f = builder().feedback(task, v);
  CHECK_HAS(f, "Hardware profile of one launch of workload M=8192, beside cuBLASLt on the same workload");
  CHECK_HAS(f,
            "- busiest unit (the highest share of its own peak): tensor pipe at 87.2% (library 99.3%) "
            "[sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_active]");
  CHECK_HAS(
      f,
      "- duration under the profiler 1.03 ms (library 887 us); SM clock 1.68 GHz (library 1.63 GHz) (the "
      "profiler's replay at its own clock; for speed use the timed medians)");
  CHECK_HAS(f,
            "a design with one block per SM (warp specialization, setmaxnreg) is register-limited by choice");
  CHECK_HAS(f,
            "DRAM throughput 19.4% (library 22.1%); DRAM bytes 962 MB (library 944 MB); L2 hit rate 76.2% "
            "(library 66.3%)");
  {  // three significant digits, trailing zeros kept: 2 GB reads as 2.00 GB beside 985 MB
    auto kp = v.kernel_profile();
    REQUIRE(kp.has_value());
    for (auto &m : kp->metrics)
      if (m.name == "dram__bytes.sum") m.value = 2.0e9;
    Verdict w = v;
    w.profiling.figures["kernel_profile"] = *kp;
    CHECK_HAS(builder().feedback(task, w), "DRAM bytes 2.00 GB (library 944 MB)");
  }
  CHECK_HAS(
      f,
      "occupancy: 1 block of 384 threads per SM = 12 warps, 18.8% of the SM's 64 warp slots, limited by "
      "registers (168 per thread); achieved 13.9% (library 14.8%); clusters of 2: at most 66 resident at "
      "once on 132 SMs; grid of 1792 blocks = 13.58 waves");
  CHECK_FALSE(has(f, "deeper TMA pipelines"));   // the fixed tips are gone
  CHECK_FALSE(has(f, "the library's busiest"));  // both are bound by the tensor pipe
  // Each gloss only beside its figure: this record (an earlier worker's metrics) has no memory roll-up and
  // none of the FMA, ALU and load/store pipes.
  CHECK_HAS(f, "the hot lines say what keeps it waiting. Occupancy and its limiter");
  CHECK_FALSE(has(f, "Memory throughput is"));
  CHECK_HAS(f, "- SM throughput ");
  {  // the standard set: no roll-ups, the ALU and load/store pipes beside the others
    evaluator::Verdict standard = v;
    auto kp = standard.kernel_profile();
    REQUIRE(kp.has_value());
    std::erase_if(kp->metrics, [](const protocol::ProfileMetric &m) {
      return m.name == "sm__throughput.avg.pct_of_peak_sustained_elapsed";
    });
    kp->metrics.push_back(
        {"sm__pipe_fma_cycles_active.avg.pct_of_peak_sustained_active", "FMA pipe", "%", 20.0, 2.0, true});
    kp->metrics.push_back(
        {"sm__pipe_alu_cycles_active.avg.pct_of_peak_sustained_active", "ALU pipe", "%", 12.5, 3.5, true});
    kp->metrics.push_back({"sm__inst_executed_pipe_lsu.avg.pct_of_peak_sustained_active", "load/store pipe",
                           "%", 4.0, 1.5, true});
    standard.profiling.figures["kernel_profile"] = *kp;
    const std::string g = builder().feedback(task, standard);
    CHECK_FALSE(has(g, "SM throughput"));
    CHECK_HAS(g,
              "; FMA pipe 20.0% (library 2.0%); ALU pipe 12.5% (library 3.5%); load/store pipe 4.0% "
              "(library 1.5%)\n");
    CHECK_HAS(
        g,
        "The FMA pipe also runs integer multiply-adds (address arithmetic). The ALU pipe runs integer "
        "adds, logic, shifts and comparisons. The load/store pipe counts issued global, local and shared "
        "memory instructions. Occupancy");
  }
  {  // a library bound elsewhere is named beside the kernel's busiest unit
    evaluator::Verdict other = v;
    auto &metrics = other.profiling.figures["kernel_profile"]["metrics"];
    for (auto &m : metrics)
      if (m["name"] == "sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_active") m["library"] = 10.0;
    for (auto &m : metrics)
      if (m["name"] == "dram__throughput.avg.pct_of_peak_sustained_elapsed") m["library"] = 91.0;
    CHECK_HAS(builder().feedback(task, other),
              "[sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_active]; the library's busiest: DRAM "
              "throughput at 91.0%\n");
  }
  // A malformed record reads as not measured rather than failing the feedback.
  v.profiling.figures["kernel_profile"]["passes"] = "nine";
  CHECK_HAS(builder().feedback(task, v), "Hardware profile: profiled workload M=8192 (9 passes)");
}

TEST_CASE("feedback: PC samples name the warp states and the hottest PTX lines with their text") {
  auto task = load_task("mha_fwd_d128");
  Verdict v = with_gpu_results(0.45, 320000);
  // The stage as the worker wrote it on an H100 for the mma.sync flash-attention reference, lines mapped.
  v.profiling = nlohmann::json::parse(test::test_data("profile/flash_fwd_sampled_stage.json"))
                    .get<evaluator::StageResult>();
  const std::string f = builder().feedback(task, v);
  CHECK_HAS(f,
            "- where the warps are (77042 PC samples of one launch): wait (fixed-latency dependency) 22%, "
            "short_scoreboard (waiting for a shared memory or special-function result) 18%, selected "
            "(issuing an instruction) 18%, math_pipe_throttle (the math pipe it needs is busy) 14%, "
            "not_selected (ready, but another warp issued) 9%\n");
  CHECK_HAS(f,
            "- hottest lines of your PTX (share of the samples; what the warps there were doing; a waiting "
            "warp is counted at the instruction it cannot issue yet");
  CHECK_HAS(f,
            "  line 366 (5%; barrier 99%; SASS BRA): @%p14 bra \t$L__BB0_4;\n");  // states under 1% left out
  CHECK_HAS(f, "  line 543 (3%; long_scoreboard 98%, selected 1%; SASS LDSM.16.M88.4)");
  CHECK_HAS(f, "  (these lines hold 12% of the samples: the time is spread over many lines)\n");
  // Line 366 waits at a barrier: the note says where such a stall is counted.
  CHECK_HAS(
      f,
      "  (warps held at a block barrier such as bar.sync are counted at the first instruction after it: "
      "such a line waiting on `barrier` means the warps wait there for the block's slowest warp to "
      "arrive)\n");
  CHECK_FALSE(has(f, "on a wgmma.wait_group line"));
  // The lines' states that the summary's five did not explain are glossed once, the others not again.
  CHECK_HAS(
      f,
      "  (their other warp states: barrier (waiting at a block barrier, or in wgmma.wait_group for its "
      "warpgroup's wgmma operations); long_scoreboard (waiting for a global or local memory result))\n");
  CHECK_HAS(f, "SASS LDSM.16.M88.4): ldmatrix.sync.aligned.m8n8.x4.shared.b16");
  CHECK_FALSE(has(f, "line 564 ("));  // three lines, no more
  // A warpgroup's wgmma.wait_group also reports `barrier`: that line gets its own note, not the bar.sync one.
  {
    auto wg = v.kernel_profile();
    REQUIRE(wg.has_value());
    REQUIRE(!wg->pc_sampling.hot_lines.empty());
    protocol::HotLine &top = wg->pc_sampling.hot_lines.front();
    REQUIRE(top.reasons.front().reason == "barrier");
    top.opcodes = {"WARPGROUP.DEPBAR.LE"};
    top.text = "wgmma.wait_group.sync.aligned 1;";
    Verdict w = v;
    w.profiling.figures["kernel_profile"] = *wg;
    const std::string waits = builder().feedback(task, w);
    CHECK_HAS(waits, "SASS WARPGROUP.DEPBAR.LE): wgmma.wait_group.sync.aligned 1;\n");
    CHECK_HAS(waits,
              "  (`barrier` on a wgmma.wait_group line is the warpgroup waiting for its own earlier wgmma "
              "operations to complete, which is expected while the tensor pipe is busy; it is not a block "
              "barrier)\n");
    CHECK_FALSE(has(waits, "block barrier such as bar.sync"));
  }
  // The full set's memory roll-up is glossed where shown.
  CHECK_HAS(f,
            "Memory throughput is the busiest of the memory units (DRAM, L2, L1/shared). The FMA pipe also "
            "runs integer multiply-adds (address arithmetic). Occupancy");
  // Sampled, but the lines could not be named: the states stay, the reason replaces the lines.
  auto kp = v.kernel_profile();
  REQUIRE(kp.has_value());
  kp->pc_sampling.hot_lines.clear();
  kp->pc_sampling.line_error = "the SASS listing has no line info";
  v.profiling.figures["kernel_profile"] = *kp;
  const std::string unmapped = builder().feedback(task, v);
  CHECK_HAS(unmapped, "- where the warps are (77042 PC samples of one launch)");
  CHECK_HAS(unmapped, "- hot lines not named: the SASS listing has no line info\n");
  CHECK_FALSE(has(unmapped, "hottest lines"));
  CHECK_FALSE(has(unmapped, "block barrier such as bar.sync"));  // no barrier line shown, no note
  // A kernel of microseconds sampled over several launches says so.
  kp->pc_sampling.launches = 8;
  v.profiling.figures["kernel_profile"] = *kp;
  CHECK_HAS(builder().feedback(task, v), "- where the warps are (77042 PC samples over 8 launches)");
  kp->pc_sampling.launches = 1;
  // Not sampled: one line saying why.
  kp->pc_sampling = {};
  kp->pc_sampling.unavailable = "not sampled: the PC sampler returned no samples for this launch";
  v.profiling.figures["kernel_profile"] = *kp;
  const std::string unsampled = builder().feedback(task, v);
  CHECK_HAS(unsampled,
            "- where the warps wait: not sampled: the PC sampler returned no samples for this launch\n");
  CHECK_FALSE(has(unsampled, "where the warps are ("));
}

TEST_CASE("feedback: targets absent from the PTX are named as such; resources beside the speed figures") {
  auto task = load_task("gemm_n7168_k5120");
  Verdict v = with_gpu_results(0.45, 0);
  v.static_checks.figures["targets_in_ptx"]["wgmma"] = false;
  v.compile.figures["targets_in_sass"]["wgmma"] = false;
  v.execution.figures["targets"][0]["present_in_sass"] = false;
  v.finalize_status();
  const std::string f = builder().feedback(task, v);
  CHECK_HAS(f, "Correct on every workload, but the task's target instructions did not all run");
  CHECK_HAS(f,
            "in PTX no, in SASS (HGMMA) no, executed 0 times (warp-level). Your PTX has no wgmma.mma_async "
            "instruction");
  CHECK_FALSE(has(f, "ptxas removed or never emitted it"));  // it was never written
  CHECK_HAS(f,
            "Resources: 168 registers/thread, spills 16 B stored / 24 B loaded, 0 B static shared, 0 B "
            "stack; no ptxas warnings\n");
  // ptxas's warnings are listed verbatim, each named as a place to start.
  {
    Verdict w = v;
    w.compile.figures["warnings"] = json::array(
        {"ptxas warning : (C7515) Potential Performance Loss: wgmma.mma_async instructions are serialized"});
    const std::string fw = builder().feedback(task, w);
    CHECK_HAS(fw, "0 B stack\nptxas warnings (each one a place to start):\n");
    CHECK_HAS(fw, "wgmma.mma_async instructions are serialized");
    CHECK_FALSE(has(fw, "no ptxas warnings"));
  }
  // In the PTX but gone from the SASS: then ptxas is the one to ask.
  v.static_checks.figures["targets_in_ptx"]["wgmma"] = true;
  CHECK_HAS(builder().feedback(task, v),
            "wgmma.mma_async is not in the SASS: ptxas removed or never emitted it");
}
