// fp32 attention reference kernels (see attention_reference.hpp).
//
// Tiling: a block of 256 threads (a 16×16 grid) owns T rows of one head
// (T = 64, or 32 for D = 256 to fit shared memory) and walks the other side's
// tiles. Tiles are staged in shared memory as fp32 with rows padded to D + 1
// words (no bank conflicts); thread (ty, tx) owns rows ty + 16·a and columns
// tx + 16·b of every T×T and T×D tile. Row reductions use shuffles within the
// 16 lanes that share a row.
#include "evaluator/worker/attention_reference.hpp"

#include <cuda_bf16.h>

#include <cmath>
#include <string>

#include "evaluator/worker/family.hpp"

// CUDA runtime checks for the attention references. Kept here rather than using
// detail/cuda_check (which needs libcuda) so this code links with the runtime alone.
#define ATTN_CUDA(call) ::ptxbench::worker::attention_check((call), #call, __FILE__, __LINE__)
namespace ptxbench::worker {
inline void attention_check(cudaError_t e, const char *call, const char *file, int line) {
  if (e != cudaSuccess)
    throw WorkerError("runtime_error", std::string(call) + " failed: " + cudaGetErrorName(e) + " (" +
                                           cudaGetErrorString(e) + ") at " + file + ":" +
                                           std::to_string(line));
}
}  // namespace ptxbench::worker

