// The stage table (evaluator/protocol/stages.hpp) and what reads it: the verdict's status order, the
// stages a failure skips (skip_from), those skipped without a GPU, the worker's running order. The worker
// client (evaluator/worker_client.hpp) with stand-in worker scripts: its command lines, a crashed or
// GPU-less worker charged to a stage or to the machine (the typed MachineFault), a pre-started worker's
// protocol lines.
#include <doctest/doctest.h>
#include <sys/stat.h>

#include <chrono>
#include <filesystem>
#include <string>
#include <vector>

#include "evaluator/detail/worker_pool.hpp"
#include "evaluator/protocol/stages.hpp"
#include "evaluator/verdict.hpp"
#include "evaluator/verdict_cache.hpp"
#include "evaluator/worker_client.hpp"
#include "util/files.hpp"

namespace ev = ptxbench::evaluator;
namespace pr = ptxbench::protocol;

TEST_CASE("stage table: one row per stage, in the verdict's status order") {
  std::vector<std::string> names;
  for (const auto &row : pr::kStageTable) names.emplace_back(row.name);
  CHECK(names == std::vector<std::string>{"parse", "static", "compile", "correctness", "execution", "timing",
                                          "sanitizer", "generalization", "profile"});
  for (const auto &row : pr::kStageTable) {
    CHECK(pr::stage_name(row.stage) == row.name);
    CHECK(pr::stage_from_name(row.name) == row.stage);
  }
  CHECK_FALSE(pr::stage_from_name("exec"));
  std::vector<std::string> deciding;
  for (const auto &row : pr::kStageTable)
    if (row.decides_status) deciding.emplace_back(row.name);
  CHECK(deciding ==
        std::vector<std::string>{"parse", "static", "compile", "correctness", "execution", "timing"});
}

TEST_CASE("stage table: the worker runs timing before execution, generalization and profile last") {
  std::vector<std::string> names(pr::kGpuStageNames.begin(), pr::kGpuStageNames.end());
  CHECK(names == std::vector<std::string>{"correctness", "timing", "execution", "generalization", "profile"});
  CHECK(pr::kWorkerStages.front() == pr::Stage::correctness);
  CHECK(pr::kWorkerStages.back() == pr::Stage::profile);
}

TEST_CASE("verdict: every stage of the table has its slot and its key") {
  ev::Verdict v;
  v.generalizes = ev::Generalization{};
  v.profiling.summary = "ran";
  for (const auto &row : pr::kStageTable) v.stage(row.stage).summary = std::string(row.name);
  CHECK(v.static_checks.summary == "static");
  CHECK(v.profiling.summary == "profile");
  const auto j = v.to_json();
  for (const auto &row : pr::kStageTable) CHECK(j["stages"][std::string(row.name)]["summary"] == row.name);
  const auto back = ev::Verdict::from_json(j);
  for (const auto &row : pr::kStageTable) CHECK(back.stage(row.stage).summary == row.name);
  // Without hidden workloads or a profile, those two keys are absent (older verdicts read the same).
  ev::Verdict plain;
  CHECK_FALSE(plain.to_json()["stages"].contains("generalization"));
  CHECK_FALSE(plain.to_json()["stages"].contains("profile"));
  CHECK(plain.to_json()["stages"].size() == 7);
}

TEST_CASE("skip_from: a failed stage skips the later stages of the status order and the sanitizer") {
  ev::Verdict v;
  v.generalizes = ev::Generalization{};
  v.skip_gpu_stages("not run yet");
  v.parse.status = ev::Status::ok;
  v.static_checks.status = ev::Status::ok;
  v.compile.status = ev::Status::compile_error;
  v.skip_from(pr::Stage::compile);
  for (const ev::StageResult *s : {&v.correctness, &v.execution, &v.timing, &v.sanitizer}) {
    CHECK(s->status == ev::Status::skipped);
    CHECK(s->summary == "not run: an earlier stage ended with compile_error");
  }
  CHECK(v.parse.status == ev::Status::ok);  // before it: untouched
  CHECK(v.static_checks.summary.empty());
  CHECK(v.generalization.summary == "not run yet");  // beside the order: left as it was
  CHECK(v.profiling.summary.empty());
  v.finalize_status();
  CHECK(v.status == ev::Status::compile_error);
}

