#!/usr/bin/env python3
"""Each figure of the profile stage next to Nsight Compute's for the same kernel and shape.

For every case TASK/SOLUTION (a folder under tasks/solutions): the verdict's kernel profile (from
--verdicts DIR/TASK.SOLUTION.json when there, else `ptxbench eval --json`), then the same evaluation with
the worker started under `ncu` (a wrapper named by PTXBENCH_WORKER; the worker scrubs its environment, so
ncu cannot be injected from outside) collecting the profile's metric names for the candidate's entry.
Of ncu's launches, those with the profiled launch's grid and block are kept and each metric's median is
compared. ncu runs with --clock-control none, as the worker's own profiler does (ncu locks the base clock
by default, which changes times and %-of-peak figures that depend on the clock).

Prints one row per (case, metric): ptxbench's figure, the library's, ncu's, the relative difference and
whether it is within --tolerance (default 5%). Exit 0 when every compared figure is (with --check NAME...:
when each named metric was compared in every case and is), 1 otherwise, 77 without a GPU or ncu.

  bench/profile_vs_ncu.py build-gpu/apps/ptxbench --worker build-gpu/evaluator/worker/ptxbench-worker \\
      --cases gemm_n7168_k5120/mma_sync gemm_n7168_k5120/wgmma_tma --out ncu_compare
"""
import argparse
import csv
import glob
import io
import json
import os
import re
import shutil
import statistics
import subprocess
import sys

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))
# Figures that are not a hardware counter of the launch: ncu has no column for them.
DERIVED = {"sm__cycles_elapsed.avg.per_second"}


def kernel_profile(v):
    p = v.get("stages", {}).get("profile") or {}
    return (p.get("figures") or {}).get("kernel_profile")


def entry_of(response_text):
    m = re.search(r'"entry"\s*:\s*"([A-Za-z_$][\w$]*)"', response_text)
    return m.group(1) if m else None


def evaluate(args, task, response, env=None, timeout=600):
    cmd = [args.ptxbench, "eval", "--json", "--task", task, "--response", response, "--tasks-dir",
           args.tasks_dir, "--no-sanitizer", "--no-hidden", "--seed", str(args.seed)]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env)
    try:
        return json.loads(done.stdout)
    except ValueError:
        return {"error": done.stderr[-1500:]}


def dims_product(text):
    nums = [int(x) for x in re.findall(r"\d+", text or "")]
    prod = 1
    for n in nums:
        prod *= n
    return prod if nums else None


def ncu_rows(ncu, report):
    """The raw page of one ncu report: [{column: value}] per launch, numbers in base units."""
    done = subprocess.run([ncu, "--import", report, "--csv", "--page", "raw", "--print-units", "base"],
                          capture_output=True, text=True, timeout=300)
    lines = [line for line in done.stdout.splitlines() if line.startswith('"')]
    if len(lines) < 3:
        return []
    table = list(csv.reader(io.StringIO("\n".join(lines))))
    header, rows = table[0], table[2:]  # table[1] holds the units
    return [dict(zip(header, r)) for r in rows]


def number(text):
    try:
        return float(str(text).replace(",", ""))
    except ValueError:
        return None


