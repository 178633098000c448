// Reference solution "simple_fwd": attention forward O = softmax(scale * Q K^T) V and the natural-log
// LSE per row, on the CUDA cores only (fp32 FMA, no tensor cores). One warp per query row, 8 rows per
// block; K and V are walked in tiles of 32 keys staged in shared memory as fp32 and shared by the 8
// rows. Lane l scores key l of the tile (a full 128-long dot product), the warp then does one online
// softmax step (running max m, running sum l) and every lane updates its own 4 columns of O.
// Layout: Q, K, V, O [B, H, S, D=128] bf16 (D contiguous), LSE [B, H, S] f32; blockIdx.y = b*H + h.
#include <cstdint>

#ifndef MHA_CAUSAL
#define MHA_CAUSAL 0  // 1: query i attends keys j <= i
#endif

namespace {

constexpr int kHeadDim = 128;
constexpr int kRows = 8;                    // query rows per block, one warp each
constexpr int kKeys = 32;                   // keys per shared-memory tile, one per lane
constexpr int kPitch = kHeadDim + 4;        // fp32 row pitch: 16-byte aligned, no bank conflicts on float4
constexpr float kLog2e = 1.4426950408889634f;
constexpr float kLn2 = 0.6931471805599453f;

__device__ __forceinline__ uint16_t f32_to_bf16(float value) {
  uint16_t bits;
  asm("cvt.rn.bf16.f32 %0, %1;" : "=h"(bits) : "f"(value));
  return bits;
}

// Loads 8 consecutive bf16 (16 bytes) and widens them to fp32 in shared memory.
__device__ __forceinline__ void stage_row_chunk(float *dst, const uint16_t *src) {
  uint4 raw;
  asm volatile("ld.global.nc.v4.u32 {%0, %1, %2, %3}, [%4];"
               : "=r"(raw.x), "=r"(raw.y), "=r"(raw.z), "=r"(raw.w)
               : "l"(src));
  const uint32_t words[4] = {raw.x, raw.y, raw.z, raw.w};
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    dst[2 * i] = __uint_as_float(words[i] << 16);
    dst[2 * i + 1] = __uint_as_float(words[i] & 0xffff0000u);
  }
}

}  // namespace

