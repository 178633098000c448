// The worker client (worker_client.hpp): locate, argv, the process, the protocol lines, the result file
// and the charging of a run that did not end cleanly.
#include "evaluator/worker_client.hpp"

#include <unistd.h>
#include <csignal>

#include <cstdlib>
#include <cstring>

#include "evaluator/evaluator.hpp"
#include "evaluator/protocol/worker_output.hpp"
#include "util/enum_names.hpp"
#include "util/files.hpp"

namespace ptxbench::evaluator {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

fs::path self_executable_dir() {
  const fs::path exe = util::own_executable();
  return exe.empty() ? fs::current_path() : exe.parent_path();
}

std::string tail(const std::string &text, std::size_t max_chars = 2000) {
  return text.size() <= max_chars ? text : "..." + text.substr(text.size() - max_chars);
}

std::string signal_name(int sig) {
  const char *d = strsignal(sig);
  return "signal " + std::to_string(sig) + (d ? std::string(" (") + d + ")" : "");
}

/// Reads result.json into `run` (no file: no stages; an unreadable one: no stages and why).
void read_result(const fs::path &result_path, WorkerRun &run) {
  std::error_code ec;
  if (!fs::exists(result_path, ec)) return;
  auto text = util::read_file(result_path, 64u << 20);
  if (!text) {
    run.result_error = text.error();
    return;
  }
  try {
    run.result = json::parse(*text).get<protocol::WorkerResult>();
    run.has_result = true;
  } catch (const std::exception &e) {  // json::exception or protocol::ProtocolError
    run.result = {};
    run.result_error = std::string("the worker's result file is malformed: ") + e.what();
  }
}

}  // namespace

bool killed_from_outside(int signal) {
  return signal == SIGKILL || signal == SIGTERM || signal == SIGINT || signal == SIGHUP || signal == SIGQUIT;
}

WorkerCommand WorkerCommand::one_job(fs::path job, fs::path result) {
  WorkerCommand c;
  c.mode = Mode::job;
  c.job = std::move(job);
  c.result = std::move(result);
  return c;
}

WorkerCommand WorkerCommand::prestart(fs::path lock, bool prewarm_cupti, bool warm_cublaslt) {
  WorkerCommand c;
  c.mode = Mode::prestart;
  c.lock = std::move(lock);
  c.prewarm_cupti = prewarm_cupti;
  c.warm_cublaslt = warm_cublaslt;
  return c;
}

WorkerCommand WorkerCommand::probe(std::optional<int> device) {
  WorkerCommand c;
  c.mode = Mode::probe;
  c.device = device;
  return c;
}

WorkerCommand WorkerCommand::check_reference() {
  WorkerCommand c;
  c.mode = Mode::check_reference;
  return c;
}

std::vector<std::string> worker_argv(const fs::path &worker, const WorkerCommand &command) {
  std::vector<std::string> argv = command.wrapper;
  argv.push_back(worker.string());
  switch (command.mode) {
    case WorkerCommand::Mode::job:
      argv.insert(argv.end(), {"--job", command.job.string(), "--result", command.result.string()});
      break;
    case WorkerCommand::Mode::prestart:
      // CUDA_VISIBLE_DEVICES pins the GPU: it is ordinal 0 to the worker.
      argv.insert(argv.end(), {"--prestart", "--device", "0"});
      if (!command.lock.empty()) argv.insert(argv.end(), {"--lock", command.lock.string()});
      if (command.prewarm_cupti) argv.push_back("--prewarm-cupti");
      if (command.warm_cublaslt) argv.push_back("--warm-cublaslt");
      break;
    case WorkerCommand::Mode::probe:
      argv.push_back("--probe");
      if (command.device) argv.insert(argv.end(), {"--device", std::to_string(*command.device)});
      break;
    case WorkerCommand::Mode::check_reference:
      argv.push_back("--check-reference");
      break;
  }
  return argv;
}

util::ProcessSpec worker_process_spec(const fs::path &worker, const WorkerCommand &command,
                                      const WorkerPlace &place) {
  util::ProcessSpec spec;
  spec.argv = worker_argv(worker, command);
  spec.env = util::scrubbed_environment(place.home.string());
  if (place.visible_device) spec.env["CUDA_VISIBLE_DEVICES"] = std::to_string(*place.visible_device);
  // `ready` and `finished N` come on this channel, apart from stdout (the kernel's printf).
  if (place.channel) spec.channel_fd_env = protocol::kChannelFdEnv;
  if (place.working_directory) spec.working_directory = place.home.string();
  spec.limits.wall_time = place.wall;
  spec.limits.cpu_seconds = place.cpu_seconds;
  spec.limits.address_space_bytes = 0;  // CUDA reserves a huge virtual address space
  if (place.sandboxed) {
    spec.limits.file_size_bytes = 256ull << 20;
    spec.limits.open_files = 1024;
  }
  return spec;
}

