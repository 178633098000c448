// The worker client: the one owner of ptxbench-worker's process protocol. It locates the worker, writes
// its command line (worker_argv: the only place one is built), sets up its sandboxed process, runs a job
// one-shot or on a pre-started worker (the `ready` line on the protocol channel, the job line on stdin,
// `finished N` on the channel; the pool in detail/worker_pool.hpp), reads its result file and says what
// a run that did not end cleanly means for the verdict (a crash charged to a stage, or a MachineFault:
// the machine's fault, not the kernel's). The GPU stage, the runner's and doctor's probes and the tests
// start workers only through it.
#pragma once

#include <chrono>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "evaluator/machine_fault.hpp"
#include "evaluator/protocol/result.hpp"
#include "util/expected.hpp"
#include "util/subprocess.hpp"

namespace ptxbench::evaluator {

struct EvaluatorSettings;

/// What a worker is started to do. Build one with the factories.
struct WorkerCommand {
  enum class Mode { job, prestart, probe, check_reference };
  Mode mode = Mode::job;
  std::filesystem::path job, result;  ///< job: the job file and where the result goes
  std::filesystem::path lock;         ///< prestart: the GPU lock it holds while it sets up ("" = none)
  bool prewarm_cupti = false;         ///< prestart: also set up the CUPTI profiler ahead
  bool warm_cublaslt = false;         ///< prestart: run cuBLASLt's one-time set-up before its job
  std::optional<int> device;          ///< probe: --device N (nullopt: the worker's default)
  /// Put before the worker's own argv (compute-sanitizer and its options run the worker)
  std::vector<std::string> wrapper;

  static WorkerCommand one_job(std::filesystem::path job, std::filesystem::path result);
  static WorkerCommand prestart(std::filesystem::path lock, bool prewarm_cupti, bool warm_cublaslt);
  static WorkerCommand probe(std::optional<int> device = std::nullopt);
  static WorkerCommand check_reference();
};

/// The command line of `worker` for `command`; the only place a worker's argv is written.
std::vector<std::string> worker_argv(const std::filesystem::path &worker, const WorkerCommand &command);

/// Where a worker process runs: its scrubbed environment with `home` as HOME, TMPDIR and working
/// directory, the GPU it sees (CUDA_VISIBLE_DEVICES; nullopt = as inherited) and its limits (no address
/// space limit: CUDA reserves a huge virtual range).
struct WorkerPlace {
  std::filesystem::path home;
  std::optional<int> visible_device;
  std::chrono::milliseconds wall{60'000};
  std::uint64_t cpu_seconds = 120;
  bool sandboxed = true;  ///< file size 256 MiB and 1024 open files (job and prestart runs)
  bool channel = false;   ///< the protocol channel ($PTXBENCH_WORKER_CHANNEL_FD): prestart
  bool working_directory = true;
};
util::ProcessSpec worker_process_spec(const std::filesystem::path &worker, const WorkerCommand &command,
                                      const WorkerPlace &place);

/// A worker's run of one job, as the client saw it.
struct WorkerRun {
  bool started = false;
  std::string start_error;
  util::ProcessResult process;
  protocol::WorkerResult result;  ///< result.json as the worker left it (empty when none)
  bool has_result = false;        ///< result.json was there and read
  std::string result_error;       ///< why result.json could not be read ("" = read, or none written)
  /// A pre-started worker that said it had finished (result complete) and is still tearing down: it
  /// holds the GPU until it exits (WorkerPool::reap_later).
  std::optional<util::StartedProcess> exiting;
  /// Ended as the job asked: exit code finished or stopped, a readable result, no signal or time limit.
  bool clean() const;
};

/// How a run that did not end cleanly is charged: the stage it ran into, its status and summary, and
/// whether that is the machine's fault (then the status is skipped).
struct CrashCharge {
  std::string stage;  ///< a name of the stage table
  protocol::Status status = protocol::Status::runtime_error;
  std::string summary;
  std::string stderr_tail;            ///< the worker's stderr, cut to its end ("" = none)
  std::optional<MachineFault> fault;  ///< set: the machine's fault (the status is then skipped)
};
/// `wanted`: the job's stages; `wall`: the worker's limit (for the timeout's summary).
CrashCharge charge_crash(const WorkerRun &run, const std::vector<std::string> &wanted,
                         std::chrono::milliseconds wall);

/// The ptxbench-worker executable: settings.worker_path, $PTXBENCH_WORKER, next to this executable, or
/// the build tree's evaluator/worker/ (nullopt = not found). find_worker_binary is this.
std::optional<std::filesystem::path> locate_worker(const EvaluatorSettings &settings);

/// Runs `command` on a fresh worker under `place` and reads `result` (job runs) into the run.
WorkerRun run_worker(const std::filesystem::path &worker, const WorkerCommand &command,
                     const WorkerPlace &place);

/// Runs a job on a pre-started worker (which said `ready`): its job and result paths on one stdin line,
/// then waits for `finished N` on the channel (or for the exit with `wait_for_exit`).
WorkerRun run_prestarted(util::StartedProcess worker, const std::filesystem::path &job_path,
                         const std::filesystem::path &result_path, std::chrono::milliseconds wall,
                         bool wait_for_exit);

/// Runs `command` (probe, check_reference) and returns its process result, or why it could not start.
util::Expected<util::ProcessResult> run_worker_command(const std::filesystem::path &worker,
                                                       const WorkerCommand &command,
                                                       const WorkerPlace &place);

}  // namespace ptxbench::evaluator
