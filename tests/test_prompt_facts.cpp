// What the prompts tell a model about the harness, held to the harness: each statement of the system and
// task messages that the harness enforces is checked here against the code that enforces it (the NVRTC
// child and ptxas for ```cuda answers, the manifest parser, the static checks, the evaluator's settings,
// the architecture table). A test here fails when the prompt and the harness part ways.
#define DOCTEST_CONFIG_IMPLEMENT_WITH_MAIN
#include <doctest/doctest.h>

#include <cmath>
#include <filesystem>
#include <string>

#include <fmt/core.h>

#include "agent/knowledge_pack.hpp"
#include "agent/prompt_builder.hpp"
#include "evaluator/candidate.hpp"
#include "evaluator/evaluator.hpp"
#include "support/support.hpp"
#include "tasks/arch.hpp"
#include "tasks/task.hpp"

namespace fs = std::filesystem;
using namespace ptxbench;
using evaluator::Status;
using evaluator::Verdict;

namespace {

bool has(const std::string &text, const std::string &needle) {
  return text.find(needle) != std::string::npos;
}

#define CHECK_HAS(text, needle) \
  CHECK_MESSAGE(has(text, needle), "missing: " << (needle) << "\n--- in:\n" << (text))

const agent::PromptBuilder &builder() {
  static const agent::PromptBuilder b = [] {
    auto loaded = agent::PromptBuilder::load(fs::path(PTXBENCH_SOURCE_DIR) / "prompts");
    if (!loaded) FAIL(loaded.error());
    return std::move(loaded).value();
  }();
  return b;
}

// CPU stages only, with the NVRTC child this build wrote (no worker binary needed).
evaluator::EvaluatorSettings cuda_settings() {
  evaluator::EvaluatorSettings s = test::cpu_settings();
  s.nvrtc_child_path = fs::path(PTXBENCH_BINARY_DIR) / "evaluator" / "worker" / "ptxbench-nvrtc";
  return s;
}

/// A ```cuda answer for the GEMM task: `signature` is the kernel's qualifiers, name and parameter list
/// (entry `k`), `body` its statements, `params` the manifest's parameter list.
std::string cuda_answer(const std::string &prelude, const std::string &signature, const std::string &body,
                        const std::string &params) {
  return fmt::format(
      "```cuda\n{}\nextern \"C\" __global__ void {} {{\n{}\n}}\n```\n\n```json\n"
      "{{\"entry\": \"k\", \"grid\": [\"ceil_div(M, 128)\", 1, 1], \"block\": [384, 1, 1], \"params\": "
      "[{}]}}\n```\n",
      prelude, signature, body, params);
}

Verdict evaluate_gemm(const std::string &answer) {
  return evaluator::evaluate(test::repo_task("gemm_n7168_k5120"), answer, cuda_settings());
}

std::string compile_warnings(const Verdict &v) {
  std::string text;
  if (v.compile.figures.contains("warnings"))
    for (const auto &w : v.compile.figures["warnings"]) text += w.get<std::string>() + "\n";
  return text;
}

// A kernel whose warpgroups trade registers (the notes' producer/consumer split).
const char *const kSetmaxnregBody =
    "  if (threadIdx.x < 128) asm volatile(\"setmaxnreg.dec.sync.aligned.u32 40;\");\n"
    "  else asm volatile(\"setmaxnreg.inc.sync.aligned.u32 232;\");\n"
    "  if (threadIdx.x < n) c[blockIdx.x * 384 + threadIdx.x] = 1.f;";

std::string manifest_with(const std::string &tensor_map) {
  return fmt::format(
      R"({{"entry": "k", "grid": [1, 1, 1], "block": [128, 1, 1], "params": [{{"tensor": "O"}}, {}]}})",
      tensor_map);
}

/// The launch plan's error for a manifest on the attention forward task's headline workload ("" = resolved).
std::string launch_error(const std::string &manifest_json) {
  const tasks::Task &task = test::repo_task("mha_fwd_d128");
  auto m = evaluator::parse_manifest(manifest_json, task);
  if (!m) return m.error();
  auto plan = evaluator::resolve_launch(*m, task, task.workloads.front());
  return plan ? "" : plan.error();
}

}  // namespace

