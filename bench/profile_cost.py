#!/usr/bin/env python3
"""What the profile stage adds to a verdict: bench_eval as shipped, without PC sampling, without the stage.

For every case TASK/SOLUTION (a folder under tasks/solutions) runs bench_eval three times in a row on the
same machine (median of --runs full evaluations each, back to back or --gap-s apart): as shipped, with --no-pc-sampling and with
--no-profile. Prints per case the median verdict wall of each, what the stage adds (shipped minus
no-profile, and the stage's own seconds in the median run), and where its seconds go (the stage's phases:
metrics of the candidate and the library, each CUPTI set-up step, PC sampling and its steps), largest
first. Exit 77 without a GPU.

  bench/profile_cost.py build-gpu/bench/bench_eval --cases gemm_n7168_k5120/wgmma_tma mha_fwd_d128/flash_fwd
"""
import argparse
import json
import os
import shutil
import subprocess
import sys

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))
MODES = [("shipped", []), ("no PC sampling", ["--no-pc-sampling"]), ("no profile", ["--no-profile"])]


def bench(args, case, extra, log):
    task, sol = case.split("/")
    cmd = [args.bench_eval, "--task", task, "--runs", str(args.runs), "--tasks-dir", args.tasks_dir,
           "--response", os.path.join(args.tasks_dir, "solutions", task, sol, "response.md")] + extra
    if args.gap_s > 0:
        cmd += ["--gap-s", str(args.gap_s)]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=args.timeout)
    with open(log, "w") as f:
        f.write(done.stdout + "\n--- stderr\n" + done.stderr)
    for line in reversed(done.stdout.splitlines()):
        try:
            return json.loads(line)
        except ValueError:
            continue
    return None


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("bench_eval")
    ap.add_argument("--cases", nargs="+", required=True, help="TASK/SOLUTION under tasks/solutions")
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--tasks-dir", default=os.path.join(ROOT, "tasks"))
    ap.add_argument("--out", default=".", help="folder for the bench_eval logs")
    ap.add_argument("--timeout", type=float, default=600)
    ap.add_argument("--gap-s", type=float, default=0,
                    help="seconds between evaluations (a run's wait for the model's next answer, during which a "
                         "pre-started worker finishes its set-up); 0 = back to back")
    ap.add_argument("--also", action="append", default=[], metavar="NAME=ARGS",
                    help="one more mode: bench_eval with these extra arguments (e.g. 'buf32=--pc-sampling-buffer-mib 32')")
    args = ap.parse_args()
    for spec in args.also:
        name, _, extra = spec.partition("=")
        MODES.append((name, extra.split()))
    if not shutil.which("nvidia-smi") or subprocess.run(["nvidia-smi", "-L"], capture_output=True).returncode:
        print("SKIPPED: no GPU (nvidia-smi lists none)")
        return 77
    os.makedirs(args.out, exist_ok=True)
    rows = []
    for case in args.cases:
        got = {}
        for mode, extra in MODES:
            log = os.path.join(args.out, f"{case.replace('/', '.')}.{mode.replace(' ', '_')}.log")
            got[mode] = bench(args, case, extra, log)
            print(f"{case} {mode}: {'-' if got[mode] is None else got[mode]['median_wall_s']:} s",
                  file=sys.stderr, flush=True)
        full, bare = got["shipped"], got["no profile"]
        if not full or not bare:
            rows.append([case, "bench_eval failed: see the logs"] + [""] * 6)
            continue
        stage = full["profile"]["stages"].get("profile", {})
        phases = sorted((stage.get("phases") or {}).items(), key=lambda kv: -kv[1])
        nopcs = got["no PC sampling"]
        rows.append([case, full["status"], f"{full['median_wall_s']:.3f}",
                     "-" if not nopcs else f"{nopcs['median_wall_s']:.3f}", f"{bare['median_wall_s']:.3f}",
                     f"{full['median_wall_s'] - bare['median_wall_s']:+.3f}",
                     f"{stage.get('s', 0):.3f} ({stage.get('status', '-')})",
                     ", ".join(f"{k} {v:.3f}" for k, v in phases[:8]) or "-"])
        for name, _ in MODES[3:]:
            more = got.get(name)
            if not more:
                rows.append([f"  {name}", "bench_eval failed"] + [""] * 6)
                continue
            mstage = more["profile"]["stages"].get("profile", {})
            mphases = sorted((mstage.get("phases") or {}).items(), key=lambda kv: -kv[1])
            rows.append([f"  {name}", more["status"], f"{more['median_wall_s']:.3f}", "", "",
                         f"{more['median_wall_s'] - bare['median_wall_s']:+.3f}",
                         f"{mstage.get('s', 0):.3f} ({mstage.get('status', '-')})",
                         ", ".join(f"{k} {v:.3f}" for k, v in mphases[:8]) or "-"])
    hdr = ["case", "status", "shipped s", "no PCS s", "no profile s", "added s", "stage s", "stage phases (s)"]
    widths = [max(len(r[i]) for r in rows + [hdr]) for i in range(len(hdr))]
    for r in [hdr] + rows:
        print("  ".join(r[i].ljust(widths[i]) for i in range(len(hdr))))
    return 0


if __name__ == "__main__":
    sys.exit(main())
