// The GEMM family's pieces that tests and the self-check reuse.
#pragma once

#include <cstdint>
#include <string>

#include "evaluator/worker/family.hpp"

namespace ptxbench::worker {

struct GemmShape {
  std::int64_t m = 0, n = 0, k = 0;
  ElemType input_type = ElemType::bf16;
};

/// "" when the workload has A[M,K], B[N,K] (same low-precision type) and output C[M,N].
std::string check_gemm_workload(const WorkloadSpec &workload);
GemmShape gemm_shape(const WorkloadSpec &workload);  ///< call after check_gemm_workload passed

/// c[m,n] = alpha · Σ_k a[m,k]·b[n,k] in float32 (row-major, K contiguous), our own tiled kernel.
void launch_reference_gemm(const void *a, const void *b, ElemType input_type, float *c, std::int64_t m,
                           std::int64_t n, std::int64_t k, float alpha, cudaStream_t stream);

/// Creates the process's cuBLASLt handle ahead of any job (a pre-started worker); "" or why it failed.
std::string prewarm_cublaslt();
/// Runs one tiny matmul through the heuristic, so that cuBLASLt's one-time set-up is done before a job;
/// "" or why it failed.
std::string prewarm_cublaslt_matmul();

}  // namespace ptxbench::worker
