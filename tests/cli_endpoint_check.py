#!/usr/bin/env python3
"""The command line against the fake OpenAI-compatible server (tests/fake_openai_server.py), no GPU:
`run`'s exit code when requests fail and each distinct error shown once, `resume` retrying them, `report`
saying "not measured" for the GPU axes, `export --out DIR/FILE` making DIR.

Usage: cli_endpoint_check.py PTXBENCH_EXE
"""
import json
import os
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
failures = []


def check(cond, what):
    print(("ok   " if cond else "FAIL ") + what)
    if not cond:
        failures.append(what)


def main():
    exe = sys.argv[1]
    tmp = tempfile.mkdtemp(prefix="ptxbench-cli-")
    env = {k: v for k, v in os.environ.items() if "proxy" not in k.lower()}
    server = subprocess.Popen([sys.executable, os.path.join(HERE, "fake_openai_server.py"), "--log",
                               os.path.join(tmp, "requests.jsonl")], stdout=subprocess.PIPE, text=True)
    try:
        port = int(server.stdout.readline())
        base = "http://127.0.0.1:%d/v1" % port

        def ptxbench(*args):
            p = subprocess.run([exe, *args], capture_output=True, text=True, env=env, timeout=300)
            return p.returncode, p.stdout, p.stderr

        common = ["--tasks", "gemm_n4096_k4096", "--turns", "1", "--no-gpu", "--progress", "lines",
                  "--compile-workers", "1"]
        # An unknown model: every turn fails for the endpoint's reason.
        rc, out, err = ptxbench("run", "--endpoint", base, "--model", "missing#cli", "--samples", "2",
                                "--out", os.path.join(tmp, "failed"), *common)
        check(rc == 4, "run whose requests all failed exits 4 (got %d)" % rc)
        check(err.count("is not served at") == 1, "the error is shown once for two failed turns:\n" + err)
        check("ptxbench resume" in err, "the exit message says how to retry")

        # A model that answers: the no-GPU report says "not measured", not 0%.
        rc, out, err = ptxbench("run", "--endpoint", base, "--model", "repair#cli", "--samples", "1",
                                "--out", os.path.join(tmp, "good"), *common)
        check(rc == 0, "run whose requests succeeded exits 0 (got %d): %s" % (rc, err[-500:]))
        rc, out, err = ptxbench("report", os.path.join(tmp, "good"), "--out", os.path.join(tmp, "report"))
        check(rc == 0, "report exits 0")
        md = open(os.path.join(tmp, "report", "report.md")).read()
        check("not measured" in md and "0.000" not in md, "report without a GPU says not measured")

        # export --out into folders that do not exist yet.
        target = os.path.join(tmp, "new", "deeper", "set.jsonl")
        rc, out, err = ptxbench("export", os.path.join(tmp, "good"), "--format", "messages", "--out", target)
        check(rc == 0 and os.path.exists(target), "export --out DIR/FILE creates DIR (rc %d): %s" % (rc, err))
    finally:
        server.terminate()
        server.wait()
        shutil.rmtree(tmp, ignore_errors=True)
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
