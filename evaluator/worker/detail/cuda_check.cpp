#include "evaluator/worker/detail/cuda_check.hpp"

#include <string>

#include "evaluator/worker/family.hpp"

namespace ptxbench::worker::detail {

std::string describe(CUresult result) {
  const char *name = nullptr;
  const char *text = nullptr;
  cuGetErrorName(result, &name);
  cuGetErrorString(result, &text);
  return std::string(name ? name : "CUDA_ERROR_UNKNOWN") + " (" + (text ? text : "no description") + ")";
}

std::string describe(cudaError_t error) {
  return std::string(cudaGetErrorName(error)) + " (" + cudaGetErrorString(error) + ")";
}

bool is_sticky(CUresult result) {
  switch (result) {
    case CUDA_ERROR_ILLEGAL_ADDRESS:
    case CUDA_ERROR_LAUNCH_FAILED:
    case CUDA_ERROR_ILLEGAL_INSTRUCTION:
    case CUDA_ERROR_MISALIGNED_ADDRESS:
    case CUDA_ERROR_INVALID_ADDRESS_SPACE:
    case CUDA_ERROR_INVALID_PC:
    case CUDA_ERROR_HARDWARE_STACK_ERROR:
    case CUDA_ERROR_ASSERT:
    case CUDA_ERROR_TENSOR_MEMORY_LEAK:
    case CUDA_ERROR_ECC_UNCORRECTABLE:
    case CUDA_ERROR_CONTEXT_IS_DESTROYED:
      return true;
    default:
      return false;
  }
}

void throw_cuda(CUresult result, const char *call, const char *file, int line) {
  const std::string where = std::string(call) + " at " + file + ":" + std::to_string(line);
  throw WorkerError(is_sticky(result) ? "runtime_error" : "internal", describe(result) + " in " + where);
}

void throw_cuda(cudaError_t error, const char *call, const char *file, int line) {
  // The runtime reports a faulted context through the same sticky codes.
  const bool sticky = error == cudaErrorIllegalAddress || error == cudaErrorLaunchFailure ||
                      error == cudaErrorIllegalInstruction || error == cudaErrorMisalignedAddress ||
                      error == cudaErrorInvalidAddressSpace || error == cudaErrorInvalidPc ||
                      error == cudaErrorHardwareStackError || error == cudaErrorAssert;
  const std::string where = std::string(call) + " at " + file + ":" + std::to_string(line);
  throw WorkerError(sticky ? "runtime_error" : "internal", describe(error) + " in " + where);
}

}  // namespace ptxbench::worker::detail
