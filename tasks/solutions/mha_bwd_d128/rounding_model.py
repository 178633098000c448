#!/usr/bin/env python3
"""One-head numpy model of the attention backward's bf16 roundings against the task's tolerance.

Draws Q, K, V, dO as the harness does ('spiky': N(0,1) plus, with probability 0.001, 10·N(0,1)), runs the
forward in float64 (O rounded to bf16, LSE kept), computes dQ, dK, dV in float64 from P = exp(s − LSE) as
the fp32 reference does, and counts the elements outside atol 2e-3 + rtol 2^-5·|expected| when the
kernel's matmuls see P and dS rounded to bf16 once (the usual FlashAttention recipe) or as bf16 hi + lo
pairs (what mha_bwd_d128/wgmma does). S = 4096, D = 128, one head; about 20 s and 3 GB here.
Usage: rounding_model.py [seed] [causal]
"""
import sys

import numpy as np

S, D = 4096, 128
SCALE = 1 / np.sqrt(D)


def bf16(x):
    u = np.asarray(x, dtype=np.float32).view(np.uint32).astype(np.uint64)
    u = ((u + 0x7FFF + ((u >> 16) & 1)) >> 16) << 16  # round to nearest even
    return u.astype(np.uint32).view(np.float32).astype(np.float64)


def main():
    rng = np.random.default_rng(int(sys.argv[1]) if len(sys.argv) > 1 else 0)
    causal = len(sys.argv) > 2 and sys.argv[2] not in ("0", "")

    def spiky():
        v = rng.standard_normal((S, D))
        return bf16(v + (rng.random((S, D)) < 0.001) * 10 * rng.standard_normal((S, D)))

    q, k, v, d_o = spiky(), spiky(), spiky(), spiky()
    s = SCALE * (q @ k.T)
    if causal:
        s = np.where(np.tril(np.ones((S, S), bool)), s, -np.inf)
    m = s.max(1, keepdims=True)
    lse = m + np.log(np.exp(s - m).sum(1, keepdims=True))
    p = np.exp(s - lse)
    o = bf16(p @ v)
    ds = p * (d_o @ v.T - (d_o * o).sum(1, keepdims=True))
    ref = {"dQ": SCALE * ds @ k, "dK": SCALE * ds.T @ q, "dV": p.T @ d_o}

    def bad(name, got):
        exp = ref[name]
        return int((np.abs(bf16(got) - exp) > 2e-3 + 0.03125 * np.abs(exp)).sum())

    p32 = p.astype(np.float32).astype(np.float64)
    ds32 = ds.astype(np.float32).astype(np.float64)
    for label, pk, dsk in (("bf16 P, dS", bf16(p32), bf16(ds32)),
                           ("hi + lo P, dS", bf16(p32) + bf16(p32 - bf16(p32)), bf16(ds32) + bf16(ds32 - bf16(ds32)))):
        print(f"{label:14s} mismatches: dQ {bad('dQ', SCALE * dsk @ k)}  dK {bad('dK', SCALE * dsk.T @ q)}  "
              f"dV {bad('dV', pk.T @ d_o)}  (of {S * D} each)")


if __name__ == "__main__":
    main()
