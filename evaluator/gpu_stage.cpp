// The orchestrator side of the GPU stage: writes the job
// file, runs ptxbench-worker in a sandboxed subprocess while holding the
// per-GPU lock, and maps its result file (or its crash) into the verdict.
// This process never loads the candidate: only the worker touches the GPU.
#include <dlfcn.h>
#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <mutex>
#include <thread>

#include <fmt/core.h>

#include "evaluator/compile.hpp"
#include "evaluator/detail/execution_axis.hpp"
#include "evaluator/detail/kernel_printf.hpp"
#include "evaluator/detail/profile_lines.hpp"
#include "evaluator/detail/sanitizer.hpp"
#include "evaluator/detail/worker_pool.hpp"
#include "evaluator/evaluator.hpp"
#include "evaluator/protocol/error.hpp"
#include "evaluator/protocol/job.hpp"
#include "evaluator/protocol/result.hpp"
#include "evaluator/protocol/worker_output.hpp"
#include "evaluator/sass.hpp"
#include "util/files.hpp"
#include "util/int_expr.hpp"
#include "util/strings.hpp"
#include "util/subprocess.hpp"

namespace ptxbench::evaluator {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

using protocol::kGpuStageNames;

StageResult &stage_of(Verdict &v, const std::string &name) {
  if (name == "correctness") return v.correctness;
  if (name == "execution") return v.execution;
  if (name == "generalization") return v.generalization;
  if (name == "profile") return v.profiling;
  return v.timing;
}

std::string tail(const std::string &text, std::size_t max_chars = 2000) {
  return text.size() <= max_chars ? text : "..." + text.substr(text.size() - max_chars);
}

fs::path self_executable_dir() {
  const fs::path exe = util::own_executable();
  return exe.empty() ? fs::current_path() : exe.parent_path();
}

/// The worker: the setting, $PTXBENCH_WORKER, next to this executable, or in the build tree layout.
std::optional<fs::path> find_worker_impl(const EvaluatorSettings &settings) {
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

/// Asks the driver (loaded with dlopen: this process never links libcuda) how many GPUs there are.
std::string probe_driver(int device) {
  void *lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!lib) return "no CUDA driver (libcuda.so.1 not found): this machine has no NVIDIA GPU driver";
  using Init = int (*)(unsigned);
  using Count = int (*)(int *);
  auto init = reinterpret_cast<Init>(dlsym(lib, "cuInit"));
  auto count = reinterpret_cast<Count>(dlsym(lib, "cuDeviceGetCount"));
  if (!init || !count) return "the CUDA driver library lacks cuInit/cuDeviceGetCount";
  if (int r = init(0); r != 0)
    return "the CUDA driver is installed but cuInit failed (CUresult " + std::to_string(r) +
           "): no usable GPU (check nvidia-smi)";
  int n = 0;
  if (count(&n) != 0 || n == 0) return "the CUDA driver sees no GPU";
  if (device < 0 || device >= n)
    return "GPU " + std::to_string(device) + " does not exist (" + std::to_string(n) + " visible)";
  return "";
}

/// Holds flock(<lock_dir>/gpu<N>.lock) so two ptxbench processes never time on one GPU at once.
class GpuLock {
 public:
  GpuLock(const fs::path &dir, const fs::path &path) {
    std::error_code ec;
    fs::create_directories(dir, ec);
    fd_ = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0666);
    if (fd_ >= 0) {
      while (::flock(fd_, LOCK_EX) != 0 && errno == EINTR) {
      }
    } else {
      error_ = "cannot open the GPU lock file " + path.string() + ": " + std::strerror(errno);
    }
  }
  ~GpuLock() {
    if (fd_ >= 0) ::close(fd_);  // closing releases the lock
  }
  GpuLock(const GpuLock &) = delete;
  GpuLock &operator=(const GpuLock &) = delete;
  const std::string &error() const { return error_; }

 private:
  int fd_ = -1;
  std::string error_;
};

fs::path selection_cache_dir(const EvaluatorSettings &settings) {
  if (!settings.worker.selection_cache_dir.empty()) return settings.worker.selection_cache_dir;
  std::error_code ec;
  const fs::path tmp = fs::temp_directory_path(ec);
  return (ec ? fs::path("/tmp") : tmp) / "ptxbench-selection-cache";
}

