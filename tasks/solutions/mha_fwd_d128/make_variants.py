#!/usr/bin/env python3
"""Writes the attention solution folders that are textual variants of a hand-written kernel.

The hand-written sources are mha_fwd_d128/{simple_fwd,flash_fwd,wgmma_tma}/kernel.cu and
mha_bwd_d128/{simple_bwd,wgmma}/kernel.cu. Causal solutions are the same source with MHA_CAUSAL fixed to 1;
each probe is a base kernel plus one planted defect, written here as an exact text substitution (the
script fails if a substitution no longer matches, so a probe cannot silently lose its defect).
Run this, then scripts/build_solutions.py, after editing a base kernel.
"""
import json
from pathlib import Path

HERE = Path(__file__).resolve().parent.parent  # tasks/solutions
CAUSAL_SWITCH = ("#ifndef MHA_CAUSAL\n#define MHA_CAUSAL 0  // 1: query i attends keys j <= i\n#endif\n")
CAUSAL_ON = "#define MHA_CAUSAL 1  // query i attends keys j <= i\n"

# Pieces of wgmma_tma/kernel.cu that the attention probes replace (each must match exactly once).
QK_WGMMA = """  wgmma_fence();
#pragma unroll
  for (int kk = 0; kk < 8; ++kk) {
    const uint32_t offset = (kk / 4) * kBoxBytes + (kk % 4) * 32;
    wgmma_ss_m64n128k16(s, smem_desc_128b(q_tile + offset, 16), smem_desc_128b(k_tile + offset, 16), kk > 0);
  }
  wgmma_commit();
"""
# S = Q·Kᵀ on mma.sync.m16n8k16: each warp its 16 rows, fragments by ldmatrix from the 128B-swizzled tiles
# (16-byte chunk c of row r sits at chunk c ^ (r % 8)).
QK_MMA_SYNC = """  {
    const int lane = threadIdx.x % 32, warp = (threadIdx.x % 128) / 32, m = lane / 8;
#pragma unroll
    for (int i = 0; i < 64; ++i) s[i] = 0.f;
#pragma unroll 1
    for (int kk = 0; kk < 8; ++kk) {  // not unrolled: keeps the registers under the budget
      const int qrow = warp * 16 + (m % 2) * 8 + lane % 8, qd = 16 * kk + (m / 2) * 8;
      uint32_t a[4];
      asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];"
                   : "=r"(a[0]), "=r"(a[1]), "=r"(a[2]), "=r"(a[3])
                   : "r"(q_tile + (qd / 64) * kBoxBytes + qrow * 128 + ((((qd % 64) / 8) ^ (qrow % 8)) * 16)));
#pragma unroll
      for (int np = 0; np < 8; ++np) {
        const int key = np * 16 + (m / 2) * 8 + lane % 8, kd = 16 * kk + (m % 2) * 8;
        uint32_t b[4];
        asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];"
                     : "=r"(b[0]), "=r"(b[1]), "=r"(b[2]), "=r"(b[3])
                     : "r"(k_tile + (kd / 64) * kBoxBytes + key * 128 + ((((kd % 64) / 8) ^ (key % 8)) * 16)));
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          float *c = &s[(2 * np + h) * 4];
          asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, "
                       "{%8, %9}, {%0, %1, %2, %3};"
                       : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
                       : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[2 * h]), "r"(b[2 * h + 1]));
        }
      }
    }
  }
"""
PV_WGMMA = """      wgmma_fence();
#pragma unroll
      for (int kk = 0; kk < 8; ++kk)  // 16 keys x 128 bytes per k-step
        wgmma_rs_m64n128k16(o, p[kk], smem_desc_128b(v_tile + kk * 2048, kBoxBytes));
      wgmma_commit();
"""
# O += P·V on mma.sync.m16n8k16: P is already in A-fragment order; V fragments by ldmatrix.trans.
PV_MMA_SYNC = """      {
        const int m = lane / 8;
#pragma unroll
        for (int kk = 0; kk < 8; ++kk)
#pragma unroll
          for (int np = 0; np < 8; ++np) {
            const int key = 16 * kk + (m % 2) * 8 + lane % 8, d = np * 16 + (m / 2) * 8;
            uint32_t b[4];
            asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];"
                         : "=r"(b[0]), "=r"(b[1]), "=r"(b[2]), "=r"(b[3])
                         : "r"(v_tile + (d / 64) * kBoxBytes + key * 128 + ((((d % 64) / 8) ^ (key % 8)) * 16)));
#pragma unroll
            for (int h = 0; h < 2; ++h) {
              float *c = &o[(2 * np + h) * 4];
              asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, "
                           "{%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};"
                           : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
                           : "r"(p[kk][0]), "r"(p[kk][1]), "r"(p[kk][2]), "r"(p[kk][3]), "r"(b[2 * h]),
                             "r"(b[2 * h + 1]));
            }
          }
      }
"""
# With mma.sync a warp's reads of a stage are done when that warp is: the releasing thread first waits for
# the four warps of its warpgroup (named barrier 1 + consumer).
WG_SYNC = 'asm volatile("bar.sync %0, 128;" ::"r"(consumer + 1));\n'
RELEASE_FIRST = ("    if (tid == 0) mbar_arrive(k_empty);\n", "    " + WG_SYNC + "    if (tid == 0) mbar_arrive(k_empty);\n")
RELEASE_LOOP = ("      fence_regs(s);\n      if (tid == 0) {\n",
                "      fence_regs(s);\n      " + WG_SYNC + "      if (tid == 0) {\n")

