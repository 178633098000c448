#!/usr/bin/env python3
"""Timing fidelity of the GEMM reference: our cuBLASLt time (from a verdict JSON
written by `ptxbench eval --json`) against torch.matmul at the same shape, timed
independently with triton.testing.do_bench (median, cold L2: do_bench flushes the
cache between runs, as our protocol does).

  python3 bench/fidelity_gemm.py --verdict v.json --task tasks/gemm_n7168_k5120.json
"""
import argparse
import json
import sys


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--verdict", required=True, help="verdict JSON from `ptxbench eval --json`")
    ap.add_argument("--task", required=True, help="the task file (shapes and dtypes)")
    args = ap.parse_args()

    import torch
    from triton.testing import do_bench

    verdict = json.load(open(args.verdict))
    task = json.load(open(args.task))
    timing = verdict["stages"]["timing"]["figures"]
    if not timing.get("workloads"):
        print("the verdict has no timing figures:", verdict["stages"]["timing"]["summary"])
        return 1
    dtype = {t["name"]: t["dtype"] for t in task["tensors"]}["A"]
    rows = []
    for w in task["workloads"]:
        ours = next((x for x in timing["workloads"] if x["name"] == w["name"]), None)
        if ours is None:
            continue
        m, n, k = (w["symbols"][s] for s in ("M", "N", "K"))
        torch.manual_seed(0)
        a = torch.randn(m, k, device="cuda")
        b = torch.randn(n, k, device="cuda")
        if dtype == "bf16":
            a, b = a.bfloat16(), b.bfloat16()
            fn = lambda: torch.matmul(a, b.t())
        elif dtype == "e4m3":
            a, b = a.to(torch.float8_e4m3fn), b.to(torch.float8_e4m3fn)
            sa = torch.tensor(0.5, device="cuda")
            sb = torch.tensor(0.25, device="cuda")
            fn = lambda: torch._scaled_mm(a, b.t(), scale_a=sa, scale_b=sb, out_dtype=torch.bfloat16)
        else:
            print("unsupported dtype", dtype)
            return 1
        torch_ms = do_bench(fn, warmup=50, rep=300, return_mode="median")
        lib_ms = ours["library_ms"]
        rows.append((w["name"], m, n, k, lib_ms, torch_ms, lib_ms / torch_ms))
    print(f"{'workload':<10} {'M':>6} {'N':>6} {'K':>6} {'cuBLASLt ms (ours)':>19} {'torch do_bench ms':>18} {'ratio':>7}")
    for r in rows:
        print(f"{r[0]:<10} {r[1]:>6} {r[2]:>6} {r[3]:>6} {r[4]:>19.4f} {r[5]:>18.4f} {r[6]:>7.3f}")
    print(json.dumps({"fidelity": [{"workload": r[0], "ours_ms": r[4], "torch_ms": r[5], "ratio": r[6]} for r in rows]}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