TEST_CASE(
    "cuda answers: __launch_bounds__(threads, 1) or __maxnreg__ set the register budget; both are refused") {
  const std::string system = builder().system_prompt(test::repo_task("gemm_n7168_k5120"));
  CHECK_HAS(system, "__launch_bounds__(threads, 1)");
  CHECK_HAS(system, "__maxnreg__(N) (PTX .maxnreg), not both on one kernel (NVRTC refuses");

  const std::string params = R"({"tensor": "C"}, {"scalar": "N"})";
  const std::string args = "(float *c, int n)";
  // setmaxnreg honoured with either budget...
  for (const char *qualifier : {"__launch_bounds__(384, 1)", "__maxnreg__(168)"}) {
    CAPTURE(qualifier);
    Verdict v = evaluate_gemm(cuda_answer("", std::string(qualifier) + " k" + args, kSetmaxnregBody, params));
    REQUIRE_MESSAGE(v.compile.status == Status::ok, v.compile.summary);
    CHECK(v.compile.figures["registers"].get<int>() <= 168);
    CHECK_FALSE(has(compile_warnings(v), "setmaxnreg"));
  }
  // ...and ignored with .maxntid alone, as the prompt says.
  Verdict bare = evaluate_gemm(cuda_answer("", "__launch_bounds__(384) k" + args, kSetmaxnregBody, params));
  REQUIRE_MESSAGE(bare.compile.status == Status::ok, bare.compile.summary);
  CHECK_HAS(compile_warnings(bare), "setmaxnreg");
  // Both qualifiers on one kernel: NVRTC's error reaches the model.
  Verdict both = evaluate_gemm(
      cuda_answer("", "__launch_bounds__(384, 1) __maxnreg__(168) k" + args, kSetmaxnregBody, params));
  CHECK(both.status == Status::compile_error);
  CHECK_HAS(both.compile.summary, "cannot be applied to the same kernel");
  // The setmaxnreg note says the same in PTX terms.
  CHECK_HAS(system, "`.maxntid` alone (`__launch_bounds__(384)`) is not enough");
}

TEST_CASE("cuda answers: int, unsigned and long long parameters take symbols, float an f32 scalar") {
  const std::string system = builder().system_prompt(test::repo_task("gemm_n7168_k5120"));
  CHECK_HAS(system, "In CUDA, int and unsigned parameters become .u32,\n");
  CHECK_HAS(system, "long long .u64 and float .f32, all accepted; short, bool and double are not.");
  const std::string body = "  if (threadIdx.x < n) c[threadIdx.x] = 1.f;";
  const std::string params = R"({"tensor": "C"}, {"scalar": "N"}, {"scalar": "M"}, {"scalar": "K"})";
  Verdict ok = evaluate_gemm(
      cuda_answer("", "__launch_bounds__(384, 1) k(float *c, int n, unsigned m, long long k)", body, params));
  CHECK_MESSAGE(ok.static_checks.status == Status::ok, ok.static_checks.summary);
  for (const char *type : {"short", "bool", "double"}) {
    CAPTURE(type);
    Verdict bad = evaluate_gemm(cuda_answer(
        "", fmt::format("__launch_bounds__(384, 1) k(float *c, {} n, unsigned m, long long k)", type), body,
        params));
    CHECK(bad.status == Status::static_error);
  }
  // An f32 task scalar: float is accepted, double is not.
  const tasks::Task &attention = test::repo_task("mha_fwd_d128");
  const std::string manifest =
      "```json\n{\"entry\": \"k\", \"grid\": [1, 1, 1], \"block\": [128, 1, 1], \"params\": [{\"tensor\": "
      "\"O\"}, {\"scalar\": \"softmax_scale\"}]}\n```\n";
  for (const auto &[type, status] :
       {std::pair{"float", Status::ok}, std::pair{"double", Status::static_error}}) {
    CAPTURE(type);
    const std::string answer = fmt::format(
        "```cuda\nextern \"C\" __global__ void k(float *o, {} s) {{ o[threadIdx.x] = s; }}\n```\n\n{}", type,
        manifest);
    Verdict v = evaluator::evaluate(attention, answer, cuda_settings());
    CHECK_MESSAGE(v.static_checks.status == status, v.static_checks.summary);
  }
}