namespace ptxbench::worker::attention_reference {
namespace {

constexpr int kThreads = 256;

struct HeadList {
  int count;  // 0 = every head (blockIdx.y is the head)
  int index[kMaxHeadSubset];
};

template <int D>
struct Tiling {
  static constexpr int T = D > 128 ? 32 : 64;  // rows per tile
  static constexpr int LD = D + 1;             // padded row of a T×D tile (floats)
  static constexpr int LP = T + 1;             // padded row of a T×T tile (floats)
  static constexpr int R = T / 16;             // rows per thread
  static constexpr int C = D / 16;             // T×D columns per thread
  static constexpr int CT = T / 16;            // T×T columns per thread
};

__device__ __forceinline__ int current_head(const HeadList &heads) {
  return heads.count ? heads.index[blockIdx.y] : static_cast<int>(blockIdx.y);
}

__device__ __forceinline__ float row_max16(float x) {
  for (int off = 8; off > 0; off >>= 1) x = fmaxf(x, __shfl_xor_sync(0xffffffffu, x, off));
  return x;
}

__device__ __forceinline__ float row_sum16(float x) {
  for (int off = 8; off > 0; off >>= 1) x += __shfl_xor_sync(0xffffffffu, x, off);
  return x;
}

// Rows [row0, row0 + T) of a [S, D] bf16 matrix -> fp32 tile; rows past S read as 0.
template <int D, int T>
__device__ void load_tile(float *dst, const __nv_bfloat16 *src, int row0, int S) {
  constexpr int LD = D + 1;
  for (int i = threadIdx.x; i < T * D; i += kThreads) {
    const int r = i / D, c = i % D, row = row0 + r;
    dst[r * LD + c] = row < S ? __bfloat162float(src[static_cast<std::size_t>(row) * D + c]) : 0.f;
  }
}

__device__ __forceinline__ bool visible(int query, int key, int S, bool causal) {
  return query < S && key < S && (!causal || key <= query);
}

template <int D>
__global__ void __launch_bounds__(kThreads)
    forward_kernel(const __nv_bfloat16 *__restrict__ q, const __nv_bfloat16 *__restrict__ k,
                   const __nv_bfloat16 *__restrict__ v, float *o_f32, __nv_bfloat16 *o_bf16, float *lse,
                   int S, float scale, bool causal, HeadList heads) {
  using Tl = Tiling<D>;
  constexpr int T = Tl::T, LD = Tl::LD, LP = Tl::LP, R = Tl::R, C = Tl::C, CT = Tl::CT;
  extern __shared__ float smem[];
  float *sQ = smem, *sK = sQ + T * LD, *sV = sK + T * LD, *sP = sV + T * LD;
  const int head = current_head(heads);
  const std::size_t base = static_cast<std::size_t>(head) * S * D;
  const int q0 = blockIdx.x * T, tx = threadIdx.x % 16, ty = threadIdx.x / 16;

  load_tile<D, T>(sQ, q + base, q0, S);
  float m[R], l[R], acc[R][C];
  for (int a = 0; a < R; ++a) {
    m[a] = -INFINITY;
    l[a] = 0.f;
    for (int c = 0; c < C; ++c) acc[a][c] = 0.f;
  }
  const int kv_end = causal ? min(S, q0 + T) : S;
  for (int k0 = 0; k0 < kv_end; k0 += T) {
    __syncthreads();  // the previous tile's readers are done
    load_tile<D, T>(sK, k + base, k0, S);
    load_tile<D, T>(sV, v + base, k0, S);
    __syncthreads();
    float s[R][CT] = {};
    for (int d = 0; d < D; ++d) {
      float qa[R], kb[CT];
      for (int a = 0; a < R; ++a) qa[a] = sQ[(ty + 16 * a) * LD + d];
      for (int b = 0; b < CT; ++b) kb[b] = sK[(tx + 16 * b) * LD + d];
      for (int a = 0; a < R; ++a)
        for (int b = 0; b < CT; ++b) s[a][b] = fmaf(qa[a], kb[b], s[a][b]);
    }
    for (int a = 0; a < R; ++a) {
      const int row = q0 + ty + 16 * a;
      float tile_max = -INFINITY;
      for (int b = 0; b < CT; ++b) {
        const int col = k0 + tx + 16 * b;
        s[a][b] = visible(row, col, S, causal) ? s[a][b] * scale : -INFINITY;
        tile_max = fmaxf(tile_max, s[a][b]);
      }
      tile_max = row_max16(tile_max);
      const float m_new = fmaxf(m[a], tile_max);
      // m_new = -inf only for padding rows past S (never written back).
      const float correction = m_new == -INFINITY ? 1.f : expf(m[a] - m_new);
      float psum = 0.f;
      for (int b = 0; b < CT; ++b) {
        const float p = s[a][b] == -INFINITY ? 0.f : expf(s[a][b] - m_new);
        sP[(ty + 16 * a) * LP + tx + 16 * b] = p;
        psum += p;
      }
      psum = row_sum16(psum);
      l[a] = l[a] * correction + psum;
      m[a] = m_new;
      for (int c = 0; c < C; ++c) acc[a][c] *= correction;
    }
    __syncthreads();
    for (int kk = 0; kk < T; ++kk) {
      float pa[R];
      for (int a = 0; a < R; ++a) pa[a] = sP[(ty + 16 * a) * LP + kk];
      for (int c = 0; c < C; ++c) {
        const float vv = sV[kk * LD + tx + 16 * c];
        for (int a = 0; a < R; ++a) acc[a][c] = fmaf(pa[a], vv, acc[a][c]);
      }
    }
  }
  for (int a = 0; a < R; ++a) {
    const int row = q0 + ty + 16 * a;
    if (row >= S) continue;
    const float inv = 1.f / l[a];
    for (int c = 0; c < C; ++c) {
      const std::size_t at = base + static_cast<std::size_t>(row) * D + tx + 16 * c;
      const float val = acc[a][c] * inv;
      if (o_f32) o_f32[at] = val;
      if (o_bf16) o_bf16[at] = __float2bfloat16_rn(val);
    }
    if (lse && tx == 0) lse[static_cast<std::size_t>(head) * S + row] = m[a] + logf(l[a]);
  }
}

// Delta_i = Σ_d dO_id · O_id, one warp per row.
__global__ void delta_kernel(const __nv_bfloat16 *__restrict__ o, const __nv_bfloat16 *__restrict__ d_o,
                             float *delta, int S, int D, HeadList heads) {
  const int head = current_head(heads);
  const int row = blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32, lane = threadIdx.x % 32;
  if (row >= S) return;
  const std::size_t at = (static_cast<std::size_t>(head) * S + row) * D;
  float sum = 0.f;
  for (int d = lane; d < D; d += 32)
    sum = fmaf(__bfloat162float(d_o[at + d]), __bfloat162float(o[at + d]), sum);
  for (int off = 16; off > 0; off >>= 1) sum += __shfl_xor_sync(0xffffffffu, sum, off);
  if (lane == 0) delta[static_cast<std::size_t>(head) * S + row] = sum;
}

// dK, dV for T key rows: walks the query tiles that see them.
template <int D>
__global__ void __launch_bounds__(kThreads)
    dkdv_kernel(const __nv_bfloat16 *__restrict__ q, const __nv_bfloat16 *__restrict__ k,
                const __nv_bfloat16 *__restrict__ v, const __nv_bfloat16 *__restrict__ d_o,
                const float *__restrict__ lse, const float *__restrict__ delta, float *dk, float *dv, int S,
                float scale, bool causal, HeadList heads) {
  using Tl = Tiling<D>;
  constexpr int T = Tl::T, LD = Tl::LD, LP = Tl::LP, R = Tl::R, C = Tl::C, CT = Tl::CT;
  extern __shared__ float smem[];
  float *sK = smem, *sV = sK + T * LD, *sQ = sV + T * LD, *sdO = sQ + T * LD;
  float *sP = sdO + T * LD, *sdS = sP + T * LP, *sLse = sdS + T * LP, *sDelta = sLse + T;
  const int head = current_head(heads);
  const std::size_t base = static_cast<std::size_t>(head) * S * D;
  const std::size_t row_base = static_cast<std::size_t>(head) * S;
  const int k0 = blockIdx.x * T, tx = threadIdx.x % 16, ty = threadIdx.x / 16;

  load_tile<D, T>(sK, k + base, k0, S);
  load_tile<D, T>(sV, v + base, k0, S);
  float acc_dk[R][C] = {}, acc_dv[R][C] = {};
  for (int q0 = causal ? k0 : 0; q0 < S; q0 += T) {
    __syncthreads();
    load_tile<D, T>(sQ, q + base, q0, S);
    load_tile<D, T>(sdO, d_o + base, q0, S);
    for (int i = threadIdx.x; i < T; i += kThreads) {
      const bool in = q0 + i < S;
      sLse[i] = in ? lse[row_base + q0 + i] : 0.f;
      sDelta[i] = in ? delta[row_base + q0 + i] : 0.f;
    }
    __syncthreads();
    // Transposed orientation: thread entries are (key row ty+16a, query col tx+16b).
    float s[R][CT] = {}, dp[R][CT] = {};
    for (int d = 0; d < D; ++d) {
      float ka[R], va[R], qb[CT], ob[CT];
      for (int a = 0; a < R; ++a) {
        ka[a] = sK[(ty + 16 * a) * LD + d];
        va[a] = sV[(ty + 16 * a) * LD + d];
      }
      for (int b = 0; b < CT; ++b) {
        qb[b] = sQ[(tx + 16 * b) * LD + d];
        ob[b] = sdO[(tx + 16 * b) * LD + d];
      }
      for (int a = 0; a < R; ++a)
        for (int b = 0; b < CT; ++b) {
          s[a][b] = fmaf(ka[a], qb[b], s[a][b]);
          dp[a][b] = fmaf(va[a], ob[b], dp[a][b]);
        }
    }
    for (int a = 0; a < R; ++a)
      for (int b = 0; b < CT; ++b) {
        const int key = k0 + ty + 16 * a, qc = tx + 16 * b;
        const float p = visible(q0 + qc, key, S, causal) ? expf(s[a][b] * scale - sLse[qc]) : 0.f;
        sP[(ty + 16 * a) * LP + qc] = p;
        sdS[(ty + 16 * a) * LP + qc] = p * (dp[a][b] - sDelta[qc]);
      }
    __syncthreads();
    for (int qq = 0; qq < T; ++qq) {
      float pa[R], dsa[R];
      for (int a = 0; a < R; ++a) {
        pa[a] = sP[(ty + 16 * a) * LP + qq];
        dsa[a] = sdS[(ty + 16 * a) * LP + qq];
      }
      for (int c = 0; c < C; ++c) {
        const float ov = sdO[qq * LD + tx + 16 * c], qv = sQ[qq * LD + tx + 16 * c];
        for (int a = 0; a < R; ++a) {
          acc_dv[a][c] = fmaf(pa[a], ov, acc_dv[a][c]);
          acc_dk[a][c] = fmaf(dsa[a], qv, acc_dk[a][c]);
        }
      }
    }
  }
  for (int a = 0; a < R; ++a) {
    const int row = k0 + ty + 16 * a;
    if (row >= S) continue;
    for (int c = 0; c < C; ++c) {
      const std::size_t at = base + static_cast<std::size_t>(row) * D + tx + 16 * c;
      dk[at] = acc_dk[a][c] * scale;
      dv[at] = acc_dv[a][c];
    }
  }
}

// dQ for T query rows: walks the key tiles they see.
template <int D>
__global__ void __launch_bounds__(kThreads)
    dq_kernel(const __nv_bfloat16 *__restrict__ q, const __nv_bfloat16 *__restrict__ k,
              const __nv_bfloat16 *__restrict__ v, const __nv_bfloat16 *__restrict__ d_o,
              const float *__restrict__ lse, const float *__restrict__ delta, float *dq, int S, float scale,
              bool causal, HeadList heads) {
  using Tl = Tiling<D>;
  constexpr int T = Tl::T, LD = Tl::LD, LP = Tl::LP, R = Tl::R, C = Tl::C, CT = Tl::CT;
  extern __shared__ float smem[];
  float *sQ = smem, *sdO = sQ + T * LD, *sK = sdO + T * LD, *sV = sK + T * LD, *sdS = sV + T * LD;
  const int head = current_head(heads);
  const std::size_t base = static_cast<std::size_t>(head) * S * D;
  const std::size_t row_base = static_cast<std::size_t>(head) * S;
  const int q0 = blockIdx.x * T, tx = threadIdx.x % 16, ty = threadIdx.x / 16;

  load_tile<D, T>(sQ, q + base, q0, S);
  load_tile<D, T>(sdO, d_o + base, q0, S);
  float row_lse[R], row_delta[R], acc[R][C] = {};
  for (int a = 0; a < R; ++a) {
    const int row = q0 + ty + 16 * a;
    row_lse[a] = row < S ? lse[row_base + row] : 0.f;
    row_delta[a] = row < S ? delta[row_base + row] : 0.f;
  }
  const int kv_end = causal ? min(S, q0 + T) : S;
  for (int k0 = 0; k0 < kv_end; k0 += T) {
    __syncthreads();
    load_tile<D, T>(sK, k + base, k0, S);
    load_tile<D, T>(sV, v + base, k0, S);
    __syncthreads();
    float s[R][CT] = {}, dp[R][CT] = {};
    for (int d = 0; d < D; ++d) {
      float qa[R], oa[R], kb[CT], vb[CT];
      for (int a = 0; a < R; ++a) {
        qa[a] = sQ[(ty + 16 * a) * LD + d];
        oa[a] = sdO[(ty + 16 * a) * LD + d];
      }
      for (int b = 0; b < CT; ++b) {
        kb[b] = sK[(tx + 16 * b) * LD + d];
        vb[b] = sV[(tx + 16 * b) * LD + d];
      }
      for (int a = 0; a < R; ++a)
        for (int b = 0; b < CT; ++b) {
          s[a][b] = fmaf(qa[a], kb[b], s[a][b]);
          dp[a][b] = fmaf(oa[a], vb[b], dp[a][b]);
        }
    }
    for (int a = 0; a < R; ++a)
      for (int b = 0; b < CT; ++b) {
        const int row = q0 + ty + 16 * a, kc = tx + 16 * b;
        const float p = visible(row, k0 + kc, S, causal) ? expf(s[a][b] * scale - row_lse[a]) : 0.f;
        sdS[(ty + 16 * a) * LP + kc] = p * (dp[a][b] - row_delta[a]);
      }
    __syncthreads();
    for (int kk = 0; kk < T; ++kk) {
      float dsa[R];
      for (int a = 0; a < R; ++a) dsa[a] = sdS[(ty + 16 * a) * LP + kk];
      for (int c = 0; c < C; ++c) {
        const float kv = sK[kk * LD + tx + 16 * c];
        for (int a = 0; a < R; ++a) acc[a][c] = fmaf(dsa[a], kv, acc[a][c]);
      }
    }
  }
  for (int a = 0; a < R; ++a) {
    const int row = q0 + ty + 16 * a;
    if (row >= S) continue;
    for (int c = 0; c < C; ++c)
      dq[base + static_cast<std::size_t>(row) * D + tx + 16 * c] = acc[a][c] * scale;
  }
}

template <int D>
constexpr std::size_t forward_smem() {
  using Tl = Tiling<D>;
  return sizeof(float) * (3 * Tl::T * Tl::LD + Tl::T * Tl::LP);
}
template <int D>
constexpr std::size_t dkdv_smem() {
  using Tl = Tiling<D>;
  return sizeof(float) * (4 * Tl::T * Tl::LD + 2 * Tl::T * Tl::LP + 2 * Tl::T);
}
template <int D>
constexpr std::size_t dq_smem() {
  using Tl = Tiling<D>;
  return sizeof(float) * (4 * Tl::T * Tl::LD + Tl::T * Tl::LP);
}

HeadList make_head_list(const Problem &p, const std::vector<int> &heads) {
  HeadList list{};
  if (heads.size() > static_cast<std::size_t>(kMaxHeadSubset))
    throw WorkerError("internal", "attention reference: more than kMaxHeadSubset heads in a subset");
  list.count = static_cast<int>(heads.size());
  for (std::size_t i = 0; i < heads.size(); ++i) {
    if (heads[i] < 0 || heads[i] >= p.batch * p.heads)
      throw WorkerError("internal", "attention reference: head index out of range");
    list.index[i] = heads[i];
  }
  return list;
}

dim3 grid_for(const Problem &p, const HeadList &list, int rows_per_block) {
  const auto tiles = static_cast<unsigned>((p.seq_len + rows_per_block - 1) / rows_per_block);
  const auto heads = static_cast<unsigned>(list.count ? list.count : p.batch * p.heads);
  return dim3(tiles, heads);
}

template <class Kernel>
void allow_smem(Kernel kernel, std::size_t bytes) {
  ATTN_CUDA(
      cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(bytes)));
}

template <int D>
void forward_d(const Problem &p, const HeadList &list, const void *q, const void *k, const void *v,
               float *o_f32, void *o_bf16, float *lse, cudaStream_t stream) {
  constexpr std::size_t smem = forward_smem<D>();
  allow_smem(forward_kernel<D>, smem);
  forward_kernel<D><<<grid_for(p, list, Tiling<D>::T), kThreads, smem, stream>>>(
      static_cast<const __nv_bfloat16 *>(q), static_cast<const __nv_bfloat16 *>(k),
      static_cast<const __nv_bfloat16 *>(v), o_f32, static_cast<__nv_bfloat16 *>(o_bf16), lse,
      static_cast<int>(p.seq_len), p.softmax_scale, p.causal, list);
  ATTN_CUDA(cudaGetLastError());
}

template <int D>
void backward_d(const Problem &p, const HeadList &list, const void *q, const void *k, const void *v,
                const void *d_o, const float *lse, const float *delta, float *dq, float *dk, float *dv,
                cudaStream_t stream) {
  const auto *qb = static_cast<const __nv_bfloat16 *>(q);
  const auto *kb = static_cast<const __nv_bfloat16 *>(k);
  const auto *vb = static_cast<const __nv_bfloat16 *>(v);
  const auto *ob = static_cast<const __nv_bfloat16 *>(d_o);
  const int S = static_cast<int>(p.seq_len);
  allow_smem(dkdv_kernel<D>, dkdv_smem<D>());
  dkdv_kernel<D><<<grid_for(p, list, Tiling<D>::T), kThreads, dkdv_smem<D>(), stream>>>(
      qb, kb, vb, ob, lse, delta, dk, dv, S, p.softmax_scale, p.causal, list);
  ATTN_CUDA(cudaGetLastError());
  allow_smem(dq_kernel<D>, dq_smem<D>());
  dq_kernel<D><<<grid_for(p, list, Tiling<D>::T), kThreads, dq_smem<D>(), stream>>>(
      qb, kb, vb, ob, lse, delta, dq, S, p.softmax_scale, p.causal, list);
  ATTN_CUDA(cudaGetLastError());
}

}  // namespace

