// What every stage of the worker uses: time, seeds, the result file, stage results and messages,
// device buffers with guard regions, and the device the job runs on.
#pragma once

#include <array>
#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include <cuda.h>
#include <cuda_runtime_api.h>
#include <nlohmann/json.hpp>

#include "evaluator/protocol/policies.hpp"
#include "evaluator/protocol/result.hpp"
#include "evaluator/worker/detail/cuda_check.hpp"
#include "evaluator/worker/detail/device_ops.hpp"
#include "evaluator/worker/detail/device_tensor.hpp"
#include "evaluator/worker/detail/speed_of_light.hpp"

namespace ptxbench::worker::detail {

using nlohmann::json;
using Clock = std::chrono::steady_clock;
using protocol::Status;
namespace exit_code = protocol::exit_code;

double seconds_since(Clock::time_point t);
/// Seconds on the steady clock (CLOCK_MONOTONIC, one clock for every process on the machine): the
/// result's `worker.clock` marks, which the evaluator compares with its own.
double monotonic_seconds();
/// A 64-bit mixer (seeds of trials, input sets, tensors).
std::uint64_t mix(std::uint64_t x);
std::uint64_t name_hash(const std::string &s);
/// Atomic write (temp file + rename, fsynced): a reader never sees half a result.
void write_atomic(const std::string &path, const std::string &data);
std::string read_all(const std::string &path);

/// A stage's result; `diagnostics` is a JSON array of diag() entries (stages collect them as JSON).
protocol::StageResult stage_json(Status status, const std::string &summary, json diagnostics = json::array(),
                                 json figures = json::object(), double wall = 0);
json diag(const std::string &text, const std::string &severity = "error");
std::string fmt_num(double v);
std::string dims_text(const std::array<std::int64_t, 3> &d);
/// Flat row-major index -> coordinates of `shape`.
std::vector<std::int64_t> unflatten(std::int64_t index, const std::vector<std::int64_t> &shape);
std::string coord_text(const std::vector<std::int64_t> &c);
/// Elements of all the workload's output tensors (the denominator of a mismatch count).
std::uint64_t output_elements(const WorkloadSpec &spec);

/// Device allocations of one scope, with guard regions; freed on destruction
/// (skipped after a fatal error: the process exits with _Exit instead).
class BufferPool {
 public:
  BufferPool(std::size_t guard, cudaStream_t stream)
      : guard_(protocol::aligned_guard_bytes(guard)), stream_(stream) {}
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

  /// The candidate's workspace: `bytes` with guard regions like a tensor's (no TensorSpec: spec stays
  /// nullptr), zero-filled here and again before every launch (StageContext::reset_workspace).
  DeviceTensor workspace(std::size_t bytes) {
    DeviceTensor t;
    t.bytes = bytes;
    t.guard_bytes = guard_;
    PTXB_CUDA(cudaMalloc(&t.base, t.bytes + 2 * guard_));
    allocations_.push_back(t.base);
    t.data = static_cast<unsigned char *>(t.base) + guard_;
    PTXB_CUDA(cudaMemsetAsync(t.base, detail::kGuardByte, t.bytes + 2 * guard_, stream_));
    PTXB_CUDA(cudaMemsetAsync(t.data, 0, t.bytes, stream_));
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

/// Bytes of `t`'s guard regions that no longer hold the pattern (restored for the next trial).
std::uint64_t guard_damage(const DeviceTensor &t, cudaStream_t s);

struct DeviceFacts {
  std::string name, pci_bus_id, uuid;
  int ordinal = 0, sm_count = 0, cc_major = 0, cc_minor = 0, clock_khz = 0, mem_clock_khz = 0,
      bus_width_bits = 0;
  std::int64_t l2_bytes = 0, memory_bytes = 0;
  int driver_version = 0, runtime_version = 0;
  json to_json() const;
};

DeviceFacts device_facts(CUdevice dev, int ordinal);

/// The CUDA context every stage uses: the device's primary context (shared with the runtime).
struct Device {
  CUdevice dev = 0;
  CUcontext ctx = nullptr;
  cudaStream_t stream = nullptr;
  DeviceFacts facts;

  explicit Device(int ordinal);
};

/// The speed-of-light inputs of a device (detail/speed_of_light.hpp).
detail::DeviceRates device_rates(const DeviceFacts &f);

}  // namespace ptxbench::worker::detail
