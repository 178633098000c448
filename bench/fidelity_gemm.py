#!/usr/bin/env python3
"""Timing fidelity of the GEMM reference: our cuBLASLt time (from a verdict JSON
written by `ptxbench eval --json`) against torch.matmul at the same shape, timed
independently on the same machine in two ways:

  * do_bench: triton.testing.do_bench (median; it clears L2 before every sample
    and launches back to back, so the card can run into its SW power cap);
  * do_bench, paced: --paced-calls short do_bench calls (rep 25 ms) with a rest
    of --paced-rest-s between them, median of their medians: the same tool, run
    so that its load stays under the power cap like the worker's duty cycle;
  * torch, our protocol: torch.matmul timed the way the worker times (events
    around one launch, L2 written over before it, an idle of
    min(cooldown_ratio x sample, cooldown_max_ms) between samples, all taken
    from the verdict's recorded timing policy).

The second isolates the library choice and the event timing; the first also
includes the difference in duty cycle. Each is measured --repeats times
(alternating); the table gives the median and the range. While each runs, `nvidia-smi -lms` samples
the SM clock, board power and clock-limiting reasons (SW power cap, thermal),
so a ratio that moved with the clocks says so.

  python3 bench/fidelity_gemm.py --verdict v.json --task tasks/gemm_n7168_k5120.json
"""
import argparse
import json
import shutil
import statistics
import subprocess
import sys
import time


