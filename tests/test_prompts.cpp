// Prompt builder: templates load and validate; system/task prompts carry the
// contract and the task's facts; feedback for each outcome carries the
// specific numbers, lines and coordinates of a hand-made verdict.
#define DOCTEST_CONFIG_IMPLEMENT_WITH_MAIN
#include <doctest/doctest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <string>

#include <unistd.h>

#include <fmt/core.h>

#include "agent/detail/template.hpp"
#include "agent/prompt_builder.hpp"
#include "evaluator/candidate.hpp"
#include "evaluator/evaluator.hpp"
#include "evaluator/protocol/job.hpp"
#include "evaluator/protocol/matrix_work.hpp"
#include "tasks/arch.hpp"
#include "tasks/task.hpp"
#include "tests/support/support.hpp"
#include "util/files.hpp"

namespace fs = std::filesystem;
using namespace ptxbench;
using evaluator::Diagnostic;
using evaluator::Status;
using evaluator::Verdict;
using nlohmann::json;

namespace {

const fs::path kPrompts = fs::path(PTXBENCH_SOURCE_DIR) / "prompts";
const fs::path kTasks = fs::path(PTXBENCH_SOURCE_DIR) / "tasks";

const agent::PromptBuilder &builder() {
  static const agent::PromptBuilder b = [] {
    auto loaded = agent::PromptBuilder::load(kPrompts);
    if (!loaded) FAIL(loaded.error());
    return std::move(loaded).value();
  }();
  return b;
}

tasks::Task load_task(const std::string &id) {
  auto t = tasks::load_task_file(kTasks / (id + ".json"));
  REQUIRE_MESSAGE(t.has_value(), (t ? "" : t.error()));
  return std::move(t).value();
}

bool has(const std::string &text, const std::string &needle) {
  return text.find(needle) != std::string::npos;
}

#define CHECK_HAS(text, needle) \
  CHECK_MESSAGE(has(text, needle), "missing: " << (needle) << "\n--- in:\n" << (text))

/// A verdict whose CPU stages passed (wgmma + TMA present in PTX and SASS).
Verdict compiled_verdict() {
  Verdict v;
  v.task_id = "gemm_n7168_k5120";
  v.parse.status = Status::ok;
  v.static_checks.status = Status::ok;
  v.static_checks.figures = {{"entry", "gemm"}, {"targets_in_ptx", {{"wgmma", true}, {"tma_load", true}}}};
  v.compile.status = Status::ok;
  v.compile.figures = {{"registers", 168},       {"spill_store_bytes", 16},
                       {"spill_load_bytes", 24}, {"shared_bytes", 0},
                       {"stack_bytes", 0},       {"warnings", json::array()},
                       {"sass_available", true}, {"targets_in_sass", {{"wgmma", true}, {"tma_load", true}}}};
  return v;
}

Verdict with_gpu_results(double speedup, double wgmma_runs) {
  Verdict v = compiled_verdict();
  v.correctness.status = Status::ok;
  v.correctness.figures = {{"workloads", json::array({{{"name", "M=8192"}, {"trials", 3}, {"passed", 3}}})}};
  v.execution.status = Status::ok;
  const auto runs = static_cast<std::uint64_t>(wgmma_runs);  // a count, as the worker writes it
  v.execution.figures = {{"targets", json::array({{{"name", "wgmma"},
                                                   {"sass_families", {"HGMMA"}},
                                                   {"present_in_sass", true},
                                                   {"warp_executions", runs},
                                                   {"executed", wgmma_runs > 0}},
                                                  {{"name", "tma_load"},
                                                   {"sass_families", {"UTMALDG"}},
                                                   {"present_in_sass", true},
                                                   {"warp_executions", 4096},
                                                   {"executed", true}}})},
                         {"top_opcodes", json::array({{{"family", "HGMMA"}, {"warp_executions", 1200000}},
                                                      {{"family", "LDS"}, {"warp_executions", 30000}}})},
                         {"tensor_core_share", 0.42}};
  v.timing.status = Status::ok;
  v.timing.figures = {{"workloads", json::array({{{"name", "M=8192"},
                                                  {"candidate_ms", 0.9},
                                                  {"library_ms", 0.9 * speedup},
                                                  {"speedup", speedup},
                                                  {"candidate_tflops", 668.1},
                                                  {"library_tflops", 668.1 * speedup},
                                                  {"sol_floor_ms", 0.608},
                                                  {"peak_tflops", 989.4}}})},
                      {"sm_clock_mhz", 1980},
                      {"geomean_speedup", speedup},
                      {"min_speedup", speedup}};
  v.axes.correct = true;
  v.axes.targets_executed = wgmma_runs > 0;
  v.axes.speedup = speedup;
  v.finalize_status();
  return v;
}

}  // namespace

TEST_CASE("templates: one-pass fill, placeholders, missing values are bugs") {
  using agent::detail::render_template;
  CHECK(agent::detail::template_placeholders("a {{x}} b {{y_2}} {{ bad }} {{x}}") ==
        std::set<std::string>{"x", "y_2"});
  CHECK(render_template("[{{a}}|{{b}}]", {{"a", "{{b}}"}, {"b", "2"}}, "t") == "[{{b}}|2]");
  CHECK(render_template("a\n\n\n\n\nb{{e}}", {{"e", ""}}, "t") == "a\n\nb");
  CHECK_THROWS_AS(render_template("{{nope}}", {}, "t"), std::logic_error);
  CHECK(agent::detail::bullet_list({"a", "b", "c"}, 2, 100) == "  - a\n  - b\n  ... 1 more\n");
  CHECK(agent::detail::truncate_text(std::string(50, 'x'), 10) == "xxxxxxxxxx... (40 more characters)");
  // Never cuts inside a UTF-8 sequence.
  std::string cut = agent::detail::truncate_text("ab\xC3\xA9\xC3\xA9", 3);
  CHECK(cut.rfind("ab...", 0) == 0);
}

