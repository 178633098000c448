// Reference solution "simple_bwd": attention backward (dQ, dK, dV) on the CUDA cores only (fp32 FMA,
// no tensor cores), deterministic and with no workspace. One launch, two kinds of block:
//  - blockIdx.x <  row_blocks: 8 keys per block (one warp each) own their rows of dK and dV and walk
//    the queries in tiles of 32 (lane = query): P = exp(s - LSE), dP = dO.V^T, dS = P (dP - Delta),
//    dV += P^T dO, dK += dS^T Q;
//  - blockIdx.x >= row_blocks: 8 queries per block (one warp each) own their rows of dQ and walk the
//    keys in tiles of 32 (lane = key): dQ += dS K.
// P is recomputed from LSE, Delta[i] = sum_d dO[i][d] O[i][d] is recomputed where needed, so every
// output element is written by exactly one thread, in a fixed summation order.
// Layout: all tensors [B, H, S, D=128] bf16 (D contiguous), LSE [B, H, S] f32; blockIdx.y = b*H + h.
#include <cstdint>

#ifndef MHA_CAUSAL
#define MHA_CAUSAL 0  // 1: query i attends keys j <= i
#endif

namespace {

constexpr int kHeadDim = 128;
constexpr int kRows = 8;              // owned rows per block, one warp each
constexpr int kTile = 32;             // rows per streamed tile, one per lane
constexpr int kPitch = kHeadDim + 4;  // fp32 pitch: 16-byte aligned rows, conflict-free float4 reads
constexpr float kLog2e = 1.4426950408889634f;

__device__ __forceinline__ uint16_t f32_to_bf16(float value) {
  uint16_t bits;
  asm("cvt.rn.bf16.f32 %0, %1;" : "=h"(bits) : "f"(value));
  return bits;
}

// Loads 8 consecutive bf16 (16 bytes) and widens them to fp32 at dst (or zeros when !valid).
__device__ __forceinline__ void stage_chunk(float *dst, const uint16_t *src, bool valid) {
  uint32_t w[4] = {0u, 0u, 0u, 0u};
  if (valid)
    asm volatile("ld.global.nc.v4.u32 {%0, %1, %2, %3}, [%4];"
                 : "=r"(w[0]), "=r"(w[1]), "=r"(w[2]), "=r"(w[3])
                 : "l"(src));
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    dst[2 * i] = __uint_as_float(w[i] << 16);
    dst[2 * i + 1] = __uint_as_float(w[i] & 0xffff0000u);
  }
}

// Stages `count` rows of 128 bf16 starting at row `first` into an fp32 array with the given pitch.
__device__ __forceinline__ void stage_rows(float *dst, int pitch, const uint16_t *head, uint32_t first, int count,
                                           uint32_t S) {
  for (int c = threadIdx.x; c < count * kHeadDim / 8; c += blockDim.x) {
    const int r = c / (kHeadDim / 8), d = (c % (kHeadDim / 8)) * 8;
    stage_chunk(dst + r * pitch + d, head + uint64_t(first + r) * kHeadDim + d, first + r < S);
  }
}

__device__ __forceinline__ float dot128(const float *a, const float *b) {
  float acc = 0.f;
#pragma unroll 8
  for (int d = 0; d < kHeadDim; d += 4) {
    const float4 x = *reinterpret_cast<const float4 *>(a + d);
    const float4 y = *reinterpret_cast<const float4 *>(b + d);
    acc = fmaf(x.x, y.x, acc);
    acc = fmaf(x.y, y.y, acc);
    acc = fmaf(x.z, y.z, acc);
    acc = fmaf(x.w, y.w, acc);
  }
  return acc;
}

__device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
  for (int off = 16; off > 0; off >>= 1) v += __shfl_xor_sync(0xffffffffu, v, off);
  return v;
}

