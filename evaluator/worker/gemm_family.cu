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
#include "evaluator/worker/selection_cache.hpp"

namespace ptxbench::worker {
namespace {

// Reference kernel tiling. The reference runs five times per evaluation of a core-shape GEMM (three
// correctness trials, two timing input sets), so it is a proper register-tiled FFMA kernel rather than a
// naive one: each thread owns an 8 x 8 block of C in registers and reads its operands from shared memory
// as float4s. Accumulation is plain fp32 FMA in ascending k, one k at a time, for every output.
constexpr int kTile = 128;     // block tile (rows and columns of C)
constexpr int kTileK = 16;     // k-slice staged in shared memory per step
constexpr int kThreads = 256;  // 16 x 16 threads, 8 x 8 outputs each
constexpr int kPad = 4;  // keeps float4 alignment of rows while spreading the transposed stores over banks

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
  // Operands transposed into [k][row] so one k step reads contiguous rows of A and of B.
  __shared__ __align__(16) float as[kTileK][kTile + kPad];
  __shared__ __align__(16) float bs[kTileK][kTile + kPad];
  const int tx = threadIdx.x % 16, ty = threadIdx.x / 16;
  const std::int64_t row0 = static_cast<std::int64_t>(blockIdx.y) * kTile;
  const std::int64_t col0 = static_cast<std::int64_t>(blockIdx.x) * kTile;
  // Staging: each thread copies 8 consecutive k of one row of A and one row of B per step.
  const int load_row = threadIdx.x / 2, load_k = (threadIdx.x % 2) * 8;
  const std::int64_t a_row = row0 + load_row, b_row = col0 + load_row;
  float acc[8][8] = {};
  for (int k0 = 0; k0 < k; k0 += kTileK) {
#pragma unroll
    for (int e = 0; e < 8; ++e) {
      const int gk = k0 + load_k + e;
      as[load_k + e][load_row] = (a_row < m && gk < k) ? load_as_float(a, a_row * k + gk) : 0.0f;
      bs[load_k + e][load_row] = (b_row < n && gk < k) ? load_as_float(b, b_row * k + gk) : 0.0f;
    }
    __syncthreads();
#pragma unroll
    for (int kk = 0; kk < kTileK; ++kk) {
      // Rows ty*4..+3 and 64+ty*4..+3 of the tile; columns likewise with tx.
      const float4 a0 = *reinterpret_cast<const float4 *>(&as[kk][ty * 4]);
      const float4 a1 = *reinterpret_cast<const float4 *>(&as[kk][64 + ty * 4]);
      const float4 b0 = *reinterpret_cast<const float4 *>(&bs[kk][tx * 4]);
      const float4 b1 = *reinterpret_cast<const float4 *>(&bs[kk][64 + tx * 4]);
      const float av[8] = {a0.x, a0.y, a0.z, a0.w, a1.x, a1.y, a1.z, a1.w};
      const float bv[8] = {b0.x, b0.y, b0.z, b0.w, b1.x, b1.y, b1.z, b1.w};
#pragma unroll
      for (int i = 0; i < 8; ++i)
#pragma unroll
        for (int j = 0; j < 8; ++j) acc[i][j] = fmaf(av[i], bv[j], acc[i][j]);
    }
    __syncthreads();
  }
#pragma unroll
  for (int i = 0; i < 8; ++i) {
    const std::int64_t r = row0 + (i < 4 ? ty * 4 + i : 64 + ty * 4 + i - 4);
    if (r >= m) continue;
#pragma unroll
    for (int j = 0; j < 8; ++j) {
      const std::int64_t col = col0 + (j < 4 ? tx * 4 + j : 64 + tx * 4 + j - 4);
      if (col < n) c[r * n + col] = alpha * acc[i][j];
    }
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

// One handle per process: created ahead of the job by a pre-started worker, reused by every handler.
cublasLtHandle_t g_lt_handle = nullptr;

cublasLtHandle_t shared_lt_handle() {
  if (!g_lt_handle) PTXB_LT(cublasLtCreate(&g_lt_handle));
  return g_lt_handle;
}

class GemmHandler final : public FamilyHandler {
 public:
  GemmHandler() = default;
  ~GemmHandler() override {
    release_library();
    if (workspace_) cudaFree(workspace_);
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
    handle_ = shared_lt_handle();
    if (!workspace_) PTXB_CUDA(cudaMalloc(&workspace_, kWorkspaceBytes));
    const GemmShape s = gemm_shape(w);
    const ElemType out_type = w.find_tensor("C")->type;
    const bool fp8 = s.input_type == ElemType::e4m3 || s.input_type == ElemType::e5m2;

    a_ = inputs.at("B").data;  // cuBLAS "A" is our B (see the layouts below)
    b_ = inputs.at("A").data;
    c_ = outputs.at("C").data;
    const float scale_a = static_cast<float>(scale_value(w, "scale_a"));
    const float scale_b = static_cast<float>(scale_value(w, "scale_b"));
    if (fp8) {
      PTXB_CUDA(cudaMalloc(&scales_, 2 * sizeof(float)));
      const float host_scales[2] = {scale_b, scale_a};  // cuBLAS A = our B
      PTXB_CUDA(cudaMemcpyAsync(scales_, host_scales, sizeof(host_scales), cudaMemcpyHostToDevice, stream));
      PTXB_CUDA(cudaStreamSynchronize(stream));
    }

    // Configurations in order of preference; the first under which some heuristic candidate runs is
    // kept, and which one it was is recorded. fp8 GEMMs are called in practice with per-tensor scales
    // as device pointers, but cuBLASLt 13.1 on the H200 offers 8 candidates for e4m3 -> bf16 with
    // A/B scale pointers and then refuses every one (NOT_SUPPORTED; a separate C, fast accumulation or
    // an fp32 D did not help); with the scales folded into alpha (the same product, in fp32) they all run.
    struct Config {
      const char *name;
      bool scale_pointers;
    };
    std::vector<Config> configs = {{"in_place", fp8}};
    if (fp8) configs.push_back({"in_place_alpha", false});
    nlohmann::json tried = nlohmann::json::array();
    cudaEvent_t start, stop;
    PTXB_CUDA(cudaEventCreate(&start));
    PTXB_CUDA(cudaEventCreate(&stop));
    nlohmann::json candidates;
    double best_ms = 1e30, default_ms = 0;
    int best = -1, found = 0;
    std::vector<cublasLtMatmulHeuristicResult_t> results(kMaxCandidates);
    std::string refusals;  // why candidates failed, for the error when none runs
    const char *config_name = "";
    bool scale_pointers = false;
    bool from_cache = false;
    for (const Config &config : configs) {
      release_descriptors();
      config_name = config.name;
      scale_pointers = config.scale_pointers;
      // Row-major C[M,N] = A·Bᵀ read column-major is Cᵀ[N,M] = B·Aᵀ: cuBLAS "A" is our B (K-major, op T)
      // and cuBLAS "B" is our A (op N), the "TN" form fp8 requires.
      PTXB_LT(cublasLtMatmulDescCreate(&desc_, CUBLAS_COMPUTE_32F, CUDA_R_32F));
      const cublasOperation_t trans = CUBLAS_OP_T, no_trans = CUBLAS_OP_N;
      PTXB_LT(cublasLtMatmulDescSetAttribute(desc_, CUBLASLT_MATMUL_DESC_TRANSA, &trans, sizeof(trans)));
      PTXB_LT(
          cublasLtMatmulDescSetAttribute(desc_, CUBLASLT_MATMUL_DESC_TRANSB, &no_trans, sizeof(no_trans)));
      if (config.scale_pointers) {
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
      found = 0;
      const cublasStatus_t hs =
          cublasLtMatmulAlgoGetHeuristic(handle_, desc_, layout_a_, layout_b_, layout_c_, layout_c_, pref,
                                         kMaxCandidates, results.data(), &found);
      cublasLtMatmulPreferenceDestroy(pref);
      if (hs != CUBLAS_STATUS_SUCCESS || found == 0) {
        tried.push_back({{"config", config.name}, {"heuristic", cublasLtGetStatusName(hs)}});
        refusals += std::string(refusals.empty() ? "" : "; ") + config.name + ": heuristic " +
                    cublasLtGetStatusName(hs) + ", " + std::to_string(found) + " candidates";
        continue;
      }
      // An earlier worker's choice for this shape, configuration and alignment (selection cache).
      const std::size_t lt_version = cublasLtGetVersion();
      const std::string cache_key = "cublaslt " + std::to_string(lt_version) + "|" + std::to_string(s.m) +
                                    "," + std::to_string(s.n) + "," + std::to_string(s.k) + "|" +
                                    to_string(s.input_type) + "->" + to_string(out_type) + "|" + config.name +
                                    "|align " + std::to_string(align_a) + "," + std::to_string(align_b) +
                                    "," + std::to_string(align_c);
      if (const auto hit = selection_cache_get(cache_key); hit && cached_algo(*hit, stream)) {
        from_cache = true;
        best = hit->value("best_index", 0);
        best_ms = hit->value("best_ms", 0.0);
        default_ms = hit->value("default_ms", 0.0);
        found = hit->value("candidates_timed", found);
        candidates = hit->value("candidates", nlohmann::json::array());
        tried.push_back({{"config", config.name}, {"from_cache", true}});
        break;
      }
      // Time every heuristic candidate; keep the fastest (the default is the first).
      candidates = nlohmann::json::array();
      best_ms = 1e30;
      default_ms = 0;
      best = -1;
      std::string config_refusals;
      for (int i = 0; i < found; ++i) {
        algo_ = results[i].algo;
        if (const cublasStatus_t st = matmul(stream); st != CUBLAS_STATUS_SUCCESS) {
          config_refusals +=
              (config_refusals.empty() ? "" : ", ") + std::to_string(i) + ": " + cublasLtGetStatusName(st);
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
      tried.push_back({{"config", config.name}, {"candidates", found}, {"ran", best >= 0}});
      if (best >= 0) {
        nlohmann::json algo_words = nlohmann::json::array();
        for (std::uint64_t word : results[best].algo.data) algo_words.push_back(word);
        selection_cache_put(cache_key, {{"algo", algo_words},
                                        {"best_index", best},
                                        {"best_ms", best_ms},
                                        {"default_ms", default_ms},
                                        {"candidates_timed", found},
                                        {"candidates", candidates}});
        break;
      }
      refusals += std::string(refusals.empty() ? "" : "; ") + config.name + ": " + std::to_string(found) +
                  " candidates refused (" + config_refusals + ")";
    }
    cudaEventDestroy(start);
    cudaEventDestroy(stop);
    if (best < 0)
      throw WorkerError("library", "cuBLASLt ran no algorithm for M=" + std::to_string(s.m) +
                                       " N=" + std::to_string(s.n) + " K=" + std::to_string(s.k) + " " +
                                       to_string(s.input_type) + " -> " + to_string(out_type) + " (" +
                                       refusals + ")");
    if (!from_cache) algo_ = results[best].algo;
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
                 {"fp8_scale_pointers", scale_pointers},
                 {"config", config_name},
                 {"from_cache", from_cache},
                 {"configs_tried", tried},
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
    release_descriptors();
    if (scales_) cudaFree(scales_);
    scales_ = nullptr;
    c_ = nullptr;
  }

 private:
  static constexpr std::size_t kWorkspaceBytes = 32u << 20;  // 32 MiB, as the design fixes
  static constexpr int kMaxCandidates = 8;
  static constexpr int kSelectionRuns = 5;

  // Sets algo_ to a cached algorithm and runs it once: false when it is malformed or refused.
  bool cached_algo(const nlohmann::json &hit, cudaStream_t stream) {
    const nlohmann::json words = hit.value("algo", nlohmann::json::array());
    cublasLtMatmulAlgo_t algo{};
    if (!words.is_array() || words.size() != std::size(algo.data)) return false;
    for (std::size_t i = 0; i < words.size(); ++i) {
      if (!words[i].is_number_unsigned()) return false;
      algo.data[i] = words[i].get<std::uint64_t>();
    }
    algo_ = algo;
    if (matmul(stream) != CUBLAS_STATUS_SUCCESS) return false;
    PTXB_CUDA(cudaStreamSynchronize(stream));
    return true;
  }

  void release_descriptors() {
    if (desc_) cublasLtMatmulDescDestroy(desc_);
    if (layout_a_) cublasLtMatrixLayoutDestroy(layout_a_);
    if (layout_b_) cublasLtMatrixLayoutDestroy(layout_b_);
    if (layout_c_) cublasLtMatrixLayoutDestroy(layout_c_);
    desc_ = nullptr;
    layout_a_ = layout_b_ = layout_c_ = nullptr;
  }

  cublasStatus_t matmul(cudaStream_t stream) {
    return cublasLtMatmul(handle_, desc_, &alpha_, a_, layout_a_, b_, layout_b_, &beta_, c_, layout_c_, c_,
                          layout_c_, &algo_, workspace_, kWorkspaceBytes, stream);
  }

  cublasLtHandle_t handle_ = nullptr;
  void *workspace_ = nullptr;
  cublasLtMatmulDesc_t desc_ = nullptr;
  cublasLtMatrixLayout_t layout_a_ = nullptr, layout_b_ = nullptr, layout_c_ = nullptr;
  cublasLtMatmulAlgo_t algo_{};
  float *scales_ = nullptr;  // device copies of the per-tensor scales (fp8)
  float alpha_ = 1, beta_ = 0;
  const void *a_ = nullptr, *b_ = nullptr;
  void *c_ = nullptr;  // C and D, in place (beta = 0)
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

std::string prewarm_cublaslt() {
  try {
    (void)shared_lt_handle();
  } catch (const WorkerError &e) {
    return e.what();
  }
  return "";
}

std::string prewarm_cublaslt_matmul() {
  // One small bf16 "TN" matmul chosen by the heuristic: the first heuristic query and the first launch
  // pay one-time set-up inside cuBLASLt that a GEMM job's library selection would otherwise pay.
  constexpr int kN = 256;
  void *a = nullptr, *b = nullptr, *c = nullptr, *workspace = nullptr;
  cublasLtMatmulDesc_t desc = nullptr;
  cublasLtMatrixLayout_t la = nullptr, lb = nullptr, lc = nullptr;
  cublasLtMatmulPreference_t pref = nullptr;
  std::string error;
  try {
    cublasLtHandle_t handle = shared_lt_handle();
    const std::size_t bytes = sizeof(__nv_bfloat16) * kN * kN, ws = 4u << 20;
    PTXB_CUDA(cudaMalloc(&a, bytes));
    PTXB_CUDA(cudaMalloc(&b, bytes));
    PTXB_CUDA(cudaMalloc(&c, bytes));
    PTXB_CUDA(cudaMalloc(&workspace, ws));
    PTXB_CUDA(cudaMemset(a, 0, bytes));
    PTXB_CUDA(cudaMemset(b, 0, bytes));
    PTXB_LT(cublasLtMatmulDescCreate(&desc, CUBLAS_COMPUTE_32F, CUDA_R_32F));
    const cublasOperation_t trans = CUBLAS_OP_T;
    PTXB_LT(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSA, &trans, sizeof(trans)));
    PTXB_LT(cublasLtMatrixLayoutCreate(&la, CUDA_R_16BF, kN, kN, kN));
    PTXB_LT(cublasLtMatrixLayoutCreate(&lb, CUDA_R_16BF, kN, kN, kN));
    PTXB_LT(cublasLtMatrixLayoutCreate(&lc, CUDA_R_16BF, kN, kN, kN));
    PTXB_LT(cublasLtMatmulPreferenceCreate(&pref));
    PTXB_LT(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws,
                                                 sizeof(ws)));
    cublasLtMatmulHeuristicResult_t result{};
    int found = 0;
    PTXB_LT(cublasLtMatmulAlgoGetHeuristic(handle, desc, la, lb, lc, lc, pref, 1, &result, &found));
    if (found > 0) {
      const float alpha = 1.0f, beta = 0.0f;
      PTXB_LT(cublasLtMatmul(handle, desc, &alpha, a, la, b, lb, &beta, c, lc, c, lc, &result.algo, workspace,
                             ws, nullptr));
      PTXB_CUDA(cudaDeviceSynchronize());
    }
  } catch (const WorkerError &e) {
    error = e.what();
  }
  if (pref) cublasLtMatmulPreferenceDestroy(pref);
  for (cublasLtMatrixLayout_t l : {la, lb, lc})
    if (l) cublasLtMatrixLayoutDestroy(l);
  if (desc) cublasLtMatmulDescDestroy(desc);
  for (void *p : {a, b, c, workspace})
    if (p) cudaFree(p);
  return error;
}

std::unique_ptr<FamilyHandler> make_gemm_handler(const std::string &reference) {
  if (reference != "cublaslt") return nullptr;
  return std::make_unique<GemmHandler>();
}

}  // namespace ptxbench::worker