std::optional<fs::path> locate_worker(const EvaluatorSettings &settings) {
  std::vector<fs::path> candidates;
  if (!settings.worker_path.empty()) {
    candidates.push_back(settings.worker_path);
  } else {
    if (const char *env = std::getenv("PTXBENCH_WORKER")) candidates.emplace_back(env);
    const fs::path dir = self_executable_dir();
    candidates.push_back(dir / "ptxbench-worker");
    candidates.push_back(dir / ".." / "evaluator" / "worker" / "ptxbench-worker");
    candidates.push_back(dir / ".." / ".." / "evaluator" / "worker" / "ptxbench-worker");
  }
  for (const auto &c : candidates)
    if (::access(c.c_str(), X_OK) == 0) return fs::weakly_canonical(c);
  return std::nullopt;
}

util::Expected<util::ProcessResult> run_worker_command(const fs::path &worker, const WorkerCommand &command,
                                                       const WorkerPlace &place) {
  return util::run_process(worker_process_spec(worker, command, place));
}

WorkerRun run_worker(const fs::path &worker, const WorkerCommand &command, const WorkerPlace &place) {
  WorkerRun run;
  auto r = run_worker_command(worker, command, place);
  if (!r) {
    run.start_error = r.error();
    return run;
  }
  run.started = true;
  run.process = std::move(*r);
  if (!command.result.empty()) read_result(command.result, run);
  return run;
}

WorkerRun run_prestarted(util::StartedProcess worker, const fs::path &job_path, const fs::path &result_path,
                         std::chrono::milliseconds wall, bool wait_for_exit) {
  WorkerRun run;
  run.started = true;
  const std::string input = job_path.string() + "\t" + result_path.string() + "\n";
  // `finished N` comes on the worker's protocol channel, which only the worker writes (the kernel's
  // printf goes to stdout), after its result file is complete.
  run.process = wait_for_exit ? worker.finish(input, wall)
                              : worker.finish_until_line(input, protocol::kFinishedLinePrefix, wall);
  if (run.process.still_running) {
    // The exit code it announced stands for the one it is about to return.
    run.process.exit_code =
        protocol::finished_code(run.process.channel_text).value_or(protocol::exit_code::kInternal);
    run.process.still_running = false;
    run.exiting.emplace(std::move(worker));
  }
  read_result(result_path, run);
  return run;
}

bool WorkerRun::clean() const {
  const util::ProcessResult &p = process;
  return !p.signaled && !p.timed_out && result_error.empty() &&
         (p.exit_code == protocol::exit_code::kFinished || p.exit_code == protocol::exit_code::kStopped);
}

CrashCharge charge_crash(const WorkerRun &run, const std::vector<std::string> &wanted,
                         std::chrono::milliseconds wall) {
  const util::ProcessResult &p = run.process;
  CrashCharge c;
  // The first stage it did not finish ran into the crash, the kill or the wall limit.
  c.stage = protocol::crashed_stage(run.result.stages, wanted);
  c.stderr_tail = tail(p.stderr_text);
  if (!run.result_error.empty()) {
    c.summary = run.result_error + " (" + p.describe() + ")";
  } else if (p.exit_code == protocol::exit_code::kNoDevice) {
    c.status = protocol::Status::skipped;
    c.summary = "the worker found no usable GPU: " + tail(p.stderr_text, 300);
    c.fault = MachineFault::no_device;
  } else if (p.timed_out) {
    c.status = protocol::Status::timeout;
    c.summary = "the GPU worker exceeded its wall-clock limit of " + std::to_string(wall.count() / 1000) +
                " s and was killed (a kernel that never " + "finishes, or far too slow)";
  } else if (p.signaled && killed_from_outside(p.signal)) {
    // Not the kernel's doing: nothing in a kernel sends its host process these.
    c.status = protocol::Status::skipped;
    c.summary =
        "the GPU worker was killed by " + signal_name(p.signal) +
        " from outside the evaluator (the OOM killer, an operator or a job scheduler): the kernel was "
        "not judged";
    c.fault = MachineFault::worker_killed;
  } else if (p.signaled) {
    c.summary = "the GPU worker was killed by " + signal_name(p.signal);
  } else {
    c.summary = "the GPU worker failed (" + p.describe() + ")";
  }
  return c;
}

}  // namespace ptxbench::evaluator