fs::path lock_file(const EvaluatorSettings &settings) {
  return settings.lock_dir / ("gpu" + std::to_string(settings.device) + ".lock");
}

/// One workload of the job: concrete shapes, tolerances, flops/bytes and the resolved launch.
protocol::JobWorkload job_workload(const tasks::Task &task, const LaunchPlan &plan) {
  tasks::Workload workload;
  workload.name = plan.workload;
  workload.symbols = plan.symbols;
  protocol::JobWorkload w;
  protocol::WorkloadSpec &spec = w.spec;
  spec.name = plan.workload;
  spec.symbols.insert(plan.symbols.begin(), plan.symbols.end());
  for (const auto &t : task.tensors) {
    protocol::TensorSpec ts;
    ts.name = t.name;
    const auto type = protocol::elem_type_from_string(tasks::to_string(t.dtype));
    const auto distribution = protocol::distribution_from_string(tasks::to_string(t.distribution));
    if (!type || !distribution)
      throw std::logic_error("task tensor " + t.name + ": no worker element type or distribution for it");
    ts.type = *type;
    ts.distribution = *distribution;
    ts.shape = task.shape_of(t, workload);
    ts.is_output = t.role == tasks::TensorRole::output;
    if (auto it = task.tolerances.find(t.name); it != task.tolerances.end()) {
      ts.atol = it->second.atol;
      ts.rtol = it->second.rtol;
    }
    spec.tensors.push_back(std::move(ts));
  }
  for (const auto &s : task.scalars) spec.scalars.push_back({s.name, s.type, s.value});
  auto figure = [&](const std::string &expr) -> double {
    if (expr.empty()) return 0;
    auto v = util::evaluate_int_expression(expr, plan.symbols);
    return v ? static_cast<double>(*v) : 0.0;
  };
  spec.flops = figure(task.flops);
  spec.bytes = figure(task.bytes);
  spec.causal = task.causal;
  w.launch = plan;
  return w;
}

protocol::Job build_job(const CompiledCandidate &c, const tasks::Task &task,
                        const EvaluatorSettings &settings, const fs::path &cubin_path) {
  protocol::Job job;
  job.task_id = task.id;
  job.family = tasks::to_string(task.family);
  job.reference = task.reference;
  job.device = 0;  // CUDA_VISIBLE_DEVICES pins the chosen GPU as ordinal 0
  job.cubin_path = cubin_path.string();
  job.entry = c.manifest.entry;
  job.stages = {"correctness", "execution", "timing"};
  for (const auto &plan : c.plans) job.workloads.push_back(job_workload(task, plan));
  if (settings.hidden.check && !c.hidden_plans.empty()) {
    job.stages.push_back("generalization");
    for (const auto &plan : c.hidden_plans) job.hidden_workloads.push_back(job_workload(task, plan));
    job.time_hidden = settings.hidden.time;
  }
  for (const auto &t : task.targets) job.targets.push_back({t.name, t.sass_families});
  job.correctness = settings.correctness;
  // Within a run the same task gets the same inputs (a resent kernel, the same verdict).
  if (job.correctness.base_seed == 0 && settings.run_seed != 0)
    job.correctness.base_seed = task_input_seed(settings.run_seed, task.id);
  job.timing = settings.timing;
  job.limits = settings.worker;
  job.profile = settings.profile;
  if (settings.profile.enabled) job.stages.push_back("profile");
  job.cache_dir = selection_cache_dir(settings).string();
  job.task = task.to_json();
  return job;
}

std::string signal_name(int sig) {
  const char *d = strsignal(sig);
  return "signal " + std::to_string(sig) + (d ? std::string(" (") + d + ")" : "");
}

/// A worker that has written its result gets this long to exit before its process group is killed.
constexpr std::chrono::milliseconds kExitingWorkerLimit{30'000};

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
};

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

