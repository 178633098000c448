// Reference solution "wgmma_tma": attention forward for head dimension 128 the Hopper way
// (FlashAttention-3 style). TMA (cp.async.bulk.tensor) loads Q once and streams K and V tiles through a
// two-stage shared-memory ring, completion tracked by mbarriers; warpgroup MMAs compute S = Q·Kᵀ
// (wgmma m64n128k16, both operands K-major in shared memory) and O += P·V (P from registers as the A
// operand, V from shared memory with the transposed-B flag); the online softmax runs in registers on the
// wgmma accumulator layout.
//
// Block: 3 warpgroups (384 threads) for 128 query rows of one (batch, head). Warpgroup 0 is the producer:
// one thread issues the TMA loads (setmaxnreg.dec frees its registers). Warpgroups 1 and 2 are consumers,
// 64 query rows each (setmaxnreg.inc). Per key tile a consumer issues P·V of this tile and Q·Kᵀ of the
// next one back to back and waits once, so the tensor cores see two MMA batches in a row while the other
// consumer warpgroup runs its softmax.
// Tensor maps: Q, K, V viewed as [B*H][S][D] (dims D, S, B*H), box 64 x 128 x 1 (64 bf16 = one 128-byte
// swizzle row), 128B swizzle, out-of-bounds rows zero-filled; keys past S are masked to -inf.
#include <cuda.h>  // CUtensorMap
#include <cstdint>

#ifndef MHA_CAUSAL
#define MHA_CAUSAL 0  // 1: query i attends keys j <= i
#endif

namespace {

constexpr int kBlockM = 128;   // query rows per block: two consumer warpgroups x 64
constexpr int kBlockN = 128;   // keys per tile
constexpr int kStages = 2;     // K/V ring depth
constexpr uint32_t kBoxBytes = 128 * 128;       // 128 rows x 64 bf16: one TMA box, 16 KiB
constexpr uint32_t kTileBytes = 2 * kBoxBytes;  // 128 rows x 128 bf16 (two boxes along D): 32 KiB
constexpr uint32_t kKOffset = kTileBytes;       // after the Q tile
constexpr uint32_t kVOffset = kKOffset + kStages * kTileBytes;
constexpr uint32_t kBarOffset = kVOffset + kStages * kTileBytes;  // 160 KiB of tiles, then 9 mbarriers
constexpr float kLog2e = 1.4426950408889634f;
constexpr float kLn2 = 0.6931471805599453f;

__device__ __forceinline__ uint32_t smem_addr(const void *p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

__device__ __forceinline__ void mbar_init(uint32_t bar, uint32_t count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(bar), "r"(count) : "memory");
}

__device__ __forceinline__ void mbar_arrive_expect_tx(uint32_t bar, uint32_t bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(bar), "r"(bytes) : "memory");
}

__device__ __forceinline__ void mbar_arrive(uint32_t bar) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" ::"r"(bar) : "memory");
}

__device__ __forceinline__ void mbar_wait(uint32_t bar, uint32_t parity) {
  asm volatile(
      "{\n"
      ".reg .pred done;\n"
      "WAIT:\n"
      "mbarrier.try_wait.parity.shared::cta.b64 done, [%0], %1;\n"
      "@!done bra WAIT;\n"
      "}\n" ::"r"(bar),
      "r"(parity)
      : "memory");
}

// One 64 x 128 x 1 box of a 3D tensor map (coordinates d, s, b*H+h) into shared memory, completing on bar.
__device__ __forceinline__ void tma_load_3d(uint32_t dst, const CUtensorMap *map, uint32_t bar, int32_t c0,
                                            int32_t c1, int32_t c2) {
  asm volatile(
      "cp.async.bulk.tensor.3d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%0], [%1, {%3, %4, "
      "%5}], [%2];" ::"r"(dst),
      "l"(reinterpret_cast<uint64_t>(map)), "r"(bar), "r"(c0), "r"(c1), "r"(c2)
      : "memory");
}

// A 128-row x 128-column bf16 tile as two TMA boxes (columns 0-63, then 64-127), 128B swizzle.
__device__ __forceinline__ void tma_load_tile(uint32_t dst, const CUtensorMap *map, uint32_t bar, int32_t row,
                                              int32_t head) {
  tma_load_3d(dst, map, bar, 0, row, head);
  tma_load_3d(dst + kBoxBytes, map, bar, 64, row, head);
}

