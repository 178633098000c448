#include "evaluator/worker/detail/cuda_check.hpp"
#include "evaluator/worker/detail/probe_kernel.hpp"

namespace ptxbench::worker::detail {
namespace {

// A branch the host never takes (flag is always 0): CUPTI must count its
// instructions as present but never executed.
__global__ void ptxbench_probe_kernel(float *out, int flag) {
  float v = static_cast<float>(threadIdx.x);
  if (flag == 0x5EED) v = sqrtf(v) * 3.0f + __sinf(v) * __cosf(v);
  out[threadIdx.x + blockIdx.x * blockDim.x] = v * 2.0f;
}

}  // namespace

void launch_probe_kernel(float *out, cudaStream_t stream) {
  ptxbench_probe_kernel<<<2, 64, 0, stream>>>(out, 0);
  PTXB_CUDA(cudaGetLastError());
}

}  // namespace ptxbench::worker::detail
