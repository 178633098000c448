// GEMM family: C[M,N] = scale_a·scale_b · A[M,K] · B[N,K]ᵀ (both K-contiguous, "TN"),
// bf16 / f16 / fp8 inputs, float32 accumulation. Reference: our own tiled kernel;
// library: cuBLASLt with its heuristic candidates timed and the best kept.
#include <cublasLt.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "evaluator/worker/detail/cuda_check.hpp"
#include "evaluator/worker/gemm_reference.hpp"

namespace ptxbench::worker {
namespace {

constexpr int kTile = 64;  // block tile (rows and columns of C)
constexpr int kTileK = 16;
constexpr int kThreads = 256;  // 16 x 16 threads, 4 x 4 outputs each

template <class T>
__device__ __forceinline__ float load_as_float(const T *p, std::int64_t i) {
  return static_cast<float>(p[i]);
}
template <>
__device__ __forceinline__ float load_as_float<__nv_bfloat16>(const __nv_bfloat16 *p, std::int64_t i) {
  return __bfloat162float(p[i]);
}
template <>
__device__ __forceinline__ float load_as_float<__half>(const __half *p, std::int64_t i) {
  return __half2float(p[i]);
}

template <class T>
__global__ void __launch_bounds__(kThreads)
    reference_gemm_kernel(const T *__restrict__ a, const T *__restrict__ b, float *__restrict__ c, int m,
                          int n, int k, float alpha) {
  __shared__ float as[kTileK][kTile + 1];
  __shared__ float bs[kTileK][kTile + 1];
  const int tx = threadIdx.x % 16, ty = threadIdx.x / 16;
  const std::int64_t row0 = static_cast<std::int64_t>(blockIdx.y) * kTile;
  const std::int64_t col0 = static_cast<std::int64_t>(blockIdx.x) * kTile;
  float acc[4][4] = {};
  for (int k0 = 0; k0 < k; k0 += kTileK) {
    // 64 x 16 elements of each operand, 4 per thread; K is the contiguous axis.
    for (int e = threadIdx.x; e < kTile * kTileK; e += kThreads) {
      const int r = e / kTileK, kk = e % kTileK;
      const std::int64_t gr = row0 + r, gc = col0 + r;
      const int gk = k0 + kk;
      as[kk][r] = (gr < m && gk < k) ? load_as_float(a, gr * k + gk) : 0.0f;
      bs[kk][r] = (gc < n && gk < k) ? load_as_float(b, gc * k + gk) : 0.0f;
    }
    __syncthreads();
#pragma unroll
    for (int kk = 0; kk < kTileK; ++kk) {
      float av[4], bv[4];
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        av[i] = as[kk][ty + 16 * i];
        bv[i] = bs[kk][tx + 16 * i];
      }
#pragma unroll
      for (int i = 0; i < 4; ++i)
#pragma unroll
        for (int j = 0; j < 4; ++j) acc[i][j] = fmaf(av[i], bv[j], acc[i][j]);
    }
    __syncthreads();
  }
#pragma unroll
  for (int i = 0; i < 4; ++i)
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      const std::int64_t r = row0 + ty + 16 * i, col = col0 + tx + 16 * j;
      if (r < m && col < n) c[r * n + col] = alpha * acc[i][j];
    }
}

cudaDataType_t cuda_type(ElemType t) {
  switch (t) {
    case ElemType::bf16:
      return CUDA_R_16BF;
    case ElemType::f16:
      return CUDA_R_16F;
    case ElemType::f32:
      return CUDA_R_32F;
    case ElemType::e4m3:
      return CUDA_R_8F_E4M3;
    case ElemType::e5m2:
      return CUDA_R_8F_E5M2;
    case ElemType::i32:
      return CUDA_R_32I;
  }
  return CUDA_R_32F;
}