// Delta for one row: dO row (fp32, shared) times O row (bf16, global), summed by the whole warp.
__device__ __forceinline__ float row_delta(const float *do_row, const uint16_t *o_row, int lane) {
  uint2 raw;
  asm volatile("ld.global.nc.v2.u32 {%0, %1}, [%2];" : "=r"(raw.x), "=r"(raw.y) : "l"(o_row + 4 * lane));
  const float4 g = *reinterpret_cast<const float4 *>(do_row + 4 * lane);
  float part = g.x * __uint_as_float(raw.x << 16) + g.y * __uint_as_float(raw.x & 0xffff0000u) +
               g.z * __uint_as_float(raw.y << 16) + g.w * __uint_as_float(raw.y & 0xffff0000u);
  return warp_sum(part);
}

__device__ __forceinline__ void store_row4(uint16_t *dst, const float v[4], float factor) {
  const uint32_t lo = uint32_t(f32_to_bf16(v[0] * factor)) | (uint32_t(f32_to_bf16(v[1] * factor)) << 16);
  const uint32_t hi = uint32_t(f32_to_bf16(v[2] * factor)) | (uint32_t(f32_to_bf16(v[3] * factor)) << 16);
  asm volatile("st.global.v2.u32 [%0], {%1, %2};" ::"l"(dst), "r"(lo), "r"(hi) : "memory");
}

}  // namespace

