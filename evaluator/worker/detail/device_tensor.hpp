// Device buffers as the worker hands them to a family handler (family.hpp) and to its own stages: one
// tensor's allocation with guard regions, and the sets of them by name.
#pragma once

#include <cstddef>
#include <map>
#include <string>

#include "evaluator/worker/detail/protocol_names.hpp"

namespace ptxbench::worker {

/// A device buffer with guard regions before and after the data.
struct DeviceTensor {
  const TensorSpec *spec = nullptr;
  void *base = nullptr;         ///< start of the allocation (guard included)
  void *data = nullptr;         ///< base + guard_bytes
  std::size_t bytes = 0;        ///< data bytes
  std::size_t guard_bytes = 0;  ///< bytes of guard on each side
  template <class T>
  T *as() const {
    return static_cast<T *>(data);
  }
};

/// Name -> tensor. Inputs are shared between candidate and library; each has its own outputs.
using TensorSet = std::map<std::string, DeviceTensor>;
/// Output name -> float32 device buffer (elements of the output tensor).
using ReferenceSet = std::map<std::string, float *>;

}  // namespace ptxbench::worker
