// The family interface of the GPU worker: what differs between GEMM and
// attention (input generation, the fp32 reference, the library call) sits
// behind FamilyHandler; the worker owns everything else (allocation with
// guard regions, poisoning, candidate launch, comparison, CUPTI, timing).
//
// Contract for implementers (GEMM: gemm_family.cu; attention: h8):
//  - every call works on the stream it is given and does not synchronize unless
//    it must (the worker synchronizes with a hang deadline);
//  - failures of CUDA / library calls throw WorkerError (the worker turns them
//    into a stage status: runtime_error for sticky CUDA errors, skipped for a
//    library the machine lacks);
//  - reference outputs are float32, one buffer per output tensor, same element
//    order (row-major over the tensor's shape, outermost first).
//
// The workload's names (ElemType, TensorSpec, WorkloadSpec, ...) are in detail/protocol_names.hpp and the
// device buffers a handler works on (DeviceTensor, TensorSet, ReferenceSet) in detail/device_tensor.hpp,
// which the worker's stages share.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include <cuda_runtime_api.h>
#include <nlohmann/json.hpp>

#include "evaluator/worker/detail/device_tensor.hpp"
#include "evaluator/worker/detail/protocol_names.hpp"

namespace ptxbench::worker {

/// A failure inside the worker that ends the current stage. `kind` says how
/// the worker reports it: "runtime_error" (sticky CUDA error: context is dead),
/// "launch_error", "library" (reference library failed: stage skipped with the
/// reason), "internal" (a bug in the worker).
class WorkerError : public std::runtime_error {
 public:
  WorkerError(std::string kind, const std::string &message)
      : std::runtime_error(message), kind_(std::move(kind)) {}
  const std::string &kind() const { return kind_; }

 private:
  std::string kind_;
};

/// What the library run used; written into the timing figures.
struct LibraryInfo {
  std::string name;                                ///< "cuBLASLt", "cuDNN"
  std::string version;                             ///< e.g. "13.0.0"
  nlohmann::json algo = nlohmann::json::object();  ///< chosen algorithm(s), default vs best times
};

class FamilyHandler {
 public:
  virtual ~FamilyHandler() = default;

  /// "gemm", "attention_fwd", "attention_bwd".
  virtual std::string family() const = 0;

  /// "" when this handler can run the workload (dtypes, shapes, tensor names), else why not.
  virtual std::string check_workload(const WorkloadSpec &workload) const = 0;

  /// Inputs with distribution `derived` (e.g. O and LSE for attention backward):
  /// called after the worker filled the other inputs with fresh random values.
  /// Default: nothing derived.
  virtual void derive_inputs(const WorkloadSpec &, const TensorSet &, cudaStream_t) {}

  /// Writes the float32 reference of every output tensor (fp32 accumulation, same
  /// low-precision inputs the candidate reads).
  virtual void run_reference(const WorkloadSpec &workload, const TensorSet &tensors,
                             const ReferenceSet &reference, cudaStream_t stream) = 0;

  /// Prepares the library for this workload's shapes (handles, plans, algorithm
  /// search timing heuristic candidates: may launch many times on these buffers).
  /// `outputs` are the library's own output buffers (same specs as the task's outputs).
  virtual LibraryInfo prepare_library(const WorkloadSpec &workload, const TensorSet &inputs,
                                      const TensorSet &outputs, cudaStream_t stream) = 0;

  /// One library launch (no synchronization) on buffers of the prepared shapes;
  /// the worker rotates input sets between calls, so pointers change.
  virtual void run_library(const TensorSet &inputs, const TensorSet &outputs, cudaStream_t stream) = 0;

  /// Drops library state of the current workload (handles stay cached).
  virtual void release_library() {}
};

/// Creates the handler for a task family and reference name ("gemm" + "cublaslt",
/// "attention_fwd"/"attention_bwd" + "cudnn_sdpa_fwd"/"cudnn_sdpa_bwd"). nullptr when unknown.
std::unique_ptr<FamilyHandler> make_family_handler(const std::string &family, const std::string &reference);

/// Per-family factories called by make_family_handler (nullptr when the reference is unknown).
std::unique_ptr<FamilyHandler> make_gemm_handler(const std::string &reference);   // gemm_family.cu
std::unique_ptr<FamilyHandler> make_attention_handler(const std::string &family,  // attention_family.cpp
                                                      const std::string &reference);

}  // namespace ptxbench::worker