extern "C" __global__ void __launch_bounds__(kRows * 32)
    mha_bwd_simple(const uint16_t *Q, const uint16_t *K, const uint16_t *V, const uint16_t *O, const uint16_t *dO,
                   const float *LSE, uint16_t *dQ, uint16_t *dK, uint16_t *dV, uint32_t S, float softmax_scale) {
  __shared__ __align__(16) float tile_a[kTile][kPitch];   // Q tile (dK/dV blocks) or K tile (dQ blocks)
  __shared__ __align__(16) float tile_b[kTile][kPitch];   // dO tile or V tile
  __shared__ __align__(16) float rows_a[kRows][kHeadDim]; // owned K rows or Q rows
  __shared__ __align__(16) float rows_b[kRows][kHeadDim]; // owned V rows or dO rows
  __shared__ float tile_lse[kTile];
  __shared__ float tile_delta[kTile];

  const int warp = threadIdx.x / 32;
  const int lane = threadIdx.x % 32;
  const uint64_t head = uint64_t(blockIdx.y) * S * kHeadDim;
  const float *lse_head = LSE + uint64_t(blockIdx.y) * S;
  const uint32_t row_blocks = (S + kRows - 1) / kRows;
  const float lse_scale = kLog2e;                   // P = exp2(log2e * (s - LSE))
  const float score_scale = softmax_scale * kLog2e; // log2e * s = score_scale * <q, k>

  if (blockIdx.x < row_blocks) {
    // ---- dK, dV for keys key0 .. key0+7 ----
    const uint32_t key0 = blockIdx.x * kRows;
    const uint32_t key = key0 + warp;
    stage_rows(&rows_a[0][0], kHeadDim, K + head, key0, kRows, S);
    stage_rows(&rows_b[0][0], kHeadDim, V + head, key0, kRows, S);
    float dk[4] = {0.f, 0.f, 0.f, 0.f}, dv[4] = {0.f, 0.f, 0.f, 0.f};
    // Causal: queries before key0 see none of these keys.
    const uint32_t q_begin = MHA_CAUSAL ? key0 / kTile * kTile : 0;
    for (uint32_t q0 = q_begin; q0 < S; q0 += kTile) {
      __syncthreads();  // previous tile consumed
      stage_rows(&tile_a[0][0], kPitch, Q + head, q0, kTile, S);
      stage_rows(&tile_b[0][0], kPitch, dO + head, q0, kTile, S);
      if (threadIdx.x < kTile) tile_lse[threadIdx.x] = q0 + threadIdx.x < S ? lse_head[q0 + threadIdx.x] : 0.f;
      __syncthreads();
#pragma unroll
      for (int i = 0; i < kTile / kRows; ++i) {  // each warp: Delta of 4 query rows
        const int r = warp * (kTile / kRows) + i;
        const float delta =
            q0 + r < S ? row_delta(tile_b[r], O + head + uint64_t(q0 + r) * kHeadDim, lane) : 0.f;
        if (lane == 0) tile_delta[r] = delta;
      }
      __syncthreads();

      const uint32_t query = q0 + lane;
      bool visible = query < S && key < S;
      if (MHA_CAUSAL) visible = visible && key <= query;
      const float s2 = dot128(tile_a[lane], rows_a[warp]) * score_scale;
      const float p = visible ? exp2f(s2 - tile_lse[lane] * lse_scale) : 0.f;
      const float dp = dot128(tile_b[lane], rows_b[warp]);
      const float ds = p * (dp - tile_delta[lane]);
#pragma unroll 4
      for (int i = 0; i < kTile; ++i) {
        const float pi = __shfl_sync(0xffffffffu, p, i);
        const float dsi = __shfl_sync(0xffffffffu, ds, i);
        const float4 g = *reinterpret_cast<const float4 *>(&tile_b[i][4 * lane]);
        const float4 q = *reinterpret_cast<const float4 *>(&tile_a[i][4 * lane]);
        dv[0] = fmaf(pi, g.x, dv[0]);
        dv[1] = fmaf(pi, g.y, dv[1]);
        dv[2] = fmaf(pi, g.z, dv[2]);
        dv[3] = fmaf(pi, g.w, dv[3]);
        dk[0] = fmaf(dsi, q.x, dk[0]);
        dk[1] = fmaf(dsi, q.y, dk[1]);
        dk[2] = fmaf(dsi, q.z, dk[2]);
        dk[3] = fmaf(dsi, q.w, dk[3]);
      }
    }
    if (key < S) {
      store_row4(dK + head + uint64_t(key) * kHeadDim + 4 * lane, dk, softmax_scale);
      store_row4(dV + head + uint64_t(key) * kHeadDim + 4 * lane, dv, 1.f);
    }
  } else {
    // ---- dQ for queries row0 .. row0+7 ----
    const uint32_t row0 = (blockIdx.x - row_blocks) * kRows;
    const uint32_t query = row0 + warp;
    stage_rows(&rows_a[0][0], kHeadDim, Q + head, row0, kRows, S);
    stage_rows(&rows_b[0][0], kHeadDim, dO + head, row0, kRows, S);
    __syncthreads();
    const float lse2 = query < S ? lse_head[query] * lse_scale : 0.f;
    const float delta = query < S ? row_delta(rows_b[warp], O + head + uint64_t(query) * kHeadDim, lane) : 0.f;
    float dq[4] = {0.f, 0.f, 0.f, 0.f};
    const uint32_t key_end = MHA_CAUSAL ? min(S, row0 + kRows) : S;
    for (uint32_t k0 = 0; k0 < key_end; k0 += kTile) {
      __syncthreads();
      stage_rows(&tile_a[0][0], kPitch, K + head, k0, kTile, S);
      stage_rows(&tile_b[0][0], kPitch, V + head, k0, kTile, S);
      __syncthreads();
      const uint32_t key = k0 + lane;
      bool visible = query < S && key < S;
      if (MHA_CAUSAL) visible = visible && key <= query;
      const float s2 = dot128(rows_a[warp], tile_a[lane]) * score_scale;
      const float p = visible ? exp2f(s2 - lse2) : 0.f;
      const float dp = dot128(rows_b[warp], tile_b[lane]);
      const float ds = p * (dp - delta);
#pragma unroll 8
      for (int j = 0; j < kTile; ++j) {
        const float dsj = __shfl_sync(0xffffffffu, ds, j);
        const float4 k = *reinterpret_cast<const float4 *>(&tile_a[j][4 * lane]);
        dq[0] = fmaf(dsj, k.x, dq[0]);
        dq[1] = fmaf(dsj, k.y, dq[1]);
        dq[2] = fmaf(dsj, k.z, dq[2]);
        dq[3] = fmaf(dsj, k.w, dq[3]);
      }
    }
    if (query < S) store_row4(dQ + head + uint64_t(query) * kHeadDim + 4 * lane, dq, softmax_scale);
  }
}
