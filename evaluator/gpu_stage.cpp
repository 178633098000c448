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
#include "evaluator/worker_client.hpp"
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
  return v.stage(protocol::stage_from_name(name).value_or(protocol::Stage::timing));
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
  for (const auto &plan : c.plans) job.workloads.push_back(job_workload(task, plan));
  const bool hidden = settings.hidden.check && !c.hidden_plans.empty();
  for (const auto &row : protocol::kStageTable) {
    if (row.side != protocol::StageSide::worker) continue;
    if (row.stage == protocol::Stage::generalization && !hidden) continue;
    if (row.stage == protocol::Stage::profile && !settings.profile.enabled) continue;
    job.stages.emplace_back(row.name);
  }
  if (hidden) {
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
  job.cache_dir = selection_cache_dir(settings).string();
  job.task = task.to_json();
  return job;
}

/// A worker that has written its result gets this long to exit before its process group is killed.
constexpr std::chrono::milliseconds kExitingWorkerLimit{30'000};

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

/// num_sms: the plans resolved it on the CPU (the task's GPU, or the setting); the worker reports the
/// device's SM count. The verdict records the value used; a different device gets a warning, since a
/// grid sized by num_sms then no longer matches the SMs one to one (timings are not the task GPU's).
void note_num_sms(CompiledCandidate &candidate, const json &environment) {
  Verdict &v = candidate.verdict;
  if (candidate.plans.empty() || candidate.plans.front().num_sms <= 0) return;
  const std::int64_t planned = candidate.plans.front().num_sms;
  v.environment["num_sms"] = planned;
  const json &found =
      environment.is_object() && environment.contains("sm_count") ? environment["sm_count"] : json(nullptr);
  if (found.is_number_integer() && found.get<std::int64_t>() != planned)
    v.correctness.diagnostics.push_back(
        {"warning",
         fmt::format(
             "the manifest's num_sms resolved to {} but this GPU ({}) has {} SMs: set the evaluator's "
             "num_sms (run config evaluator.num_sms, or ptxbench eval --num-sms {}) to evaluate on it",
             planned, environment.value("gpu_name", "?"), found.get<std::int64_t>(),
             found.get<std::int64_t>()),
         std::nullopt});
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
  WorkerCommand command = WorkerCommand::one_job(job_path, result_path);
  command.wrapper = {*tool_path, "--tool", tool, "--print-limit", "20", "--show-backtrace", "device"};
  const WorkerRun run = run_worker(worker, command,
                                   WorkerPlace{.home = job_dir,
                                               .visible_device = settings.device,
                                               .wall = std::chrono::milliseconds(60'000),
                                               .cpu_seconds = 300});
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
  return locate_worker(settings);
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

namespace {

/// The job's files in the GPU stage's private folder. A listing still being made goes to the worker as
/// a file when it is done; the worker needs it only for the execution stage, after correctness and timing.
struct JobFiles {
  util::TempDir dir{"ptxbench-gpu"};
  fs::path cubin = dir.path() / "kernel.cubin";
  fs::path job = dir.path() / "job.json";
  fs::path result = dir.path() / "result.json";
  fs::path sass = dir.path() / "sass.json";
};

protocol::Job write_job(const CompiledCandidate &candidate, const tasks::Task &task,
                        const EvaluatorSettings &settings, const JobFiles &files) {
  protocol::Job job = build_job(candidate, task, settings, files.cubin);
  if (candidate.pending_sass)
    job.sass_path = files.sass.string();
  else
    job.sass = candidate.sass_listing.instructions;
  if (auto w1 = util::write_file_atomic(files.cubin, candidate.cubin); !w1)
    throw std::runtime_error(w1.error());
  if (auto w2 = util::write_file_atomic(files.job, json(job).dump()); !w2)
    throw std::runtime_error(w2.error());
  return job;
}

/// Hands the SASS listing to the worker as a file once the disassembler is done (on a thread).
std::jthread hand_over_sass(CompiledCandidate &candidate, const fs::path &sass_path) {
  if (!candidate.pending_sass) return {};
  return std::jthread([&candidate, &sass_path] {
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
}

/// Runs the job on the pre-started worker `ready` (or a one-shot one), and once more on a one-shot
/// worker when the pre-started one died before it took the job (no verdict on the candidate).
WorkerRun run_job(std::optional<util::StartedProcess> ready, const fs::path &worker, const JobFiles &files,
                  const EvaluatorSettings &settings, json &profile) {
  const auto worker_start = std::chrono::steady_clock::now();
  const auto one_shot = [&] {
    return run_worker(worker, WorkerCommand::one_job(files.job, files.result),
                      WorkerPlace{.home = files.dir.path(),
                                  .visible_device = settings.device,
                                  .wall = settings.worker.wall,
                                  .cpu_seconds = settings.worker.cpu_seconds});
  };
  const bool prestarted = ready.has_value();
  WorkerRun run = prestarted ? run_prestarted(std::move(*ready), files.job, files.result,
                                              settings.worker.wall, settings.worker.wait_for_exit)
                             : one_shot();
  profile["worker"] = prestarted ? "prestarted" : "one_shot";
  if (prestarted && !run.process.timed_out && !fs::exists(files.result)) {
    profile["worker"] = "one_shot_after_prestarted_died";
    profile["prestarted_exit"] = run.process.describe();
    run = one_shot();
  }
  const auto worker_end = std::chrono::steady_clock::now();
  profile["worker_run_seconds"] = std::chrono::duration<double>(worker_end - worker_start).count();
  profile["worker_handover"] = handover_seconds(run.result.worker, worker_start, worker_end);
  // A worker still tearing down keeps the GPU lock until it exits, after this verdict is made.
  profile["worker_exit"] = run.exiting ? "after the verdict" : "waited for";
  return run;
}

/// The worker's stages into the verdict: those it wrote, in its words; the crash, kill or wall limit
/// charged to the first it did not finish (a machine fault recorded as such); the rest not run.
void take_worker_stages(Verdict &v, const WorkerRun &run, const protocol::Job &job,
                        const EvaluatorSettings &settings) {
  const auto &stages = run.result.stages;
  for (const char *name : kGpuStageNames)
    if (stages.contains(name)) stage_of(v, name) = stages.at(name);
  if (!run.clean()) {
    const CrashCharge charge = charge_crash(run, job.stages, settings.worker.wall);
    StageResult &s = stage_of(v, charge.stage);
    s.status = charge.status;
    s.summary = charge.summary;
    if (!charge.stderr_tail.empty())
      s.diagnostics.push_back({"error", "worker stderr: " + charge.stderr_tail, std::nullopt});
    s.diagnostics.insert(s.diagnostics.begin(), Diagnostic{"error", s.summary, std::nullopt});
    if (charge.fault) v.machine_fault = charge.fault;
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
}

/// The kernel's printf, the timing policy, what ran it (environment, num_sms, the inputs' seed) and where
/// the worker run's time went.
void record_run(CompiledCandidate &candidate, const WorkerRun &run, const fs::path &worker,
                const EvaluatorSettings &settings, json profile) {
  Verdict &v = candidate.verdict;
  const util::ProcessResult &p = run.process;
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
  if (run.result.environment.is_object())
    for (auto &[k, val] : run.result.environment.items()) v.environment[k] = val;
  v.environment["gpu_index"] = settings.device;
  v.environment["worker"] = worker.string();
  note_num_sms(candidate, run.result.environment);
  if (run.has_result) v.settings["correctness_base_seed"] = run.result.base_seed;
  // The worker's own set-up and the handover: worker run minus the stages it timed.
  if (run.has_result) profile["worker_setup"] = run.result.worker;
  double stage_seconds = 0;
  for (const char *name : kGpuStageNames) stage_seconds += stage_of(v, name).wall_seconds;
  profile["outside_stages_seconds"] = profile["worker_run_seconds"].get<double>() - stage_seconds;
  v.profile = std::move(profile);
  map_profile_lines(v.profiling, candidate);
}

/// The three axes and, beside them, the hidden workloads. Executed means run AND doing the work: a
/// target that ran but did too little of the task's FLOPs (e.g. one wgmma beside an FFMA loop) fails the
/// axis and is named in a warning.
void decide(CompiledCandidate &candidate, const tasks::Task &task, const EvaluatorSettings &settings) {
  Verdict &v = candidate.verdict;
  detail::AxesDecision decided = detail::decide_axes(v, !task.targets.empty(), settings.min_target_work_share,
                                                     settings.min_tma_byte_share, settings.redundant_work);
  v.axes = decided.axes;
  for (auto &line : decided.shortfalls)
    v.execution.diagnostics.push_back({"warning", std::move(line), std::nullopt});
  v.generalizes = detail::decide_generalization(v, task.hidden_workloads.size(), candidate.hidden_plan_errors,
                                                settings.hidden.check);
}

/// Diagnostics for the model on faults, hangs and races: compute-sanitizer reruns the job's smallest
/// workload once (the worker still tearing down is waited for: the rerun needs the GPU to itself).
void sanitize_if_needed(CompiledCandidate &candidate, const tasks::Task &task, const protocol::Job &job,
                        const JobFiles &files, const fs::path &worker, WorkerRun &run,
                        const EvaluatorSettings &settings) {
  Verdict &v = candidate.verdict;
  const Status c = v.correctness.status;
  const bool wants_sanitizer =
      c == Status::runtime_error || c == Status::timeout || c == Status::nondeterministic;
  if (!settings.run_sanitizer || !wants_sanitizer) {
    v.sanitizer.status = Status::skipped;
    v.sanitizer.summary = wants_sanitizer ? "sanitizer disabled" : "not needed (no fault, hang or race)";
    return;
  }
  if (run.exiting) {
    (void)run.exiting->reap(kExitingWorkerLimit);
    run.exiting.reset();
  }
  run_sanitizer(candidate, task, job, files.dir.path(), worker, candidate.sass_listing, settings);
}

/// Marks the GPU stages skipped with `reason` (a machine fault when one is given) and ends the verdict.
void skip_all(Verdict &v, const std::string &reason, std::optional<MachineFault> fault = std::nullopt) {
  v.skip_gpu_stages(reason);
  if (fault) v.machine_fault = fault;
  v.finalize_status();
}

}  // namespace

void run_gpu_stages(CompiledCandidate &candidate, const tasks::Task &task,
                    const EvaluatorSettings &settings) {
  Verdict &v = candidate.verdict;
  if (const std::string reason = gpu_unavailable_reason(settings); !reason.empty())
    return skip_all(v, reason);
  if (!candidate.ready_for_gpu()) return skip_all(v, "not run: an earlier stage did not pass");
  const fs::path worker = *find_worker_binary(settings);
  const JobFiles files;
  const protocol::Job job = write_job(candidate, task, settings, files);

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
  if (!lock->error().empty()) return skip_all(v, lock->error(), MachineFault::gpu_lock);
  std::jthread sass_handover = hand_over_sass(candidate, files.sass);
  WorkerRun run = run_job(std::move(ready), worker, files, settings, profile);
  // The next candidate's worker sets itself up while this process does CPU work; it waits for the lock.
  if (settings.worker.prestart) detail::WorkerPool::shared().refill(key, task.family == tasks::Family::gemm);
  if (sass_handover.joinable()) sass_handover.join();
  if (!run.started)
    return skip_all(v, "the GPU worker could not start: " + run.start_error,
                    MachineFault::worker_not_started);

  take_worker_stages(v, run, job, settings);
  record_run(candidate, run, worker, settings, std::move(profile));
  decide(candidate, task, settings);
  sanitize_if_needed(candidate, task, job, files, worker, run, settings);
  v.finalize_status();
  if (run.exiting)
    detail::WorkerPool::shared().reap_later(std::move(*run.exiting), lock, kExitingWorkerLimit);
}

}  // namespace ptxbench::evaluator
