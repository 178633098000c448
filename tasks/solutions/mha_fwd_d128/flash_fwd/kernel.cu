// Reference solution "flash_fwd": tensor-core flash-attention forward for D = 128 (O and natural-log LSE).
// Per block: 128 query rows of one (batch, head), 8 warps of 16 rows each. K and V stream through
// shared memory in tiles of 64 keys, double-buffered with cp.async (the next tile loads while this one
// is used). Each warp keeps its Q fragments, its S = Q K^T tile (16 x 64) and its O accumulator
// (16 x 128) in registers; products are mma.sync.m16n8k16 bf16 with fp32 accumulation, operands read
// with ldmatrix (V with .trans). Shared-memory rows are 256 bytes of 16 chunks of 16 bytes; chunk c of
// row r lives at chunk c ^ (r & 7), so ldmatrix's 8 row addresses hit 8 different bank groups.
// Softmax is online, in the log2 domain (t = s * scale * log2 e): per tile a new row max m, rescale of
// O and of the running sum by exp2(m_old - m), P = exp2(t - m) rounded to bf16 for P V.
// Layout: Q, K, V, O [B, H, S, 128] bf16 (D contiguous), LSE [B, H, S] f32; blockIdx.y = b*H + h.
#include <cstdint>

#ifndef MHA_CAUSAL
#define MHA_CAUSAL 0  // 1: query i attends keys j <= i
#endif

namespace {

constexpr int kHeadDim = 128;
constexpr int kBlockRows = 128;                  // query rows per block
constexpr int kBlockKeys = 64;                   // keys per K/V tile
constexpr int kWarps = 8;                        // 16 query rows each
constexpr int kThreads = kWarps * 32;
constexpr int kRowBytes = kHeadDim * 2;          // 256 bytes per bf16 row
constexpr int kQBytes = kBlockRows * kRowBytes;  // 32 KB
constexpr int kKVBytes = kBlockKeys * kRowBytes; // 16 KB per K or V tile
constexpr int kSharedBytes = kQBytes + 4 * kKVBytes;  // Q + 2 x (K, V) = 96 KB
static_assert(kSharedBytes == 98304, "the manifest's shared_bytes");
constexpr float kLog2e = 1.4426950408889634f;
constexpr float kLn2 = 0.6931471805599453f;

// Byte offset of 16-byte chunk `chunk` of row `row` in a swizzled tile.
__device__ __forceinline__ uint32_t swizzled(int row, int chunk) {
  return uint32_t(row * kRowBytes + ((chunk ^ (row & 7)) << 4));
}

__device__ __forceinline__ void cp_async_16(uint32_t dst, const void *src, bool valid) {
  // src-size 0 fills the 16 bytes with zeros (rows past S).
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;" ::"r"(dst), "l"(src), "r"(valid ? 16 : 0)
               : "memory");
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;" ::: "memory"); }
__device__ __forceinline__ void cp_async_wait_all() { asm volatile("cp.async.wait_group 0;" ::: "memory"); }

// Copies `rows` rows of 128 bf16 starting at global row `first` into a swizzled tile at `dst`.
template <int rows>
__device__ __forceinline__ void load_tile(uint32_t dst, const uint16_t *head, uint32_t first, uint32_t S) {
#pragma unroll
  for (int i = 0; i < rows * 16 / kThreads; ++i) {
    const int idx = threadIdx.x + i * kThreads;
    const int r = idx >> 4, c = idx & 15;
    const bool valid = first + r < S;
    const uint16_t *src = head + uint64_t(valid ? first + r : 0) * kHeadDim + c * 8;
    cp_async_16(dst + swizzled(r, c), src, valid);
  }
}

__device__ __forceinline__ void ldmatrix_x4(uint32_t (&r)[4], uint32_t addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(addr));
}
__device__ __forceinline__ void ldmatrix_x4_trans(uint32_t (&r)[4], uint32_t addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(addr));
}