TEST_CASE("cuda answers: the headers and macros the system message names compile; host code does not") {
  const std::string system = builder().system_prompt(test::repo_task("gemm_n7168_k5120"));
  CHECK_HAS(system, "<cuda_bf16.h>, <cuda_fp16.h>, <cuda/ptx>, <cuda/barrier>, <cooperative_groups.h>,");
  CHECK_HAS(system,
            "<cuda.h> for CUtensorMap), and so do <cstdint>, <cmath>, <cfloat>, <climits>, <type_traits>");
  const std::string prelude =
      "#include <cuda_bf16.h>\n#include <cuda_fp16.h>\n#include <cuda/ptx>\n#include <cuda/barrier>\n"
      "#include <cooperative_groups.h>\n#include <cuda.h>\n#include <cstdint>\n#include <cmath>\n"
      "#include <cfloat>\n#include <climits>\n#include <type_traits>\n";
  const std::string body =
      "  static_assert(sizeof(CUtensorMap) == 128 && std::is_same_v<std::uint32_t, unsigned>);\n"
      "  float x = __bfloat162float(__float2bfloat16(1.5f)) + __half2float(__float2half(0.5f));\n"
      "  x = fmaxf(expf(x) + exp2f(x) + __expf(x), -FLT_MAX) + (n > INT_MAX - 1 ? INFINITY : 0.f);\n"
      "  if (threadIdx.x < n) c[threadIdx.x] = x;";
  const std::string params = R"({"tensor": "C"}, {"scalar": "N"})";
  Verdict v = evaluate_gemm(cuda_answer(prelude, "k(float *c, int n)", body, params));
  CHECK_MESSAGE(v.compile.status == Status::ok, v.compile.summary);
  // Math functions and the macros need no include.
  Verdict bare =
      evaluate_gemm(cuda_answer("", "k(float *c, int n)",
                                "  if (threadIdx.x < n) c[threadIdx.x] = fmaxf(expf(1.f), FLT_MAX) + "
                                "exp2f(2.f) + __expf(0.f) + INFINITY;",
                                params));
  CHECK_MESSAGE(bare.compile.status == Status::ok, bare.compile.summary);
  Verdict host = evaluate_gemm(cuda_answer("#include <iostream>", "k(float *c, int n)", "", params));
  CHECK(host.status == Status::compile_error);
}

TEST_CASE("tensor maps: box entries per map dimension, expressions in dims and box, the swizzle span") {
  const std::string system = builder().system_prompt(test::repo_task("mha_fwd_d128"));
  CHECK_HAS(system,
            "with exactly one entry per map dimension (4 for a [B, H, S, D] tensor without \"dims\"),");
  CHECK_HAS(system, "\"dims\" and \"box\" entries are integer expressions");
  CHECK_HAS(system, "\"swizzle\" is \"none\" (the default: no span limit)");
  CHECK_HAS(system, R"((e.g. ["D", "S", "B*H"] for a [B, H, S, D] tensor; every)");
  // A [B, H, S, D] tensor is a 4-D map: 4 box entries, not 2.
  CHECK(launch_error(manifest_with(R"({"tensor_map": "Q", "box": [64, 128, 1, 1], "swizzle": "128B"})")) ==
        "");
  CHECK_HAS(launch_error(manifest_with(R"({"tensor_map": "Q", "box": [64, 128], "swizzle": "128B"})")),
            "has 2 dimensions but the tensor (view) has 4");
  // The prompt's example view, with expressions in dims and box.
  CHECK(
      launch_error(manifest_with(
          R"({"tensor_map": "Q", "dims": ["D", "S", "B*H"], "box": ["D / 2", 128, 1], "swizzle": "128B"})")) ==
      "");
  CHECK_HAS(
      launch_error(manifest_with(R"({"tensor_map": "Q", "dims": ["D", "S", "B*H"], "box": [64, 128]})")),
      "has 2 dimensions but the tensor (view) has 3");
  // "none" has no span limit; a swizzle caps box[0] at its span; 16-byte rows and 1..256 always.
  CHECK(launch_error(manifest_with(R"({"tensor_map": "Q", "box": [128, 64, 1, 1], "swizzle": "none"})")) ==
        "");
  CHECK(launch_error(manifest_with(R"({"tensor_map": "Q", "box": [128, 64, 1, 1]})")) == "");
  CHECK_HAS(launch_error(manifest_with(R"({"tensor_map": "Q", "box": [128, 64, 1, 1], "swizzle": "128B"})")),
            "exceed the 128B swizzle span");
  CHECK_HAS(launch_error(manifest_with(R"({"tensor_map": "Q", "box": [4, 64, 1, 1]})")),
            "not a multiple of 16");
  CHECK_HAS(launch_error(manifest_with(R"({"tensor_map": "Q", "box": [64, 257, 1, 1]})")), "outside 1..256");
}