TEST_CASE("load: every template present and valid; missing files and unknown placeholders are named") {
  CHECK(agent::PromptBuilder::load(kPrompts).has_value());

  fs::path dir = fs::temp_directory_path() / ("ptxbench_prompts_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::copy(kPrompts, dir, fs::copy_options::recursive);
  fs::remove(dir / "feedback" / "ok_fast.txt");
  std::ofstream(dir / "feedback" / "incorrect.txt") << "wrong {{max_error}} here";
  auto bad = agent::PromptBuilder::load(dir);
  REQUIRE_FALSE(bad.has_value());
  CHECK_HAS(bad.error(), (dir / "feedback" / "ok_fast.txt").string() + ": cannot read");
  CHECK_HAS(bad.error(),
            (dir / "feedback" / "incorrect.txt").string() + ": unknown placeholder {{max_error}}");
  fs::remove_all(dir);
}

TEST_CASE("system prompt: contract, target architecture, and only the relevant reference notes") {
  auto gemm = load_task("gemm_n7168_k5120");
  std::string s = builder().system_prompt(gemm);
  CHECK_HAS(s, ".target sm_90a");
  CHECK_HAS(s, "Hopper");
  CHECK_HAS(s, "wgmma.mma_async (SASS HGMMA), cp.async.bulk.tensor (SASS UTMALDG)");
  CHECK_HAS(s, ".param .align 64 .b8 name[128]");
  CHECK_HAS(s, "LAST ```ptx or\n```cuda block is the kernel");
  CHECK_HAS(s, "\"tensor_map\": \"A\", \"box\": [64, 128], \"swizzle\": \"128B\"");
  CHECK_HAS(s, "cuBLASLt");
  CHECK_HAS(s, "wgmma.fence.sync.aligned");  // notes/wgmma
  CHECK_HAS(s, "mbarrier.try_wait.parity");  // notes/tma
  CHECK_HAS(s, "setmaxnreg.dec");            // notes/setmaxnreg
  CHECK_FALSE(has(s, "tcgen05.alloc"));
  CHECK_FALSE(has(s, "{{"));

  auto sm100 = load_task("mha_fwd_d128_sm100");
  std::string b = builder().system_prompt(sm100);
  CHECK_HAS(b, ".target sm_100a");
  CHECK_HAS(b, "Blackwell");
  CHECK_HAS(b, "tcgen05.alloc.cta_group::1");
  CHECK_HAS(b, "tcgen05.mma (SASS UTCHMMA)");
  CHECK_HAS(b, "cuDNN fused attention (SDPA forward)");
  CHECK_FALSE(has(b, "wgmma.fence.sync.aligned"));
}

TEST_CASE(
    "system prompt: num_sms is the arch table's SM count, the one the manifest's expressions resolve to") {
  for (const char *id : {"gemm_n7168_k5120", "mha_bwd_d128", "mha_fwd_d128_sm100"}) {
    CAPTURE(id);
    auto task = load_task(id);
    const tasks::ArchFacts *facts = tasks::arch_facts(task.arch);
    REQUIRE(facts != nullptr);
    REQUIRE(facts->peaks.has_value());
    const std::string s = builder().system_prompt(task);
    // The statement, with the table's value and GPU (132 on the H200 SXM for sm_90a).
    const std::string stated = fmt::format(
        "every expression may use num_sms, the number of SMs of the GPU the "
        "kernel runs on\n({} on the {})",
        facts->peaks->sm_count, facts->peaks->gpu);
    CHECK_HAS(s, stated);
    // The value the prompt states is the value a manifest's "grid": "num_sms" launches with.
    const auto at = s.find("kernel runs on\n(");
    REQUIRE(at != std::string::npos);
    const long stated_value = std::stol(s.substr(at + std::string("kernel runs on\n(").size()));
    auto manifest =
        evaluator::parse_manifest(R"({"entry": "k", "grid": "num_sms", "block": 128, "params": []})", task);
    REQUIRE_MESSAGE(manifest.has_value(), manifest.error());
    auto plan = evaluator::resolve_launch(*manifest, task, task.workloads.at(0));
    REQUIRE(plan.has_value());
    CHECK(plan->grid[0] == stated_value);
    CHECK(plan->num_sms == stated_value);
    CHECK_HAS(builder().task_prompt(task), ", num_sms.");
  }
  CHECK(tasks::arch_facts("sm_90a")->peaks->sm_count == 132);  // the H200 SXM the prompts quote
}

TEST_CASE("system prompt: the workspace is explained once, with the harness's limit") {
  auto gemm = load_task("gemm_n7168_k5120");
  const std::string s = builder().system_prompt(gemm);
  CHECK_HAS(s, "\"workspace_bytes\": expr,      optional global scratch memory in bytes");
  CHECK_HAS(s, "{\"workspace\": true}     the workspace: the device address of \"workspace_bytes\" bytes");
  CHECK_HAS(s, fmt::format("(1 byte to\n                          {} GiB; declare `.param .u64 name`)",
                           protocol::kMaxWorkspaceBytes >> 30));
  CHECK_HAS(
      s, "ZERO-FILLED by the harness before every launch (the fill is not\n                          timed)");
  CHECK_HAS(s, "reduce in a fixed order");
  // Explained once: the parameter's description appears one time.
  const std::string once = "{\"workspace\": true}     the workspace";
  CHECK(s.find(once) == s.rfind(once));
  // The backward tasks offer it instead of forbidding global scratch memory.
  for (const char *id : {"mha_bwd_d128", "mha_bwd_d128_causal", "mha_bwd_d64"}) {
    CAPTURE(id);
    const std::string t = builder().task_prompt(load_task(id));
    CHECK_HAS(t, "can be declared in the manifest as a workspace");
    CHECK_FALSE(has(t, "must live in shared memory or registers"));
  }
}

TEST_CASE("task prompt: tensors with headline shapes, scalars, workloads, targets, tolerances, speed floor") {
  auto gemm = load_task("gemm_n7168_k5120");
  std::string p = builder().task_prompt(gemm);
  CHECK_HAS(p, "# Task gemm_n7168_k5120");
  CHECK_HAS(
      p, "A: input bf16 [M, K] = [8192, 5120] in the first workload; row-major, K contiguous; values N(0,1)");
  CHECK_HAS(p, "C: output bf16 [M, N] = [8192, 7168]");
  CHECK_HAS(p, "M=8192: M=8192 N=7168 K=5120; 6.013e+11 FLOPs");
  CHECK_HAS(p, "physical floor ~0.562 ms");  // 6.013e11 FLOPs at 4096 x 132 x 1.98 GHz
  CHECK_HAS(p, "C: atol 0.125, rtol 0.0078125");
  CHECK_HAS(p, "wgmma: PTX wgmma.mma_async (SASS HGMMA)");
  CHECK_HAS(p, "Symbols usable in the manifest's expressions: M, N, K, num_sms.");
  CHECK_FALSE(has(p, "## Scalars"));
  CHECK_FALSE(has(p, "{{"));

  auto attn = load_task("mha_bwd_d128_causal");
  std::string a = builder().task_prompt(attn);
  CHECK_HAS(a, "softmax_scale: f32 = 0.0883883476");
  CHECK_HAS(a, "LSE: input f32 [B, H, S] = [4, 48, 4096] in the first workload");
  CHECK_HAS(a, "computed by the reference from the other inputs");
  CHECK_HAS(a, "Causal: query i attends only to keys j <= i");
  CHECK_HAS(a, "cuDNN fused attention (SDPA backward)");
  CHECK_HAS(a, "dQ: atol 0.15, rtol 0.03125");
}

TEST_CASE("feedback: parse, manifest, static and compile failures quote the specific problem") {
  auto task = load_task("gemm_n7168_k5120");
  {
    Verdict v;
    v.parse.status = Status::no_kernel;
    v.parse.summary = "no ```ptx or ```cuda block found (1 ```json block seen)";
    v.finalize_status();
    std::string f = builder().feedback(task, v);
    CHECK_HAS(f, "could not be evaluated: no ```ptx or ```cuda block found (1 ```json block seen)");
  }
  {
    Verdict v;
    v.parse.status = Status::bad_manifest;
    v.parse.summary = "manifest rejected";
    v.parse.diagnostics.push_back(
        {"error", "params[2]: 'X' is not a tensor or scalar of this task (known: A, B, C)", {}});
    v.finalize_status();
    std::string f = builder().feedback(task, v);
    CHECK_HAS(f, "params[2]: 'X' is not a tensor or scalar of this task (known: A, B, C)");
    CHECK_HAS(f, "expressions may only use\nM, N, K");
  }
  {
    Verdict v = compiled_verdict();
    v.static_checks.status = Status::static_error;
    v.static_checks.summary = "the manifest lists 4 parameters but entry 'gemm' declares 3";
    v.static_checks.diagnostics.push_back({"error", "entry 'gemm' has 3 parameters", 12});
    v.static_checks.figures["targets_in_ptx"] = {{"wgmma", false}, {"tma_load", true}};
    v.static_checks.figures["module_globals"] = {"counter"};
    v.compile.status = Status::skipped;
    v.finalize_status();
    REQUIRE(v.status == Status::static_error);
    std::string f = builder().feedback(task, v);
    CHECK_HAS(f, "the manifest lists 4 parameters but entry 'gemm' declares 3");
    CHECK_HAS(f, "line 12: entry 'gemm' has 3 parameters");
    CHECK_HAS(f, "target wgmma (wgmma.mma_async) is not in your PTX");
    CHECK_HAS(f, "module-scope .global variable 'counter'");
    CHECK_FALSE(has(f, "target tma_load"));
  }
  {
    Verdict v = compiled_verdict();
    v.compile.status = Status::compile_error;
    v.compile.summary = "ptxas failed with 2 errors";
    v.compile.diagnostics.push_back(
        {"error", "ptxas: Arguments mismatch for instruction 'wgmma.mma_async'", 45});
    v.compile.diagnostics.push_back({"warning", "ptxas: unused register %r9", 46});
    v.finalize_status();
    std::string f = builder().feedback(task, v);
    CHECK_HAS(f, "Compilation failed: ptxas failed with 2 errors");
    CHECK_HAS(f, "line 45: ptxas: Arguments mismatch for instruction 'wgmma.mma_async'");
    CHECK_HAS(f, "line 46: warning: ptxas: unused register %r9");
  }
}

TEST_CASE("feedback: launch, runtime, timeout, sanitizer") {
  auto task = load_task("gemm_n7168_k5120");
  {
    Verdict v = compiled_verdict();
    v.correctness.status = Status::launch_error;
    v.correctness.summary = "cuLaunchKernelEx: CUDA_ERROR_INVALID_VALUE (shared_bytes 300000 > 232448)";
    v.finalize_status();
    std::string f = builder().feedback(task, v);
    CHECK_HAS(f, "shared_bytes 300000 > 232448");
    CHECK_HAS(f, "168 registers/thread, spills 16 B stored / 24 B loaded");
  }
  {
    Verdict v = compiled_verdict();
    v.correctness.status = Status::runtime_error;
    v.correctness.summary = "CUDA_ERROR_ILLEGAL_ADDRESS at workload M=8192";
    v.sanitizer.status = Status::runtime_error;
    v.sanitizer.summary = "memcheck: 3 errors";
    v.sanitizer.diagnostics.push_back(
        {"error", "Invalid __global__ write of size 2 bytes at C + 117440512", 88});
    v.finalize_status();
    std::string f = builder().feedback(task, v);
    CHECK_HAS(f, "CUDA_ERROR_ILLEGAL_ADDRESS at workload M=8192");
    CHECK_HAS(f, "compute-sanitizer: memcheck: 3 errors");
    CHECK_HAS(f, "line 88: Invalid __global__ write of size 2 bytes at C + 117440512");
  }
  {
    Verdict v = compiled_verdict();
    v.correctness.status = Status::timeout;
    v.correctness.summary = "a launch ran longer than 10.0 s";
    v.finalize_status();
    std::string f = builder().feedback(task, v);
    CHECK_HAS(f, "(a launch ran longer than 10.0 s)");
    CHECK_HAS(f, "mbarrier wait whose phase never completes");
    CHECK_FALSE(has(f, "compute-sanitizer"));
  }
}

TEST_CASE("feedback: incorrect and nondeterministic report coordinates and counts") {
  auto task = load_task("gemm_n4096_k4096");
  Verdict v = compiled_verdict();
  v.correctness.status = Status::incorrect;
  v.correctness.summary = "1 of 2 workloads failed";
  v.correctness.figures = {
      {"workloads",
       json::array(
           {{{"name", "M=4096"}, {"trials", 3}, {"passed", 3}, {"deterministic", true}},
            {{"name", "M=3000"},
             {"trials", 3},
             {"passed", 0},
             {"max_abs_error", 41.5},
             {"max_rel_error", 1.0},
             {"mismatches", 1234},
             {"first_mismatch", {{"tensor", "C"}, {"index", {2944, 17}}, {"got", 1.5}, {"expected", 2.25}}},
             {"nan_count", 512},
             {"unwritten_count", 512},
             {"guard_damage", 64},  // bytes, as the worker counts them
             {"inputs_mutated", false},
             {"deterministic", true}}})}};
  v.finalize_status();
  std::string f = builder().feedback(task, v);
  CHECK_HAS(f,
            "M=3000: 0 of 3 trials passed; max abs error 41.5, max rel error 1; 1234 mismatching elements");
  CHECK_HAS(f, "first mismatch C[2944, 17]: got 1.5, expected 2.25");
  CHECK_HAS(f, "512 output elements never written");
  CHECK_HAS(f, "wrote outside a tensor (64 guard bytes damaged)");
  CHECK_FALSE(has(f, "M=4096:"));  // passing workloads are not listed

  Verdict nd = compiled_verdict();
  nd.correctness.status = Status::nondeterministic;
  nd.correctness.summary = "outputs differ between two identical launches (17 elements)";
  nd.correctness.figures = {
      {"workloads",
       json::array({{{"name", "M=4096"}, {"trials", 3}, {"passed", 3}, {"deterministic", false}}})}};
  nd.finalize_status();
  std::string g = builder().feedback(task, nd);
  CHECK_HAS(g, "(17 elements)");
  // The row as a worker's record renders (every count written, 0 here).
  CHECK_HAS(
      g,
      "M=4096: 3 of 3 trials passed; max abs error 0, max rel error 0; 0 mismatching elements; a second "
      "identical launch gave different bits");
}

TEST_CASE("feedback: a kernel near the tolerance is told so, correct or not; others are not") {
  auto task = load_task("gemm_n7168_k5120");
  const json near = {{"tensors", json::array({{{"tensor", "C"}, {"max_error_ratio", 0.93}, {"trial", 5}}})},
                     {"max_error_ratio", 0.93},
                     {"borderline", true},
                     {"trials_run", 11},
                     {"trials_failed", 0},
                     {"extra_trials", 8},
                     {"failure_rate", 0.0},
                     {"extra_stopped_by", "count"}};
  Verdict ok = with_gpu_results(0.85, 320000);
  ok.correctness.figures["workloads"][0]["margin"] = near;
  ok.correctness.figures["workloads"][0]["trials"] = 11;
  ok.correctness.figures["workloads"][0]["passed"] = 11;
  ok.correctness.figures["borderline"] = true;
  const std::string f = builder().feedback(task, ok);
  CHECK_HAS(f,
            "Near the tolerance on M=8192: the largest error is 0.93x the tolerance (1 = the limit); 0 of 11 "
            "trials on fresh inputs failed.\nA kernel this close to the limit can fail on other inputs");

  // Not borderline (an honest rounding at 0.45x): nothing said.
  Verdict clear = with_gpu_results(0.85, 320000);
  json margin = near;
  margin["borderline"] = false;
  margin["max_error_ratio"] = 0.45;
  margin["extra_trials"] = 0;
  margin["trials_run"] = 3;
  clear.correctness.figures["workloads"][0]["margin"] = margin;
  CHECK_FALSE(has(builder().feedback(task, clear), "Near the tolerance"));

  // Incorrect near the edge: the row says how near and how often, and where to look.
  Verdict bad = compiled_verdict();
  bad.correctness.status = Status::incorrect;
  bad.correctness.summary = "workload M=8192: 8 of 11 trials passed";
  json failing = near;
  failing["max_error_ratio"] = 1.04;
  failing["trials_failed"] = 3;
  failing["failure_rate"] = 3.0 / 11;
  bad.correctness.figures = {{"workloads", json::array({{{"name", "M=8192"},
                                                         {"trials", 11},
                                                         {"passed", 8},
                                                         {"mismatches", 2},
                                                         {"deterministic", true},
                                                         {"margin", failing}}})},
                             {"borderline", true}};
  bad.finalize_status();
  REQUIRE(bad.status == Status::incorrect);
  const std::string g = builder().feedback(task, bad);
  CHECK_HAS(g, "M=8192: 8 of 11 trials passed");
  CHECK_HAS(g,
            "near the tolerance: the largest error is 1.04x the tolerance (1 = the limit); 3 of 11 trials on "
            "fresh inputs failed");
  CHECK_HAS(g, "The errors are just past the tolerance: they come from precision");
}

TEST_CASE("feedback: the execution axis names the target that ran 0 times") {
  auto task = load_task("gemm_n7168_k5120");
  Verdict v = with_gpu_results(0.93, 0);
  REQUIRE(v.status == Status::ok);
  std::string f = builder().feedback(task, v);
  CHECK_HAS(f, "wgmma.mma_async is in your PTX and in the SASS but executed 0 times");
  CHECK_HAS(f, "cp.async.bulk.tensor (tma_load): in PTX yes, in SASS (UTMALDG) yes, executed 4096 times");
  CHECK_HAS(f, "Top executed opcodes (warp-level counts): HGMMA 1.2e+06, LDS 3e+04");
}

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

TEST_CASE("feedback: suspicious timing, GPU skipped, unusable response") {
  auto task = load_task("gemm_n7168_k5120");
  Verdict s = with_gpu_results(60, 320000);
  s.timing.status = Status::suspicious;
  s.timing.summary = "0.01 ms is below the physical floor of 0.608 ms";
  s.finalize_status();
  std::string f = builder().feedback(task, s);
  CHECK_HAS(f, "0.01 ms is below the physical floor of 0.608 ms");
  CHECK_HAS(f, "speedup 60.000x");

  Verdict cpu = compiled_verdict();
  cpu.correctness.status = Status::skipped;
  cpu.correctness.summary = "no CUDA driver (libcuda.so.1 not found)";
  cpu.finalize_status();
  REQUIRE(cpu.status == Status::ok);
  std::string g = builder().feedback(task, cpu);
  CHECK_HAS(g, "it was not executed: no CUDA driver (libcuda.so.1 not found)");
  CHECK_HAS(g, "wgmma.mma_async (wgmma): in PTX yes, in SASS (HGMMA) yes, execution not measured");

  std::string u =
      builder().feedback_unusable_response("the response was cut at max_tokens (finish_reason=length)");
  CHECK_HAS(u, "could not be used: the response was cut at max_tokens (finish_reason=length)");
}

TEST_CASE("feedback is bounded and never expands placeholders inside model or compiler text") {
  auto task = load_task("gemm_n7168_k5120");
  Verdict v = compiled_verdict();
  v.compile.status = Status::compile_error;
  v.compile.summary = "ptxas failed with 100 errors";
  for (int i = 0; i < 100; ++i)
    v.compile.diagnostics.push_back({"error", "ptxas: error {{summary}} " + std::string(2000, 'x'), i + 1});
  v.finalize_status();
  std::string f = builder().feedback(task, v);
  CHECK_HAS(f, "... 88 more");
  CHECK_HAS(f, "line 12: ptxas: error {{summary}} ");
  CHECK_FALSE(has(f, "line 13:"));
  CHECK_HAS(f, "more characters)");  // each 2000-char diagnostic is cut
  CHECK(f.size() < 12100);
}

namespace {
std::size_t occurrences(const std::string &text, const std::string &needle) {
  std::size_t n = 0;
  for (auto pos = text.find(needle); pos != std::string::npos; pos = text.find(needle, pos + needle.size()))
    ++n;
  return n;
}
}  // namespace

TEST_CASE("feedback states each fact once: compile errors listed once, each with its PTX line quoted") {
  auto task = load_task("gemm_n7168_k5120");
  const std::string ptx =
      ".version 8.5\n.target sm_90a\n.visible .entry gemm(.param .u64 a)\n{\n  add.f32 %f1, %f2, bogus;\n"
      "  wgmma.mma_async.sync.aligned.m64n256k16.f32.bf16.bf16 {%f1}, %rd1, %rd2;\n  ret;\n}\n";
  Verdict v = compiled_verdict();
  v.compile.status = Status::compile_error;
  // As the evaluator writes them: the first error is also the summary.
  const std::string e1 = "ptxas, line 5 of the PTX block (response line 7): Unknown symbol 'bogus'";
  const std::string e2 =
      "ptxas, line 6 of the PTX block (response line 8): Arguments mismatch for instruction 'wgmma'";
  v.compile.summary = e1 + " (and 1 more error(s))";
  v.compile.diagnostics.push_back({"error", e1, 5});
  v.compile.diagnostics.push_back({"error", e2, 6});
  v.finalize_status();
  const agent::FeedbackSources sources{ptx, ptx, false};
  std::string f = builder().feedback(task, v, &sources);
  CHECK_HAS(f, "Compilation failed: 2 errors");
  CHECK(occurrences(f, "Unknown symbol 'bogus'") == 1);
  CHECK(occurrences(f, "Arguments mismatch") == 1);
  CHECK(occurrences(f, "line 5") == 1);  // the line number is not prefixed a second time
  CHECK_HAS(f, "Unknown symbol 'bogus'\n    > add.f32 %f1, %f2, bogus;");
  CHECK_HAS(f, "> wgmma.mma_async.sync.aligned.m64n256k16.f32.bf16.bf16 {%f1}, %rd1, %rd2;");
  // Two errors on one line: the line is quoted once.
  Verdict same = v;
  same.compile.diagnostics[1] = {"error",
                                 "ptxas, line 5 of the PTX block (response line 7): Arguments mismatch", 5};
  std::string once = builder().feedback(task, same, &sources);
  CHECK(occurrences(once, "> add.f32 %f1, %f2, bogus;") == 1);
  CHECK(once.find("> add.f32") > once.find("Arguments mismatch"));
  // Without the sources the message is the same minus the quotes.
  std::string plain = builder().feedback(task, v);
  CHECK(occurrences(plain, "Unknown symbol 'bogus'") == 1);
  CHECK_FALSE(has(plain, "> add.f32"));
}

TEST_CASE("feedback: an NVRTC error quotes the CUDA line; ptxas errors on NVRTC's PTX quote that PTX") {
  auto task = load_task("gemm_n7168_k5120");
  const std::string cuda =
      "#include <cstdint>\nextern \"C\" __global__ void gemm(float *c) {\n  c[0] = undefined_x;\n}\n";
  Verdict v = compiled_verdict();
  v.compile.status = Status::compile_error;
  const std::string text = "NVRTC: kernel.cu(3): error: identifier \"undefined_x\" is undefined";
  v.compile.summary = text;
  v.compile.diagnostics.push_back({"error", text, std::nullopt});
  v.finalize_status();
  const agent::FeedbackSources sources{cuda, "", true};
  std::string f = builder().feedback(task, v, &sources);
  CHECK(occurrences(f, "is undefined") == 1);
  CHECK_HAS(f, "kernel.cu(3): error: identifier \"undefined_x\" is undefined\n    > c[0] = undefined_x;");
  CHECK_HAS(f, "Compilation failed: 1 error");

  const std::string generated = ".version 8.5\n.target sm_90a\n  ld.global.f32 %f1, [%rd9];\n";
  Verdict p = compiled_verdict();
  p.compile.status = Status::compile_error;
  const std::string e = "ptxas, line 3 of the NVRTC-generated PTX: Unknown symbol '%rd9'";
  p.compile.summary = e;
  p.compile.diagnostics.push_back({"error", e, 3});
  p.finalize_status();
  const agent::FeedbackSources cuda_sources{cuda, generated, true};
  std::string g = builder().feedback(task, p, &cuda_sources);
  CHECK_HAS(g, "Unknown symbol '%rd9'\n    > ld.global.f32 %f1, [%rd9];");
  CHECK(occurrences(g, "Unknown symbol") == 1);
}

TEST_CASE("feedback states each fact once: an incorrect output's mismatch appears once") {
  auto task = load_task("gemm_n4096_k4096");
  Verdict v = compiled_verdict();
  v.correctness.status = Status::incorrect;
  // As the worker writes it: the failing workload's text is the first diagnostic and the summary.
  const std::string text =
      "workload M=3000: 0 of 3 trials passed; 1234 mismatching elements over all trials (of 12288000 per "
      "trial); first at C[2944, 17]: got 1.5, expected 2.25 (tolerance 0.02 + 0.02·|expected|)";
  v.correctness.summary = text;
  v.correctness.diagnostics.push_back({"error", text, std::nullopt});
  v.correctness.figures = {
      {"workloads",
       json::array(
           {{{"name", "M=4096"}, {"trials", 3}, {"passed", 3}, {"deterministic", true}},
            {{"name", "M=3000"},
             {"trials", 3},
             {"passed", 0},
             {"max_abs_error", 41.5},
             {"max_rel_error", 1.0},
             {"mismatches", 1234},
             {"first_mismatch", {{"tensor", "C"}, {"index", {2944, 17}}, {"got", 1.5}, {"expected", 2.25}}},
             {"deterministic", true}}})}};
  v.finalize_status();
  std::string f = builder().feedback(task, v);
  CHECK(occurrences(f, "2944") == 1);
  CHECK(occurrences(f, "1234") == 1);
  CHECK_HAS(f, "The kernel ran but the results are wrong: 1 of 2 workloads failed");
  CHECK_HAS(f, "first mismatch C[2944, 17]: got 1.5, expected 2.25 (tolerance");
  // A worker diagnostic no row states (e.g. about another stage) is still listed.
  v.correctness.diagnostics.push_back(
      {"warning", "the SM clock fell to 1200 MHz during the check", std::nullopt});
  CHECK_HAS(builder().feedback(task, v), "the SM clock fell to 1200 MHz");
}

TEST_CASE("feedback states each fact once: a runtime error's summary is not repeated as a diagnostic") {
  auto task = load_task("gemm_n7168_k5120");
  Verdict v = compiled_verdict();
  v.correctness.status = Status::runtime_error;
  v.correctness.summary = "CUDA_ERROR_ILLEGAL_ADDRESS at workload M=8192";
  v.correctness.diagnostics.push_back({"error", v.correctness.summary, std::nullopt});
  v.sanitizer.status = Status::runtime_error;
  v.sanitizer.summary = "compute-sanitizer memcheck: Invalid __global__ write of size 2 bytes";
  v.sanitizer.diagnostics.push_back({"error", "Invalid __global__ write of size 2 bytes", 88});
  v.finalize_status();
  std::string f = builder().feedback(task, v);
  CHECK(occurrences(f, "CUDA_ERROR_ILLEGAL_ADDRESS") == 1);
  CHECK(occurrences(f, "Invalid __global__ write") == 1);
  CHECK_HAS(f, "compute-sanitizer memcheck\n");
  CHECK_HAS(f, "line 88: Invalid __global__ write of size 2 bytes");
}

TEST_CASE(
    "knowledge packs: the shipped packs load, their manifests' sizes are true, prompts hold what is "
    "selected") {
  const auto &packs = builder().packs();
  for (const char *name : {"ptx-hopper", "ptx-blackwell", "arch-figures", "debugging", "patterns"}) {
    INFO(name);
    REQUIRE(packs.count(name) == 1);
    const auto &p = packs.at(name);
    CHECK_FALSE(p.version.empty());
    CHECK_FALSE(p.covers.empty());
    CHECK(p.text.size() > 1000);
    CHECK(std::abs(static_cast<double>(p.tokens - agent::estimate_tokens(p.text))) <= 0.1 * p.tokens);
  }
  // The Hopper pack covers what the issue of writing wgmma/TMA kernels needs.
  const std::string &hopper = packs.at("ptx-hopper").text;
  for (const char *topic : {"Shared-memory matrix descriptor", "Register A fragment", "expect_tx",
                            "setmaxnreg.inc", "multicast::cluster", "mapa.shared::cluster"})
    CHECK_MESSAGE(has(hopper, topic), topic);
  CHECK_HAS(packs.at("ptx-blackwell").text, "tcgen05.alloc");
  CHECK_HAS(packs.at("patterns").text, "FlashAttention");

  auto gemm = load_task("gemm_n7168_k5120");
  const std::string defaults = builder().system_prompt(gemm);
  const std::string with_packs = builder().system_prompt(gemm, {true, {"patterns", "debugging"}});
  const std::string packs_only = builder().system_prompt(gemm, {false, {"arch-figures"}});
  const std::string nothing = builder().system_prompt(gemm, {false, {}});
  CHECK(defaults == builder().system_prompt(gemm, {}));
  CHECK_HAS(with_packs, "wgmma.fence.sync.aligned");  // the target notes stay
  CHECK_HAS(with_packs, "Knowledge pack patterns (version 1)");
  CHECK_HAS(with_packs, "Knowledge pack debugging (version 1)");
  CHECK(with_packs.find("Knowledge pack patterns") <
        with_packs.find("Knowledge pack debugging"));  // config order
  CHECK_FALSE(has(packs_only, "wgmma.fence.sync.aligned"));
  CHECK_HAS(packs_only, "Knowledge pack arch-figures");
  CHECK_FALSE(has(nothing, "Knowledge pack"));
  CHECK_FALSE(has(nothing, "mbarrier.try_wait.parity"));
  CHECK(nothing.size() < defaults.size());
  CHECK(with_packs.size() > defaults.size() + packs.at("patterns").text.size());

  auto unknown = builder().check_packs({"patterns", "ptx-hoper"});
  REQUIRE_FALSE(unknown);
  CHECK_HAS(unknown.error(), "ptx-hoper");
  CHECK_HAS(unknown.error(), "ptx-hopper");
  CHECK(builder().check_packs({"patterns"}));
}

TEST_CASE("knowledge packs: a stale size figure, a missing file and a name mismatch are load errors") {
  fs::path dir = fs::temp_directory_path() / ("ptxbench_packs_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir / "good");
  std::ofstream(dir / "good" / "a.md") << std::string(400, 'x');
  std::ofstream(dir / "good" / "pack.json")
      << R"({"name":"good","version":"1","covers":"c","files":["a.md"],"tokenizer":"bytes/4","tokens":100})";
  auto ok = agent::load_knowledge_packs(dir);
  REQUIRE_MESSAGE(ok, (ok ? "" : ok.error()));
  CHECK(ok->size() == 1);
  fs::create_directories(dir / "stale");
  fs::create_directories(dir / "renamed");
  std::ofstream(dir / "stale" / "a.md") << std::string(4000, 'x');
  std::ofstream(dir / "stale" / "pack.json")
      << R"({"name":"stale","version":"2","covers":"c","files":["a.md"],"tokenizer":"bytes/4","tokens":100})";
  fs::create_directories(dir / "missing");
  std::ofstream(dir / "missing" / "pack.json")
      << R"({"name":"missing","version":"1","covers":"c","files":["gone.md"],"tokenizer":"bytes/4","tokens":1})";
  std::ofstream(dir / "renamed" / "pack.json")
      << R"({"name":"other","version":"1","covers":"c","files":["../good/a.md"],"tokenizer":"bytes/4","tokens":1})";
  auto bad = agent::load_knowledge_packs(dir);
  REQUIRE_FALSE(bad);
  CHECK_HAS(bad.error(), "gone.md");
  CHECK_HAS(bad.error(), "the manifest says 100, the files hold about 1000");
  CHECK_HAS(bad.error(), "differs from the folder name");
  CHECK_HAS(bad.error(), "must be a plain name");
  fs::remove_all(dir);
}

TEST_CASE("hidden workloads: the task message states the ranges and never a hidden value") {
  for (const char *id : {"gemm_n7168_k5120", "mha_fwd_d128", "mha_bwd_d128_causal"}) {
    CAPTURE(id);
    const auto task = load_task(id);
    REQUIRE_FALSE(task.hidden_workloads.empty());
    const std::string p = builder().task_prompt(task);
    CHECK_HAS(p, "The kernel must be correct for every shape in these ranges, not only the ones above: ");
    CHECK_HAS(p, "whether the kernel is correct on them is reported beside the three axes");
    for (const auto &w : task.hidden_workloads) {
      CHECK_FALSE(has(p, w.name));
      for (const auto &[symbol, value] : w.symbols)
        if (value != task.workloads[0].symbols.at(symbol) && task.ranges.at(symbol).min != value)
          CHECK_MESSAGE(!has(p, symbol + "=" + std::to_string(value)), symbol << "=" << value << " printed");
    }
    if (std::string(id) == "gemm_n7168_k5120")
      CHECK_HAS(p, "M is any value from 1 to 16384; N = 7168; K = 5120");
  }
  // A task without hidden workloads or ranges says nothing of them.
  CHECK_FALSE(has(builder().task_prompt(load_task("gemm_n4096_k4096")), "in these ranges"));
}

TEST_CASE("feedback: hidden-workload failures by kind, their values only with reveal") {
  const auto task = load_task("gemm_n7168_k5120");
  Verdict v = with_gpu_results(0.85, 320000);
  REQUIRE(v.status == Status::ok);
  evaluator::Generalization g;
  g.value = false;
  g.passed = 0;
  g.total = 2;
  g.failed = {{"M=8200", "incorrect", "57344 of 58777600 output elements wrong", 57344.0 / 58777600},
              {"M=77", "runtime_error",
               "the kernel faulted: an illegal memory access (workload M=77, trial 1, grid 28 x 1 x 1, block "
               "384 x 1 x 1)"}};
  v.generalizes = g;
  const std::string f = builder().feedback(task, v);
  CHECK_HAS(f,
            "But it is not correct on 2 of 2 other shapes the task promises (M is any value from 1 to 16384");
  // How much was wrong, but no count over a total (that would give M away), and no launch context.
  CHECK_HAS(f, "unseen shape 1: wrong results in under 0.1% of the output elements");
  CHECK_HAS(f, "unseen shape 2: the kernel faulted (the kernel faulted: an illegal memory access)");
  CHECK_FALSE(has(f, "58777600"));
  CHECK_FALSE(has(f, "grid 28"));
  CHECK_HAS(f, "guard partial tiles at the edges");
  CHECK_FALSE(has(f, "8200"));
  CHECK_FALSE(has(f, "M=77"));
  // Revealed (evaluator setting hidden_workloads.reveal, recorded in the verdict's settings).
  v.settings["hidden_workloads"] = {{"check", true}, {"time", false}, {"reveal", true}};
  const std::string r = builder().feedback(task, v);
  CHECK_HAS(r, "shape M=8200: wrong results");
  CHECK_HAS(r, "shape M=77: the kernel faulted");
  // Right on every hidden shape: one short line. Not checked: nothing.
  g.value = true;
  g.passed = 2;
  g.failed.clear();
  v.generalizes = g;
  CHECK_HAS(builder().feedback(task, v),
            "It is also correct on 2 other shapes within the task's stated ranges.");
  g.value.reset();
  v.generalizes = g;
  CHECK_FALSE(has(builder().feedback(task, v), "other shape"));
}

TEST_CASE("feedback: a target whose work is done again outside it is named, with the work and the rule") {
  auto task = load_task("gemm_n7168_k5120");
  // The decoy as the evaluator records it: wgmma ran at 102% of the FLOPs and mma.sync did them again.
  Verdict v = with_gpu_results(0.4, 1.2e6);
  v.settings = evaluator::EvaluatorSettings{}.to_json();
  json &targets = v.execution.figures["targets"];
  targets[0]["matrix_target"] = true;
  targets[0]["threads_on"] = std::uint64_t{38400000};
  targets[0]["work_share"] = 1.024;
  targets[1]["matrix_target"] = false;
  protocol::MatrixWork work;
  work.workload_flops = 1e11;
  work.target_flops = work.non_target_tensor_flops = 1.024e11;
  work.target_share = work.non_target_tensor_share = 1.024;
  work.fma_flops = 2e8;
  work.fma_share = 0.002;
  work.families = {{"HMMA", "tensor", 1.024e11, 1.024}, {"FFMA", "fma", 2e8, 0.002}};
  v.execution.figures["matrix_work"] = work;
  v.axes.targets_executed = false;
  const std::string f = builder().feedback(task, v);
  CHECK_HAS(f, "Correct on every workload, but the task's target instructions did not all run");
  CHECK_HAS(f,
            "The targets do not count: target wgmma did 102% of the task's FLOPs, but multiply-add "
            "instructions outside the targets did 103% of them as well (mma.sync (HMMA) 102%, fp32 fma "
            "(FFMA) 0.2%)");
  CHECK_FALSE(has(f, "Multiply-add work outside the target instructions"));  // the reason names the work once
  CHECK_HAS(f, "at or under 25% of the task's FLOPs");
  CHECK_HAS(f, "make the target's work count as repeated");
  CHECK_FALSE(has(f, "HMMA (HMMA)"));

  // Honest: the softmax-sized FMA work beside wgmma is not worth a line, and nothing is refused.
  Verdict honest = with_gpu_results(1.1, 1.2e6);
  honest.settings = evaluator::EvaluatorSettings{}.to_json();
  work.non_target_tensor_flops = work.non_target_tensor_share = 0;
  work.families = {{"FFMA", "fma", 2e8, 0.002}};
  honest.execution.figures["matrix_work"] = work;
  const std::string ok = builder().feedback(task, honest);
  CHECK_FALSE(has(ok, "Multiply-add work outside"));
  CHECK_FALSE(has(ok, "The targets do not count"));
  // Mixed: a tenth on mma.sync beside wgmma is shown, and within the rule nothing is refused.
  work.non_target_tensor_flops = 1e10;
  work.non_target_tensor_share = 0.1;
  work.families = {{"HMMA", "tensor", 1e10, 0.1}, {"FFMA", "fma", 2e8, 0.002}};
  honest.execution.figures["matrix_work"] = work;
  const std::string mixed = builder().feedback(task, honest);
  CHECK_HAS(mixed,
            "Multiply-add work outside the target instructions: mma.sync (HMMA) 10%, fp32 fma (FFMA) "
            "0.2% of the task's FLOPs.");
  CHECK_FALSE(has(mixed, "The targets do not count"));
}