TEST_CASE("skip_gpu_stages: the GPU stages and the sanitizer, the hidden workloads' result unless told") {
  ev::Verdict v;
  v.generalizes = ev::Generalization{};
  v.skip_gpu_stages("no GPU here");
  for (const ev::StageResult *s : {&v.correctness, &v.execution, &v.timing, &v.sanitizer, &v.generalization})
    CHECK(s->summary == "no GPU here");
  CHECK(v.profiling.summary.empty());  // the profile stage stays absent from the verdict
  CHECK(v.generalizes->reason == "not checked: no GPU here");

  ev::Verdict shown;
  shown.generalizes = ev::Generalization{};
  shown.generalization.summary = "not run yet";
  shown.skip_gpu_stages("disabled by --no-gpu", ev::Verdict::GpuSkip::shown_workloads);
  CHECK(shown.timing.summary == "disabled by --no-gpu");
  CHECK(shown.sanitizer.summary == "disabled by --no-gpu");
  CHECK(shown.generalization.summary == "not run yet");
  CHECK(shown.generalizes->reason.empty());
}

// ---- the worker client ---------------------------------------------------------------------------

namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;

/// A stand-in for ptxbench-worker (bash: the channel's descriptor number is above 9).
fs::path fake_worker(const fs::path &dir, const std::string &name, const std::string &body) {
  const fs::path p = dir / name;
  REQUIRE(ptxbench::util::write_file_atomic(p, "#!/bin/bash\n" + body));
  ::chmod(p.c_str(), 0755);
  return p;
}

ev::WorkerPlace place_in(const fs::path &dir) {
  return ev::WorkerPlace{.home = dir, .wall = 10'000ms, .cpu_seconds = 30};
}

/// A scratch folder with an (empty) job file and where its result goes.
struct JobDir {
  ptxbench::util::TempDir dir{"ptxbench-test"};
  fs::path job = dir.path() / "job.json", result = dir.path() / "result.json";
  JobDir() { REQUIRE(ptxbench::util::write_file_atomic(job, "{}")); }
};

const std::vector<std::string> kWanted = {"correctness", "execution", "timing"};

}  // namespace

TEST_CASE("worker client: the one command line per mode") {
  const fs::path w = "/opt/ptxbench-worker";
  using C = ev::WorkerCommand;
  CHECK(ev::worker_argv(w, C::one_job("/j/job.json", "/j/result.json")) ==
        std::vector<std::string>{w.string(), "--job", "/j/job.json", "--result", "/j/result.json"});
  CHECK(ev::worker_argv(w, C::prestart("/locks/gpu1.lock", true, true)) ==
        std::vector<std::string>{w.string(), "--prestart", "--device", "0", "--lock", "/locks/gpu1.lock",
                                 "--prewarm-cupti", "--warm-cublaslt"});
  CHECK(ev::worker_argv(w, C::prestart("", false, false)) ==
        std::vector<std::string>{w.string(), "--prestart", "--device", "0"});
  CHECK(ev::worker_argv(w, C::probe()) == std::vector<std::string>{w.string(), "--probe"});
  CHECK(ev::worker_argv(w, C::probe(0)) == std::vector<std::string>{w.string(), "--probe", "--device", "0"});
  CHECK(ev::worker_argv(w, C::check_reference()) ==
        std::vector<std::string>{w.string(), "--check-reference"});
  C sanitized = C::one_job("j", "r");
  sanitized.wrapper = {"compute-sanitizer", "--tool", "memcheck"};
  CHECK(ev::worker_argv(w, sanitized) == std::vector<std::string>{"compute-sanitizer", "--tool", "memcheck",
                                                                  w.string(), "--job", "j", "--result", "r"});

  // The process: scrubbed environment in its home, the GPU pinned, the channel only for prestart.
  const auto spec = ev::worker_process_spec(
      w, C::prestart("", false, false), ev::WorkerPlace{.home = "/h", .visible_device = 3, .channel = true});
  CHECK(spec.env.at("CUDA_VISIBLE_DEVICES") == "3");
  CHECK(spec.env.at("TMPDIR") == "/h");
  CHECK(spec.working_directory == "/h");
  CHECK(spec.channel_fd_env == ptxbench::protocol::kChannelFdEnv);
  CHECK(spec.limits.address_space_bytes == 0);
  CHECK(spec.limits.open_files == 1024);
}