TEST_CASE("clusters: the grid counts blocks and is a multiple of the cluster; at most 16 blocks") {
  const std::string system = builder().system_prompt(test::repo_task("gemm_n7168_k5120"));
  CHECK_HAS(system, "\"grid\" still counts blocks and must be a multiple of\n\"cluster\" in each dimension");
  CHECK_HAS(system, "a cluster has at most 16 blocks");
  const auto with_cluster = [](const char *grid, const char *cluster) {
    return launch_error(fmt::format(
        R"({{"entry": "k", "grid": {}, "block": [128, 1, 1], "cluster": {}, "params": [{{"tensor": "O"}}]}})",
        grid, cluster));
  };
  CHECK(with_cluster("[64, 2, 1]", "[2, 1, 1]") == "");
  CHECK(with_cluster("[64, 2, 1]", "[16, 1, 1]") == "");
  CHECK_HAS(with_cluster("[63, 2, 1]", "[2, 1, 1]"), "is not a multiple of the cluster's");
  CHECK_HAS(with_cluster("[64, 2, 1]", "[16, 2, 1]"), "32 CTAs per cluster");
}

TEST_CASE("axis 2: the target rule states the evaluator's thresholds, once, for the targets it applies to") {
  const evaluator::EvaluatorSettings settings;
  const std::string flops_rule =
      fmt::format("must do at least {:g}% of the workload's FLOPs", 100 * settings.min_target_work_share);
  const std::string bytes_rule = fmt::format("must deliver at least {:g}% of the bytes the kernel reads from",
                                             100 * settings.min_tma_byte_share);
  for (const char *id : {"gemm_n7168_k5120", "mha_fwd_d128", "mha_bwd_d128_causal"}) {
    CAPTURE(id);
    const tasks::Task &task = test::repo_task(id);
    const std::string system = builder().system_prompt(task);
    CHECK_HAS(system, "the wgmma.mma_async instructions " + flops_rule);
    CHECK_HAS(system, "the TMA loads " + bytes_rule);
    const std::string user = builder().task_prompt(task);
    CHECK_HAS(user, "Each is judged by the axis 2 rule of the system message.");
    CHECK_FALSE(has(user, "critical path"));
    CHECK_FALSE(has(user, flops_rule));  // stated once, in the system message
  }
  // tcgen05.mma has no FLOP share (its SASS opcode carries no shape): no FLOP rule there, the TMA rule stays.
  const std::string blackwell = builder().system_prompt(test::repo_task("mha_fwd_d128_sm100"));
  CHECK_FALSE(has(blackwell, flops_rule));
  CHECK_HAS(blackwell, bytes_rule);
  // Beside every matrix target, tcgen05.mma included: the bound on work outside the targets, with the
  // evaluator's threshold and what it counts (evaluator/target_work.hpp).
  const std::string repeated_rule = fmt::format(
      "beside them, multiply-add instructions outside the targets (other tensor-core instructions "
      "such as mma.sync, and fma on the CUDA cores: FFMA, HFMA2, DFMA) may do at most {:g}% of the "
      "workload's FLOPs",
      100 * settings.redundant_work.max_non_target_share);
  for (const char *id : {"gemm_n7168_k5120", "mha_bwd_d128_causal", "mha_fwd_d128_sm100"}) {
    CAPTURE(id);
    const std::string system = builder().system_prompt(test::repo_task(id));
    CHECK_HAS(system, repeated_rule);
    CHECK_HAS(system, "the target's results thrown away or multiplied by 0, does not count");
  }
}

