#!/usr/bin/env python3
"""Evaluates one kernel N times with one run seed (and, with --fresh-seeds, N times with drawn seeds).

A kernel near the tolerance edge must get the same verdict every time within one run seed: the inputs
derive from the run seed, the task and the trial. Prints one row per evaluation (status, speedup, the
largest |error| / tolerance over workloads, the borderline flag, trials run / failed / extra, the failure
rate and why the extra trials stopped) and a last line saying whether the verdicts agreed. Exit 0 when
every same-seed evaluation gave the same status, margin and flag; 1 otherwise; 77 without a GPU.

  bench/borderline_repeat.py build-gpu/apps/ptxbench --task gemm_n4096_k4096 \\
      --response tests/adversarial/borderline_truncated_store/response.md --repeats 10 --seed 12345
"""
import argparse
import json
import os
import shutil
import subprocess
import sys
import time


def margin_of(v):
    """The workload with the largest margin: (ratio, borderline, run, failed, extra, rate, stop)."""
    best = None
    for w in v["stages"]["correctness"].get("figures", {}).get("workloads", []):
        m = w.get("margin")
        if m and (best is None or m["max_error_ratio"] > best["max_error_ratio"]):
            best = m
    return best


def evaluate(args, seed):
    cmd = [args.ptxbench, "eval", "--json", "--task", args.task, "--response", args.response,
           "--tasks-dir", args.tasks_dir, "--no-sanitizer"]
    if seed is not None:
        cmd += ["--seed", str(seed)]
    t0 = time.monotonic()
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=args.timeout)
    wall = time.monotonic() - t0
    try:
        return json.loads(done.stdout), wall
    except ValueError:
        sys.stderr.write(done.stderr[-2000:])
        raise SystemExit(f"ptxbench eval printed no verdict (exit {done.returncode})")


def row(label, v, wall):
    m = margin_of(v) or {}
    spd = v["axes"]["speedup"]
    return [label, v["status"], "-" if spd is None else f"{spd:.3f}",
            f"{m.get('max_error_ratio', float('nan')):.4f}", str(v["stages"]["correctness"].get("figures", {})
                                                                .get("borderline", False)).lower(),
            str(m.get("trials_run", "-")), str(m.get("trials_failed", "-")), str(m.get("extra_trials", "-")),
            f"{m.get('failure_rate', float('nan')):.3f}", m.get("extra_stopped_by", "") or "-",
            str(v.get("settings", {}).get("run_seed", "-")), f"{wall:.1f}"]


def print_table(rows):
    hdr = ["run", "status", "speedup", "margin", "borderline", "trials", "failed", "extra", "fail rate",
           "extra stop", "run seed", "wall s"]
    widths = [max(len(r[i]) for r in rows + [hdr]) for i in range(len(hdr))]
    for r in [hdr] + rows:
        print("  ".join(r[i].ljust(widths[i]) for i in range(len(hdr))), flush=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("ptxbench")
    ap.add_argument("--task", required=True)
    ap.add_argument("--response", required=True)
    ap.add_argument("--tasks-dir", default=os.path.join(os.path.dirname(__file__), "..", "tasks"))
    ap.add_argument("--repeats", type=int, default=10)
    ap.add_argument("--seed", type=int, default=20261206, help="the run seed of the same-seed evaluations")
    ap.add_argument("--fresh-seeds", type=int, default=0, help="this many more, each with a drawn seed")
    ap.add_argument("--timeout", type=float, default=300, help="seconds per evaluation")
    ap.add_argument("--out", help="folder for the verdict JSON files")
    args = ap.parse_args()
    if not shutil.which("nvidia-smi") or subprocess.run(["nvidia-smi", "-L"], capture_output=True).returncode:
        print("SKIPPED: no GPU (nvidia-smi lists none)")
        return 77
    rows, same = [], []
    for i in range(args.repeats + args.fresh_seeds):
        seed = args.seed if i < args.repeats else None
        v, wall = evaluate(args, seed)
        if args.out:
            os.makedirs(args.out, exist_ok=True)
            with open(os.path.join(args.out, f"run{i:02d}.json"), "w") as f:
                json.dump(v, f)
        r = row(f"{'seed' if seed is not None else 'drawn'} {i + 1}", v, wall)
        rows.append(r)
        if seed is not None:
            same.append((r[1], r[3], r[4]))
        print(" | ".join(r), file=sys.stderr, flush=True)
    print_table(rows)
    agree = len(set(same)) == 1
    print(f"same-seed evaluations: {len(same)}, distinct (status, margin, borderline): {len(set(same))} "
          f"-> {'the same verdict every time' if agree else 'verdicts differ'}")
    return 0 if agree else 1


if __name__ == "__main__":
    sys.exit(main())