# K and V by plain loads instead of TMA: the producer warpgroup copies each 128 x 128 tile with 16-byte
# loads into the same 128B-swizzled layout, makes the writes visible to wgmma (async proxy), then one thread
# arrives on the full barrier (count 1, no transaction bytes). Q still comes by TMA, once per block.
TMA_KV = """      for (uint32_t t = 0; t < num_tiles; ++t) {
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
"""
PLAIN_KV = """    }
    for (uint32_t t = 0; t < num_tiles; ++t) {
      const uint32_t s = t % kStages;
      const uint32_t key0 = t * kBlockN;
      for (int which = 0; which < 2; ++which) {  // K, then V
        const uint16_t *src = which == 0 ? K : V;
        const uint32_t tile = (which == 0 ? k_smem : v_smem) + s * kTileBytes;
        const uint32_t full = (which == 0 ? k_full : v_full) + 8 * s;
        if (t >= kStages) mbar_wait((which == 0 ? k_empty : v_empty) + 8 * s, ((t / kStages) - 1) & 1);
#pragma unroll 1
        for (uint32_t c = threadIdx.x; c < 128 * 16; c += 128) {  // 16-byte chunk c: row c / 16
          const uint32_t row = c / 16, chunk = c % 16, key = key0 + row;
          uint32_t x = 0, y = 0, z = 0, w = 0;
          if (key < S)
            asm volatile("ld.global.v4.u32 {%0, %1, %2, %3}, [%4];"
                         : "=r"(x), "=r"(y), "=r"(z), "=r"(w)
                         : "l"(src + (static_cast<uint64_t>(head) * S + key) * 128 + chunk * 8));
          const uint32_t dst = tile + (chunk / 8) * kBoxBytes + row * 128 + (((chunk % 8) ^ (row % 8)) * 16);
          asm volatile("st.shared.v4.u32 [%0], {%1, %2, %3, %4};" ::"r"(dst), "r"(x), "r"(y), "r"(z), "r"(w)
                       : "memory");
        }
        asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
        asm volatile("bar.sync 3, 128;" ::: "memory");
        if (threadIdx.x == 0) mbar_arrive(full);
      }
    }
"""


def substitute(text, old, new, what):
    if text.count(old) != 1:
        raise SystemExit(f"error: {what}: expected exactly one match of {old!r}")
    return text.replace(old, new)


def write_variant(base, dest, header, edits, manifest=False):
    """manifest=True also copies the base's manifest.json; a function instead edits its parsed JSON."""
    text = (HERE / base / "kernel.cu").read_text()
    for old, new in edits:
        text = substitute(text, old, new, dest)
    out = HERE / dest / "kernel.cu"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(f"// {dest}: generated by mha_fwd_d128/make_variants.py from {base}/kernel.cu.\n{header}" + text)
    if manifest:
        text = (HERE / base / "manifest.json").read_text()
        if callable(manifest):
            text = json.dumps(manifest(json.loads(text)), indent=2) + "\n"
        (out.parent / "manifest.json").write_text(text)
    print(f"wrote {out.relative_to(HERE)}")


