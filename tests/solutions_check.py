#!/usr/bin/env python3
"""Evaluates the reference solutions and probes under tasks/solutions and checks each verdict against the
task folder's expected.json.

usage: solutions_check.py PTXBENCH_BINARY [--gpu] [--solutions GLOB ...] [--out DIR]

Every task folder under tasks/solutions has an expected.json with one entry per solution folder (and no
entry without a folder, or the check fails). Each solution's response.md is evaluated with
`ptxbench eval --json`:
- without --gpu (label cpu): `--no-gpu`; the CPU stages (parse, static checks, ptxas, SASS listing) must
  pass for every solution whose expected status comes from a GPU stage, and every target named in a
  target_detail must be in the PTX when the detail expects it executed or present in SASS;
- with --gpu (label gpu; exit 77 without a GPU, saying so): the full verdict is compared with every field
  of the entry (status, correct, targets_executed, min/max_speedup, target_detail figures with min_/max_
  bounds, failing_outputs by the first mismatch's tensor).
Prints one row per solution: status, axes, per target warp executions and work/byte share, candidate and
library ms, speedup, TFLOP/s, whether it is as expected, wall seconds; the verdicts go to --out if given.
Exit 1 when any verdict differs from its entry.
"""
import argparse
import fnmatch
import json
import os
import shutil
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SOLUTIONS = os.path.join(ROOT, "tasks", "solutions")
CPU_FAILURES = {"no_kernel", "bad_manifest", "static_error", "compile_error", "launch_error"}


def has_gpu():
    smi = shutil.which("nvidia-smi")
    if not smi:
        return False
    r = subprocess.run([smi, "-L"], capture_output=True, text=True)
    return r.returncode == 0 and "GPU" in r.stdout


def figure_ok(have, key, value):
    if key.startswith("min_"):
        return have is not None and have >= value
    if key.startswith("max_"):
        return have is not None and have <= value
    return have == value


def differences_gpu(exp, v):
    """What differs between an expected.json entry and a full verdict (empty: as expected)."""
    bad = []
    if "status" in exp and exp["status"] != v["status"]:
        bad.append(f"status {v['status']}")
    for axis in ("correct", "targets_executed"):
        if axis in exp and exp[axis] != v["axes"][axis]:
            bad.append(f"{axis} {v['axes'][axis]}")
    if "generalizes" in exp:  # the hidden workloads: true, false, or null (not checked)
        got = (v.get("generalizes") or {}).get("value")
        if got != exp["generalizes"]:
            bad.append(f"generalizes {got}")
    spd = v["axes"]["speedup"]
    if "min_speedup" in exp and (spd is None or spd < exp["min_speedup"]):
        bad.append(f"speedup {spd}")
    if "max_speedup" in exp and (spd is None or spd > exp["max_speedup"]):
        bad.append(f"speedup {spd}")
    targets = {t["name"]: t for t in v["stages"]["execution"]["figures"].get("targets", [])}
    for name, want in exp.get("target_detail", {}).items():
        got = targets.get(name, {})
        for key, value in want.items():
            field = key[4:] if key.startswith(("min_", "max_")) else key
            if not figure_ok(got.get(field), key, value):
                bad.append(f"{name}.{field} {got.get(field)}")
    if exp.get("failing_outputs"):
        first = [w.get("first_mismatch") for w in v["stages"]["correctness"]["figures"].get("workloads", [])]
        names = {f.get("tensor") for f in first if isinstance(f, dict)}
        if names and not names & set(exp["failing_outputs"]):
            bad.append(f"first mismatch in {sorted(names)}")
    return bad


def differences_cpu(exp, v):
    """The CPU stages of a solution whose expected verdict comes from the GPU must all pass."""
    bad = []
    want = exp.get("status")
    if want not in CPU_FAILURES:
        for stage in ("parse", "static", "compile"):
            st = v["stages"][stage]["status"]
            if st != "ok":
                bad.append(f"{stage} {st}: {v['stages'][stage].get('summary', '')[:120]}")
    elif v["status"] != want:
        bad.append(f"status {v['status']}")
    in_ptx = v["stages"]["static"]["figures"].get("targets_in_ptx", {})
    for name, detail in exp.get("target_detail", {}).items():
        if detail.get("executed") or detail.get("present_in_sass") or "min_work_share" in detail:
            if isinstance(in_ptx, dict) and in_ptx and not in_ptx.get(name, False):
                bad.append(f"{name} not in the PTX")
    return bad


