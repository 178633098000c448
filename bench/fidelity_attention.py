#!/usr/bin/env python3
"""Fidelity of PTXBench's cuDNN attention reference against PyTorch's cuDNN backend.

Times, at the core shapes (B=4, H=48, S=4096, D=128, bf16; forward with the
log-sum-exp statistics, causal forward, backward, causal backward):
  * PyTorch: F.scaled_dot_product_attention under
    torch.nn.attention.sdpa_kernel(SDPBackend.CUDNN_ATTENTION), timed with
    triton.testing.do_bench (median, L2 cleared before each sample);
  * ours: the cuDNN frontend graphs the worker times against candidates
    (evaluator/worker/cudnn_sdpa.cpp), timed by
    `test_gpu_attention --cudnn-times=FILE` in the same way (256 MB L2 clear,
    CUDA events, median of 100).
and prints a table with the ratio ours / PyTorch (target <= 1.10).

Usage: python3 bench/fidelity_attention.py --binary build/tests/test_gpu_attention [--json out.json]
"""
import argparse
import json
import math
import subprocess
import sys
import tempfile


def torch_times(B, H, S, D):
    import torch
    import torch.nn.functional as F
    from torch.nn.attention import SDPBackend, sdpa_kernel
    from triton.testing import do_bench

    torch.manual_seed(0)
    dev = "cuda"
    q, k, v = (torch.randn(B, H, S, D, device=dev, dtype=torch.bfloat16, requires_grad=True) for _ in range(3))
    scale = 1.0 / math.sqrt(D)
    rows = []
    with sdpa_kernel(SDPBackend.CUDNN_ATTENTION):
        for causal in (False, True):
            # requires_grad inputs: the training forward, which also writes the LSE statistics (as ours does).
            def fwd():
                return F.scaled_dot_product_attention(q, k, v, is_causal=causal, scale=scale)

            o = fwd()
            d_o = torch.randn_like(o)

            def bwd():
                o.backward(d_o, retain_graph=True)

            t_fwd = do_bench(fwd, warmup=50, rep=300, return_mode="median")
            t_bwd = do_bench(bwd, warmup=50, rep=300, grad_to_none=[q, k, v], return_mode="median")
            rows.append(("fwd", causal, t_fwd))
            rows.append(("bwd", causal, t_bwd))
    versions = {"torch": torch.__version__, "cudnn": torch.backends.cudnn.version(),
                "gpu": torch.cuda.get_device_name()}
    return rows, versions


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--binary", required=True, help="path of the built test_gpu_attention")
    ap.add_argument("--json", help="also write the table here")
    args = ap.parse_args()
    B, H, S, D = 4, 48, 4096, 128

    with tempfile.NamedTemporaryFile(suffix=".json") as tmp:
        proc = subprocess.run([args.binary, f"--cudnn-times={tmp.name}"], capture_output=True, text=True,
                              timeout=600)
        if proc.returncode != 0:
            sys.exit(f"{args.binary} failed ({proc.returncode}):\n{proc.stdout}\n{proc.stderr}")
        ours = json.load(open(tmp.name))

    torch_rows, versions = torch_times(B, H, S, D)
    flops_fwd = 4.0 * B * H * S * S * D
    table = []
    print(f"shape B={B} H={H} S={S} D={D} bf16 on {versions['gpu']}")
    print(f"ours: cuDNN {ours['cudnn']} ({ours['cudnn_library']}), frontend {ours['frontend']};"
          f" PyTorch {versions['torch']} with cuDNN {versions['cudnn']}")
    print(f"{'case':<12} {'ours ms':>9} {'torch ms':>9} {'ours TF/s':>10} {'torch TF/s':>11} {'ours/torch':>11}")
    for direction, causal, t_torch in torch_rows:
        mine = next(r for r in ours["rows"] if r["direction"] == direction and r["causal"] == causal)
        flops = flops_fwd * (0.5 if causal else 1.0) * (2.5 if direction == "bwd" else 1.0)
        t_ours = mine["median_ms"]
        name = direction + (" causal" if causal else "")
        row = {"case": name, "ours_ms": t_ours, "torch_ms": t_torch, "ratio": t_ours / t_torch,
               "ours_tflops": flops / t_ours / 1e9, "torch_tflops": flops / t_torch / 1e9,
               "plan": mine["plan"]["name"]}
        table.append(row)
        print(f"{name:<12} {t_ours:9.3f} {t_torch:9.3f} {row['ours_tflops']:10.0f} {row['torch_tflops']:11.0f}"
              f" {row['ratio']:11.3f}")
    worst = max(r["ratio"] for r in table)
    print(f"worst ours/torch ratio {worst:.3f} ({'within' if worst <= 1.10 else 'OUTSIDE'} the 10% bound)")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"versions": versions, "ours": ours, "table": table}, f, indent=2)


if __name__ == "__main__":
    main()