def main():
    causal = [(CAUSAL_SWITCH, CAUSAL_ON)]
    write_variant("mha_fwd_d128/simple_fwd", "mha_fwd_d128_causal/simple_fwd", "", causal)
    write_variant("mha_fwd_d128/flash_fwd", "mha_fwd_d128_causal/flash_fwd", "", causal)
    write_variant("mha_bwd_d128/simple_bwd", "mha_bwd_d128_causal/simple_bwd", "", causal)
    write_variant("mha_fwd_d128/wgmma_tma", "mha_fwd_d128_causal/wgmma_tma", "", causal, manifest=True)
    write_variant("mha_bwd_d128/wgmma", "mha_bwd_d128_causal/wgmma", "", causal, manifest=True)

    write_variant(
        "mha_fwd_d128/wgmma_tma", "mha_fwd_d128/probe_pv_mma_sync",
        "// PROBE (half on target): S = Q·Kᵀ runs on wgmma, O += P·V on mma.sync (HMMA): correct, wgmma does half\n"
        "// of the task's FLOPs, below min_target_work_share.\n",
        [(PV_WGMMA, PV_MMA_SYNC), RELEASE_FIRST, RELEASE_LOOP], manifest=True)
    write_variant(
        "mha_fwd_d128/wgmma_tma", "mha_fwd_d128/probe_dead_wgmma",
        "// PROBE (dead target): both matmuls run on mma.sync; the wgmma paths stay in the binary on branches\n"
        "// guarded by S == 0xFFFFFFFF (a kernel parameter no workload sets, so no compiler can fold the branch\n"
        "// away): HGMMA in the SASS, executed 0 times.\n",
        [(QK_WGMMA, "  if (S == 0xFFFFFFFFu) {\n" + QK_WGMMA + "  } else\n" + QK_MMA_SYNC),
         (PV_WGMMA, "      if (S == 0xFFFFFFFFu) {\n" + PV_WGMMA + "      } else\n" + PV_MMA_SYNC),
         ("void issue_qk(float (&s)[64], uint32_t q_tile, uint32_t k_tile) {",
          "void issue_qk(float (&s)[64], uint32_t q_tile, uint32_t k_tile, uint32_t S) {"),
         ("issue_qk(s, q_tile, k_smem);", "issue_qk(s, q_tile, k_smem, S);"),
         ("issue_qk(s, q_tile, k_smem + next * kTileBytes);", "issue_qk(s, q_tile, k_smem + next * kTileBytes, S);"),
         RELEASE_FIRST, RELEASE_LOOP], manifest=True)
    write_variant(
        "mha_fwd_d128/wgmma_tma", "mha_fwd_d128/probe_lse_unwritten",
        "// PROBE (planted defect): O is written, LSE never is (it keeps the harness's NaN poison).\n",
        [("      if (lane % 4 == 0) LSE[static_cast<uint64_t>(head) * S + row] = (m_run[h] + __log2f(l)) * kLn2;\n",
          "      // DEFECT: no LSE store\n")], manifest=True)
    write_variant(
        "mha_fwd_d128/wgmma_tma", "mha_fwd_d128_causal/probe_full_square",
        "// PROBE (wasted work): causal, but every block visits all key tiles and masks the ones above the\n"
        "// diagonal: correct, targets executed (about twice the causal FLOPs on wgmma), about half the speed.\n",
        causal + [("const uint32_t num_tiles = MHA_CAUSAL ? min(key_tiles, (q0 + kBlockM + kBlockN - 1) / kBlockN) : "
                   "key_tiles;", "const uint32_t num_tiles = key_tiles;  // DEFECT: the full square")],
        manifest=True)
    write_variant(
        "mha_fwd_d128/wgmma_tma", "mha_fwd_d128/probe_tma_q_only",
        "// PROBE (token TMA): Q arrives by TMA once per block; K and V, almost all of the bytes, by plain\n"
        "// 16-byte loads of the producer warpgroup. Correct, wgmma does all the FLOPs, but TMA delivers under\n"
        "// min_tma_byte_share of the bytes read.\n",
        [("mha_fwd_wgmma_tma(uint16_t *O, float *LSE,",
          "mha_fwd_wgmma_tma(uint16_t *O, float *LSE, const uint16_t *K, const uint16_t *V,"),
         (TMA_KV, PLAIN_KV)],
        manifest=lambda m: {**m, "params": m["params"][:2] + [{"tensor": "K"}, {"tensor": "V"}] + m["params"][2:]})
    write_variant(
        "mha_fwd_d128/simple_fwd", "mha_fwd_d128/probe_lse_log2",
        "// PROBE (planted defect): LSE is stored in base 2 (m2 + log2 l) instead of natural log; O is right.\n",
        [("LSE[uint64_t(blockIdx.y) * S + row] = (m2 + log2f(l)) * kLn2;",
          "LSE[uint64_t(blockIdx.y) * S + row] = m2 + log2f(l);  // DEFECT: log2, not ln"),
         ("constexpr float kLn2 = 0.6931471805599453f;\n", "")])
    write_variant(
        "mha_fwd_d128/simple_fwd", "mha_fwd_d128_causal/probe_causal_off_by_one",
        "// PROBE (planted defect): the causal mask lets query i also see key i+1 (j <= i+1 instead of j <= i).\n",
        causal + [
            ("if (MHA_CAUSAL) visible = visible && key <= row;",
             "if (MHA_CAUSAL) visible = visible && key <= row + 1;  // DEFECT: off by one"),
            ("const uint32_t key_end = MHA_CAUSAL ? min(S, row0 + kRows) : S;",
             "const uint32_t key_end = MHA_CAUSAL ? min(S, row0 + kRows + 1) : S;  // DEFECT: one key further")])
    write_variant(
        "mha_bwd_d128/simple_bwd", "mha_bwd_d128/probe_dv_scaled",
        "// PROBE (planted defect): dV is multiplied by softmax_scale (it must not be); dQ and dK are right.\n",
        [("store_row4(dV + head + uint64_t(key) * kHeadDim + 4 * lane, dv, 1.f);",
          "store_row4(dV + head + uint64_t(key) * kHeadDim + 4 * lane, dv, softmax_scale);  // DEFECT")])


if __name__ == "__main__":
    main()