// c += a * b for one m16n8k16 tile (bf16 in, fp32 accumulate).
__device__ __forceinline__ void mma_bf16(float (&c)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
      "{%0, %1, %2, %3};"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

// Two fp32 -> one bf16x2 word, `lo` in the low half (the lower column index).
__device__ __forceinline__ uint32_t pack_bf16(float lo, float hi) {
  uint32_t r;
  asm("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(hi), "f"(lo));
  return r;
}

__device__ __forceinline__ float fast_exp2(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
}

}  // namespace

extern "C" __global__ void __launch_bounds__(kThreads, 1)
    mha_fwd_flash(const uint16_t *Q, const uint16_t *K, const uint16_t *V, uint16_t *O, float *LSE, uint32_t S,
                  float softmax_scale) {
  extern __shared__ __align__(128) uint8_t smem[];
  const uint32_t q_smem = static_cast<uint32_t>(__cvta_generic_to_shared(smem));
  const uint32_t k_smem = q_smem + kQBytes;              // buffers 0, 1
  const uint32_t v_smem = q_smem + kQBytes + 2 * kKVBytes; // buffers 0, 1

  const int warp = threadIdx.x / 32;
  const int lane = threadIdx.x % 32;
  const int g = lane >> 2;  // fragment row within 8
  const int t = lane & 3;   // fragment column pair
  // Heaviest causal blocks (last query rows) first; harmless without a mask.
  const uint32_t q_block = gridDim.x - 1 - blockIdx.x;
  const uint32_t q0 = q_block * kBlockRows;
  const uint64_t head = uint64_t(blockIdx.y) * S * kHeadDim;
  const uint16_t *Kh = K + head;
  const uint16_t *Vh = V + head;

  const uint32_t key_end = MHA_CAUSAL ? min(S, q0 + kBlockRows) : S;
  const int n_tiles = int((key_end + kBlockKeys - 1) / kBlockKeys);

  load_tile<kBlockRows>(q_smem, Q + head, q0, S);
  load_tile<kBlockKeys>(k_smem, Kh, 0, S);
  load_tile<kBlockKeys>(v_smem, Vh, 0, S);
  cp_async_commit();

  const float score_scale = softmax_scale * kLog2e;
  uint32_t q_frag[8][4];  // A fragments of this warp's 16 rows, d = 16*kk .. 16*kk+15
  float o_acc[16][4];     // n-tile dt: d = 8*dt .. 8*dt+7; [0,1] row g, [2,3] row g+8
#pragma unroll
  for (int dt = 0; dt < 16; ++dt) o_acc[dt][0] = o_acc[dt][1] = o_acc[dt][2] = o_acc[dt][3] = 0.f;
  float m_row[2] = {-INFINITY, -INFINITY};  // running max of t, rows g and g+8
  float l_row[2] = {0.f, 0.f};              // this thread's part of the running sum of exp2(t - m)

  const int row_lo = int(q0) + warp * 16 + g;  // global query index of fragment row g
  for (int kt = 0; kt < n_tiles; ++kt) {
    cp_async_wait_all();
    __syncthreads();  // tile kt visible to all; every warp is done with buffer (kt + 1) & 1
    if (kt == 0) {
#pragma unroll
      for (int kk = 0; kk < 8; ++kk)
        ldmatrix_x4(q_frag[kk], q_smem + swizzled(warp * 16 + (lane & 15), 2 * kk + (lane >> 4)));
    }
    if (kt + 1 < n_tiles) {
      const int nb = (kt + 1) & 1;
      load_tile<kBlockKeys>(k_smem + nb * kKVBytes, Kh, (kt + 1) * kBlockKeys, S);
      load_tile<kBlockKeys>(v_smem + nb * kKVBytes, Vh, (kt + 1) * kBlockKeys, S);
    }
    cp_async_commit();
    const uint32_t k_buf = k_smem + (kt & 1) * kKVBytes;
    const uint32_t v_buf = v_smem + (kt & 1) * kKVBytes;

    // S = Q K^T for 16 rows x 64 keys.
    float s_acc[8][4];
#pragma unroll
    for (int nt = 0; nt < 8; ++nt) {
      s_acc[nt][0] = s_acc[nt][1] = s_acc[nt][2] = s_acc[nt][3] = 0.f;
#pragma unroll
      for (int kp = 0; kp < 4; ++kp) {
        uint32_t b[4];  // b0, b1 of k-step 2kp, then of 2kp+1
        ldmatrix_x4(b, k_buf + swizzled(nt * 8 + (lane & 7), 4 * kp + (lane >> 3)));
        mma_bf16(s_acc[nt], q_frag[2 * kp], b[0], b[1]);
        mma_bf16(s_acc[nt], q_frag[2 * kp + 1], b[2], b[3]);
      }
    }

    // Scale to the log2 domain and mask (keys past S; keys after the query when causal).
    const int key_base = kt * kBlockKeys;
    const bool needs_mask = key_base + kBlockKeys > int(S) || (MHA_CAUSAL && key_base + kBlockKeys - 1 > int(q0));
#pragma unroll
    for (int nt = 0; nt < 8; ++nt) {
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        float v = s_acc[nt][e] * score_scale;
        if (needs_mask) {
          const int key = key_base + nt * 8 + 2 * t + (e & 1);
          const int row = row_lo + (e >> 1) * 8;
          bool visible = key < int(S);
          if (MHA_CAUSAL) visible = visible && key <= row;
          v = visible ? v : -INFINITY;
        }
        s_acc[nt][e] = v;
      }
    }

    // Online softmax: new row max over the quad (4 threads share a row), rescale, exponentiate.
    float alpha[2];
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      float mx = m_row[h];
#pragma unroll
      for (int nt = 0; nt < 8; ++nt) mx = fmaxf(mx, fmaxf(s_acc[nt][2 * h], s_acc[nt][2 * h + 1]));
      mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
      mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
      const float base = mx == -INFINITY ? 0.f : mx;  // no visible key yet: avoid inf - inf
      alpha[h] = fast_exp2(m_row[h] - base);
      m_row[h] = mx;
      float sum = 0.f;
#pragma unroll
      for (int nt = 0; nt < 8; ++nt) {
        s_acc[nt][2 * h] = fast_exp2(s_acc[nt][2 * h] - base);
        s_acc[nt][2 * h + 1] = fast_exp2(s_acc[nt][2 * h + 1] - base);
        sum += s_acc[nt][2 * h] + s_acc[nt][2 * h + 1];
      }
      l_row[h] = l_row[h] * alpha[h] + sum;
    }
#pragma unroll
    for (int dt = 0; dt < 16; ++dt) {
      o_acc[dt][0] *= alpha[0];
      o_acc[dt][1] *= alpha[0];
      o_acc[dt][2] *= alpha[1];
      o_acc[dt][3] *= alpha[1];
    }

    // O += P V: P from the S accumulators (C layout of n-tiles 2kk, 2kk+1 = A layout of k-step kk).
#pragma unroll
    for (int kk = 0; kk < 4; ++kk) {
      const uint32_t p_frag[4] = {
          pack_bf16(s_acc[2 * kk][0], s_acc[2 * kk][1]), pack_bf16(s_acc[2 * kk][2], s_acc[2 * kk][3]),
          pack_bf16(s_acc[2 * kk + 1][0], s_acc[2 * kk + 1][1]),
          pack_bf16(s_acc[2 * kk + 1][2], s_acc[2 * kk + 1][3])};
#pragma unroll
      for (int dp = 0; dp < 8; ++dp) {
        uint32_t b[4];  // b0, b1 of n-tile 2dp, then of 2dp+1
        ldmatrix_x4_trans(b, v_buf + swizzled(kk * 16 + (lane & 15), 2 * dp + (lane >> 4)));
        mma_bf16(o_acc[2 * dp], p_frag, b[0], b[1]);
        mma_bf16(o_acc[2 * dp + 1], p_frag, b[2], b[3]);
      }
    }
  }

  // Epilogue: full row sums over the quad, O = acc / l in bf16, LSE = ln 2 * (m + log2 l).
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    l_row[h] += __shfl_xor_sync(0xffffffffu, l_row[h], 1);
    l_row[h] += __shfl_xor_sync(0xffffffffu, l_row[h], 2);
  }
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    const int row = row_lo + 8 * h;
    if (row >= int(S)) continue;
    const float inv_l = 1.f / l_row[h];
    uint16_t *out = O + head + uint64_t(row) * kHeadDim + 2 * t;
#pragma unroll
    for (int dt = 0; dt < 16; ++dt) {
      const uint32_t word = pack_bf16(o_acc[dt][2 * h] * inv_l, o_acc[dt][2 * h + 1] * inv_l);
      asm volatile("st.global.u32 [%0], %1;" ::"l"(out + dt * 8), "r"(word) : "memory");
    }
    if (t == 0) LSE[uint64_t(blockIdx.y) * S + row] = (m_row[h] + __log2f(l_row[h])) * kLn2;
  }
}