const char *unsupported_reason(const Problem &p) {
  if (p.batch <= 0 || p.heads <= 0 || p.seq_len <= 0) return "B, H and S must be positive";
  if (p.head_dim != 64 && p.head_dim != 128 && p.head_dim != 256)
    return "the fp32 attention reference supports head dims 64, 128 and 256";
  if (p.seq_len > (1 << 30) || p.batch * p.heads > 65535) return "problem too large for the reference grid";
  return "";
}

void forward(const void *q, const void *k, const void *v, float *o_f32, void *o_bf16, float *lse,
             const Problem &p, const std::vector<int> &heads, cudaStream_t stream) {
  if (const char *why = unsupported_reason(p); *why) throw WorkerError("internal", why);
  const HeadList list = make_head_list(p, heads);
  switch (p.head_dim) {
    case 64:
      forward_d<64>(p, list, q, k, v, o_f32, o_bf16, lse, stream);
      break;
    case 128:
      forward_d<128>(p, list, q, k, v, o_f32, o_bf16, lse, stream);
      break;
    default:
      forward_d<256>(p, list, q, k, v, o_f32, o_bf16, lse, stream);
      break;
  }
}

void backward(const void *q, const void *k, const void *v, const void *o, const void *d_o, const float *lse,
              float *dq, float *dk, float *dv, const Problem &p, const std::vector<int> &heads,
              cudaStream_t stream) {
  if (const char *why = unsupported_reason(p); *why) throw WorkerError("internal", why);
  const HeadList list = make_head_list(p, heads);
  float *delta = nullptr;
  const std::size_t rows = static_cast<std::size_t>(p.batch * p.heads * p.seq_len);
  ATTN_CUDA(cudaMallocAsync(reinterpret_cast<void **>(&delta), rows * sizeof(float), stream));
  constexpr int kRowsPerBlock = 8;  // 8 warps of 32 lanes
  delta_kernel<<<grid_for(p, list, kRowsPerBlock), 32 * kRowsPerBlock, 0, stream>>>(
      static_cast<const __nv_bfloat16 *>(o), static_cast<const __nv_bfloat16 *>(d_o), delta,
      static_cast<int>(p.seq_len), static_cast<int>(p.head_dim), list);
  ATTN_CUDA(cudaGetLastError());
  switch (p.head_dim) {
    case 64:
      backward_d<64>(p, list, q, k, v, d_o, lse, delta, dq, dk, dv, stream);
      break;
    case 128:
      backward_d<128>(p, list, q, k, v, d_o, lse, delta, dq, dk, dv, stream);
      break;
    default:
      backward_d<256>(p, list, q, k, v, d_o, lse, delta, dq, dk, dv, stream);
      break;
  }
  ATTN_CUDA(cudaFreeAsync(delta, stream));
}

}  // namespace ptxbench::worker::attention_reference
