// The worker's entry points: one job (fresh or on a pre-started worker), the probe and the reference
// check. The stages themselves: detail/stage_runner.hpp.
#include "evaluator/worker/worker.hpp"

#include <fcntl.h>
#include <poll.h>
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

#include "evaluator/protocol/worker_output.hpp"
#include "evaluator/worker/cudnn_sdpa.hpp"
#include "evaluator/worker/detail/candidate_kernel.hpp"
#include "evaluator/worker/detail/cuda_check.hpp"
#include "evaluator/worker/detail/device_ops.hpp"
#include "evaluator/worker/detail/nvml_clock.hpp"
#include "evaluator/worker/detail/probe_kernel.hpp"
#include "evaluator/worker/detail/profile_metrics.hpp"
#include "evaluator/worker/detail/range_profiler.hpp"
#include "evaluator/worker/detail/sass_counts.hpp"
#include "evaluator/worker/detail/speed_of_light.hpp"
#include "evaluator/worker/detail/stage_runner.hpp"
#include "evaluator/worker/family.hpp"
#include "evaluator/worker/gemm_reference.hpp"
#include "evaluator/worker/job.hpp"
#include "evaluator/worker/selection_cache.hpp"
#include "util/strings.hpp"

namespace ptxbench::worker {

using detail::BufferPool;
using detail::Clock;
using detail::Device;
using detail::read_all;
using detail::seconds_since;
using detail::Worker;
using nlohmann::json;
namespace exit_code = protocol::exit_code;

namespace {

/// The protocol channel (evaluator/protocol/worker_output.hpp): `ready` and `finished N` go there,
/// never to stdout, which carries only the candidate's device printf. Closed for a worker started
/// without one (one-shot, sanitizer rerun). A malformed variable: nullptr, and why in `error`.
const protocol::WorkerChannel *protocol_channel(std::string &error) {
  static std::string why;
  static const protocol::WorkerChannel channel = protocol::WorkerChannel::from_environment(why);
  error = why;
  return why.empty() ? &channel : nullptr;
}

/// Runs one job on a device that is ready (fresh or pre-started). `figures`: where the worker's own
/// time went before the job (recorded in result.json under "worker").
int run_job_on(const std::string &job_path, const std::string &result_path, const Device &device,
               json figures) {
  std::string channel_error;
  const protocol::WorkerChannel *channel = protocol_channel(channel_error);
  if (!channel) {
    std::fprintf(stderr, "ptxbench-worker: %s\n", channel_error.c_str());
    return exit_code::kBadJob;
  }
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
    const int code = worker->run();
    // The result file is complete: say so before the teardown (buffers, handles, context). On the
    // channel only: stdout is the kernel's.
    channel->say(protocol::finished_line(code));
    return code;
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
                    json{{"prestarted", false},
                         {"phase_seconds", {{"context", seconds_since(start)}}},
                         {"clock", {{"job_received", detail::monotonic_seconds()}}}});
}

int serve_prestarted(int device_ordinal, const std::string &lock_path, bool cupti, bool warm_cublaslt) {
  json phases = json::object();
  auto last = Clock::now();
  const auto mark = [&](const char *phase) {
    const auto now = Clock::now();
    phases[phase] = std::chrono::duration<double>(now - last).count();
    last = now;
  };
  std::string channel_error;
  const protocol::WorkerChannel *channel = protocol_channel(channel_error);
  if (!channel || !channel->open()) {
    std::fprintf(stderr, "ptxbench-worker: --prestart needs the protocol channel ($%s): %s\n",
                 protocol::kChannelFdEnv, channel ? "not set" : channel_error.c_str());
    return exit_code::kBadJob;
  }
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
  channel->say(protocol::kReadyLine);
  // cuBLASLt's one-time set-up is CPU work with one tiny launch, done outside the GPU lock so that it
  // costs no GPU time; only when asked (the job before was a GEMM), since a job that arrives meanwhile
  // waits for it, and never when the job is already waiting.
  pollfd job_waiting{STDIN_FILENO, POLLIN, 0};
  if (warm_cublaslt && ::poll(&job_waiting, 1, 0) == 0) {
    if (std::string why = prewarm_cublaslt_matmul(); !why.empty()) warm["cublaslt_matmul"] = why;
    mark("library_warmup");
  }
  // The profiler's host-side set-up is the same for every job on this GPU: made now, while no job waits
  // (a job that arrives meanwhile waits for it, as its profile stage would have). The default metric set:
  // a job asking for the full set makes its own.
  if (cupti && ::poll(&job_waiting, 1, 0) == 0) {
    if (std::string why =
            detail::prepare_range_profiler(device->ctx, device->facts.ordinal,
                                           detail::profile_metric_names(protocol::ProfilePolicy{}.metrics));
        !why.empty())
      warm["profiler"] = why;
    mark("profiler_setup");
  }
  std::string line;
  if (!std::getline(std::cin, line)) return exit_code::kFinished;  // the pool closed: no job for this worker
  mark("idle");
  const double received = detail::monotonic_seconds();
  const std::size_t tab = line.find('\t');
  if (tab == std::string::npos) {
    std::fprintf(stderr, "ptxbench-worker: expected JOB<TAB>RESULT on stdin, got '%s'\n", line.c_str());
    return exit_code::kBadJob;
  }
  json figures = {{"prestarted", true}, {"phase_seconds", phases}, {"clock", {{"job_received", received}}}};
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
