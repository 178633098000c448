// The candidate's kernel: loaded from its cubin with the driver API, its
// launch configuration checked against the device, its parameters (device
// pointers, scalars, tensor maps) packed, and launched with cuLaunchKernelEx.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include <cuda.h>

#include "evaluator/worker/detail/device_tensor.hpp"
#include "evaluator/worker/detail/protocol_names.hpp"

namespace ptxbench::worker::detail {

/// Kernel parameters in launch order; storage for each value (tensor maps are 128 bytes, 64-aligned).
struct PackedParams {
  struct alignas(64) Slot {
    unsigned char bytes[128];
  };
  std::vector<Slot> slots;
  std::vector<void *> pointers;  ///< kernelParams for cuLaunchKernelEx
};

/// How waiting for the candidate ended.
struct WaitOutcome {
  enum Kind { done, fault, hang } kind = done;
  CUresult error = CUDA_SUCCESS;  ///< fault: the error the stream reported
};

class CandidateKernel {
 public:
  /// Loads the cubin and finds the entry. Error text says why (e.g. no binary for this GPU).
  std::string load(const std::string &cubin_bytes, const std::string &entry);

  /// "" when the device can run this configuration, else why not and the limit.
  /// Raises the dynamic shared memory limit (and the cluster-size limit) when needed.
  std::string prepare_launch(const LaunchPlan &launch);

  /// Packs the parameters; error text (launch_error) names the parameter and the reason.
  std::string pack(const LaunchPlan &launch, const WorkloadSpec &workload, const TensorSet &tensors,
                   PackedParams &out) const;

  /// Enqueues one launch; returns the driver's answer (non-success = launch_error or sticky fault).
  CUresult launch(const LaunchPlan &launch, PackedParams &params, CUstream stream) const;

  CUfunction function() const { return function_; }
  int registers() const;

 private:
  CUmodule module_ = nullptr;
  CUfunction function_ = nullptr;
  std::string entry_;
};

/// Waits for everything enqueued on `stream` so far, at most `deadline_ms`.
WaitOutcome wait_with_deadline(CUstream stream, double deadline_ms);

}  // namespace ptxbench::worker::detail