#define PTXB_LT(call)                                                                                  \
  do {                                                                                                 \
    cublasStatus_t ptxb_s_ = (call);                                                                   \
    if (ptxb_s_ != CUBLAS_STATUS_SUCCESS)                                                              \
      throw WorkerError("library", std::string(#call) + " failed: " + cublasLtGetStatusName(ptxb_s_) + \
                                       " (" + cublasLtGetStatusString(ptxb_s_) + ")");                 \
  } while (0)

/// The largest power of two up to 256 that divides the address (cuBLASLt's alignment preference unit).
std::uint32_t pointer_alignment(const void *p) {
  const auto address = reinterpret_cast<std::uintptr_t>(p);
  std::uint32_t a = 256;
  while (a > 1 && address % a != 0) a /= 2;
  return a;
}

double scale_value(const WorkloadSpec &w, const char *name) {
  const ScalarSpec *s = w.find_scalar(name);
  return s ? s->value : 1.0;
}

class GemmHandler final : public FamilyHandler {
 public:
  GemmHandler() = default;
  ~GemmHandler() override {
    release_library();
    if (workspace_) cudaFree(workspace_);
    if (handle_) cublasLtDestroy(handle_);
  }

  std::string family() const override { return "gemm"; }

  std::string check_workload(const WorkloadSpec &w) const override { return check_gemm_workload(w); }

  void run_reference(const WorkloadSpec &w, const TensorSet &tensors, const ReferenceSet &reference,
                     cudaStream_t stream) override {
    const GemmShape s = gemm_shape(w);
    launch_reference_gemm(tensors.at("A").data, tensors.at("B").data, s.input_type, reference.at("C"), s.m,
                          s.n, s.k, static_cast<float>(scale_value(w, "scale_a") * scale_value(w, "scale_b")),
                          stream);
  }

  LibraryInfo prepare_library(const WorkloadSpec &w, const TensorSet &inputs, const TensorSet &outputs,
                              cudaStream_t stream) override {
    release_library();
    if (!handle_) PTXB_LT(cublasLtCreate(&handle_));
    if (!workspace_) PTXB_CUDA(cudaMalloc(&workspace_, kWorkspaceBytes));
    const GemmShape s = gemm_shape(w);
    const ElemType out_type = w.find_tensor("C")->type;
    const bool fp8 = s.input_type == ElemType::e4m3 || s.input_type == ElemType::e5m2;

    // Row-major C[M,N] = A·Bᵀ is column-major Cᵀ[N,M] = op(B)ᵀ... : cuBLAS "A" = our B (transposed), "B" =
    // our A.
    PTXB_LT(cublasLtMatmulDescCreate(&desc_, CUBLAS_COMPUTE_32F, CUDA_R_32F));
    const cublasOperation_t trans = CUBLAS_OP_T, no_trans = CUBLAS_OP_N;
    PTXB_LT(cublasLtMatmulDescSetAttribute(desc_, CUBLASLT_MATMUL_DESC_TRANSA, &trans, sizeof(trans)));
    PTXB_LT(cublasLtMatmulDescSetAttribute(desc_, CUBLASLT_MATMUL_DESC_TRANSB, &no_trans, sizeof(no_trans)));
    const float scale_a = static_cast<float>(scale_value(w, "scale_a"));
    const float scale_b = static_cast<float>(scale_value(w, "scale_b"));
    if (fp8) {
      // Per-tensor scales through device pointers, as fp8 GEMMs are called in practice.
      PTXB_CUDA(cudaMalloc(&scales_, 2 * sizeof(float)));
      const float host_scales[2] = {scale_b, scale_a};  // cuBLAS A = our B
      PTXB_CUDA(cudaMemcpyAsync(scales_, host_scales, sizeof(host_scales), cudaMemcpyHostToDevice, stream));
      PTXB_CUDA(cudaStreamSynchronize(stream));
      float *sa = scales_, *sb = scales_ + 1;
      PTXB_LT(cublasLtMatmulDescSetAttribute(desc_, CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, &sa, sizeof(sa)));
      PTXB_LT(cublasLtMatmulDescSetAttribute(desc_, CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, &sb, sizeof(sb)));
      alpha_ = 1.0f;
    } else {
      alpha_ = scale_a * scale_b;
    }
    beta_ = 0.0f;
    PTXB_LT(cublasLtMatrixLayoutCreate(&layout_a_, cuda_type(s.input_type), s.k, s.n, s.k));
    PTXB_LT(cublasLtMatrixLayoutCreate(&layout_b_, cuda_type(s.input_type), s.k, s.m, s.k));
    PTXB_LT(cublasLtMatrixLayoutCreate(&layout_c_, cuda_type(out_type), s.n, s.m, s.n));
    a_ = inputs.at("B").data;
    b_ = inputs.at("A").data;
    c_ = outputs.at("C").data;

    cublasLtMatmulPreference_t pref = nullptr;
    PTXB_LT(cublasLtMatmulPreferenceCreate(&pref));
    const std::uint64_t ws = kWorkspaceBytes;
    PTXB_LT(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws,
                                                 sizeof(ws)));
    // The heuristic assumes 256-byte aligned pointers unless told otherwise; tell it the real ones so it
    // never offers an algorithm these buffers cannot run.
    const std::uint32_t align_a = pointer_alignment(a_), align_b = pointer_alignment(b_),
                        align_c = pointer_alignment(c_);
    PTXB_LT(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, &align_a,
                                                 sizeof(align_a)));
    PTXB_LT(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, &align_b,
                                                 sizeof(align_b)));
    PTXB_LT(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, &align_c,
                                                 sizeof(align_c)));
    PTXB_LT(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, &align_c,
                                                 sizeof(align_c)));
    std::vector<cublasLtMatmulHeuristicResult_t> results(kMaxCandidates);
    int found = 0;
    const cublasStatus_t hs =
        cublasLtMatmulAlgoGetHeuristic(handle_, desc_, layout_a_, layout_b_, layout_c_, layout_c_, pref,
                                       kMaxCandidates, results.data(), &found);
    cublasLtMatmulPreferenceDestroy(pref);
    if (hs != CUBLAS_STATUS_SUCCESS || found == 0)
      throw WorkerError(
          "library", std::string("cuBLASLt has no algorithm for this GEMM: ") + cublasLtGetStatusString(hs));

    // Time every heuristic candidate; keep the fastest (the default is the first).
    cudaEvent_t start, stop;
    PTXB_CUDA(cudaEventCreate(&start));
    PTXB_CUDA(cudaEventCreate(&stop));
    nlohmann::json candidates = nlohmann::json::array();
    double best_ms = 1e30, default_ms = 0;
    int best = -1;
    std::string refusals;  // why candidates failed, for the error when none runs
    for (int i = 0; i < found; ++i) {
      algo_ = results[i].algo;
      if (const cublasStatus_t st = matmul(stream); st != CUBLAS_STATUS_SUCCESS) {
        refusals += (refusals.empty() ? "" : ", ") + std::to_string(i) + ": " + cublasLtGetStatusName(st);
        candidates.push_back({{"index", i}, {"status", cublasLtGetStatusName(st)}});
        continue;
      }
      matmul(stream);
      std::vector<float> times;
      for (int r = 0; r < kSelectionRuns; ++r) {
        PTXB_CUDA(cudaEventRecord(start, stream));
        matmul(stream);
        PTXB_CUDA(cudaEventRecord(stop, stream));
        PTXB_CUDA(cudaEventSynchronize(stop));
        float ms = 0;
        PTXB_CUDA(cudaEventElapsedTime(&ms, start, stop));
        times.push_back(ms);
      }
      std::sort(times.begin(), times.end());
      const double median = times[times.size() / 2];
      candidates.push_back({{"index", i}, {"median_ms", median}});
      if (i == 0) default_ms = median;
      if (median < best_ms) {
        best_ms = median;
        best = i;
      }
    }
    cudaEventDestroy(start);
    cudaEventDestroy(stop);
    if (best < 0)
      throw WorkerError("library", "every cuBLASLt heuristic candidate failed to run (" +
                                       std::to_string(found) + " tried; " + refusals +
                                       ") for M=" + std::to_string(s.m) + " N=" + std::to_string(s.n) +
                                       " K=" + std::to_string(s.k) + " " + to_string(s.input_type) + " -> " +
                                       to_string(out_type));
    algo_ = results[best].algo;
    PTXB_CUDA(cudaStreamSynchronize(stream));

    LibraryInfo info;
    info.name = "cuBLASLt";
    const std::size_t v = cublasLtGetVersion();
    info.version =
        std::to_string(v / 10000) + "." + std::to_string((v / 100) % 100) + "." + std::to_string(v % 100);
    info.algo = {{"candidates_timed", found},
                 {"default_index", 0},
                 {"default_ms", default_ms},
                 {"best_index", best},
                 {"best_ms", best_ms},
                 {"workspace_bytes", kWorkspaceBytes},
                 {"layout", "TN"},
                 {"fp8_scale_pointers", fp8},
                 {"candidates", candidates}};
    return info;
  }

  void run_library(const TensorSet &inputs, const TensorSet &outputs, cudaStream_t stream) override {
    a_ = inputs.at("B").data;
    b_ = inputs.at("A").data;
    c_ = outputs.at("C").data;
    const cublasStatus_t st = matmul(stream);
    if (st != CUBLAS_STATUS_SUCCESS)
      throw WorkerError("library", std::string("cublasLtMatmul failed: ") + cublasLtGetStatusString(st));
  }

  void release_library() override {
    if (desc_) cublasLtMatmulDescDestroy(desc_);
    if (layout_a_) cublasLtMatrixLayoutDestroy(layout_a_);
    if (layout_b_) cublasLtMatrixLayoutDestroy(layout_b_);
    if (layout_c_) cublasLtMatrixLayoutDestroy(layout_c_);
    if (scales_) cudaFree(scales_);
    desc_ = nullptr;
    layout_a_ = layout_b_ = layout_c_ = nullptr;
    scales_ = nullptr;
  }

 private:
  static constexpr std::size_t kWorkspaceBytes = 32u << 20;  // 32 MiB, as the design fixes
  static constexpr int kMaxCandidates = 8;
  static constexpr int kSelectionRuns = 5;

  cublasStatus_t matmul(cudaStream_t stream) {
    return cublasLtMatmul(handle_, desc_, &alpha_, a_, layout_a_, b_, layout_b_, &beta_, c_, layout_c_, c_,
                          layout_c_, &algo_, workspace_, kWorkspaceBytes, stream);
  }

  cublasLtHandle_t handle_ = nullptr;
  void *workspace_ = nullptr;
  cublasLtMatmulDesc_t desc_ = nullptr;
  cublasLtMatrixLayout_t layout_a_ = nullptr, layout_b_ = nullptr, layout_c_ = nullptr;
  cublasLtMatmulAlgo_t algo_{};
  float *scales_ = nullptr;
  float alpha_ = 1, beta_ = 0;
  const void *a_ = nullptr, *b_ = nullptr;
  void *c_ = nullptr;
};

}  // namespace

