// Fixture kernels for tests/test_gpu_gemm.cpp: C[M,N] = A[M,K]·B[N,K]ᵀ (bf16 in,
// fp32 accumulate, bf16 out), one thread per output. Each variant is emitted
// to its own PTX file by make_fixtures.sh (-D selects the variant).
#include <cuda_bf16.h>

extern "C" __global__ void gemm_fixture(__nv_bfloat16 *C, const __nv_bfloat16 *A, const __nv_bfloat16 *B,
                                              int M, int N, int K) {
#if defined(VARIANT_HANG)
  // Spins on a value inputs never hold (0x7FFF is a NaN): never finishes.
  volatile const unsigned short *a = reinterpret_cast<volatile const unsigned short *>(A);
  while (a[0] != 0x7FFF) {
  }
#endif
  const int n = blockIdx.x * blockDim.x + threadIdx.x;
  const int m = blockIdx.y * blockDim.y + threadIdx.y;
  if (m >= M || n >= N) return;
  float acc = 0.0f;
  for (int k = 0; k < K; ++k)
    acc = fmaf(__bfloat162float(A[static_cast<size_t>(m) * K + k]), __bfloat162float(B[static_cast<size_t>(n) * K + k]),
               acc);
#if defined(VARIANT_REGS)
  // ~170 live accumulators per thread: a block of 1024 threads needs more registers
  // than a multiprocessor has, which only the device (not the PTX) can tell.
  float extra[160];
#pragma unroll
  for (int i = 0; i < 160; ++i) extra[i] = static_cast<float>(i);
  for (int k = 0; k < K; ++k) {
    const float b = __bfloat162float(B[static_cast<size_t>(n) * K + k]);
#pragma unroll
    for (int i = 0; i < 160; ++i) extra[i] = fmaf(b, extra[i], 1.0f);
  }
  if (n < 0) {  // never true, but the compiler cannot drop the accumulators
#pragma unroll
    for (int i = 0; i < 160; ++i) C[i] = __float2bfloat16(extra[i]);
  }
#endif
#if defined(VARIANT_WRONG)
  if (n == 5) acc *= 1.5f;  // one wrong column: first mismatch at C[0, 5]
#endif
#if defined(VARIANT_DEAD)
  if (K == 123457) {  // never taken: the brev below is in SASS but never executes
    unsigned bits;
    asm volatile("brev.b32 %0, %1;" : "=r"(bits) : "r"(__float_as_uint(acc)));
    acc = __uint_as_float(bits);
  }
#endif
  C[static_cast<size_t>(m) * N + n] = __float2bfloat16(acc);
}
