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

#include "tests/prompt_fixtures.hpp"

using namespace ptxbench::test;

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
       json::array({{{"name", "M=4096"}, {"trials", 3}, {"passed", 3}, {"deterministic", true}},
                    failing_gemm_workload({{"nan_count", 512},
                                           {"unwritten_count", 512},
                                           {"guard_damage", 64},  // bytes, as the worker counts them
                                           {"inputs_mutated", false}})})}};
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
