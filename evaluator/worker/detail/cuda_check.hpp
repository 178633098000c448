// Checked CUDA calls for the worker: every driver / runtime / library call
// goes through one of these, and a failure becomes a WorkerError whose kind
// says how the stage reports it.
#pragma once

#include <string>

#include <cuda.h>
#include <cuda_runtime_api.h>

namespace ptxbench::worker::detail {

/// "CUDA_ERROR_ILLEGAL_ADDRESS (an illegal memory access was encountered)".
std::string describe(CUresult result);
std::string describe(cudaError_t error);

/// Errors after which the context is unusable (the kernel faulted).
bool is_sticky(CUresult result);

[[noreturn]] void throw_cuda(CUresult result, const char *call, const char *file, int line);
[[noreturn]] void throw_cuda(cudaError_t error, const char *call, const char *file, int line);

}  // namespace ptxbench::worker::detail

#define PTXB_CU(call)                                                                                        \
  do {                                                                                                       \
    CUresult ptxb_r_ = (call);                                                                               \
    if (ptxb_r_ != CUDA_SUCCESS) ::ptxbench::worker::detail::throw_cuda(ptxb_r_, #call, __FILE__, __LINE__); \
  } while (0)

#define PTXB_CUDA(call)                                                                                     \
  do {                                                                                                      \
    cudaError_t ptxb_e_ = (call);                                                                           \
    if (ptxb_e_ != cudaSuccess) ::ptxbench::worker::detail::throw_cuda(ptxb_e_, #call, __FILE__, __LINE__); \
  } while (0)