class GpuSampler:
    """nvidia-smi in the background for the life of a `with` block: SM MHz (median and minimum), watts
    (median), and which clock-limiting reasons were active. On the H200 a 300 ms do_bench of the
    8192x7168x5120 GEMM ran at 1980 MHz once, then at 1515 MHz with the SW power cap active (same cuBLAS
    kernel, 0.761 -> 0.877 ms), which is what moves the do_bench ratio."""

    QUERY = "clocks.sm,power.draw,clocks_event_reasons.active"
    # clocks_event_reasons bits that lower the clock under load (nvml.h: nvmlClocksEventReason*).
    LIMITS = {0x4: "SW power cap", 0x8: "HW slowdown", 0x20: "SW thermal", 0x40: "HW thermal",
              0x80: "HW power brake"}

    def __enter__(self):
        self.proc = None
        if shutil.which("nvidia-smi"):
            self.proc = subprocess.Popen(
                ["nvidia-smi", f"--query-gpu={self.QUERY}", "--format=csv,noheader,nounits", "-i", "0",
                 "-lms", "20"], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
            time.sleep(0.3)  # nvidia-smi needs a moment before its first line
        return self

    def __exit__(self, *exc):
        self.mhz = self.min_mhz = self.watts = None
        self.limits = set()
        if self.proc is None:
            return False
        self.proc.terminate()
        out, _ = self.proc.communicate(timeout=10)
        clocks, watts = [], []
        for line in out.splitlines():
            parts = [p.strip() for p in line.split(",")]
            try:
                clocks.append(float(parts[0]))
                watts.append(float(parts[1]))
                reasons = int(parts[2], 16)
            except (ValueError, IndexError):
                continue
            self.limits |= {name for bit, name in self.LIMITS.items() if reasons & bit}
        if clocks:
            self.mhz, self.min_mhz, self.watts = statistics.median(clocks), min(clocks), statistics.median(watts)
        return False

    @staticmethod
    def text(samplers):
        """One cell for several measurements: median of their median clocks, lowest clock, limits seen."""
        seen = [g for g in samplers if g.mhz is not None]
        if not seen:
            return "-"
        limits = set().union(*(g.limits for g in seen))
        capped = f" [{', '.join(sorted(limits))}]" if limits else ""
        return (f"{statistics.median(g.mhz for g in seen):.0f} MHz (min {min(g.min_mhz for g in seen):.0f}) "
                f"{statistics.median(g.watts for g in seen):.0f} W{capped}")


def time_like_worker(fn, torch, policy, l2_bytes):
    """torch.matmul timed with the worker's protocol (evaluator/worker/worker.cpp, timing stage).

    The idle is a GPU-side spin (torch.cuda._sleep) queued before the flush rather than a host sleep: the
    host queues flush, events and matmul while the GPU spins, so Python's launch overhead never falls
    inside the timed region (the C++ worker queues fast enough not to need this)."""
    scratch = torch.empty(int(policy["l2_flush_factor"] * l2_bytes), dtype=torch.uint8, device="cuda")
    start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    torch.cuda._sleep(1_000_000)
    stop.record()
    stop.synchronize()
    cycles_per_ms = 1_000_000 / start.elapsed_time(stop)
    for _ in range(policy["warmup_launches"]):
        fn()
    torch.cuda.synchronize()
    samples, begin, flush = [], time.perf_counter(), 0
    previous_ms = policy["cooldown_max_ms"]
    while len(samples) < policy["min_samples"] or time.perf_counter() - begin < policy["min_seconds"]:
        flush += 1
        idle_ms = max(min(policy["cooldown_ratio"] * previous_ms, policy["cooldown_max_ms"]), 0.05)
        torch.cuda._sleep(int(idle_ms * cycles_per_ms))
        scratch.fill_(flush & 0xFF)
        start.record()
        fn()
        stop.record()
        stop.synchronize()
        previous_ms = start.elapsed_time(stop)
        samples.append(previous_ms)
    return statistics.median(samples)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--verdict", required=True, help="verdict JSON from `ptxbench eval --json`")
    ap.add_argument("--task", required=True, help="the task file (shapes and dtypes)")
    ap.add_argument("--repeats", type=int, default=3, help="measurements of torch per protocol (median kept)")
    ap.add_argument("--paced-calls", type=int, default=5, help="short do_bench calls per paced measurement")
    ap.add_argument("--paced-rest-s", type=float, default=0.5, help="rest before each paced do_bench call (s)")
    args = ap.parse_args()

    import torch
    from triton.testing import do_bench

    verdict = json.load(open(args.verdict))
    task = json.load(open(args.task))
    timing = verdict["stages"]["timing"]["figures"]
    if not timing.get("workloads"):
        print("the verdict has no timing figures:", verdict["stages"]["timing"]["summary"])
        return 1
    policy = verdict["settings"]["timing"]
    l2_bytes = torch.cuda.get_device_properties(0).L2_cache_size
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
        # torch's own time at a shape can move between measurements (H200, 8192x7168x5120: 0.754 ms and
        # 0.865 ms in one process), so each protocol is measured `repeats` times, alternating.
        bench, paced, same, bench_gpu, paced_gpu, same_gpu = [], [], [], [], [], []
        for _ in range(args.repeats):
            with GpuSampler() as g:
                bench.append(do_bench(fn, warmup=50, rep=300, return_mode="median"))
            bench_gpu.append(g)
            calls = []
            with GpuSampler() as g:
                for _ in range(args.paced_calls):
                    time.sleep(args.paced_rest_s)
                    calls.append(do_bench(fn, warmup=5, rep=25, return_mode="median"))
            paced.append(statistics.median(calls))
            paced_gpu.append(g)
            time.sleep(0.5)  # let the card settle between the two protocols
            with GpuSampler() as g:
                same.append(time_like_worker(fn, torch, policy, l2_bytes))
            same_gpu.append(g)
        bench_ms, paced_ms, same_ms = statistics.median(bench), statistics.median(paced), statistics.median(same)
        lib_ms = ours["library_ms"]
        rows.append({"workload": w["name"], "M": m, "N": n, "K": k, "ours_ms": lib_ms,
                     "ours_sm_clock_mhz_after": ours.get("sm_clock_mhz_after"), "torch_ms": bench_ms,
                     "torch_ms_repeats": bench, "ratio": lib_ms / bench_ms,
                     "torch_gpu": GpuSampler.text(bench_gpu),
                     "torch_paced_ms": paced_ms, "torch_paced_ms_repeats": paced, "ratio_paced": lib_ms / paced_ms,
                     "torch_paced_gpu": GpuSampler.text(paced_gpu),
                     "torch_protocol_ms": same_ms, "torch_protocol_ms_repeats": same,
                     "ratio_same_protocol": lib_ms / same_ms, "torch_protocol_gpu": GpuSampler.text(same_gpu)})
    # One line per (workload, torch measurement) keeps the table readable in a terminal.
    span = lambda xs: f"{statistics.median(xs):.4f} ({min(xs):.3f}-{max(xs):.3f})"
    print(f"{'workload':<10} {'M x N x K':>17} {'ours ms':>8}  {'torch timed by':<20} {'torch ms (range)':>22} "
          f"{'ours/torch':>10}  GPU during torch")
    for r in rows:
        shape = f"{r['M']}x{r['N']}x{r['K']}"
        for label, key, ratio, gpu in (("do_bench", "torch_ms_repeats", "ratio", "torch_gpu"),
                                       ("do_bench, paced", "torch_paced_ms_repeats", "ratio_paced", "torch_paced_gpu"),
                                       ("our protocol", "torch_protocol_ms_repeats", "ratio_same_protocol",
                                        "torch_protocol_gpu")):
            print(f"{r['workload']:<10} {shape:>17} {r['ours_ms']:>8.4f}  {label:<20} {span(r[key]):>22} "
                  f"{r[ratio]:>10.3f}  {r[gpu]}")
    print(json.dumps({"fidelity": rows}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