TEST_CASE("one peak figure: the task prompt's floor, the arch table and the arch-figures pack agree") {
  const tasks::PeakRates &h200 = *tasks::arch_facts("sm_90a")->peaks;
  const tasks::Task &gemm = test::repo_task("gemm_n7168_k5120");
  const std::string user = builder().task_prompt(gemm);
  CHECK_HAS(user, fmt::format("The floors above assume about {:.0f} TFLOP/s of dense bf16",
                              h200.bf16_flops_per_s / 1e12));
  const double floor_ms = 2.0 * 8192 * 7168 * 5120 / h200.bf16_flops_per_s * 1e3;
  CHECK_HAS(user, fmt::format("physical floor ~{:.3f} ms", floor_ms));
  const std::string pack = builder().packs().at("arch-figures").text;
  CHECK_HAS(pack, fmt::format("about {:.0f} TFLOP/s", h200.bf16_flops_per_s / 1e12));
  CHECK_HAS(pack, fmt::format("about {:.0f} TFLOP/s", h200.fp8_flops_per_s / 1e12));
  CHECK_FALSE(has(pack, "about 989"));
}

TEST_CASE("task texts: the tolerance rationale once per task, LSE masked only where there is a mask") {
  for (const char *id : {"mha_bwd_d128", "mha_bwd_d128_causal", "mha_bwd_d64"}) {
    CAPTURE(id);
    const tasks::Task &task = test::repo_task(id);
    REQUIRE_FALSE(task.tolerance_note.empty());
    const std::string user = builder().task_prompt(task);
    const auto first = user.find(task.tolerance_note);
    REQUIRE(first != std::string::npos);
    CHECK(user.find(task.tolerance_note, first + 1) == std::string::npos);
    CHECK(user.find("spiky inputs a single term") == user.rfind("spiky inputs a single term"));
  }
  const auto all = tasks::load_task_dir(tasks::default_task_dir());
  REQUIRE(all.has_value());
  for (const tasks::Task &task : *all) {
    CAPTURE(task.id);
    const std::string user = builder().task_prompt(task);
    CHECK_FALSE(has(user, "(masked)"));
    if (task.family != tasks::Family::gemm && !task.causal) CHECK_FALSE(has(user, "masked scores"));
    if (task.family != tasks::Family::gemm && task.causal) CHECK_HAS(user, "scaled, masked scores");
  }
  const std::string causal = builder().task_prompt(test::repo_task("mha_fwd_d128_causal"));
  CHECK_HAS(causal, "Row i averages only its i + 1 keys");
}

TEST_CASE("nothing a model reads names internal tests, sessions or measurement history") {
  const auto clean = [](const std::string &what, const std::string &text) {
    CAPTURE(what);
    for (const char *word : {"Measured", "test_", "session", "seed paper", "cuDNN's own backward needed"}) {
      CAPTURE(word);
      CHECK_FALSE(has(text, word));
    }
  };
  std::vector<std::string> all_packs;
  for (const auto &[name, pack] : builder().packs()) all_packs.push_back(name);
  const auto all = tasks::load_task_dir(tasks::default_task_dir());
  REQUIRE(all.has_value());
  for (const tasks::Task &task : *all) {
    clean(task.id + " system", builder().system_prompt(task, {true, all_packs}));
    clean(task.id + " task", builder().task_prompt(task));
  }
}

TEST_CASE("buffers: the alignment the prompt promises is the one the worker's guard regions keep") {
  const std::string system = builder().system_prompt(test::repo_task("gemm_n7168_k5120"));
  const std::string promise = std::to_string(protocol::kBufferAlignment) + "-byte aligned";
  CHECK_MESSAGE(system.find("a task tensor: its device address, " + promise) != std::string::npos, system);
  CHECK(system.find("), " + promise + ", guard bytes around it") != std::string::npos);  // the workspace
  // cudaMalloc returns kBufferAlignment-aligned bases; the data starts one rounded guard after it.
  for (std::size_t guard :
       {std::size_t{0}, std::size_t{1}, std::size_t{255}, std::size_t{4096}, std::size_t{4097}}) {
    CAPTURE(guard);
    const std::size_t placed = protocol::aligned_guard_bytes(guard);
    CHECK(placed % protocol::kBufferAlignment == 0);
    CHECK(placed >= guard);
    CHECK(placed < guard + protocol::kBufferAlignment);
  }
  CHECK(protocol::aligned_guard_bytes(protocol::CorrectnessPolicy{}.guard_bytes) ==
        protocol::CorrectnessPolicy{}.guard_bytes);
}