WorkerRun run_worker(const std::vector<std::string> &argv, const fs::path &job_dir,
                     const fs::path &result_path, int device, std::chrono::milliseconds wall,
                     std::uint64_t cpu_seconds) {
  WorkerRun run;
  util::ProcessSpec spec;
  spec.argv = argv;
  spec.env = util::scrubbed_environment(job_dir.string());
  spec.env["CUDA_VISIBLE_DEVICES"] = std::to_string(device);
  spec.env["TMPDIR"] = job_dir.string();
  spec.working_directory = job_dir.string();
  spec.limits.wall_time = wall;
  spec.limits.cpu_seconds = cpu_seconds;
  spec.limits.address_space_bytes = 0;  // CUDA reserves a huge virtual address space
  spec.limits.file_size_bytes = 256ull << 20;
  spec.limits.open_files = 1024;
  auto r = util::run_process(spec);
  if (!r) {
    run.start_error = r.error();
    return run;
  }
  run.started = true;
  run.process = std::move(*r);
  read_result(result_path, run);
  return run;
}

/// Runs the job on a pre-started worker (which said "ready"): its job and result paths on one stdin line.
/// Where the worker run's time went outside the stages, from the worker's steady-clock marks (one
/// clock for every process): job_line (the job handed over until the worker read it), job_load (job
/// parse, cubin load: until the first stage), exit (the result written until the process was reaped:
/// the CUDA context's teardown). Absent marks are left out.
json handover_seconds(const json &worker, std::chrono::steady_clock::time_point sent,
                      std::chrono::steady_clock::time_point reaped) {
  json out = json::object();
  if (!worker.is_object() || !worker.contains("clock") || !worker["clock"].is_object()) return out;
  const json &clock = worker["clock"];
  const auto at = [](std::chrono::steady_clock::time_point t) {
    return std::chrono::duration<double>(t.time_since_epoch()).count();
  };
  const auto mark = [&](const char *name) -> std::optional<double> {
    if (!clock.contains(name) || !clock[name].is_number()) return std::nullopt;
    return clock[name].get<double>();
  };
  const auto received = mark("job_received"), started = mark("stages_start"), finished = mark("finished");
  if (received) out["job_line"] = *received - at(sent);
  if (received && started) out["job_load"] = *started - *received;
  if (finished) out["exit"] = at(reaped) - *finished;
  return out;
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

/// The profile's sampled PCs named by the candidate's own lines (the listing was made with line info).
void map_profile_lines(StageResult &profiling, const CompiledCandidate &c) {
  if (profiling.status != Status::ok) return;
  try {
    auto kp = protocol::kernel_profile_from_figures(profiling.figures);
    if (!kp || kp->pc_sampling.samples == 0) return;
    const bool cuda = c.response.language == KernelLanguage::cuda;
    detail::map_hot_lines(kp->pc_sampling, c.sass_listing,
                          cuda ? std::string_view(c.response.kernel_source) : c.ptx, cuda);
    profiling.figures["kernel_profile"] = *kp;
  } catch (const protocol::ProtocolError &e) {
    profiling.diagnostics.push_back(
        {"warning", std::string("the profile record could not be read: ") + e.what(), std::nullopt});
  }
}

/// The cubin the sanitizer reruns and the source its line info names.
struct SanitizerTarget {
  fs::path cubin;
  SassListing listing;                            ///< of that cubin (for function+offset -> SASS opcode)
  std::optional<detail::SanitizerSource> source;  ///< nullopt = reports carry SASS offsets only
  protocol::SanitizerFigures figures{};           ///< line_info, line_info_error, ...
};

/// PTX: the candidate's PTX recompiled with a `.loc` per line (evaluator/ptx_lines.hpp), so reports
/// name lines of the PTX the model wrote; if that fails, the evaluated cubin and why. CUDA: the
/// evaluated cubin, whose line info (NVRTC and ptxas ran with -lineinfo) names kernel.cu lines.
SanitizerTarget sanitizer_target(const CompiledCandidate &c, const tasks::Task &task, const fs::path &job_dir,
                                 const fs::path &evaluated_cubin, const SassListing &evaluated_listing,
                                 const EvaluatorSettings &settings) {
  SanitizerTarget t{evaluated_cubin, evaluated_listing, std::nullopt};
  if (c.response.language == KernelLanguage::cuda) {
    t.source = detail::SanitizerSource{"kernel.cu", c.response.kernel_source, "CUDA"};
    t.figures.line_info = true;
    t.figures.line_info_file = "kernel.cu";
    return t;
  }
  auto without_line_info = [&](const std::string &why) {
    t.figures.line_info = false;
    t.figures.line_info_error = why + " (reports name SASS offsets only)";
    return t;
  };
  const auto ptxas = find_ptxas(settings.ptxas_path);
  if (!ptxas) return without_line_info("ptxas not found");
  util::ProcessLimits limits;  // the compile stage's limits
  limits.wall_time = settings.compile.ptxas_wall;
  limits.address_space_bytes = settings.compile.ptxas_address_space_bytes;
  limits.cpu_seconds = static_cast<std::uint64_t>(settings.compile.ptxas_wall.count() / 1000) + 5;
  auto compiled = compile_ptx_with_line_info(*ptxas, c.ptx, task.arch, job_dir / "lineinfo", limits);
  if (!compiled) return without_line_info(compiled.error());
  t.cubin = compiled->cubin;
  t.source = detail::SanitizerSource{"kernel.ptx", c.ptx, "PTX"};
  t.figures.line_info = true;
  t.figures.line_info_file = "kernel.ptx";
  t.figures.line_info_ptxas_seconds = compiled->ptxas_seconds;
  // Offsets in reports are of the cubin that ran: list its SASS, not the evaluated one's.
  t.listing = SassListing{};
  if (auto dis = find_disassembler(settings.disassembler_path)) {
    util::ProcessLimits dlimits;
    dlimits.wall_time = settings.compile.disassembler_wall;
    dlimits.max_output_bytes = 64u << 20;
    if (auto text = disassemble_cubin(*dis, t.cubin, dlimits))
      t.listing = parse_sass_listing(*text);
    else
      t.figures.line_info_sass_error = text.error();
  }
  return t;
}

void run_sanitizer(CompiledCandidate &c, const tasks::Task &task, const protocol::Job &job,
                   const fs::path &job_dir, const fs::path &worker, const SassListing &listing,
                   const EvaluatorSettings &settings) {
  Verdict &v = c.verdict;
  StageResult &s = v.sanitizer;
  const auto tool_path = util::find_program("compute-sanitizer", {"/usr/local/cuda/bin"});
  if (!tool_path) {
    s.status = Status::skipped;
    s.summary = "compute-sanitizer is not installed";
    return;
  }
  const bool race = v.correctness.status == Status::nondeterministic;
  const std::string tool = race ? "racecheck" : "memcheck";
  // Reduced job: one trial of the smallest workload, correctness only, a short hang limit.
  protocol::Job small = job;
  small.mode = protocol::JobMode::sanitize;
  small.stages = {"correctness"};
  small.limits.kernel_hang = std::chrono::milliseconds(10'000);
  std::size_t pick = 0;
  for (std::size_t i = 1; i < job.workloads.size(); ++i)
    if (job.workloads[i].spec.flops < job.workloads[pick].spec.flops) pick = i;
  small.workloads = {job.workloads[pick]};
  const SanitizerTarget target = sanitizer_target(c, task, job_dir, job.cubin_path, listing, settings);
  small.cubin_path = target.cubin.string();
  small.sass = target.listing.instructions;
  small.sass_path.clear();
  const fs::path job_path = job_dir / "sanitize_job.json";
  const fs::path result_path = job_dir / "sanitize_result.json";
  if (!util::write_file_atomic(job_path, json(small).dump())) {
    s.status = Status::skipped;
    s.summary = "could not write the sanitizer job file";
    return;
  }
  const auto start = std::chrono::steady_clock::now();
  const WorkerRun run =
      run_worker({*tool_path, "--tool", tool, "--print-limit", "20", "--show-backtrace", "device",
                  worker.string(), "--job", job_path.string(), "--result", result_path.string()},
                 job_dir, result_path, settings.device, std::chrono::milliseconds(60'000), 300);
  s.wall_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  if (!run.started) {
    s.status = Status::skipped;
    s.summary = "compute-sanitizer could not start: " + run.start_error;
    return;
  }
  const std::string output = run.process.stdout_text + "\n" + run.process.stderr_text;
  s.diagnostics =
      detail::sanitizer_reports(output, target.listing, 8, target.source ? &*target.source : nullptr);
  protocol::SanitizerFigures figures = target.figures;
  figures.tool = tool;
  figures.exit = run.process.describe();
  figures.reports = s.diagnostics.size();
  figures.workload = small.workloads[0].spec.name;
  s.figures = figures;
  if (s.diagnostics.empty()) {
    s.status = Status::ok;
    s.summary = "compute-sanitizer " + tool + " found nothing on one trial of the smallest workload (" +
                run.process.describe() + ")";
  } else {
    s.status = race ? Status::nondeterministic : Status::runtime_error;
    s.summary = "compute-sanitizer " + tool + ": " + s.diagnostics.front().text;
  }
}

}  // namespace

std::optional<std::filesystem::path> find_worker_binary(const EvaluatorSettings &settings) {
  return find_worker_impl(settings);
}

std::string gpu_unavailable_reason(const EvaluatorSettings &settings) {
  if (!settings.run_gpu) return "GPU stages disabled (--no-gpu)";
  // The driver answer does not change within a process; the worker binary may.
  static std::once_flag once;
  static std::string driver_reason;
  static int probed_device = -1;
  std::call_once(once, [&] {
    probed_device = settings.device;
    driver_reason = probe_driver(settings.device);
  });
  std::string reason = probed_device == settings.device ? driver_reason : probe_driver(settings.device);
  if (!reason.empty()) return reason;
  if (!find_worker_binary(settings))
    return "the GPU worker (ptxbench-worker) was not found next to ptxbench, in the build tree or at "
           "$PTXBENCH_WORKER; build the target ptxbench-worker";
  return "";
}

std::string gpu_driver_unavailable_reason(int device) {
  return probe_driver(device);
}

void run_gpu_stages(CompiledCandidate &candidate, const tasks::Task &task,
                    const EvaluatorSettings &settings) {
  Verdict &v = candidate.verdict;
  const std::string reason = gpu_unavailable_reason(settings);
  if (!reason.empty()) {
    v.skip_gpu_stages(reason);
    v.finalize_status();
    return;
  }
  if (!candidate.ready_for_gpu()) {
    v.skip_gpu_stages("not run: an earlier stage did not pass");
    v.finalize_status();
    return;
  }
  const fs::path worker = *find_worker_binary(settings);
  util::TempDir dir("ptxbench-gpu");
  const fs::path cubin_path = dir.path() / "kernel.cubin";
  const fs::path job_path = dir.path() / "job.json";
  const fs::path result_path = dir.path() / "result.json";
  // A listing still being made goes to the worker as a file when it is done; the worker needs it only
  // for the execution stage, after correctness and timing.
  const fs::path sass_path = dir.path() / "sass.json";
  protocol::Job job = build_job(candidate, task, settings, cubin_path);
  if (candidate.pending_sass)
    job.sass_path = sass_path.string();
  else
    job.sass = candidate.sass_listing.instructions;
  if (auto w1 = util::write_file_atomic(cubin_path, candidate.cubin); !w1)
    throw std::runtime_error(w1.error());
  if (auto w2 = util::write_file_atomic(job_path, json(job).dump()); !w2)
    throw std::runtime_error(w2.error());

  // A worker that set itself up ahead (under the GPU lock, which it has released by now): taken before
  // the lock, since one still setting up waits for that lock.
  const detail::WorkerKey key{worker, settings.device, lock_file(settings), settings.worker.cpu_seconds,
                              settings.worker.prestart_cupti};
  json profile = json::object();
  std::optional<util::StartedProcess> ready;
  if (settings.worker.prestart) {
    std::error_code ec;
    fs::create_directories(settings.lock_dir, ec);
    json pool = json::object();
    ready = detail::WorkerPool::shared().take(key, std::chrono::milliseconds(60'000), pool);
    profile["pool"] = pool;
  }
  // Held until the end, sanitizer rerun included: one GPU stage at a time per GPU.
  const auto lock_start = std::chrono::steady_clock::now();
  auto lock = std::make_shared<GpuLock>(settings.lock_dir, lock_file(settings));
  profile["lock_wait_seconds"] =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - lock_start).count();
  if (!lock->error().empty()) {
    v.skip_gpu_stages(lock->error());
    v.finalize_status();
    return;
  }
  std::jthread sass_handover;
  if (candidate.pending_sass)
    sass_handover = std::jthread([&candidate, &sass_path] {
      // finish_sass touches only the compile stage and `sass`, which nothing reads until the join.
      protocol::SassHandover file;
      try {
        const std::string error = finish_sass(candidate);
        if (error.empty())
          file.sass = candidate.sass_listing.instructions;
        else
          file.error = error;
      } catch (const std::exception &e) {
        file.error = std::string("the SASS listing failed: ") + e.what();
      }
      (void)util::write_file_atomic(sass_path,
                                    json(file).dump());  // unwritten: the worker gives up and says so
    });
  const auto worker_start = std::chrono::steady_clock::now();
  const auto one_shot = [&] {
    return run_worker({worker.string(), "--job", job_path.string(), "--result", result_path.string()},
                      dir.path(), result_path, settings.device, settings.worker.wall,
                      settings.worker.cpu_seconds);
  };
  WorkerRun run = ready ? run_prestarted(std::move(*ready), job_path, result_path, settings.worker.wall,
                                         settings.worker.wait_for_exit)
                        : one_shot();
  profile["worker"] = ready ? "prestarted" : "one_shot";
  // A pre-started worker that died before it took the job (no result file at all) is no verdict on the
  // candidate: run the job again in a fresh worker.
  if (ready && !run.process.timed_out && !fs::exists(result_path)) {
    profile["worker"] = "one_shot_after_prestarted_died";
    profile["prestarted_exit"] = run.process.describe();
    run = one_shot();
  }
  const auto worker_end = std::chrono::steady_clock::now();
  profile["worker_run_seconds"] = std::chrono::duration<double>(worker_end - worker_start).count();
  profile["worker_handover"] = handover_seconds(run.result.worker, worker_start, worker_end);
  // A worker still tearing down keeps the GPU lock until it exits, after this verdict is made.
  profile["worker_exit"] = run.exiting ? "after the verdict" : "waited for";
  // The next candidate's worker sets itself up while this process does CPU work; it waits for the lock.
  if (settings.worker.prestart) detail::WorkerPool::shared().refill(key, task.family == tasks::Family::gemm);
  if (sass_handover.joinable()) sass_handover.join();
  if (!run.started) {
    v.skip_gpu_stages("the GPU worker could not start: " + run.start_error);
    v.finalize_status();
    return;
  }

  // Stages the worker finished, in its words.
  const auto &stages = run.result.stages;
  for (const char *name : kGpuStageNames)
    if (stages.contains(name)) stage_of(v, name) = stages.at(name);

  // The first stage it did not finish ran into the crash, the kill or the wall limit.
  const util::ProcessResult &p = run.process;
  const bool clean =
      !p.signaled && !p.timed_out && run.result_error.empty() &&
      (p.exit_code == protocol::exit_code::kFinished || p.exit_code == protocol::exit_code::kStopped);
  if (!clean) {
    const std::string stage_name = protocol::crashed_stage(stages, job.stages);
    StageResult &s = stage_of(v, stage_name);
    const std::string err_tail = tail(p.stderr_text);
    if (!run.result_error.empty()) {
      s.status = Status::runtime_error;
      s.summary = run.result_error + " (" + p.describe() + ")";
    } else if (p.exit_code == protocol::exit_code::kNoDevice) {
      s.status = Status::skipped;
      s.summary = "the worker found no usable GPU: " + tail(p.stderr_text, 300);
    } else if (p.timed_out) {
      s.status = Status::timeout;
      s.summary = "the GPU worker exceeded its wall-clock limit of " +
                  std::to_string(settings.worker.wall.count() / 1000) +
                  " s and was killed (a kernel that never " + "finishes, or far too slow)";
    } else if (p.signaled) {
      s.status = Status::runtime_error;
      s.summary = "the GPU worker was killed by " + signal_name(p.signal);
    } else {
      s.status = Status::runtime_error;
      s.summary = "the GPU worker failed (" + p.describe() + ")";
    }
    if (!err_tail.empty()) s.diagnostics.push_back({"error", "worker stderr: " + err_tail, std::nullopt});
    s.diagnostics.insert(s.diagnostics.begin(), Diagnostic{"error", s.summary, std::nullopt});
  }
  for (const char *name : kGpuStageNames) {
    StageResult &s = stage_of(v, name);
    if (std::string_view(name) == "generalization" && !v.generalizes) continue;      // the task has none
    if (std::string_view(name) == "profile" && !settings.profile.enabled) continue;  // not asked for
    if (!stages.contains(name) && s.summary.empty()) {
      s.status = Status::skipped;
      s.summary = "not run: an earlier GPU stage ended the worker";
    }
  }

  // The kernel's device printf: all of the worker's stdout (its protocol lines use their own channel).
  v.kernel_output = protocol::kernel_output_from(p.stdout_text, p.stdout_dropped);
  detail::note_printf_in_timeouts(v, *v.kernel_output, detail::ptx_calls_printf(candidate.ptx));

  if (v.timing.status != Status::skipped) {
    v.timing.figures["policy"] = settings.timing;
    try {
      (void)v.timing_figures();  // the axis and the feedback read them through the codec
    } catch (const protocol::ProtocolError &e) {
      v.timing.diagnostics.push_back(
          {"warning", std::string("the timing figures could not be read: ") + e.what(), std::nullopt});
    }
  }

  // Environment: what ran it.
  if (run.result.environment.is_object())
    for (auto &[k, val] : run.result.environment.items()) v.environment[k] = val;
  v.environment["gpu_index"] = settings.device;
  v.environment["worker"] = worker.string();
  // num_sms: the plans resolved it on the CPU (the task's GPU, or the setting); the worker reports the
  // device's SM count. The verdict records the value used; a different device gets a warning, since a
  // grid sized by num_sms then no longer matches the SMs one to one (timings are not the task GPU's).
  if (!candidate.plans.empty() && candidate.plans.front().num_sms > 0) {
    const std::int64_t planned = candidate.plans.front().num_sms;
    v.environment["num_sms"] = planned;
    const json &found = run.result.environment.is_object() && run.result.environment.contains("sm_count")
                            ? run.result.environment["sm_count"]
                            : json(nullptr);
    if (found.is_number_integer() && found.get<std::int64_t>() != planned)
      v.correctness.diagnostics.push_back(
          {"warning",
           fmt::format(
               "the manifest's num_sms resolved to {} but this GPU ({}) has {} SMs: set the evaluator's "
               "num_sms (run config evaluator.num_sms, or ptxbench eval --num-sms {}) to evaluate on it",
               planned, run.result.environment.value("gpu_name", "?"), found.get<std::int64_t>(),
               found.get<std::int64_t>()),
           std::nullopt});
  }
  if (run.has_result) v.settings["correctness_base_seed"] = run.result.base_seed;
  // The worker's own set-up and the handover: worker run minus the stages it timed.
  if (run.has_result) profile["worker_setup"] = run.result.worker;
  double stage_seconds = 0;
  for (const char *name : kGpuStageNames) stage_seconds += stage_of(v, name).wall_seconds;
  profile["outside_stages_seconds"] = profile["worker_run_seconds"].get<double>() - stage_seconds;
  v.profile = profile;
  map_profile_lines(v.profiling, candidate);

  // The three axes. Executed means run AND doing the work: a target that ran but did too little of
  // the task's FLOPs (e.g. one wgmma beside an FFMA loop) fails the axis and is named in a warning.
  detail::AxesDecision decided = detail::decide_axes(v, !task.targets.empty(), settings.min_target_work_share,
                                                     settings.min_tma_byte_share, settings.redundant_work);
  v.axes = decided.axes;
  for (auto &line : decided.shortfalls)
    v.execution.diagnostics.push_back({"warning", std::move(line), std::nullopt});
  // Beside the axes: the hidden workloads.
  v.generalizes = detail::decide_generalization(v, task.hidden_workloads.size(), candidate.hidden_plan_errors,
                                                settings.hidden.check);

  // Diagnostics for the model on faults, hangs and races.
  const Status c = v.correctness.status;
  const bool wants_sanitizer =
      c == Status::runtime_error || c == Status::timeout || c == Status::nondeterministic;
  if (settings.run_sanitizer && wants_sanitizer) {
    if (run.exiting) {  // the rerun needs the GPU to itself
      (void)run.exiting->reap(kExitingWorkerLimit);
      run.exiting.reset();
    }
    run_sanitizer(candidate, task, job, dir.path(), worker, candidate.sass_listing, settings);
  } else {
    v.sanitizer.status = Status::skipped;
    v.sanitizer.summary = wants_sanitizer ? "sanitizer disabled" : "not needed (no fault, hang or race)";
  }
  v.finalize_status();
  if (run.exiting)
    detail::WorkerPool::shared().reap_later(std::move(*run.exiting), lock, kExitingWorkerLimit);
}

}  // namespace ptxbench::evaluator