extern "C" __global__ void __launch_bounds__(kRows * 32)
    mha_fwd_simple(const uint16_t *Q, const uint16_t *K, const uint16_t *V, uint16_t *O, float *LSE, uint32_t S,
                   float softmax_scale) {
  __shared__ __align__(16) float q_tile[kRows][kHeadDim];
  __shared__ __align__(16) float k_tile[kKeys][kPitch];
  __shared__ __align__(16) float v_tile[kKeys][kPitch];

  const int warp = threadIdx.x / 32;
  const int lane = threadIdx.x % 32;
  const uint64_t head_offset = uint64_t(blockIdx.y) * S * kHeadDim;
  const uint32_t row0 = blockIdx.x * kRows;
  const uint32_t row = row0 + warp;
  const bool row_valid = row < S;

  // Q rows of this block, fp32 (a missing row past S is zero and never stored).
  for (int c = threadIdx.x; c < kRows * kHeadDim / 8; c += blockDim.x) {
    const int r = c / (kHeadDim / 8), d = (c % (kHeadDim / 8)) * 8;
    if (row0 + r < S) {
      stage_row_chunk(&q_tile[r][d], Q + head_offset + uint64_t(row0 + r) * kHeadDim + d);
    } else {
#pragma unroll
      for (int i = 0; i < 8; ++i) q_tile[r][d + i] = 0.f;
    }
  }

  // Scores are kept in the log2 domain: t = s * log2(e), so exp(s - m) = exp2(t - m2).
  const float score_scale = softmax_scale * kLog2e;
  float m2 = -INFINITY;  // running max of t over the keys seen (per row, same in every lane)
  float l = 0.f;         // running sum of exp2(t - m2)
  float o[4] = {0.f, 0.f, 0.f, 0.f};  // O[row][4*lane .. 4*lane+3], unnormalised

  // Causal: the block's last row is row0 + kRows - 1, so keys past it are never needed.
  const uint32_t key_end = MHA_CAUSAL ? min(S, row0 + kRows) : S;
  for (uint32_t key0 = 0; key0 < key_end; key0 += kKeys) {
    __syncthreads();  // previous tile fully consumed (and q_tile written on the first pass)
    for (int c = threadIdx.x; c < kKeys * kHeadDim / 8; c += blockDim.x) {
      const int r = c / (kHeadDim / 8), d = (c % (kHeadDim / 8)) * 8;
      if (key0 + r < S) {
        stage_row_chunk(&k_tile[r][d], K + head_offset + uint64_t(key0 + r) * kHeadDim + d);
        stage_row_chunk(&v_tile[r][d], V + head_offset + uint64_t(key0 + r) * kHeadDim + d);
      } else {
#pragma unroll
        for (int i = 0; i < 8; ++i) k_tile[r][d + i] = v_tile[r][d + i] = 0.f;
      }
    }
    __syncthreads();

    // Lane = key: t = scale*log2e * <q_row, k_key>.
    const uint32_t key = key0 + lane;
    float dot = 0.f;
#pragma unroll 8
    for (int d = 0; d < kHeadDim; d += 4) {
      const float4 qv = *reinterpret_cast<const float4 *>(&q_tile[warp][d]);
      const float4 kv = *reinterpret_cast<const float4 *>(&k_tile[lane][d]);
      dot = fmaf(qv.x, kv.x, dot);
      dot = fmaf(qv.y, kv.y, dot);
      dot = fmaf(qv.z, kv.z, dot);
      dot = fmaf(qv.w, kv.w, dot);
    }
    bool visible = key < S;
    if (MHA_CAUSAL) visible = visible && key <= row;
    const float t = visible ? dot * score_scale : -INFINITY;

    // One online-softmax step over the 32 keys of the tile.
    float tile_max = t;
#pragma unroll
    for (int off = 16; off > 0; off >>= 1) tile_max = fmaxf(tile_max, __shfl_xor_sync(0xffffffffu, tile_max, off));
    const float m2_new = fmaxf(m2, tile_max);
    // A row with no visible key yet keeps m2 = -inf; avoid (-inf) - (-inf).
    const float base = m2_new == -INFINITY ? 0.f : m2_new;
    const float p = exp2f(t - base);
    const float alpha = exp2f(m2 - base);
    float p_sum = p;
#pragma unroll
    for (int off = 16; off > 0; off >>= 1) p_sum += __shfl_xor_sync(0xffffffffu, p_sum, off);
    l = l * alpha + p_sum;
    m2 = m2_new;
#pragma unroll
    for (int i = 0; i < 4; ++i) o[i] *= alpha;
#pragma unroll 8
    for (int j = 0; j < kKeys; ++j) {
      const float pj = __shfl_sync(0xffffffffu, p, j);
      const float4 vv = *reinterpret_cast<const float4 *>(&v_tile[j][4 * lane]);
      o[0] = fmaf(pj, vv.x, o[0]);
      o[1] = fmaf(pj, vv.y, o[1]);
      o[2] = fmaf(pj, vv.z, o[2]);
      o[3] = fmaf(pj, vv.w, o[3]);
    }
  }

  if (!row_valid) return;
  const float inv_l = 1.f / l;
  const uint32_t lo = uint32_t(f32_to_bf16(o[0] * inv_l)) | (uint32_t(f32_to_bf16(o[1] * inv_l)) << 16);
  const uint32_t hi = uint32_t(f32_to_bf16(o[2] * inv_l)) | (uint32_t(f32_to_bf16(o[3] * inv_l)) << 16);
  uint16_t *out = O + head_offset + uint64_t(row) * kHeadDim + 4 * lane;
  asm volatile("st.global.v2.u32 [%0], {%1, %2};" ::"l"(out), "r"(lo), "r"(hi) : "memory");
  // Natural-log LSE: (m2 + log2 l) is log2 of sum exp(s); times ln 2.
  if (lane == 0) LSE[uint64_t(blockIdx.y) * S + row] = (m2 + log2f(l)) * kLn2;
}