TEST_CASE("worker client: a one-shot job's result is read; a crash is charged to the stage it ran into") {
  const JobDir d;
  const auto &[dir, job, result] = d;
  // Writes correctness, then dies of SIGSEGV in the next stage it runs.
  const fs::path crashing = fake_worker(
      dir.path(), "crash.sh",
      "[ \"$1\" = --job ] && [ \"$3\" = --result ] || exit 2\n"
      "printf '{\"stages\": {\"correctness\": {\"status\": \"ok\", \"summary\": \"fine\"}}}' > \"$4\"\n"
      "echo 'kernel says hi'\necho 'dying' >&2\nkill -SEGV $$\n");
  const ev::WorkerRun run =
      ev::run_worker(crashing, ev::WorkerCommand::one_job(job, result), place_in(dir.path()));
  REQUIRE(run.started);
  CHECK(run.has_result);
  CHECK(run.result.stages.contains("correctness"));
  CHECK(run.process.stdout_text == "kernel says hi\n");
  CHECK_FALSE(run.clean());
  const ev::CrashCharge charge = ev::charge_crash(run, kWanted, 10'000ms);
  CHECK(charge.stage == "timing");  // the worker runs timing before execution
  CHECK(charge.status == ev::Status::runtime_error);
  CHECK(charge.summary.starts_with("the GPU worker was killed by signal 11"));
  CHECK(charge.stderr_tail.find("dying") != std::string::npos);
  CHECK_FALSE(charge.fault);  // the kernel's doing, as far as anyone can tell

  // SIGKILL from outside (the OOM killer, an operator): the machine's fault, typed; the kernel not judged.
  const fs::path killed = fake_worker(dir.path(), "killed.sh", "kill -KILL $$\n");
  const ev::WorkerRun gone = ev::run_worker(
      killed, ev::WorkerCommand::one_job(job, dir.path() / "r_killed.json"), place_in(dir.path()));
  const ev::CrashCharge outside = ev::charge_crash(gone, kWanted, 10'000ms);
  CHECK(outside.stage == "correctness");
  CHECK(outside.status == ev::Status::skipped);
  CHECK(outside.fault == ev::MachineFault::worker_killed);
  CHECK(outside.summary.starts_with("the GPU worker was killed by signal 9"));
  CHECK(outside.summary.find("from outside the evaluator") != std::string::npos);
  CHECK(ev::machine_fault_from_string(ev::to_string(ev::MachineFault::worker_killed)) ==
        ev::MachineFault::worker_killed);

  // The worker's "no usable GPU" exit: the machine's fault, typed, the stage skipped.
  const fs::path no_gpu = fake_worker(dir.path(), "nogpu.sh", "echo 'no usable GPU: none' >&2\nexit 4\n");
  const ev::WorkerRun none =
      ev::run_worker(no_gpu, ev::WorkerCommand::one_job(job, dir.path() / "r2.json"), place_in(dir.path()));
  const ev::CrashCharge machine = ev::charge_crash(none, kWanted, 10'000ms);
  CHECK(machine.stage == "correctness");
  CHECK(machine.status == ev::Status::skipped);
  CHECK(machine.fault == ev::MachineFault::no_device);
  CHECK(machine.summary == "the worker found no usable GPU: no usable GPU: none\n");

  // Past its wall limit: a timeout; an unreadable result: a runtime error naming it.
  const fs::path slow = fake_worker(dir.path(), "slow.sh", "sleep 30\n");
  const ev::WorkerRun hung =
      ev::run_worker(slow, ev::WorkerCommand::one_job(job, dir.path() / "r3.json"),
                     ev::WorkerPlace{.home = dir.path(), .wall = 300ms, .cpu_seconds = 30});
  const ev::CrashCharge timeout = ev::charge_crash(hung, kWanted, 2'000ms);
  CHECK(timeout.status == ev::Status::timeout);
  CHECK(timeout.summary.starts_with("the GPU worker exceeded its wall-clock limit of 2 s"));
  const fs::path garbled = fake_worker(dir.path(), "garbled.sh", "echo '{not json' > \"$4\"\n");
  const ev::WorkerRun bad =
      ev::run_worker(garbled, ev::WorkerCommand::one_job(job, dir.path() / "r4.json"), place_in(dir.path()));
  CHECK_FALSE(bad.has_result);
  CHECK_FALSE(bad.clean());  // exit 0, but the result cannot be read
  CHECK(
      ev::charge_crash(bad, kWanted, 10'000ms).summary.starts_with("the worker's result file is malformed"));

  // A program that cannot start at all.
  const ev::WorkerRun missing =
      ev::run_worker(dir.path() / "absent", ev::WorkerCommand::one_job(job, result), place_in(dir.path()));
  CHECK_FALSE(missing.started);
  CHECK_FALSE(missing.start_error.empty());
}

TEST_CASE("worker client: a pre-started worker takes the job line and says finished on its channel") {
  const JobDir d;
  const auto &[dir, job, result] = d;
  const fs::path w = fake_worker(
      dir.path(), "prestarted.sh",
      "[ \"$1\" = --prestart ] || exit 2\n"
      "echo ready >&\"$PTXBENCH_WORKER_CHANNEL_FD\"\n"
      "IFS=\"$(printf '\\t')\" read -r job result || exit 0\n"
      "printf '{\"finished\": true, \"stages\": {\"correctness\": {\"status\": \"ok\"}}}' > \"$result\"\n"
      "echo 'finished 0' >&\"$PTXBENCH_WORKER_CHANNEL_FD\"\nsleep 0.3\n");
  ev::detail::WorkerPool pool;
  nlohmann::json figures;
  auto ready = pool.take(ev::detail::WorkerKey{w, 0, "", 60}, 5000ms, figures);
  REQUIRE(ready);
  ev::WorkerRun run = ev::run_prestarted(std::move(*ready), job, result, 10'000ms, false);
  CHECK(run.clean());
  CHECK(run.has_result);
  CHECK(run.result.finished);
  REQUIRE(run.exiting);  // announced, still tearing down
  CHECK(run.exiting->reap(5000ms).exit_code == 0);
}

TEST_CASE("machine fault: a typed value in the verdict, kept through JSON; the cache does not keep it") {
  ev::Verdict v;
  CHECK_FALSE(v.to_json().contains("machine_fault"));  // every other verdict reads as before
  CHECK_FALSE(ev::Verdict::from_json(v.to_json()).machine_fault);
  v.machine_fault = ev::MachineFault::gpu_lock;
  CHECK(v.to_json()["machine_fault"] == "gpu_lock");
  CHECK(ev::Verdict::from_json(v.to_json()).machine_fault == ev::MachineFault::gpu_lock);
  for (auto f :
       {ev::MachineFault::worker_not_started, ev::MachineFault::no_device, ev::MachineFault::gpu_lock})
    CHECK(ev::machine_fault_from_string(ev::to_string(f)) == f);

  ev::VerdictCache cache(nlohmann::json{{"gpu", "H200"}});
  cache.put("k", v, "x");
  CHECK(cache.size() == 0);
  // A summary that reads like one is only a summary: the kernel's verdict is kept.
  ev::Verdict kernel;
  kernel.correctness.summary = "the GPU worker could not start: a kernel cannot write this";
  cache.put("k", kernel, "x");
  CHECK(cache.size() == 1);
}
