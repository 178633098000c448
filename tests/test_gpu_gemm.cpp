// GPU tests of the GEMM evaluation (label gpu): the reference GEMM against
// cuBLASLt, and fixture candidates (tests/data/gpu/*.response.md, emitted by
// make_fixtures.sh) through the whole evaluator: correct, wrong, refused
// launch, endless loop (and the next evaluation still works), dead branch
// counted by CUPTI. Exit 77 (skipped) on machines without a usable GPU.
#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <string>

#include <nlohmann/json.hpp>

#include "evaluator/evaluator.hpp"
#include "evaluator/worker_client.hpp"
#include "util/files.hpp"
#include "util/subprocess.hpp"

namespace ev = ptxbench::evaluator;
namespace tasks = ptxbench::tasks;
using nlohmann::json;

namespace {

const std::filesystem::path kWorker =
    std::filesystem::path(PTXBENCH_BINARY_DIR) / "evaluator/worker/ptxbench-worker";

/// A small bf16 GEMM task: two workloads (one ragged), an FFMA target that runs
/// and a BREV target that only the dead-branch fixture has (never taken).
tasks::Task small_gemm_task() {
  tasks::Task t;
  t.id = "test_gemm_small";
  t.family = tasks::Family::gemm;
  t.arch = "sm_90a";
  t.title = "test GEMM";
  t.description = "C = A * B^T";
  t.tensors = {
      {"A", tasks::DType::bf16, {"M", "K"}, tasks::TensorRole::input, tasks::Distribution::normal, ""},
      {"B", tasks::DType::bf16, {"N", "K"}, tasks::TensorRole::input, tasks::Distribution::normal, ""},
      {"C", tasks::DType::bf16, {"M", "N"}, tasks::TensorRole::output, tasks::Distribution::normal, ""}};
  t.symbols = {"M", "N", "K"};
  t.workloads = {{"M=256", {{"M", 256}, {"N", 192}, {"K", 128}}},
                 {"M=100", {{"M", 100}, {"N", 192}, {"K", 128}}}};
  tasks::TargetInstruction ffma;
  ffma.name = "ffma";
  ffma.ptx_mnemonic = "fma.rn.f32";
  ffma.sass_families = {"FFMA"};
  tasks::TargetInstruction brev;
  brev.name = "dead_brev";
  brev.ptx_mnemonic = "brev.b32";
  brev.sass_families = {"BREV"};
  t.targets = {ffma, brev};
  t.reference = "cublaslt";
  t.tolerances["C"] = {0.05, 0.0078125};  // bf16 output rounding of values ~ sqrt(128)
  t.flops = "2*M*N*K";
  t.bytes = "2*(M*K + N*K + M*N)";
  return t;
}

/// The same task with one workload large enough that the naive FFMA kernel runs for about a millisecond,
/// as the shown workloads of real tasks do: profiling and PC sampling see a launch of realistic length.
tasks::Task profiled_gemm_task() {
  tasks::Task t = small_gemm_task();
  t.id = "test_gemm_profiled";
  t.workloads = {{"M=2048", {{"M", 2048}, {"N", 1024}, {"K", 512}}}};
  return t;
}

ev::EvaluatorSettings fast_settings() {
  ev::EvaluatorSettings s;
  s.worker_path = kWorker;
  s.timing.min_seconds = 0.05;
  s.timing.max_seconds = 1.0;
  s.timing.min_samples = 5;
  s.worker.wall = std::chrono::milliseconds(120'000);
  s.worker.kernel_hang = std::chrono::milliseconds(3'000);
  s.correctness.base_seed = 12345;
  return s;
}

std::string fixture(const std::string &name) {
  auto text =
      ptxbench::util::read_file(std::filesystem::path(PTXBENCH_TEST_DATA) / "gpu" / (name + ".response.md"));
  REQUIRE_MESSAGE(text.has_value(), "missing fixture " << name);
  return *text;
}

const json *target_named(const ev::Verdict &v, const std::string &name) {
  for (const auto &t : v.execution.figures["targets"])
    if (t["name"] == name) return &t;
  return nullptr;
}

}  // namespace

TEST_CASE("reference GEMM agrees with cuBLASLt (bf16, ragged, core-sized, fp8 with scales)") {
  auto r = ev::run_worker_command(kWorker, ev::WorkerCommand::check_reference(),
                                  ev::WorkerPlace{.home = "/tmp",
                                                  .wall = std::chrono::milliseconds(120'000),
                                                  .sandboxed = false,
                                                  .working_directory = false});
  REQUIRE(r.has_value());
  INFO("stderr: " << r->stderr_text);
  REQUIRE(r->exit_code == 0);
  const json out = json::parse(r->stdout_text);
  REQUIRE(out["cases"].size() == 4);
  for (const auto &c : out["cases"]) {
    INFO(c.dump());
    if (c.contains("error")) {
      FAIL_CHECK("cuBLASLt failed on " << c["case"] << ": " << c["error"]);
      continue;
    }
    CHECK(c["mismatches"] == 0);
    CHECK(c["unwritten"] == 0);
    CHECK(c["nan_count"] == 0);
    // No bound on max_rel_error: near-zero outputs make it large; mismatches already apply atol + rtol.
    CHECK(c["max_abs_error"].get<double>() > 0);  // two different computations, not one buffer read twice
  }
}

TEST_CASE("a correct naive kernel is correct, timed against cuBLASLt, and its FFMA counted") {
  const auto v = ev::evaluate(small_gemm_task(), fixture("naive_ok"), fast_settings());
  INFO(v.to_json().dump(1));
  CHECK(v.correctness.status == ev::Status::ok);
  CHECK(v.axes.correct == true);
  REQUIRE(v.correctness.figures["workloads"].size() == 2);
  for (const auto &w : v.correctness.figures["workloads"]) {
    CHECK(w["passed"] == 3);
    CHECK(w["deterministic"] == true);
    CHECK(w["unwritten_count"] == 0);
    CHECK(w["guard_damage"] == 0);
    CHECK(w["max_abs_error"].get<double>() > 0);
  }
  CHECK(v.timing.status == ev::Status::ok);
  REQUIRE(v.axes.speedup.has_value());
  CHECK(*v.axes.speedup > 0);
  CHECK(v.timing.figures["library"]["name"] == "cuBLASLt");
  REQUIRE(v.execution.status == ev::Status::ok);
  const json *ffma = target_named(v, "ffma");
  REQUIRE(ffma != nullptr);
  CHECK((*ffma)["executed"] == true);
  // 100 x 192 outputs x 128 k-steps, one FFMA each (smallest workload), in warps of 32 threads.
  CHECK((*ffma)["threads_on"].get<std::uint64_t>() >= 100ull * 192 * 128);
  const json *brev = target_named(v, "dead_brev");
  REQUIRE(brev != nullptr);
  CHECK((*brev)["present_in_sass"] == false);
  CHECK(v.axes.targets_executed == false);
  CHECK(v.environment.contains("gpu_name"));
}

TEST_CASE(
    "profile: an FFMA kernel keeps the FMA pipe busy and the tensor pipe idle; cuBLASLt's uses tensor "
    "cores") {
  const auto v = ev::evaluate(profiled_gemm_task(), fixture("naive_ok"), fast_settings());
  INFO(v.profiling.summary);
  REQUIRE(v.profiling.status == ev::Status::ok);
  const auto p = v.kernel_profile();
  REQUIRE(p.has_value());
  CHECK(p->workload == "M=2048");
  CHECK(p->passes > 0);
  const auto *tensor = p->find("sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_active");
  const auto *fma = p->find("sm__pipe_fma_cycles_active.avg.pct_of_peak_sustained_active");
  REQUIRE(tensor != nullptr);
  REQUIRE(fma != nullptr);
  CHECK(tensor->value < 0.5);  // no MMA instruction in this kernel
  CHECK(fma->value > 0.5);
  REQUIRE(tensor->library.has_value());
  CHECK(*tensor->library > 1.0);
  // What the SMs held cannot exceed what the launch allows.
  const auto *achieved = p->find("sm__warps_active.avg.pct_of_peak_sustained_active");
  REQUIRE(achieved != nullptr);
  CHECK(achieved->value <= p->occupancy.theoretical_pct + 1.0);
  CHECK(p->occupancy.blocks_per_sm > 0);
  // PC sampling: the warps' states, and the kernel's own PTX lines with their text; the inner loop is hot.
  const auto &s = p->pc_sampling;
  INFO(s.unavailable, " ", s.line_error, " (period 2^", s.period_log2, ", ", s.launches, " launches, ",
       s.dropped_samples, " dropped; profile phases ",
       v.profiling.figures.value("phase_seconds", json()).dump(), ")");
  if (s.samples == 0) {  // why not: the same kernel once more with the continuous-mode retry
    auto settings = fast_settings();
    settings.profile.pc_sampling_continuous_retry = true;
    const auto again = ev::evaluate(profiled_gemm_task(), fixture("naive_ok"), settings).kernel_profile();
    if (again)
      MESSAGE("with the continuous retry: ", again->pc_sampling.samples, " samples; ",
              again->pc_sampling.unavailable);
  }
  REQUIRE(s.samples > 0);
  CHECK(!s.reasons.empty());
  CHECK(s.line_source == "kernel.ptx");
  REQUIRE(!s.hot_lines.empty());
  // The kernel waits on its loads (L1 near its peak): the hottest line is one of the unrolled k-loop's
  // loads, the bf16 conversions waiting on them, or the FMAs.
  std::string lines;
  for (const auto &h : s.hot_lines) lines += "\n  line " + std::to_string(h.line) + ": " + h.text;
  INFO("hot lines:", lines);
  const std::string &hottest = s.hot_lines.front().text;
  CHECK((hottest.find("ld.global.u16") != std::string::npos ||
         hottest.find("cvt.f32.bf16") != std::string::npos ||
         hottest.find("fma.rn.f32") != std::string::npos));
}

TEST_CASE("a wrong column is incorrect with the first mismatch in that column") {
  const auto v = ev::evaluate(small_gemm_task(), fixture("wrong_column"), fast_settings());
  INFO(v.to_json().dump(1));
  CHECK(v.status == ev::Status::incorrect);
  CHECK(v.axes.correct == false);
  const auto &w = v.correctness.figures["workloads"][0];
  REQUIRE(w["first_mismatch"].is_object());
  CHECK(w["first_mismatch"]["tensor"] == "C");
  // Column 5 is scaled by 1.5: the first mismatch is in column 5 of an early row (row 0 unless
  // that element happens to be within tolerance of zero).
  CHECK(w["first_mismatch"]["index"][1] == 5);
  CHECK(w["first_mismatch"]["index"][0].get<int>() <= 2);
  // The first failing trial ends the stage: ~all of column 5 (256 rows) in that one trial.
  CHECK(w["trials"] == 1);
  CHECK(w["trials_planned"] == 3);
  CHECK(v.correctness.figures["stopped_early"] == true);
  CHECK(w["mismatches"].get<std::uint64_t>() >= 250);
  CHECK(w["unwritten_count"] == 0);
  CHECK(v.timing.status == ev::Status::skipped);
  CHECK(v.execution.status == ev::Status::ok);  // the axes stay separate (cheap to count: counted)

  // all_trials: every trial runs and the counts cover them all.
  auto all = fast_settings();
  all.correctness.all_trials = true;
  const auto v3 = ev::evaluate(small_gemm_task(), fixture("wrong_column"), all);
  CHECK(v3.status == ev::Status::incorrect);
  const auto &w3 = v3.correctness.figures["workloads"][0];
  CHECK(w3["trials"] == 3);
  CHECK(w3["mismatches"].get<std::uint64_t>() >= 3 * 250);
  CHECK(v3.settings["correctness"]["all_trials"] == true);
}

TEST_CASE("a block needing more registers than the device has is a launch_error naming the limit") {
  // 174 registers x 1024 threads > 65536 (the PTX has no launch bounds): known from ptxas's register
  // count and the manifest's block, so it is reported before any launch, as a launch_error.
  const auto v = ev::evaluate(small_gemm_task(), fixture("launch_error"), fast_settings());
  INFO(v.to_json().dump(1));
  CHECK(v.status == ev::Status::launch_error);
  CHECK(v.compile.status == ev::Status::launch_error);
  CHECK(v.compile.summary.find("1024 threads") != std::string::npos);
  CHECK(v.compile.summary.find("registers") != std::string::npos);
  CHECK(v.correctness.status == ev::Status::skipped);
  CHECK(v.timing.status == ev::Status::skipped);
}

TEST_CASE("an endless loop times out within the hang limit, and the next evaluation still works") {
  auto settings = fast_settings();
  settings.run_sanitizer = false;
  const auto start = std::chrono::steady_clock::now();
  const auto v = ev::evaluate(small_gemm_task(), fixture("endless_loop"), settings);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  INFO(v.to_json().dump(1));
  CHECK(v.status == ev::Status::timeout);
  CHECK(v.correctness.status == ev::Status::timeout);
  CHECK(seconds < 30.0);
  const auto next = ev::evaluate(small_gemm_task(), fixture("naive_ok"), fast_settings());
  CHECK(next.correctness.status == ev::Status::ok);
}

TEST_CASE("CUPTI: an instruction on a dead branch is present in SASS but never executed") {
  const auto v = ev::evaluate(small_gemm_task(), fixture("dead_branch"), fast_settings());
  INFO(v.to_json().dump(1));
  CHECK(v.correctness.status == ev::Status::ok);
  REQUIRE(v.execution.status == ev::Status::ok);
  const json *brev = target_named(v, "dead_brev");
  REQUIRE(brev != nullptr);
  CHECK((*brev)["present_in_sass"] == true);
  // ptxas may predicate the branch: warps then issue BREV (warp_executions > 0) with every thread off.
  CHECK((*brev)["threads_on"] == 0);
  CHECK((*brev)["executed"] == false);
  const json *ffma = target_named(v, "ffma");
  REQUIRE(ffma != nullptr);
  CHECK((*ffma)["executed"] == true);
  CHECK(v.axes.targets_executed == false);
}

int main(int argc, char **argv) {
  // No usable GPU: skipped. A GPU without the worker binary is a broken build: failed.
  if (const std::string why = ev::gpu_driver_unavailable_reason(0); !why.empty()) {
    std::printf("SKIPPED: %s\n", why.c_str());
    return 77;
  }
  if (const std::string why = ev::gpu_unavailable_reason(fast_settings()); !why.empty()) {
    std::printf("FAILED: a GPU is present but %s\n", why.c_str());
    return 1;
  }
  doctest::Context context(argc, argv);
  return context.run();
}
