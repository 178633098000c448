// The worker's stages: correctness, timing, execution counts (in that order
// of running, so that no timed launch ever runs patched by CUPTI).
#include "evaluator/worker/worker.hpp"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <iterator>
#include <optional>
#include <random>
#include <sstream>
#include <thread>

#include <cublasLt.h>
#include <cuda.h>
#include <cuda_runtime_api.h>
#include <dlfcn.h>

#include "evaluator/worker/cudnn_sdpa.hpp"
#include "evaluator/worker/detail/candidate_kernel.hpp"
#include "evaluator/worker/detail/cuda_check.hpp"
#include "evaluator/worker/detail/device_ops.hpp"
#include "evaluator/worker/detail/nvml_clock.hpp"
#include "evaluator/worker/detail/probe_kernel.hpp"
#include "evaluator/worker/detail/sass_counts.hpp"
#include "evaluator/worker/detail/speed_of_light.hpp"
#include "evaluator/worker/family.hpp"
#include "evaluator/worker/gemm_reference.hpp"
#include "evaluator/worker/job.hpp"
#include "evaluator/worker/selection_cache.hpp"
#include "util/strings.hpp"

namespace ptxbench::worker {
namespace {

using nlohmann::json;
using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

std::uint64_t mix(std::uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

std::uint64_t name_hash(const std::string &s) {
  std::uint64_t h = 1469598103934665603ull;
  for (unsigned char c : s) h = (h ^ c) * 1099511628211ull;
  return h;
}

/// Atomic write (temp file + rename, fsynced): a reader never sees half a result.
void write_atomic(const std::string &path, const std::string &data) {
  const std::string tmp = path + ".tmp";
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
  if (fd < 0) throw WorkerError("internal", "cannot write " + tmp);
  std::size_t done = 0;
  while (done < data.size()) {
    const ssize_t n = ::write(fd, data.data() + done, data.size() - done);
    if (n <= 0) {
      ::close(fd);
      throw WorkerError("internal", "short write to " + tmp);
    }
    done += static_cast<std::size_t>(n);
  }
  ::fsync(fd);
  ::close(fd);
  if (std::rename(tmp.c_str(), path.c_str()) != 0) throw WorkerError("internal", "cannot rename " + tmp);
}

std::string read_all(const std::string &path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw WorkerError("internal", "cannot read " + path);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

using protocol::Status;
namespace exit_code = protocol::exit_code;

/// A stage's result; `diagnostics` is a JSON array of diag() entries (stages collect them as JSON).
protocol::StageResult stage_json(Status status, const std::string &summary, json diagnostics = json::array(),
                                 json figures = json::object(), double wall = 0) {
  return protocol::StageResult{status, summary, diagnostics.get<std::vector<protocol::Diagnostic>>(),
                               std::move(figures), wall};
}

json diag(const std::string &text, const std::string &severity = "error") {
  return protocol::Diagnostic{severity, text, std::nullopt};
}

std::string fmt_num(double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.6g", v);
  return buf;
}

std::string dims_text(const std::array<std::int64_t, 3> &d) {
  std::string s = "(";  // appended piecewise: GCC 12 warns falsely on "(" + std::string
  s += std::to_string(d[0]);
  s += ",";
  s += std::to_string(d[1]);
  s += ",";
  s += std::to_string(d[2]);
  s += ")";
  return s;
}

/// Flat row-major index -> coordinates of `shape`.
std::vector<std::int64_t> unflatten(std::int64_t index, const std::vector<std::int64_t> &shape) {
  std::vector<std::int64_t> coord(shape.size(), 0);
  for (std::size_t d = shape.size(); d-- > 0;) {
    coord[d] = shape[d] ? index % shape[d] : 0;
    index = shape[d] ? index / shape[d] : 0;
  }
  return coord;
}

std::string coord_text(const std::vector<std::int64_t> &c) {
  std::string s = "[";
  for (std::size_t i = 0; i < c.size(); ++i) s += (i ? ", " : "") + std::to_string(c[i]);
  return s + "]";
}

/// Device allocations of one scope, with guard regions; freed on destruction
/// (skipped after a fatal error: the process exits with _Exit instead).
class BufferPool {
 public:
  BufferPool(std::size_t guard, cudaStream_t stream) : guard_((guard + 255) / 256 * 256), stream_(stream) {}
  ~BufferPool() {
    for (void *p : allocations_) cudaFree(p);
  }
  BufferPool(const BufferPool &) = delete;
  BufferPool &operator=(const BufferPool &) = delete;

  DeviceTensor tensor(const TensorSpec &spec) {
    DeviceTensor t;
    t.spec = &spec;
    t.bytes = spec.bytes();
    t.guard_bytes = guard_;
    PTXB_CUDA(cudaMalloc(&t.base, t.bytes + 2 * guard_));
    allocations_.push_back(t.base);
    t.data = static_cast<unsigned char *>(t.base) + guard_;
    // On the worker's stream: a plain cudaMemset would run on the legacy stream, unordered
    // with the non-blocking stream that fills the inputs next.
    PTXB_CUDA(cudaMemsetAsync(t.base, detail::kGuardByte, t.bytes + 2 * guard_, stream_));
    return t;
  }

  float *floats(std::int64_t count) {
    void *p = nullptr;
    PTXB_CUDA(cudaMalloc(&p, static_cast<std::size_t>(count) * sizeof(float)));
    allocations_.push_back(p);
    return static_cast<float *>(p);
  }

  void *raw(std::size_t bytes) {
    void *p = nullptr;
    PTXB_CUDA(cudaMalloc(&p, bytes));
    allocations_.push_back(p);
    return p;
  }

 private:
  std::size_t guard_;
  cudaStream_t stream_;
  std::vector<void *> allocations_;
};

std::uint64_t guard_damage(const DeviceTensor &t, cudaStream_t s) {
  const auto *base = static_cast<const unsigned char *>(t.base);
  std::uint64_t n = detail::count_guard_damage(base, t.guard_bytes, s);
  n += detail::count_guard_damage(base + t.guard_bytes + t.bytes, t.guard_bytes, s);
  if (n) {  // restore the pattern so later trials report their own damage
    PTXB_CUDA(cudaMemsetAsync(t.base, detail::kGuardByte, t.guard_bytes, s));
    PTXB_CUDA(cudaMemsetAsync(static_cast<unsigned char *>(t.base) + t.guard_bytes + t.bytes,
                              detail::kGuardByte, t.guard_bytes, s));
  }
  return n;
}

struct DeviceFacts {
  std::string name, pci_bus_id, uuid;
  int ordinal = 0, sm_count = 0, cc_major = 0, cc_minor = 0, clock_khz = 0, mem_clock_khz = 0,
      bus_width_bits = 0;
  std::int64_t l2_bytes = 0, memory_bytes = 0;
  int driver_version = 0, runtime_version = 0;
  json to_json() const {
    return json{{"gpu_name", name},
                {"gpu_index", ordinal},
                {"gpu_pci_bus_id", pci_bus_id},
                {"gpu_uuid", uuid},
                {"compute_capability", std::to_string(cc_major) + "." + std::to_string(cc_minor)},
                {"sm_count", sm_count},
                {"l2_bytes", l2_bytes},
                {"memory_bytes", memory_bytes},
                {"max_sm_clock_mhz", clock_khz / 1000},
                {"memory_clock_mhz", mem_clock_khz / 1000},
                {"memory_bus_width_bits", bus_width_bits},
                {"driver_version", driver_version},
                {"cuda_runtime_version", runtime_version},
                {"cublaslt_version", cublasLtGetVersion()},
                {"cupti_version", detail::cupti_version()}};
  }
};

DeviceFacts device_facts(CUdevice dev, int ordinal) {
  DeviceFacts f;
  f.ordinal = ordinal;
  char name[256] = {0};
  PTXB_CU(cuDeviceGetName(name, sizeof name, dev));
  f.name = name;
  char pci[64] = {0};
  if (cuDeviceGetPCIBusId(pci, sizeof pci, dev) == CUDA_SUCCESS) f.pci_bus_id = pci;
  CUuuid uuid;
  if (cuDeviceGetUuid(&uuid, dev) == CUDA_SUCCESS) {
    char hex[40];
    for (int i = 0; i < 16; ++i)
      std::snprintf(hex + 2 * i, 3, "%02x", static_cast<unsigned>(static_cast<unsigned char>(uuid.bytes[i])));
    f.uuid = std::string("GPU-") + hex;
  }
  auto attr = [&](CUdevice_attribute a) {
    int v = 0;
    PTXB_CU(cuDeviceGetAttribute(&v, a, dev));
    return v;
  };
  f.sm_count = attr(CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT);
  f.cc_major = attr(CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR);
  f.cc_minor = attr(CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR);
  f.clock_khz = attr(CU_DEVICE_ATTRIBUTE_CLOCK_RATE);
  f.mem_clock_khz = attr(CU_DEVICE_ATTRIBUTE_MEMORY_CLOCK_RATE);
  f.bus_width_bits = attr(CU_DEVICE_ATTRIBUTE_GLOBAL_MEMORY_BUS_WIDTH);
  f.l2_bytes = attr(CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE);
  std::size_t mem = 0;
  PTXB_CU(cuDeviceTotalMem(&mem, dev));
  f.memory_bytes = static_cast<std::int64_t>(mem);
  PTXB_CU(cuDriverGetVersion(&f.driver_version));
  cudaRuntimeGetVersion(&f.runtime_version);
  return f;
}

/// The CUDA context every stage uses: the device's primary context (shared with the runtime).
struct Device {
  CUdevice dev = 0;
  CUcontext ctx = nullptr;
  cudaStream_t stream = nullptr;
  DeviceFacts facts;

  explicit Device(int ordinal) {
    CUresult r = cuInit(0);
    if (r != CUDA_SUCCESS) throw WorkerError("device", "cuInit failed: " + detail::describe(r));
    int count = 0;
    PTXB_CU(cuDeviceGetCount(&count));
    if (ordinal < 0 || ordinal >= count)
      throw WorkerError("device", "CUDA device " + std::to_string(ordinal) + " does not exist (" +
                                      std::to_string(count) + " visible)");
    PTXB_CU(cuDeviceGet(&dev, ordinal));
    PTXB_CU(cuDevicePrimaryCtxRetain(&ctx, dev));
    PTXB_CU(cuCtxSetCurrent(ctx));
    PTXB_CUDA(cudaSetDevice(ordinal));
    PTXB_CUDA(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
    facts = device_facts(dev, ordinal);
  }
};

/// The speed-of-light inputs of a device (detail/speed_of_light.hpp).
detail::DeviceRates device_rates(const DeviceFacts &f) {
  return {f.cc_major, f.sm_count, static_cast<double>(f.clock_khz), static_cast<double>(f.mem_clock_khz),
          f.bus_width_bits};
}

double median_of(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

double rel_spread(std::vector<double> v) {
  if (v.size() < 4) return 1;
  std::sort(v.begin(), v.end());
  const double p25 = v[v.size() / 4], p75 = v[(3 * v.size()) / 4];
  const double med = v[v.size() / 2];
  return med > 0 ? (p75 - p25) / med : 1;
}

/// Relative half-width of the ~95% confidence interval of the median
/// (1.57·IQR/√n, the box-plot notch): the adaptive stopping rule compares this
/// with TimingPolicy::target_rel_spread, so that the reported median, not each
/// sample, is known to that precision.
double median_ci_rel(const std::vector<double> &v) {
  if (v.size() < 4) return 1;
  return 1.57 * rel_spread(v) / std::sqrt(static_cast<double>(v.size()));
}

class Worker {
 public:
  Worker(Job job, std::string result_path, Device device, json worker_figures)
      : job_(std::move(job)), result_path_(std::move(result_path)), device_(device) {
    result_.environment = device_.facts.to_json();
    result_.worker = std::move(worker_figures);
    set_selection_cache(job_.cache_dir, device_.facts.uuid + "|driver " +
                                            std::to_string(device_.facts.driver_version) + "|runtime " +
                                            std::to_string(device_.facts.runtime_version));
    family_ = make_family_handler(job_.family, job_.reference);
    if (job_.correctness.base_seed == 0)
      job_.correctness.base_seed = mix(static_cast<std::uint64_t>(Clock::now().time_since_epoch().count()) ^
                                       static_cast<std::uint64_t>(getpid()));
    result_.base_seed = job_.correctness.base_seed;
    flush();
  }

  int run() {
    const auto fail_all = [&](Status status, const std::string &why) {
      for (const char *s : protocol::kGpuStageNames)
        if (job_.wants(s))
          result_.stages[s] = stage_json(s == std::string("correctness") ? status : Status::skipped, why);
      finish();
      return exit_code::kFinished;
    };
    if (!family_)
      return fail_all(Status::skipped, "no GPU evaluation for family '" + job_.family + "' with reference '" +
                                           job_.reference + "' in this worker");
    for (const auto &w : job_.workloads)
      if (std::string why = family_->check_workload(w.spec); !why.empty())
        return fail_all(Status::skipped, "workload " + w.spec.name + ": " + why);
    std::string cubin;
    try {
      cubin = read_all(job_.cubin_path);
    } catch (const WorkerError &e) {
      return fail_all(Status::skipped, e.what());
    }
    if (std::string why = kernel_.load(cubin, job_.entry); !why.empty())
      fatal("correctness", Status::launch_error, why);

    bool correct = true;
    if (job_.wants("correctness")) correct = correctness_stage();
    if (job_.wants("timing")) {
      if (correct)
        timing_stage();
      else
        set_stage("timing", stage_json(Status::skipped, "not timed: the outputs were not correct"));
    }
    if (job_.wants("execution")) execution_stage(correct);
    finish();
    return exit_code::kFinished;
  }

 private:
  // ---- result bookkeeping ---------------------------------------------------------------
  void flush() { write_atomic(result_path_, json(result_).dump(1)); }
  void set_stage(const std::string &name, protocol::StageResult stage) {
    result_.stages[name] = std::move(stage);
    flush();
  }
  void finish() {
    result_.finished = true;
    flush();
  }
  /// A stage ended the worker (runtime_error, timeout, launch_error): record and exit now.
  /// _Exit: no destructors, since a faulted or hung context must not be touched again.
  [[noreturn]] void fatal(const std::string &stage, Status status, const std::string &summary,
                          json figures = json::object()) {
    json diagnostics = json::array({diag(summary)});
    result_.stages[stage] = stage_json(status, summary, diagnostics, std::move(figures), 0);
    result_.fatal = protocol::FatalStage{stage, status};
    try {
      flush();
    } catch (...) {
    }
    std::fflush(stdout);
    std::fflush(stderr);
    std::_Exit(exit_code::kStopped);
  }

  std::string launch_context(const JobWorkload &w, const std::string &what) const {
    return "workload " + w.spec.name + ", " + what + ", grid " + dims_text(w.launch.grid) + ", block " +
           dims_text(w.launch.block) +
           (w.launch.cluster[0] * w.launch.cluster[1] * w.launch.cluster[2] > 1
                ? ", cluster " + dims_text(w.launch.cluster)
                : "");
  }

  /// Launches the candidate and waits with the hang deadline; any failure ends the worker.
  /// deadline_ms < 0: the job's kernel-hang limit. instrumented: a launch under CUPTI, whose slowness is
  /// the instrumentation's, so running past the deadline skips the stage instead of calling it a hang.
  void launch_and_wait(const std::string &stage, const JobWorkload &w, detail::PackedParams &params,
                       const std::string &what, double deadline_ms = -1, bool instrumented = false) {
    const CUresult r = kernel_.launch(w.launch, params, device_.stream);
    if (r != CUDA_SUCCESS) {
      if (detail::is_sticky(r))
        fatal(stage, Status::runtime_error,
              "the kernel faulted: " + detail::describe(r) + " (" + launch_context(w, what) + ")");
      fatal(stage, Status::launch_error,
            "the device refused the launch: " + detail::describe(r) + " (" + launch_context(w, what) + ")");
    }
    wait_candidate(stage, w, what, deadline_ms, instrumented);
  }

  void wait_candidate(const std::string &stage, const JobWorkload &w, const std::string &what,
                      double deadline_ms = -1, bool instrumented = false) {
    if (deadline_ms < 0) deadline_ms = kernel_hang_ms();
    const detail::WaitOutcome o = detail::wait_with_deadline(device_.stream, deadline_ms);
    if (o.kind == detail::WaitOutcome::hang && instrumented) {
      // The same launch finished uninstrumented; counting every instruction made it this slow.
      const std::string why = "the instrumented launch ran past " + fmt_num(deadline_ms / 1000.0) +
                              " s (the kernel is too slow to count instructions within the limit)";
      result_.stages[stage] = stage_json(Status::skipped, why, json::array({diag(why, "warning")}));
      try {
        flush();
      } catch (...) {
      }
      std::fflush(stderr);
      std::_Exit(exit_code::kStopped);  // the context is busy with the kernel: leave, results are written
    }
    if (o.kind == detail::WaitOutcome::hang)
      fatal(stage, Status::timeout,
            "the kernel did not finish within " + fmt_num(kernel_hang_ms() / 1000.0) + " s (" +
                launch_context(w, what) +
                "): an endless loop or a deadlock, e.g. an mbarrier wait whose phase never completes");
    if (o.kind == detail::WaitOutcome::fault)
      fatal(stage, Status::runtime_error,
            "the kernel faulted: " + detail::describe(o.error) + " (" + launch_context(w, what) + ")");
  }

  void prepare(const std::string &stage, const JobWorkload &w) {
    if (std::string why = kernel_.prepare_launch(w.launch); !why.empty())
      fatal(stage, Status::launch_error, "workload " + w.spec.name + ": " + why);
  }

  void pack(const std::string &stage, const JobWorkload &w, const TensorSet &tensors,
            detail::PackedParams &out) {
    if (std::string why = kernel_.pack(w.launch, w.spec, tensors, out); !why.empty())
      fatal(stage, Status::launch_error, "workload " + w.spec.name + ": " + why);
  }

  void fill_inputs(const WorkloadSpec &spec, const TensorSet &tensors, std::uint64_t seed) {
    for (const auto &t : spec.tensors)
      if (!t.is_output && t.distribution != InputDistribution::derived) {
        const DeviceTensor &d = tensors.at(t.name);
        detail::fill_random(d.data, t.type, t.elements(), t.distribution, mix(seed ^ name_hash(t.name)),
                            device_.stream);
      }
    family_->derive_inputs(spec, tensors, device_.stream);
  }

  void poison_outputs(const WorkloadSpec &spec, const TensorSet &tensors) {
    for (const auto &t : spec.tensors)
      if (t.is_output) detail::fill_poison(tensors.at(t.name).data, t.type, t.elements(), device_.stream);
  }

  std::uint64_t input_checksum(const WorkloadSpec &spec, const TensorSet &tensors) {
    std::uint64_t sum = 0;
    for (const auto &t : spec.tensors)
      if (!t.is_output) sum = mix(sum ^ detail::checksum(tensors.at(t.name).data, t.bytes(), device_.stream));
    return sum;
  }

  // Seconds per phase of a stage, for finding where evaluation time goes. Each mark waits for the
  // stream, so GPU work is charged to the phase that queued it.
  struct PhaseSeconds {
    cudaStream_t stream;
    Clock::time_point last = Clock::now();
    json seconds = json::object();
    void mark(const char *phase) {
      PTXB_CUDA(cudaStreamSynchronize(stream));
      const auto now = Clock::now();
      seconds[phase] = seconds.value(phase, 0.0) + std::chrono::duration<double>(now - last).count();
      last = now;
    }
  };

  // ---- correctness ---------------------------------------------------------------------
  bool correctness_stage() {
    const auto start = Clock::now();
    PhaseSeconds phases{device_.stream};
    json workloads = json::array(), diagnostics = json::array();
    bool all_correct = true, all_deterministic = true, stopped_early = false;
    const bool sanitize = job_.mode == JobMode::sanitize;
    std::size_t workloads_skipped = 0;
    for (std::size_t wi = 0; wi < job_.workloads.size(); ++wi) {
      if (stopped_early) {
        ++workloads_skipped;
        continue;
      }
      const JobWorkload &w = job_.workloads[wi];
      prepare("correctness", w);
      BufferPool pool(job_.correctness.guard_bytes, device_.stream);
      TensorSet tensors;
      ReferenceSet reference;
      std::map<std::string, void *> snapshots;
      for (const auto &t : w.spec.tensors) {
        tensors[t.name] = pool.tensor(t);
        if (t.is_output) {
          reference[t.name] = pool.floats(t.elements());
          snapshots[t.name] = pool.raw(t.bytes());
        }
      }
      detail::PackedParams params;
      pack("correctness", w, tensors, params);
      phases.mark("buffers");

      json worst_first = nullptr;
      double max_abs = 0, max_rel = 0;
      std::uint64_t mismatches = 0, nans = 0, unwritten = 0, damage = 0;
      bool mutated = false, deterministic = true;
      int passed = 0, trials_run = 0;
      const int trials = sanitize ? 1 : job_.correctness.trials;
      for (int trial = 0; trial < trials && !stopped_early; ++trial) {
        ++trials_run;
        const std::uint64_t seed = mix(job_.correctness.base_seed ^ mix(wi * 1000003ull + trial));
        fill_inputs(w.spec, tensors, seed);
        phases.mark("fill");
        family_->run_reference(w.spec, tensors, reference, device_.stream);
        phases.mark("reference");
        if (!sanitize) keep_for_timing(wi, trial, w.spec, tensors, reference);
        poison_outputs(w.spec, tensors);
        const std::uint64_t before = input_checksum(w.spec, tensors);
        phases.mark("checks");
        const auto launch_start = Clock::now();
        launch_and_wait("correctness", w, params, "trial " + std::to_string(trial + 1));
        // Sizes the instrumented launch's deadline and budget when the kernel is never timed.
        correctness_launch_ms_ = std::max(correctness_launch_ms_, 1e3 * seconds_since(launch_start));
        phases.mark("candidate");
        bool trial_ok = true;
        for (const auto &t : w.spec.tensors) {
          if (!t.is_output) continue;
          const detail::CompareStats s =
              detail::compare_to_reference(tensors.at(t.name).data, t.type, reference.at(t.name),
                                           t.elements(), t.atol, t.rtol, device_.stream);
          max_abs = std::max(max_abs, s.max_abs_error);
          max_rel = std::max(max_rel, s.max_rel_error);
          mismatches += s.mismatches;
          nans += s.nan_count;
          unwritten += s.unwritten_count;
          if (s.mismatches) {
            trial_ok = false;
            if (worst_first.is_null())
              worst_first = {{"tensor", t.name},
                             {"index", unflatten(s.first_mismatch, t.shape)},
                             {"got", std::isnan(s.first_got) ? json("NaN") : json(s.first_got)},
                             {"expected", s.first_expected},
                             {"trial", trial + 1},
                             {"unwritten", s.unwritten_count > 0 && std::isnan(s.first_got)}};
          }
        }
        for (const auto &[name, t] : tensors) damage += guard_damage(t, device_.stream);
        if (input_checksum(w.spec, tensors) != before) mutated = true;
        if (damage || mutated) trial_ok = false;
        // The first failing trial decides the verdict; the remaining trials (and workloads) would only
        // add counts, so they are skipped unless the settings ask for all of them.
        if (!trial_ok && !job_.correctness.all_trials && !sanitize) stopped_early = true;
        // A second identical launch must give the same bits (races, uninitialized reads).
        if (trial == 0 && job_.correctness.check_determinism && !sanitize && !stopped_early) {
          for (const auto &t : w.spec.tensors)
            if (t.is_output)
              PTXB_CUDA(cudaMemcpyAsync(snapshots[t.name], tensors.at(t.name).data, t.bytes(),
                                        cudaMemcpyDeviceToDevice, device_.stream));
          poison_outputs(w.spec, tensors);
          launch_and_wait("correctness", w, params, "determinism relaunch");
          for (const auto &t : w.spec.tensors)
            if (t.is_output && detail::count_bit_differences(snapshots[t.name], tensors.at(t.name).data,
                                                             t.type, t.elements(), device_.stream) != 0)
              deterministic = false;
        }
        passed += trial_ok;
        phases.mark("checks");
      }
      const bool ok = passed == trials && trials_run == trials;
      all_correct = all_correct && ok;
      all_deterministic = all_deterministic && deterministic;
      std::uint64_t elements = 0;
      for (const auto &t : w.spec.tensors)
        if (t.is_output) elements += static_cast<std::uint64_t>(t.elements());
      workloads.push_back({{"name", w.spec.name},
                           {"trials", trials_run},
                           {"trials_planned", trials},
                           {"passed", passed},
                           {"max_abs_error", max_abs},
                           {"max_rel_error", max_rel},
                           {"mismatches", mismatches},
                           {"first_mismatch", worst_first},
                           {"nan_count", nans},
                           {"unwritten_count", unwritten},
                           {"guard_damage", damage},
                           {"inputs_mutated", mutated},
                           {"deterministic", deterministic},
                           {"output_elements", elements}});
      if (!ok) {
        std::string text = "workload " + w.spec.name + ": " + std::to_string(passed) + " of " +
                           std::to_string(trials_run) + " trials passed";
        if (trials_run < trials)
          text += " (stopped at the first failing trial; " + std::to_string(trials - trials_run) +
                  " more skipped)";
        if (mismatches) {
          text += "; " + std::to_string(mismatches) + " mismatching elements over all trials (of " +
                  std::to_string(elements) + " per trial)";
          if (!worst_first.is_null()) {
            const auto &tensor_spec = *w.spec.find_tensor(worst_first["tensor"].get<std::string>());
            text += "; first at " + worst_first["tensor"].get<std::string>() +
                    coord_text(worst_first["index"].get<std::vector<std::int64_t>>()) + ": got " +
                    worst_first["got"].dump() + ", expected " +
                    fmt_num(worst_first["expected"].get<double>()) + " (tolerance " +
                    fmt_num(tensor_spec.atol) + " + " + fmt_num(tensor_spec.rtol) + "·|expected|)";
          }
        }
        if (nans) text += "; " + std::to_string(nans) + " NaN values";
        if (unwritten)
          text += "; " + std::to_string(unwritten) + " elements never written (still the NaN poison)";
        if (damage)
          text += "; " + std::to_string(damage) + " bytes written outside the buffers (guard regions)";
        if (mutated) text += "; the kernel modified its input tensors";
        diagnostics.push_back(diag(text));
      } else if (!deterministic) {
        diagnostics.push_back(
            diag("workload " + w.spec.name +
                 ": a second identical launch gave different bits (a race between threads or "
                 "blocks, or a read of memory nothing wrote)"));
      }
    }
    Status status = Status::ok;
    std::string summary = "correct on every workload";
    if (!all_correct) {
      status = Status::incorrect;
      summary = diagnostics.empty() ? "incorrect" : diagnostics[0]["text"].get<std::string>();
    } else if (!all_deterministic) {
      status = Status::nondeterministic;
      summary = diagnostics[0]["text"].get<std::string>();
    } else {
      summary = "correct on " + std::to_string(job_.workloads.size()) + " workloads x " +
                std::to_string(sanitize ? 1 : job_.correctness.trials) + " trials";
    }
    phases.mark("buffers");  // freeing them
    json figures = {{"workloads", workloads},
                    {"base_seed", job_.correctness.base_seed},
                    {"stopped_early", stopped_early},
                    {"workloads_skipped", workloads_skipped},
                    {"slowest_launch_ms", correctness_launch_ms_},
                    {"phase_seconds", phases.seconds}};
    set_stage("correctness", stage_json(status, summary, diagnostics, figures, seconds_since(start)));
    return status == Status::ok;
  }

  // A correctness trial's inputs and fp32 reference, kept (copied before the candidate ran) as one of
  // the timing stage's input sets: see TimingPolicy::reuse_correctness_inputs. Kept only while the GPU
  // has room for them beside 2 GiB of headroom; otherwise timing draws its own sets.
  void keep_for_timing(std::size_t wi, int trial, const WorkloadSpec &spec, const TensorSet &tensors,
                       const ReferenceSet &reference) {
    if (!job_.timing.reuse_correctness_inputs || trial >= job_.timing.input_sets || !job_.wants("timing"))
      return;
    std::vector<KeptInputs> &sets = kept_[wi];
    if (static_cast<int>(sets.size()) != trial) return;  // an earlier trial could not be kept
    std::size_t bytes = 0;
    for (const auto &t : spec.tensors)
      bytes += t.is_output ? static_cast<std::size_t>(t.elements()) * sizeof(float) : t.bytes();
    std::size_t free_bytes = 0, total_bytes = 0;
    PTXB_CUDA(cudaMemGetInfo(&free_bytes, &total_bytes));
    if (free_bytes < bytes + (std::size_t{2} << 30)) return;
    if (!kept_pool_) kept_pool_ = std::make_unique<BufferPool>(256, device_.stream);
    KeptInputs k;
    for (const auto &t : spec.tensors) {
      if (t.is_output) {
        k.refs[t.name] = kept_pool_->floats(t.elements());
        PTXB_CUDA(cudaMemcpyAsync(k.refs[t.name], reference.at(t.name),
                                  static_cast<std::size_t>(t.elements()) * sizeof(float),
                                  cudaMemcpyDeviceToDevice, device_.stream));
      } else {
        k.inputs[t.name] = kept_pool_->tensor(t);
        PTXB_CUDA(cudaMemcpyAsync(k.inputs[t.name].data, tensors.at(t.name).data, t.bytes(),
                                  cudaMemcpyDeviceToDevice, device_.stream));
      }
    }
    sets.push_back(std::move(k));
  }

  // ---- timing ---------------------------------------------------------------------------
  void timing_stage() {
    const auto start = Clock::now();
    PhaseSeconds phases{device_.stream};
    const TimingPolicy &tp = job_.timing;
    json workloads = json::array(), diagnostics = json::array();
    json library = json::object();
    std::vector<double> speedups;
    bool suspicious = false;
    double sm_clock = 0;
    void *scratch = nullptr;
    const std::size_t scratch_bytes = static_cast<std::size_t>(
        tp.l2_flush_factor * static_cast<double>(std::max<std::int64_t>(device_.facts.l2_bytes, 1 << 20)));
    PTXB_CUDA(cudaMalloc(&scratch, scratch_bytes));
    cudaEvent_t ev_start, ev_stop;
    PTXB_CUDA(cudaEventCreate(&ev_start));
    PTXB_CUDA(cudaEventCreate(&ev_stop));
    std::mt19937_64 rng(job_.correctness.base_seed ^ 0x7151ull);
    int flush_counter = 0;
    auto flush_l2 = [&] {
      PTXB_CUDA(cudaMemsetAsync(scratch, (++flush_counter) & 0xFF, scratch_bytes, device_.stream));
    };
    auto elapsed_ms = [&] {
      float ms = 0;
      PTXB_CUDA(cudaEventElapsedTime(&ms, ev_start, ev_stop));
      return static_cast<double>(ms);
    };
    // The stream is idle here (every sample is waited for), so the GPU idles while we sleep.
    auto cool_down = [&](double sample_ms) {
      const double idle_ms = std::min(tp.cooldown_ratio * sample_ms, tp.cooldown_max_ms);
      if (idle_ms > 0) std::this_thread::sleep_for(std::chrono::duration<double, std::milli>(idle_ms));
    };

    for (std::size_t wi = 0; wi < job_.workloads.size(); ++wi) {
      const JobWorkload &w = job_.workloads[wi];
      prepare("timing", w);
      BufferPool pool(256, device_.stream);
      const int sets = tp.input_sets;
      std::vector<TensorSet> cand(sets), lib(sets);
      std::vector<ReferenceSet> refs(sets);
      std::vector<detail::PackedParams> params(sets);
      TensorSet cand_out, lib_out;
      for (const auto &t : w.spec.tensors)
        if (t.is_output) {
          cand_out[t.name] = pool.tensor(t);
          lib_out[t.name] = pool.tensor(t);
        }
      const std::vector<KeptInputs> *kept = kept_.contains(wi) ? &kept_.at(wi) : nullptr;
      for (int s = 0; s < sets; ++s) {
        const bool reuse = kept && s < static_cast<int>(kept->size());
        for (const auto &t : w.spec.tensors) {
          if (t.is_output) {
            cand[s][t.name] = cand_out[t.name];
            lib[s][t.name] = lib_out[t.name];
            refs[s][t.name] = reuse ? (*kept)[s].refs.at(t.name) : pool.floats(t.elements());
          } else {
            cand[s][t.name] = lib[s][t.name] = reuse ? (*kept)[s].inputs.at(t.name) : pool.tensor(t);
          }
        }
        if (!reuse) {
          fill_inputs(w.spec, cand[s], mix(job_.correctness.base_seed ^ mix(0xABCDEFull + wi * 977 + s)));
          family_->run_reference(w.spec, cand[s], refs[s], device_.stream);
        }
        pack("timing", w, cand[s], params[s]);
      }
      phases.mark("inputs");
      LibraryInfo info;
      try {
        TensorSet lib_inputs = lib[0];
        info = family_->prepare_library(w.spec, lib_inputs, lib_out, device_.stream);
      } catch (const WorkerError &e) {
        if (e.kind() == "runtime_error") throw;
        cudaFree(scratch);
        set_stage("timing",
                  stage_json(Status::skipped, std::string("the reference library could not run: ") + e.what(),
                             json::array({diag(e.what(), "warning")})));
        return;
      }
      library = {{"name", info.name}, {"version", info.version}, {"algo", info.algo}};
      phases.mark("library_selection");

      for (int i = 0; i < tp.warmup_launches; ++i) {
        launch_and_wait("timing", w, params[i % sets], "warm-up");
        family_->run_library(lib[i % sets], lib_out, device_.stream);
      }
      PTXB_CUDA(cudaStreamSynchronize(device_.stream));

      const int reverify_at =
          tp.reverify_random_launch
              ? static_cast<int>(rng() % static_cast<std::uint64_t>(std::max(1, tp.min_samples)))
              : -1;
      std::vector<double> cand_ms, lib_ms;
      json reverify = nullptr;
      int last_set =
          0;  // input set of the last timed candidate launch (its output is re-checked after the loop)
      // Output elements of the candidate's latest launch outside tolerance against input set `set`'s
      // reference.
      const auto wrong_outputs = [&](int set) {
        std::uint64_t bad = 0;
        for (const auto &t : w.spec.tensors)
          if (t.is_output)
            bad += detail::compare_to_reference(cand_out.at(t.name).data, t.type, refs[set].at(t.name),
                                                t.elements(), t.atol, t.rtol, device_.stream)
                       .mismatches;
        return bad;
      };
      phases.mark("warmup");
      const auto loop_start = Clock::now();
      for (int i = 0;; ++i) {
        const int s = i % sets;
        last_set = s;
        for (int half = 0; half < 2; ++half) {
          // Alternate who goes first so neither always runs right after the flush of the other.
          const bool candidate_turn = (half == 0) == (i % 2 == 0);
          flush_l2();
          PTXB_CUDA(cudaEventRecord(ev_start, device_.stream));
          if (candidate_turn) {
            const CUresult r = kernel_.launch(w.launch, params[s], device_.stream);
            if (r != CUDA_SUCCESS)
              fatal("timing", detail::is_sticky(r) ? Status::runtime_error : Status::launch_error,
                    "timed launch failed: " + detail::describe(r) + " (" + launch_context(w, "timing") + ")");
            PTXB_CUDA(cudaEventRecord(ev_stop, device_.stream));
            wait_candidate("timing", w, "timed launch " + std::to_string(i + 1));
            cand_ms.push_back(elapsed_ms());
            cool_down(cand_ms.back());
            if (i == reverify_at) {
              // The output of a random timed launch must still be right (no caching across calls).
              const std::uint64_t bad = wrong_outputs(s);
              reverify = {{"launch", i + 1}, {"input_set", s}, {"mismatches", bad}};
              if (bad) {
                suspicious = true;
                diagnostics.push_back(diag("workload " + w.spec.name + ": the output of timed launch " +
                                           std::to_string(i + 1) + " (input set " + std::to_string(s) +
                                           ") had " + std::to_string(bad) +
                                           " wrong elements although the correctness trials passed"));
              }
            }
          } else {
            if (tp.library_preroll) {  // see TimingPolicy::library_preroll
              family_->run_library(lib[s], lib_out, device_.stream);
              flush_l2();
              PTXB_CUDA(cudaEventRecord(ev_start, device_.stream));
            }
            family_->run_library(lib[s], lib_out, device_.stream);
            PTXB_CUDA(cudaEventRecord(ev_stop, device_.stream));
            PTXB_CUDA(cudaEventSynchronize(ev_stop));
            lib_ms.push_back(elapsed_ms());
            cool_down(lib_ms.back());
          }
        }
        const double t = seconds_since(loop_start);
        const bool enough = static_cast<int>(cand_ms.size()) >= tp.min_samples && t >= tp.min_seconds &&
                            median_ci_rel(cand_ms) <= tp.target_rel_spread &&
                            median_ci_rel(lib_ms) <= tp.target_rel_spread;
        if (enough || t >= tp.max_seconds) break;
      }
      phases.mark("sampling");
      if (tp.reverify_random_launch) {
        // Also the LAST timed launch: a kernel that turns wrong (and cheap) only after the random
        // re-check would otherwise keep an inflated speedup.
        const std::uint64_t bad = wrong_outputs(last_set);
        reverify["last_launch"] = {{"launch", cand_ms.size()}, {"input_set", last_set}, {"mismatches", bad}};
        if (bad) {
          suspicious = true;
          diagnostics.push_back(diag("workload " + w.spec.name + ": the output of the last timed launch (" +
                                     std::to_string(cand_ms.size()) + ") had " + std::to_string(bad) +
                                     " wrong elements although the correctness trials passed"));
        }
      }
      double workload_clock = 0;  // SM clock right after this workload's sampling
      if (auto mhz = detail::sm_clock_mhz(device_.facts.pci_bus_id)) sm_clock = workload_clock = *mhz;
      family_->release_library();

      const double cmed = median_of(cand_ms), lmed = median_of(lib_ms);
      slowest_launch_ms_ = std::max(slowest_launch_ms_, cmed);
      const ElemType in_type = [&] {
        for (const auto &t : w.spec.tensors)
          if (!t.is_output) return t.type;
        return ElemType::bf16;
      }();
      const detail::PeakRates peak = detail::peak_rates(device_rates(device_.facts), in_type);
      const double floor_ms = detail::sol_floor_ms(w.spec.flops, w.spec.bytes, peak);
      const double speedup = cmed > 0 ? lmed / cmed : 0;
      speedups.push_back(speedup);
      if (cmed < tp.sol_slack * floor_ms) {
        suspicious = true;
        diagnostics.push_back(diag(
            "workload " + w.spec.name + ": " + fmt_num(cmed) + " ms is below the speed-of-light floor of " +
            fmt_num(floor_ms) + " ms (peak " + fmt_num(peak.flops_per_s / 1e12) + " TFLOP/s, " +
            fmt_num(peak.bytes_per_s / 1e9) + " GB/s): the kernel cannot have done the work"));
      }
      json wj = {{"name", w.spec.name},
                 {"candidate_ms", cmed},
                 {"candidate_spread", rel_spread(cand_ms)},
                 {"library_ms", lmed},
                 {"library_spread", rel_spread(lib_ms)},
                 {"speedup", speedup},
                 {"candidate_tflops", cmed > 0 ? w.spec.flops / (cmed * 1e9) : 0},
                 {"library_tflops", lmed > 0 ? w.spec.flops / (lmed * 1e9) : 0},
                 {"sol_floor_ms", floor_ms},
                 {"candidate_median_ci", median_ci_rel(cand_ms)},
                 {"library_median_ci", median_ci_rel(lib_ms)},
                 {"sampling_seconds", seconds_since(loop_start)},
                 {"samples", cand_ms.size()},
                 {"library_samples", lib_ms.size()},
                 {"reverified", reverify},
                 {"sm_clock_mhz_after", workload_clock > 0 ? json(workload_clock) : json(nullptr)},
                 {"flops", w.spec.flops},
                 {"bytes", w.spec.bytes}};
      wj.update(peak.to_json());
      workloads.push_back(wj);
    }
    cudaFree(scratch);
    cudaEventDestroy(ev_start);
    cudaEventDestroy(ev_stop);

    double log_sum = 0, min_speedup = speedups.empty() ? 0 : speedups[0];
    for (double s : speedups) {
      log_sum += std::log(std::max(s, 1e-12));
      min_speedup = std::min(min_speedup, s);
    }
    const double geomean = speedups.empty() ? 0 : std::exp(log_sum / static_cast<double>(speedups.size()));
    json figures = {{"workloads", workloads},
                    {"geomean_speedup", geomean},
                    {"min_speedup", min_speedup},
                    {"sm_clock_mhz", sm_clock > 0 ? json(sm_clock) : json(nullptr)},
                    {"library", library},
                    {"l2_flush_bytes", scratch_bytes},
                    {"phase_seconds", phases.seconds}};
    const std::string summary = suspicious ? diagnostics[0]["text"].get<std::string>()
                                           : "speedup " + fmt_num(geomean) + "x geomean (min " +
                                                 fmt_num(min_speedup) + "x) over " +
                                                 library.value("name", "library");
    set_stage("timing", stage_json(suspicious ? Status::suspicious : Status::ok, summary, diagnostics,
                                   figures, seconds_since(start)));
  }

  // ---- execution (CUPTI SASS metrics) --------------------------------------------------
  // The orchestrator disassembles the cubin while the first stages run; wait for its listing here.
  // "" when it arrived (or was in the job), else why there is none.
  std::string await_sass_listing() {
    if (!job_.sass.empty() || job_.sass_path.empty()) return "";
    const auto give_up = Clock::now() + std::chrono::seconds(120);
    std::error_code ec;
    while (!std::filesystem::exists(job_.sass_path, ec)) {
      if (Clock::now() > give_up) return "the SASS listing did not arrive within 120 s";
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    std::ifstream in(job_.sass_path);
    const json j = json::parse(in, nullptr, /*allow_exceptions=*/false);
    if (j.is_discarded()) return "the SASS listing file is not JSON";
    SassHandover handover;
    try {
      handover = j.get<SassHandover>();
    } catch (const protocol::ProtocolError &e) {
      return std::string("the SASS listing file is malformed: ") + e.what();
    }
    if (handover.error) return *handover.error;
    job_.sass = std::move(handover.sass);
    return "";
  }

  void execution_stage(bool correct) {
    const auto start = Clock::now();
    // Instrumented code runs up to ~200x slower than plain. An incorrect kernel's counts still help the
    // repair feedback (a target in the SASS that never runs), so they are taken when that is cheap; a
    // kernel too slow to count within the budget is left uncounted instead of holding the GPU.
    const double launch_ms = std::max(slowest_launch_ms_, correctness_launch_ms_);
    if (!correct && 200.0 * launch_ms > incorrect_execution_budget_ms()) {
      set_stage(
          "execution",
          stage_json(Status::skipped,
                     "not counted: the outputs were not correct and counting instructions would take "
                     "about " +
                         fmt_num(200.0 * launch_ms / 1000.0) + " s (200x its " + fmt_num(launch_ms) +
                         " ms launch; budget " + fmt_num(incorrect_execution_budget_ms() / 1000.0) + " s)",
                     json::array(), json{{"estimated_seconds", 200.0 * launch_ms / 1000.0}},
                     seconds_since(start)));
      return;
    }
    if (const std::string why = await_sass_listing(); !why.empty()) {
      set_stage("execution",
                stage_json(Status::skipped, "no SASS listing of the cubin to join the counts with: " + why));
      return;
    }
    if (job_.sass.empty()) {
      set_stage("execution",
                stage_json(Status::skipped,
                           "no SASS listing of the cubin to join the counts with (cuobjdump/nvdisasm "
                           "missing on this machine)"));
      return;
    }
    // The smallest workload: instrumented code runs much slower.
    std::size_t pick = 0;
    for (std::size_t i = 1; i < job_.workloads.size(); ++i)
      if (job_.workloads[i].spec.flops < job_.workloads[pick].spec.flops) pick = i;
    const JobWorkload &w = job_.workloads[pick];
    prepare("execution", w);
    BufferPool pool(256, device_.stream);
    TensorSet tensors;
    for (const auto &t : w.spec.tensors) tensors[t.name] = pool.tensor(t);
    fill_inputs(w.spec, tensors, mix(job_.correctness.base_seed ^ 0xE3ull));
    poison_outputs(w.spec, tensors);
    detail::PackedParams params;
    pack("execution", w, tensors, params);
    PTXB_CUDA(cudaStreamSynchronize(device_.stream));
    const detail::SassCountResult counts =
        detail::count_sass_instructions(device_.ctx, device_.facts.ordinal, [&] {
          // Instrumented code runs many times slower: allow 200x the slowest timed launch, within limits.
          const double deadline = std::clamp(200.0 * launch_ms, kernel_hang_ms(), 60'000.0);
          launch_and_wait("execution", w, params, "instrumented launch", deadline, /*instrumented=*/true);
        });
    if (!counts.available) {
      set_stage(
          "execution",
          stage_json(Status::skipped, "CUPTI cannot count instructions here: " + counts.reason,
                     json::array({diag(counts.reason, "warning")}), json::object(), seconds_since(start)));
      return;
    }
    // The largest TMA box of the launch: an upper bound on what one UTMALDG moves (which map a PC uses
    // is not in the SASS), so a token TMA load is judged generously and still cannot pass.
    double box_bytes = 0;
    for (const auto &p : w.launch.params) {
      if (p.kind != ParamKind::tensor_map) continue;
      double elems = 1;
      for (auto b : p.box) elems *= static_cast<double>(b);
      for (const auto &t : w.spec.tensors)
        if (t.name == p.name) box_bytes = std::max(box_bytes, elems * static_cast<double>(size_of(t.type)));
    }
    json figures = detail::execution_figures(job_.sass, job_.targets, counts.counts, w.spec.flops, box_bytes);
    figures["workload"] = w.spec.name;
    figures["dropped_records"] = counts.dropped_records;
    // The busiest opcode families, named when a target did only part of the work.
    std::string top_text;
    for (std::size_t i = 0; i < figures["top_opcodes"].size() && i < 3; ++i)
      top_text += (i ? ", " : "") + figures["top_opcodes"][i]["family"].get<std::string>() + " " +
                  fmt_num(figures["top_opcodes"][i]["warp_executions"].get<double>());
    json diagnostics = json::array();
    std::string summary;
    for (const auto &t : figures["targets"]) {
      const std::string name = t["name"];
      std::string line;
      if (!t["present_in_sass"].get<bool>())
        line = "target " + name + " is not in the compiled SASS (no " + t["sass_families"].dump() +
               " instructions)";
      else if (!t["executed"].get<bool>())
        line = "target " + name +
               " is in the SASS but never executed (0 warp executions: it sits on a path the "
               "kernel never takes)";
      else
        line = "target " + name + " executed: " + std::to_string(t["warp_executions"].get<std::uint64_t>()) +
               " warp instructions";
      if (t["executed"].get<bool>() && t["work_share"].is_number()) {
        // The evaluator decides whether this share is enough (settings.min_target_work_share).
        const double share = t["work_share"].get<double>();
        line += " doing " + util::percent_text(share) + " of workload " + w.spec.name + "'s " +
                fmt_num(w.spec.flops) + " FLOPs";
        if (share < 0.99) line += " (the rest ran on other units; top opcodes: " + top_text + ")";
      }
      if (t["executed"].get<bool>() && t.contains("byte_share") && t["byte_share"].is_number())
        line += " loading " + util::percent_text(t["byte_share"].get<double>()) +
                " of the bytes read from global memory (at most, counting every box at the largest size)";
      diagnostics.push_back(diag(line, t["executed"].get<bool>() ? "note" : "warning"));
      summary += (summary.empty() ? "" : "; ") + line;
    }
    if (summary.empty()) summary = "the task names no target instructions";
    set_stage("execution", stage_json(Status::ok, summary, diagnostics, figures, seconds_since(start)));
  }

  double kernel_hang_ms() const { return static_cast<double>(job_.limits.kernel_hang.count()); }
  double incorrect_execution_budget_ms() const {
    return static_cast<double>(job_.limits.incorrect_execution_budget.count());
  }

  Job job_;
  std::string result_path_;
  Device device_;
  protocol::WorkerResult result_;
  double slowest_launch_ms_ =
      0;  ///< ms: slowest median candidate launch timed so far (sizes the instrumented deadline)
  double correctness_launch_ms_ = 0;  ///< ms: slowest correctness launch, wall clock (launch + wait)
  struct KeptInputs {
    TensorSet inputs;   ///< non-output tensors only
    ReferenceSet refs;  ///< fp32 reference of each output
  };
  std::map<std::size_t, std::vector<KeptInputs>> kept_;  ///< workload index -> kept trials, in trial order
  std::unique_ptr<BufferPool> kept_pool_;                ///< owns kept_'s buffers
  std::unique_ptr<FamilyHandler> family_;
  detail::CandidateKernel kernel_;
};

}  // namespace

namespace {

/// Runs one job on a device that is ready (fresh or pre-started). `figures`: where the worker's own
/// time went before the job (recorded in result.json under "worker").
int run_job_on(const std::string &job_path, const std::string &result_path, const Device &device,
               json figures) {
  Job job;
  try {
    job = json::parse(read_all(job_path)).get<Job>();
  } catch (const protocol::ProtocolError &e) {
    std::fprintf(stderr, "ptxbench-worker: malformed job %s: %s\n", job_path.c_str(), e.what());
    return exit_code::kBadJob;
  } catch (const json::exception &e) {
    std::fprintf(stderr, "ptxbench-worker: malformed job %s: %s\n", job_path.c_str(), e.what());
    return exit_code::kBadJob;
  } catch (const WorkerError &e) {
    std::fprintf(stderr, "ptxbench-worker: %s\n", e.what());
    return exit_code::kBadJob;
  }
  if (job.device != device.facts.ordinal) {
    std::fprintf(stderr, "ptxbench-worker: the job names device %d, this worker holds device %d\n",
                 job.device, device.facts.ordinal);
    return exit_code::kBadJob;
  }
  std::unique_ptr<Worker> worker;
  try {
    worker = std::make_unique<Worker>(std::move(job), result_path, device, std::move(figures));
  } catch (const WorkerError &e) {
    std::fprintf(stderr, "ptxbench-worker: no usable GPU: %s\n", e.what());
    return exit_code::kNoDevice;
  }
  try {
    return worker->run();
  } catch (const WorkerError &e) {
    // A sticky error outside a candidate launch (e.g. in a comparison after the
    // kernel corrupted memory): the orchestrator maps "error" to runtime_error.
    std::fprintf(stderr, "ptxbench-worker: %s: %s\n", e.kind().c_str(), e.what());
    std::fflush(stderr);
    std::_Exit(e.kind() == "runtime_error" ? exit_code::kStopped : exit_code::kInternal);
  }
}

int job_device(const std::string &job_path) {
  try {
    return json::parse(read_all(job_path)).value("device", 0);
  } catch (const std::exception &) {
    return 0;  // run_job_on reports the malformed job
  }
}

}  // namespace

int run_job_file(const std::string &job_path, const std::string &result_path) {
  const auto start = Clock::now();
  std::optional<Device> device;
  try {
    device.emplace(job_device(job_path));
  } catch (const WorkerError &e) {
    std::fprintf(stderr, "ptxbench-worker: no usable GPU: %s\n", e.what());
    return exit_code::kNoDevice;
  }
  return run_job_on(job_path, result_path, *device,
                    json{{"prestarted", false}, {"phase_seconds", {{"context", seconds_since(start)}}}});
}

int serve_prestarted(int device_ordinal, const std::string &lock_path, bool cupti) {
  json phases = json::object();
  auto last = Clock::now();
  const auto mark = [&](const char *phase) {
    const auto now = Clock::now();
    phases[phase] = std::chrono::duration<double>(now - last).count();
    last = now;
  };
  // Setting up under the GPU lock: a context being created beside a timed launch would disturb it.
  int lock_fd = -1;
  if (!lock_path.empty()) {
    lock_fd = ::open(lock_path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0666);
    if (lock_fd >= 0)
      while (::flock(lock_fd, LOCK_EX) != 0 && errno == EINTR) {
      }
  }
  mark("lock_wait");
  std::optional<Device> device;
  try {
    device.emplace(device_ordinal);
  } catch (const WorkerError &e) {
    std::fprintf(stderr, "ptxbench-worker: no usable GPU: %s\n", e.what());
    return exit_code::kNoDevice;
  }
  mark("context");
  // Both libraries, whatever the job: it is not known yet. A failure here is the job's to report.
  json warm = json::object();
  if (std::string why = prewarm_cublaslt(); !why.empty()) warm["cublaslt"] = why;
  if (std::string why = cudnn_sdpa::prewarm(); !why.empty()) warm["cudnn"] = why;
  mark("handles");
  if (cupti) {
    if (std::string why = detail::prewarm_cupti(device->facts.ordinal); !why.empty()) warm["cupti"] = why;
    mark("cupti");
  }
  if (lock_fd >= 0) ::close(lock_fd);  // closing releases the lock
  std::fputs("ready\n", stdout);
  std::fflush(stdout);
  std::string line;
  if (!std::getline(std::cin, line)) return exit_code::kFinished;  // the pool closed: no job for this worker
  mark("idle");
  const std::size_t tab = line.find('\t');
  if (tab == std::string::npos) {
    std::fprintf(stderr, "ptxbench-worker: expected JOB<TAB>RESULT on stdin, got '%s'\n", line.c_str());
    return exit_code::kBadJob;
  }
  json figures = {{"prestarted", true}, {"phase_seconds", phases}};
  if (!warm.empty()) figures["prewarm_errors"] = warm;
  return run_job_on(line.substr(0, tab), line.substr(tab + 1), *device, std::move(figures));
}

json probe(int device, bool cupti_probe) {
  json out;
  int driver = 0;
  if (cuInit(0) != CUDA_SUCCESS || cuDriverGetVersion(&driver) != CUDA_SUCCESS) {
    out["gpu"] = nullptr;
    out["error"] = "cuInit failed: no usable CUDA driver or device";
    return out;
  }
  Device d(device);
  out = d.facts.to_json();
  // cuDNN, if present, through dlopen (the worker does not need it for GEMM).
  if (void *lib = dlopen("libcudnn.so.9", RTLD_NOW | RTLD_LOCAL)) {
    using GetVersion = std::size_t (*)();
    if (auto f = reinterpret_cast<GetVersion>(dlsym(lib, "cudnnGetVersion"))) out["cudnn_version"] = f();
  } else {
    out["cudnn_version"] = nullptr;
  }
  if (cupti_probe) {
    float *buf = nullptr;
    PTXB_CUDA(cudaMalloc(reinterpret_cast<void **>(&buf), 128 * sizeof(float)));
    const detail::SassCountResult r = detail::count_sass_instructions(d.ctx, device, [&] {
      detail::launch_probe_kernel(buf, d.stream);
      PTXB_CUDA(cudaStreamSynchronize(d.stream));
    });
    std::uint64_t executed = 0, zero = 0;
    for (const auto &c : r.counts) {
      executed += c.warp_executions;
      zero += c.warp_executions == 0;
    }
    out["cupti_sass_metrics"] = {{"available", r.available},
                                 {"reason", r.reason},
                                 {"records", r.counts.size()},
                                 {"warp_instructions", executed},
                                 {"never_executed_records", zero}};
    cudaFree(buf);
  }
  return out;
}

json check_reference_gemm(int device) {
  Device d(device);
  struct Case {
    const char *name;
    std::int64_t m, n, k;
    ElemType in, out;
    double scale_a, scale_b;
    double atol, rtol;  // bf16: output rounding dominates. fp8: Hopper's fp8 tensor cores accumulate with
                        // fewer mantissa bits than fp32, so allow 5% of the output deviation
                        // (scale_a·scale_b·√K), as the fp8 task does.
  };
  const Case cases[] = {
      {"bf16 256x384x512", 256, 384, 512, ElemType::bf16, ElemType::bf16, 1, 1, 1e-2, 8e-3},
      {"bf16 1000x1000x1000", 1000, 1000, 1000, ElemType::bf16, ElemType::bf16, 1, 1, 1e-2, 8e-3},
      {"bf16 2048x7168x5120", 2048, 7168, 5120, ElemType::bf16, ElemType::bf16, 1, 1, 1e-2, 8e-3},
      {"e4m3 512x256x1024 scaled", 512, 256, 1024, ElemType::e4m3, ElemType::bf16, 0.5, 2.0,
       0.05 * 0.5 * 2.0 * std::sqrt(1024.0), 1.0 / 64}};
  json out = json::array();
  for (const Case &c : cases) {
    WorkloadSpec w;
    w.name = c.name;
    w.tensors = {TensorSpec{"A", c.in, {c.m, c.k}, false, InputDistribution::normal, 0, 0},
                 TensorSpec{"B", c.in, {c.n, c.k}, false, InputDistribution::normal, 0, 0},
                 TensorSpec{"C", c.out, {c.m, c.n}, true, InputDistribution::normal, 0, 0}};
    if (c.in == ElemType::e4m3) w.scalars = {{"scale_a", "f32", c.scale_a}, {"scale_b", "f32", c.scale_b}};
    // One case's library failure is that case's result: the others still tell what works.
    try {
      auto family = make_gemm_handler("cublaslt");
      BufferPool pool(256, d.stream);
      TensorSet inputs, lib_out;
      inputs["A"] = pool.tensor(w.tensors[0]);
      inputs["B"] = pool.tensor(w.tensors[1]);
      lib_out["C"] = pool.tensor(w.tensors[2]);
      detail::fill_random(inputs["A"].data, c.in, w.tensors[0].elements(), InputDistribution::normal, 11,
                          d.stream);
      detail::fill_random(inputs["B"].data, c.in, w.tensors[1].elements(), InputDistribution::normal, 12,
                          d.stream);
      ReferenceSet ref{{"C", pool.floats(w.tensors[2].elements())}};
      family->run_reference(w, inputs, ref, d.stream);
      const LibraryInfo info = family->prepare_library(w, inputs, lib_out, d.stream);
      detail::fill_poison(lib_out["C"].data, c.out, w.tensors[2].elements(), d.stream);
      family->run_library(inputs, lib_out, d.stream);
      const detail::CompareStats s = detail::compare_to_reference(
          lib_out["C"].data, c.out, ref.at("C"), w.tensors[2].elements(), c.atol, c.rtol, d.stream);
      out.push_back({{"case", c.name},
                     {"elements", s.elements},
                     {"mismatches", s.mismatches},
                     {"unwritten", s.unwritten_count},
                     {"nan_count", s.nan_count},
                     {"max_abs_error", s.max_abs_error},
                     {"max_rel_error", s.max_rel_error},
                     {"atol", c.atol},
                     {"rtol", c.rtol},
                     {"library", info.name + " " + info.version},
                     {"best_algo_ms", info.algo.value("best_ms", 0.0)},
                     {"library_config", info.algo.value("config", "")}});
    } catch (const WorkerError &e) {
      out.push_back({{"case", c.name}, {"error", e.what()}});
    }
  }
  return json{{"gpu", d.facts.name}, {"cases", out}};
}

}  // namespace ptxbench::worker