std::string check_gemm_workload(const WorkloadSpec &w) {
  const TensorSpec *a = w.find_tensor("A"), *b = w.find_tensor("B"), *c = w.find_tensor("C");
  if (!a || !b || !c) return "GEMM tasks need tensors A[M,K], B[N,K] and C[M,N]";
  if (a->shape.size() != 2 || b->shape.size() != 2 || c->shape.size() != 2) return "GEMM tensors must be 2-D";
  if (a->shape[1] != b->shape[1] || c->shape[0] != a->shape[0] || c->shape[1] != b->shape[0])
    return "GEMM shapes disagree: need A[M,K], B[N,K], C[M,N]";
  if (a->type != b->type) return "A and B must have the same element type";
  if (a->type == ElemType::f32 || a->type == ElemType::i32)
    return "GEMM inputs must be bf16, f16, e4m3 or e5m2";
  if (!c->is_output) return "C must be an output";
  return "";
}

GemmShape gemm_shape(const WorkloadSpec &w) {
  const TensorSpec *a = w.find_tensor("A"), *b = w.find_tensor("B");
  return GemmShape{a->shape[0], b->shape[0], a->shape[1], a->type};
}

void launch_reference_gemm(const void *a, const void *b, ElemType input_type, float *c, std::int64_t m,
                           std::int64_t n, std::int64_t k, float alpha, cudaStream_t stream) {
  const dim3 grid(static_cast<unsigned>((n + kTile - 1) / kTile),
                  static_cast<unsigned>((m + kTile - 1) / kTile));
  const int mi = static_cast<int>(m), ni = static_cast<int>(n), ki = static_cast<int>(k);
  switch (input_type) {
    case ElemType::bf16:
      reference_gemm_kernel<<<grid, kThreads, 0, stream>>>(
          static_cast<const __nv_bfloat16 *>(a), static_cast<const __nv_bfloat16 *>(b), c, mi, ni, ki, alpha);
      break;
    case ElemType::f16:
      reference_gemm_kernel<<<grid, kThreads, 0, stream>>>(
          static_cast<const __half *>(a), static_cast<const __half *>(b), c, mi, ni, ki, alpha);
      break;
    case ElemType::e4m3:
      reference_gemm_kernel<<<grid, kThreads, 0, stream>>>(
          static_cast<const __nv_fp8_e4m3 *>(a), static_cast<const __nv_fp8_e4m3 *>(b), c, mi, ni, ki, alpha);
      break;
    case ElemType::e5m2:
      reference_gemm_kernel<<<grid, kThreads, 0, stream>>>(
          static_cast<const __nv_fp8_e5m2 *>(a), static_cast<const __nv_fp8_e5m2 *>(b), c, mi, ni, ki, alpha);
      break;
    default:
      throw WorkerError("internal", "reference GEMM: unsupported input type " + to_string(input_type));
  }
  PTXB_CUDA(cudaGetLastError());
}

std::unique_ptr<FamilyHandler> make_gemm_handler(const std::string &reference) {
  if (reference != "cublaslt") return nullptr;
  return std::make_unique<GemmHandler>();
}

}  // namespace ptxbench::worker
