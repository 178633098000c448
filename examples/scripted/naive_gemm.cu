// Hand-written example answer for the quick start: one thread per C element,
// fp32 accumulation over K, bf16 output. Correct and slow on purpose (no
// tensor cores), so the default run shows the "target not executed" axis.
// Regenerate naive_gemm.ptx: nvcc -ptx -gencode=arch=compute_90a,code=sm_90a -O3 naive_gemm.cu
#include <cuda_bf16.h>

extern "C" __global__ void gemm_naive(__nv_bfloat16 *C, const __nv_bfloat16 *A, const __nv_bfloat16 *B,
                                      unsigned M, unsigned N, unsigned K) {
  const unsigned col = blockIdx.x * blockDim.x + threadIdx.x;  // n
  const unsigned row = blockIdx.y * blockDim.y + threadIdx.y;  // m
  if (row >= M || col >= N) return;
  const __nv_bfloat16 *a = A + static_cast<size_t>(row) * K;
  const __nv_bfloat16 *b = B + static_cast<size_t>(col) * K;
  float acc = 0.f;
  for (unsigned k = 0; k < K; ++k) acc += __bfloat162float(a[k]) * __bfloat162float(b[k]);
  C[static_cast<size_t>(row) * N + col] = __float2bfloat16_rn(acc);
}