// Shared-memory matrix descriptor, 128B swizzle. K-major operands (Q, K): rows of 128 bytes, 8-row groups
// 1024 bytes apart (stride byte offset), leading byte offset unused. V as a transposed (MN-major) B operand:
// rows are keys (the K dimension), 8-key groups 1024 bytes apart (stride byte offset), and the second
// 64-column half of D lies in the next box, 16 KiB further (leading byte offset).
__device__ __forceinline__ uint64_t smem_desc_128b(uint32_t addr, uint32_t leading_bytes) {
  return static_cast<uint64_t>((addr & 0x3FFFF) >> 4) | (static_cast<uint64_t>(leading_bytes >> 4) << 16) |
         (static_cast<uint64_t>(1024 >> 4) << 32) | (static_cast<uint64_t>(1) << 62);
}

__device__ __forceinline__ void wgmma_fence() {
  asm volatile("wgmma.fence.sync.aligned;" ::: "memory");
}
__device__ __forceinline__ void wgmma_commit() {
  asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory");
}
__device__ __forceinline__ void wgmma_wait_all() {
  asm volatile("wgmma.wait_group.sync.aligned 0;" ::: "memory");
}

// Keeps the compiler from moving accumulator reads across a wgmma wait (the registers change asynchronously).
__device__ __forceinline__ void fence_regs(float (&d)[64]) {
#pragma unroll
  for (int i = 0; i < 64; ++i) asm volatile("" : "+f"(d[i])::"memory");
}

#define MHA_ACC64(d) \
  "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), \
  "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), \
  "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), \
  "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), \
  "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), \
  "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), \
  "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]), \
  "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63])
#define MHA_ACC64_LIST \
  "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, " \
  "%21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, " \
  "%40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, " \
  "%59, %60, %61, %62, %63"
// D[64x128] (+)= A[64x16] · B[128x16]^T, both operands K-major in shared memory; scale_d = 0 overwrites D.
__device__ __forceinline__ void wgmma_ss_m64n128k16(float (&d)[64], uint64_t desc_a, uint64_t desc_b,
                                                    int scale_d) {
  asm volatile(
      "{\n"
      ".reg .pred p;\n"
      "setp.ne.b32 p, %66, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 {" MHA_ACC64_LIST
      "}, %64, %65, p, 1, 1, 0, 0;\n"
      "}\n"
      : MHA_ACC64(d)
      : "l"(desc_a), "l"(desc_b), "r"(scale_d));
}

// D[64x128] += A[64x16] · B[16x128], A (bf16 pairs) from registers, B MN-major in shared memory.
__device__ __forceinline__ void wgmma_rs_m64n128k16(float (&d)[64], const uint32_t (&a)[4], uint64_t desc_b) {
  asm volatile(
      "wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 {" MHA_ACC64_LIST
      "}, {%64, %65, %66, %67}, %68, 1, 1, 1, 1;\n"
      : MHA_ACC64(d)
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc_b));
}

__device__ __forceinline__ uint32_t pack_bf16x2(float lo, float hi) {
  uint32_t packed;
  asm("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(packed) : "f"(hi), "f"(lo));
  return packed;
}

__device__ __forceinline__ float fast_exp2(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
}

// S = Q·Kᵀ for one consumer: 8 wgmmas over D = 128 (4 per 64-column box, 32 bytes along the swizzled row).
__device__ __forceinline__ void issue_qk(float (&s)[64], uint32_t q_tile, uint32_t k_tile) {
  wgmma_fence();
#pragma unroll
  for (int kk = 0; kk < 8; ++kk) {
    const uint32_t offset = (kk / 4) * kBoxBytes + (kk % 4) * 32;
    wgmma_ss_m64n128k16(s, smem_desc_128b(q_tile + offset, 16), smem_desc_128b(k_tile + offset, 16), kk > 0);
  }
  wgmma_commit();
}

}  // namespace