def row(task, sol, v, verdict_text, wall):
    if v is None:
        return [task, sol, "error", "-", "-", "-", "-", "-", "-", "-", "-", "-", verdict_text, f"{wall:.2f}"]
    st = v["stages"]

    def target_text(t):
        share, bshare = t.get("work_share"), t.get("byte_share")
        return (f"{t['name']}:{t['warp_executions']}{'' if t['present_in_sass'] else '(absent)'}"
                + ("" if share is None else f"(work {share:.3g})")
                + ("" if bshare is None else f"(bytes {bshare:.3g})"))

    targets = " ".join(target_text(t) for t in st["execution"]["figures"].get("targets", [])) \
        or st["execution"]["status"]
    tw = st["timing"]["figures"].get("workloads", [])
    ax = v["axes"]
    text = lambda b: "-" if b is None else str(b).lower()  # noqa: E731
    gen = v.get("generalizes") or {}
    gen_text = "-" if gen.get("value") is None else f"{text(gen['value'])} {gen.get('passed')}/{gen.get('total')}"
    return [task, sol, v["status"], text(ax["correct"]), text(ax["targets_executed"]), gen_text,
            "-" if ax["speedup"] is None else f"{ax['speedup']:.3f}", targets,
            "/".join(f"{w['candidate_ms']:.3f}" for w in tw) or "-",
            "/".join(f"{w['library_ms']:.3f}" for w in tw) or "-",
            "/".join(f"{w['speedup']:.3f}" for w in tw) or "-",
            "/".join(f"{w['candidate_tflops']:.0f}" for w in tw) or "-",
            verdict_text, f"{wall:.2f}"]


def profile_row(task, sol, v):
    """The profile stage of one verdict: what bounds it, the tensor pipe beside the library, PC sampling."""
    p = (v or {}).get("stages", {}).get("profile")
    if not p:
        return [task, sol, "-"] + ["-"] * 6
    kp = (p.get("figures") or {}).get("kernel_profile")
    if p.get("status") != "ok" or not kp:
        return [task, sol, p.get("status", "?"), (p.get("summary") or "")[:60]] + ["-"] * 5
    metrics = {m["name"]: m for m in kp.get("metrics", [])}
    pct = lambda x: "-" if x is None else f"{x:.0f}%"  # noqa: E731
    through = [m for m in kp.get("metrics", []) if m.get("throughput")]
    bound = max(through, key=lambda m: m["value"], default=None)
    bound_text = "-" if bound is None else f"{bound['label']} {pct(bound['value'])}/{pct(bound.get('library'))}"
    tensor = metrics.get("sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_active", {})
    pc = kp.get("pc_sampling") or {}
    if pc.get("samples"):
        hot = pc.get("hot_lines") or []
        top = hot[0] if hot else None
        top_text = "-" if top is None else (
            f"L{top['line']} {top['share']:.0%} {(top.get('reasons') or [{'reason': '?'}])[0]['reason']}")
        sampled = f"{pc['samples']} ({len(hot)} lines {pc.get('line_source') or pc.get('line_error', '')[:30]})"
    else:
        top_text, sampled = "-", (pc.get("unavailable") or "off")[:60]
    phases = (p.get("figures") or {}).get("phase_seconds") or {}
    return [task, sol, "ok", bound_text, f"{pct(tensor.get('value'))}/{pct(tensor.get('library'))}", sampled,
            top_text, f"{p.get('wall_seconds', 0):.2f}", f"{phases.get('pc_sampling', 0):.2f}"]


def sampling_problem(v):
    """Why a profiled verdict's PC sampling counts as broken: the sampler ran (a sampling period is recorded)
    and gave no sample of the kernel. A launch too slow for the sampling budget is never sampled (no period)
    and is not a problem. None if fine."""
    p = (v or {}).get("stages", {}).get("profile") or {}
    kp = (p.get("figures") or {}).get("kernel_profile") or {}
    pc = kp.get("pc_sampling")
    if p.get("status") != "ok" or not pc or pc.get("samples") or not pc.get("period_log2"):
        return None
    return "PC sampling gave no samples: " + (pc.get("unavailable") or "")[:120]