def ncu_case(args, task, sol, response, kp, metrics):
    entry = entry_of(open(response).read())
    case_dir = os.path.join(args.out, f"{task}.{sol}")
    os.makedirs(case_dir, exist_ok=True)
    for old in glob.glob(os.path.join(case_dir, "*.ncu-rep")):
        os.remove(old)
    wrapper = os.path.join(case_dir, "worker_under_ncu.sh")
    with open(wrapper, "w") as f:
        f.write("#!/bin/sh\n"
                f"exec '{args.ncu}' --target-processes all --clock-control none --kernel-name 'regex:^{entry}$' "
                f"--launch-count {args.launch_count} --metrics {','.join(metrics)} -f "
                f"-o '{case_dir}/worker_'$$ --log-file '{case_dir}/ncu_'$$.log '{args.worker}' \"$@\"\n")
    os.chmod(wrapper, 0o755)
    env = dict(os.environ, PTXBENCH_WORKER=wrapper)
    v = evaluate(args, task, response, env=env, timeout=args.timeout)
    with open(os.path.join(case_dir, "verdict_under_ncu.json"), "w") as f:
        json.dump(v, f)
    occ = kp.get("occupancy") or {}
    grid, block = occ.get("grid_blocks"), occ.get("block_threads")
    launches = []
    for rep in sorted(glob.glob(os.path.join(case_dir, "*.ncu-rep"))):
        for r in ncu_rows(args.ncu, rep):
            if dims_product(r.get("Grid Size")) == grid and dims_product(r.get("Block Size")) == block:
                launches.append(r)
    return launches


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("ptxbench")
    ap.add_argument("--worker", required=True, help="the real ptxbench-worker")
    ap.add_argument("--cases", nargs="+", required=True, help="TASK/SOLUTION under tasks/solutions")
    ap.add_argument("--verdicts", help="folder with TASK.SOLUTION.json verdicts to reuse (solutions_check --out)")
    ap.add_argument("--tasks-dir", default=os.path.join(ROOT, "tasks"))
    ap.add_argument("--ncu", default=shutil.which("ncu") or "/usr/local/cuda/bin/ncu")
    ap.add_argument("--out", required=True)
    ap.add_argument("--seed", type=int, default=20261206)
    ap.add_argument("--launch-count", type=int, default=16, help="candidate launches ncu profiles per worker")
    ap.add_argument("--tolerance", type=float, default=0.05, help="relative difference counted as agreeing")
    ap.add_argument("--timeout", type=float, default=400, help="seconds for the evaluation under ncu")
    ap.add_argument("--check", nargs="*", default=None,
                    help="metric names that decide the exit code (default: every compared metric)")
    args = ap.parse_args()
    if not shutil.which("nvidia-smi") or subprocess.run(["nvidia-smi", "-L"], capture_output=True).returncode \
            or not os.path.exists(args.ncu):
        print("SKIPPED: needs a GPU and ncu")
        return 77
    args.worker, args.out = os.path.abspath(args.worker), os.path.abspath(args.out)
    os.makedirs(args.out, exist_ok=True)
    rows, bad, compared = [], 0, 0
    checked = {}  # (case, metric) -> within tolerance, for --check
    for case in args.cases:
        task, sol = case.split("/")
        response = os.path.join(args.tasks_dir, "solutions", task, sol, "response.md")
        cached = os.path.join(args.verdicts or "", f"{task}.{sol}.json")
        v = json.load(open(cached)) if args.verdicts and os.path.exists(cached) else \
            evaluate(args, task, response)
        kp = kernel_profile(v)
        if not kp:
            rows.append([case, "(no profile)", "-", "-", "-", "-", v.get("status", v.get("error", "?"))[:80]])
            continue
        metrics = [m["name"] for m in kp["metrics"] if m["name"] not in DERIVED]
        launches = ncu_case(args, task, sol, response, kp, metrics)
        occ = kp.get("occupancy") or {}
        where = f"{kp.get('workload')} grid {occ.get('grid_blocks')} x {occ.get('block_threads')}"
        if not launches:
            rows.append([case, f"(ncu: no launch with {where})", "-", "-", "-", "-", "see ncu_*.log"])
            continue
        for m in kp["metrics"]:
            if m["name"] in DERIVED:
                continue
            values = [x for x in (number(r.get(m["name"])) for r in launches) if x is not None]
            ours = m["value"]
            if not values:
                rows.append([case, m["name"], f"{ours:.4g}", "-", "(no column)", "-", ""])
                continue
            theirs = statistics.median(values)
            # Shares near zero: compare absolutely (1 point of 100%) so 0.01% vs 0.02% is not "100% off".
            diff = abs(ours - theirs) / abs(theirs) if abs(theirs) > 1e-12 else abs(ours)
            near_zero = m["unit"] == "%" and max(abs(ours), abs(theirs)) < 2.0
            ok = diff <= args.tolerance or (near_zero and abs(ours - theirs) <= 1.0)
            compared += 1
            bad += 0 if ok else 1
            checked[(case, m["name"])] = ok
            lib = m.get("library")
            rows.append([case, m["name"], f"{ours:.4g}", "-" if lib is None else f"{lib:.4g}", f"{theirs:.4g}",
                         f"{diff:.1%}", ("ok" if ok else "DIFFERS") + f" ({len(values)} launches, {where})"])
    hdr = ["case", "metric", "ptxbench", "library", "ncu", "rel diff", "within tolerance"]
    widths = [max(len(str(r[i])) for r in rows + [hdr]) for i in range(len(hdr))]
    for r in [hdr] + rows:
        print("  ".join(str(r[i]).ljust(widths[i]) for i in range(len(hdr))))
    print(f"compared {compared} figures: {compared - bad} within {args.tolerance:.0%}, {bad} not")
    if args.check is not None:
        missing = [(c, n) for c in args.cases for n in args.check if (c, n) not in checked]
        failing = [(c, n) for c in args.cases for n in args.check if checked.get((c, n)) is False]
        print(f"checked metrics: {len(args.check) * len(args.cases) - len(missing) - len(failing)} agree, "
              f"{len(failing)} differ, {len(missing)} not compared {missing or ''}")
        return 0 if not missing and not failing else 1
    return 0 if compared and not bad else 1


if __name__ == "__main__":
    sys.exit(main())
