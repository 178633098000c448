#!/usr/bin/env python3
"""Builds the reference solutions and probes under tasks/solutions/<task>/<solution>/.

Each solution folder holds the hand-written sources:
  kernel.cu      CUDA device code with inline PTX (one extern "C" __global__ entry)
  manifest.json  the launch manifest
  intro.md       the prose that opens the model-style response
and gets two generated files:
  kernel.ptx     PTX emitted by nvcc for the task's target (sm_90a)
  response.md    intro + ```ptx block + ```json block: what the evaluator's response parser reads

It also runs ptxas -v on every PTX and fails when a kernel spills or when ptxas ignores setmaxnreg,
so a regression is caught before any GPU time is spent.

Usage: scripts/build_solutions.py [--check] [solution folders...]
  --check  rebuild in memory and fail if a committed kernel.ptx/response.md is stale
"""
import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SOLUTIONS = ROOT / "tasks" / "solutions"
CUDA = Path(os.environ.get("CUDA_HOME", "/usr/local/cuda"))
ARCH = "90a"  # every GEMM and attention task here targets sm_90a


def run(cmd):
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        sys.exit(f"error: {' '.join(map(str, cmd))} failed:\n{proc.stdout}{proc.stderr}")
    return proc.stdout + proc.stderr


def emit_ptx(folder: Path) -> str:
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "kernel.ptx"
        run([CUDA / "bin" / "nvcc", "-ptx", f"-gencode=arch=compute_{ARCH},code=sm_{ARCH}", "-O3",
             "-std=c++17", folder / "kernel.cu", "-o", out])
        ptx = out.read_text()
    rel = folder.relative_to(ROOT)
    header = (f"// {rel.parent.name}/{rel.name}: emitted by scripts/build_solutions.py from {rel}/kernel.cu\n"
              f"// (nvcc -ptx -gencode=arch=compute_{ARCH},code=sm_{ARCH} -O3)\n")
    return header + ptx


def ptxas_report(ptx_path: Path) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        log = run([CUDA / "bin" / "ptxas", f"-arch=sm_{ARCH}", "-v", ptx_path, "-o", Path(tmp) / "k.cubin"])
    regs = re.search(r"Used (\d+) registers", log)
    spill = re.search(r"(\d+) bytes spill stores, (\d+) bytes spill loads", log)
    stack = re.search(r"(\d+) bytes stack frame", log)
    return {
        "registers": int(regs.group(1)) if regs else None,
        "spill_bytes": int(spill.group(1)) + int(spill.group(2)) if spill else 0,
        "stack_bytes": int(stack.group(1)) if stack else 0,
        "warnings": [line for line in log.splitlines() if "warning" in line.lower() or "C75" in line],
    }


def response_text(folder: Path, ptx: str) -> str:
    intro = (folder / "intro.md").read_text().strip()
    manifest = json.loads((folder / "manifest.json").read_text())  # validates the JSON
    return (f"{intro}\n\n```ptx\n{ptx.rstrip()}\n```\n\n"
            f"Launch manifest:\n\n```json\n{json.dumps(manifest, indent=2)}\n```\n")


def build(folder: Path, check: bool) -> bool:
    ptx = emit_ptx(folder)
    response = response_text(folder, ptx)
    with tempfile.NamedTemporaryFile("w", suffix=".ptx", delete=False) as f:
        f.write(ptx)
        tmp_ptx = Path(f.name)
    try:
        report = ptxas_report(tmp_ptx)
    finally:
        tmp_ptx.unlink()
    name = str(folder.relative_to(SOLUTIONS))
    ok = True
    print(f"{name:45s} regs={report['registers']} stack={report['stack_bytes']} spills={report['spill_bytes']}")
    for w in report["warnings"]:
        print(f"    ptxas: {w}")
    if report["spill_bytes"] or any("setmaxnreg" in w for w in report["warnings"]):
        print(f"error: {name}: spills or ignored setmaxnreg", file=sys.stderr)
        ok = False
    if check:
        for fname, text in (("kernel.ptx", ptx), ("response.md", response)):
            path = folder / fname
            if not path.exists() or path.read_text() != text:
                print(f"error: {name}/{fname} is stale: rerun scripts/build_solutions.py", file=sys.stderr)
                ok = False
    else:
        (folder / "kernel.ptx").write_text(ptx)
        (folder / "response.md").write_text(response)
    return ok


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true")
    parser.add_argument("folders", nargs="*", type=Path)
    args = parser.parse_args()
    folders = [f.resolve() for f in args.folders] or sorted(
        p.parent for pattern in ("gemm_*/*/kernel.cu", "mha_*/*/kernel.cu") for p in SOLUTIONS.glob(pattern))
    ok = all([build(folder, args.check) for folder in folders])
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