def print_table(hdr, rows):
    widths = [max(len(str(r[i])) for r in rows + [hdr]) for i in range(len(hdr))]
    for r in [hdr] + rows:
        print("  ".join(str(r[i]).ljust(widths[i]) for i in range(len(hdr))))


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("ptxbench")
    ap.add_argument("--gpu", action="store_true", help="full verdicts on a GPU (exit 77 without one)")
    ap.add_argument("--solutions", nargs="*", default=["*/*"], help="globs TASK/SOLUTION (default */*)")
    ap.add_argument("--out", help="folder for the verdict JSON files")
    args = ap.parse_args()
    if args.gpu and not has_gpu():
        print("SKIPPED: no GPU (nvidia-smi lists none): the full verdicts need one")
        return 77
    if args.out:
        os.makedirs(args.out, exist_ok=True)

    problems, rows, profile_rows = [], [], []
    for task in sorted(os.listdir(SOLUTIONS)):
        folder = os.path.join(SOLUTIONS, task)
        if not os.path.isdir(folder):
            continue
        try:
            expected = json.load(open(os.path.join(folder, "expected.json")))
        except (OSError, ValueError) as e:
            problems.append(f"{task}: expected.json unreadable: {e}")
            continue
        solutions = sorted(d for d in os.listdir(folder) if os.path.isfile(os.path.join(folder, d, "response.md")))
        entries = sorted(k for k in expected if not k.startswith("_"))
        for missing in sorted(set(solutions) - set(entries)):
            problems.append(f"{task}/{missing}: no entry in expected.json")
        for orphan in sorted(set(entries) - set(solutions)):
            problems.append(f"{task}/{orphan}: expected.json names a folder without response.md")
        for sol in solutions:
            if sol not in expected or not any(fnmatch.fnmatch(f"{task}/{sol}", g) for g in args.solutions):
                continue
            cmd = [args.ptxbench, "eval", "--task", task, "--json", "--tasks-dir", os.path.join(ROOT, "tasks"),
                   "--response", os.path.join(folder, sol, "response.md")]
            if not args.gpu:
                cmd.append("--no-gpu")
            start = time.monotonic()
            r = subprocess.run(cmd, capture_output=True, text=True)
            wall = time.monotonic() - start
            try:
                v = json.loads(r.stdout)
            except ValueError:
                err = (r.stderr.strip().splitlines() or [f"exit {r.returncode}"])[-1]
                problems.append(f"{task}/{sol}: no verdict: {err[:200]}")
                rows.append(row(task, sol, None, "NO: no verdict", wall))
                continue
            if args.out:
                with open(os.path.join(args.out, f"{task}.{sol}.json"), "w") as f:
                    f.write(r.stdout)
            bad = differences_gpu(expected[sol], v) if args.gpu else differences_cpu(expected[sol], v)
            if args.gpu and (why := sampling_problem(v)):
                bad.append(why)
            if bad:
                problems.append(f"{task}/{sol}: " + ", ".join(bad))
            rows.append(row(task, sol, v, "yes" if not bad else "NO: " + ", ".join(bad), wall))
            profile_rows.append(profile_row(task, sol, v))
            # One line as each verdict arrives, so a run cut short by a time limit still shows its rows.
            print("  ".join(str(c) for c in rows[-1]), file=sys.stderr, flush=True)

    hdr = ["task", "solution", "status", "correct", "targets", "generalizes", "speedup",
           "targets executed (warp instr., work/byte share)", "cand ms", "library ms", "speedup/wl", "TFLOP/s",
           "as expected", "wall s"]
    if args.gpu and profile_rows:
        print_table(["task", "solution", "profile", "busiest unit (yours/library)", "tensor pipe",
                     "PC samples (lines mapped)", "hottest line", "profile s", "sampling s"], profile_rows)
        print()
    print_table(hdr, rows)
    print(f"{len(rows)} solutions evaluated ({'full verdicts' if args.gpu else 'CPU stages only'}), "
          f"{len(problems)} problems")
    for p in problems:
        print("PROBLEM:", p)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