extern "C" __global__ void __launch_bounds__(384, 1)
    mha_fwd_wgmma_tma(uint16_t *O, float *LSE, const __grid_constant__ CUtensorMap tmap_q,
                      const __grid_constant__ CUtensorMap tmap_k, const __grid_constant__ CUtensorMap tmap_v,
                      uint32_t S, float softmax_scale) {
  extern __shared__ uint8_t smem_raw[];
  // 128B-swizzled TMA boxes and wgmma descriptors want 1024-byte aligned tiles.
  const uint32_t base = (smem_addr(smem_raw) + 1023) & ~1023u;
  const uint32_t q_smem = base;
  const uint32_t k_smem = base + kKOffset;
  const uint32_t v_smem = base + kVOffset;
  const uint32_t q_full = base + kBarOffset;  // "Q loaded"
  const uint32_t k_full = q_full + 8;         // kStages x 8 bytes: "K tile loaded"
  const uint32_t v_full = k_full + 8 * kStages;
  const uint32_t k_empty = v_full + 8 * kStages;  // "K tile consumed" (one arrive per consumer warpgroup)
  const uint32_t v_empty = k_empty + 8 * kStages;

  // Causal: the blocks with the most key tiles start first, so the short ones fill the last wave.
  const uint32_t q_block = MHA_CAUSAL ? gridDim.x - 1 - blockIdx.x : blockIdx.x;
  const uint32_t head = blockIdx.y;  // b*H + h
  const uint32_t q0 = q_block * kBlockM;
  const uint32_t key_tiles = (S + kBlockN - 1) / kBlockN;
  const uint32_t num_tiles = MHA_CAUSAL ? min(key_tiles, (q0 + kBlockM + kBlockN - 1) / kBlockN) : key_tiles;

  const int warpgroup = threadIdx.x / 128;
  if (threadIdx.x == 0) {
    mbar_init(q_full, 1);
    for (int s = 0; s < kStages; ++s) {
      mbar_init(k_full + 8 * s, 1);  // the producer's arrive.expect_tx (+ the TMA bytes)
      mbar_init(v_full + 8 * s, 1);
      mbar_init(k_empty + 8 * s, 2);
      mbar_init(v_empty + 8 * s, 2);
    }
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
  }
  __syncthreads();

  if (warpgroup == 0) {
    asm volatile("setmaxnreg.dec.sync.aligned.u32 24;");
    if (threadIdx.x == 0) {
      asm volatile("prefetch.tensormap [%0];" ::"l"(reinterpret_cast<uint64_t>(&tmap_q)) : "memory");
      asm volatile("prefetch.tensormap [%0];" ::"l"(reinterpret_cast<uint64_t>(&tmap_k)) : "memory");
      asm volatile("prefetch.tensormap [%0];" ::"l"(reinterpret_cast<uint64_t>(&tmap_v)) : "memory");
      mbar_arrive_expect_tx(q_full, kTileBytes);
      tma_load_tile(q_smem, &tmap_q, q_full, static_cast<int32_t>(q0), static_cast<int32_t>(head));
      for (uint32_t t = 0; t < num_tiles; ++t) {
        const uint32_t s = t % kStages;
        const int32_t key0 = static_cast<int32_t>(t * kBlockN);
        if (t >= kStages) mbar_wait(k_empty + 8 * s, ((t / kStages) - 1) & 1);
        mbar_arrive_expect_tx(k_full + 8 * s, kTileBytes);
        tma_load_tile(k_smem + s * kTileBytes, &tmap_k, k_full + 8 * s, key0, static_cast<int32_t>(head));
        if (t >= kStages) mbar_wait(v_empty + 8 * s, ((t / kStages) - 1) & 1);
        mbar_arrive_expect_tx(v_full + 8 * s, kTileBytes);
        tma_load_tile(v_smem + s * kTileBytes, &tmap_v, v_full + 8 * s, key0, static_cast<int32_t>(head));
      }
    }
  } else {
    asm volatile("setmaxnreg.inc.sync.aligned.u32 240;");
    const int consumer = warpgroup - 1;
    const int tid = threadIdx.x % 128;
    const int warp = tid / 32;
    const int lane = tid % 32;
    // Accumulator layout (m64nN): element j*4 + {0,1} is (row r, columns 8j + 2*(lane%4) + {0,1}),
    // j*4 + {2,3} is (row r+8, same columns), r = 16*warp + lane/4 within the consumer's 64 rows.
    const uint32_t row_base = q0 + consumer * 64 + warp * 16 + lane / 4;
    const uint32_t q_tile = q_smem + consumer * 64 * 128;
    const float scale_log2 = softmax_scale * kLog2e;

    float o[64];
#pragma unroll
    for (int i = 0; i < 64; ++i) o[i] = 0.f;
    float m_run[2] = {-INFINITY, -INFINITY};  // running max of the scaled scores, log2 units
    float l_run[2] = {0.f, 0.f};              // this thread's part of the running row sum

    float s[64];
    mbar_wait(q_full, 0);
    mbar_wait(k_full, 0);
    issue_qk(s, q_tile, k_smem);
    wgmma_wait_all();
    fence_regs(s);
    if (tid == 0) mbar_arrive(k_empty);

    for (uint32_t t = 0; t < num_tiles; ++t) {
      const uint32_t stage = t % kStages;
      const uint32_t key0 = t * kBlockN;
      // Mask keys past S and, causal, keys after the query (only the last tiles can hold either).
      const bool ragged = key0 + kBlockN > S;
      const bool diagonal = MHA_CAUSAL && key0 + kBlockN > q0 + consumer * 64 + warp * 16;
      if (ragged || diagonal) {
#pragma unroll
        for (int j = 0; j < 16; ++j)
#pragma unroll
          for (int e = 0; e < 4; ++e) {
            const uint32_t key = key0 + 8 * j + 2 * (lane % 4) + (e & 1);
            const uint32_t row = row_base + 8 * (e >> 1);
            if (key >= S || (MHA_CAUSAL && key > row)) s[j * 4 + e] = -INFINITY;
          }
      }
      // Online softmax per row half h (rows r and r+8): new max, rescale factor, P = 2^(s*c - m).
      float alpha[2], m_use[2];
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        float mx = -INFINITY;
#pragma unroll
        for (int j = 0; j < 16; ++j) mx = fmaxf(mx, fmaxf(s[j * 4 + 2 * h], s[j * 4 + 2 * h + 1]));
        mx = fmaxf(mx, __shfl_xor_sync(0xffffffff, mx, 1));
        mx = fmaxf(mx, __shfl_xor_sync(0xffffffff, mx, 2));
        const float m_new = fmaxf(m_run[h], mx * scale_log2);
        m_use[h] = m_new == -INFINITY ? 0.f : m_new;  // a row with nothing visible yet stays at zero
        alpha[h] = fast_exp2(m_run[h] - m_use[h]);
        m_run[h] = m_new;
      }
      uint32_t p[8][4];  // P as bf16 A fragments: k-step kk covers keys 16kk..16kk+15
      float sum[2] = {0.f, 0.f};
#pragma unroll
      for (int j = 0; j < 16; ++j) {
        float v[4];
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          v[e] = fast_exp2(fmaf(s[j * 4 + e], scale_log2, -m_use[e >> 1]));
          sum[e >> 1] += v[e];
        }
        p[j / 2][(j % 2) * 2 + 0] = pack_bf16x2(v[0], v[1]);
        p[j / 2][(j % 2) * 2 + 1] = pack_bf16x2(v[2], v[3]);
      }
#pragma unroll
      for (int h = 0; h < 2; ++h) l_run[h] = l_run[h] * alpha[h] + sum[h];
#pragma unroll
      for (int j = 0; j < 16; ++j)
#pragma unroll
        for (int e = 0; e < 4; ++e) o[j * 4 + e] *= alpha[e >> 1];

      // O += P·V for this tile, then S = Q·Kᵀ for the next tile, then one wait for both.
      mbar_wait(v_full + 8 * stage, (t / kStages) & 1);
      const uint32_t v_tile = v_smem + stage * kTileBytes;
      wgmma_fence();
#pragma unroll
      for (int kk = 0; kk < 8; ++kk)  // 16 keys x 128 bytes per k-step
        wgmma_rs_m64n128k16(o, p[kk], smem_desc_128b(v_tile + kk * 2048, kBoxBytes));
      wgmma_commit();
      const bool more = t + 1 < num_tiles;
      if (more) {
        const uint32_t next = (t + 1) % kStages;
        mbar_wait(k_full + 8 * next, ((t + 1) / kStages) & 1);
        issue_qk(s, q_tile, k_smem + next * kTileBytes);
      }
      wgmma_wait_all();
      fence_regs(o);
      fence_regs(s);
      if (tid == 0) {
        mbar_arrive(v_empty + 8 * stage);
        if (more) mbar_arrive(k_empty + 8 * ((t + 1) % kStages));
      }
    }

    // Epilogue: full row sums across the quad, O = acc / l in bf16, LSE = ln 2 * (m + log2 l).
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      float l = l_run[h];
      l += __shfl_xor_sync(0xffffffff, l, 1);
      l += __shfl_xor_sync(0xffffffff, l, 2);
      const uint32_t row = row_base + 8 * h;
      if (row >= S) continue;
      const float inv = 1.f / l;
      uint16_t *o_row = O + (static_cast<uint64_t>(head) * S + row) * 128 + 2 * (lane % 4);
#pragma unroll
      for (int j = 0; j < 16; ++j) {
        const uint32_t packed = pack_bf16x2(o[j * 4 + 2 * h] * inv, o[j * 4 + 2 * h + 1] * inv);
        asm volatile("st.global.b32 [%0], %1;" ::"l"(o_row + 8 * j), "r"(packed) : "memory");
      }
      if (lane % 4 == 0) LSE[static_cast<uint64_t>(head) * S + row] = (m_run[h] + __log2f(l)) * kLn2;
    }
  }
}
