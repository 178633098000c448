#!/usr/bin/env python3
"""`ptxbench repairs` on the command line against the fake OpenAI-compatible server, no GPU: the coverage
table comes first on stdout; --prepare-only writes the seeds and repairs_config.json and starts nothing;
that config runs as shards (`run --config ... --shard I/N`) and the shards report and export as one run; a
full repairs run writes records naming the student turn they repair, and the repair-pairs card shows the
selection coverage; nothing selected exits 2. Without a GPU no repair is verified (axes unmeasured), so
fix rates here are 0: test_repairs covers them with GPU outcomes.

Usage: cli_repairs_check.py PTXBENCH_EXE
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
    tmp = tempfile.mkdtemp(prefix="ptxbench-repairs-cli-")
    env = {k: v for k, v in os.environ.items() if "proxy" not in k.lower()}
    server = subprocess.Popen([sys.executable, os.path.join(HERE, "fake_openai_server.py"), "--log",
                               os.path.join(tmp, "requests.jsonl")], stdout=subprocess.PIPE, text=True)
    try:
        port = int(server.stdout.readline())
        base = "http://127.0.0.1:%d/v1" % port

        def ptxbench(*args):
            p = subprocess.run([exe, *args], capture_output=True, text=True, env=env, timeout=300)
            return p.returncode, p.stdout, p.stderr

        student = os.path.join(tmp, "student")
        rc, out, err = ptxbench("run", "--endpoint", base, "--model", "demo-10", "--tasks",
                                "gemm_n7168_k5120,gemm_n4096_k4096", "--samples", "3", "--turns", "2", "--no-gpu",
                                "--progress", "lines", "--out", student)
        check(rc == 0, "student run exits 0 (got %d): %s" % (rc, err[-500:]))
        teacher = os.path.join(tmp, "teacher.json")
        with open(teacher, "w") as f:
            json.dump({"endpoints": [{"name": "teacher", "model": "teacher.compile_error", "base_url": base}]}, f)

        prepared = os.path.join(tmp, "prepared")
        rc, out, err = ptxbench("repairs", "--from", student, "--teacher", teacher, "--samples", "2",
                                "--cap-per-category", "2", "--seed", "3", "--no-gpu", "--prepare-only",
                                "--out", prepared)
        check(rc == 0, "repairs --prepare-only exits 0 (got %d): %s" % (rc, err[-500:]))
        check(out.startswith("Repair seeds: "), "the coverage table comes first:\n" + out[:300])
        check("left out (why)" in out and "not measured (GPU stages skipped)" in out,
              "the table says what was left out and why")
        check(os.path.exists(os.path.join(prepared, "repair_seeds.jsonl")) and
              not os.path.exists(os.path.join(prepared, "trajectories.jsonl")),
              "--prepare-only writes the seeds and starts nothing")
        seeds = [json.loads(l) for l in open(os.path.join(prepared, "repair_seeds.jsonl"))]
        check(len(seeds) >= 1 and all(s["conversation"][-1]["role"] == "user" for s in seeds),
              "%d seeds, each ending with the feedback" % len(seeds))
        config = json.load(open(os.path.join(prepared, "repairs_config.json")))
        check(config["repairs"]["selection"]["settings"]["seed"] == 3, "the selection seed is recorded")

        # The prepared config runs as shards; the shards read as one run.
        shards = os.path.join(tmp, "shards")
        for i in range(2):
            rc, out, err = ptxbench("run", "--config", os.path.join(prepared, "repairs_config.json"), "--shard",
                                    "%d/2" % i, "--out", shards, "--progress", "lines")
            check(rc == 0, "shard %d/2 exits 0 (got %d): %s" % (i, rc, err[-300:]))
        records = []
        for i in range(2):
            path = os.path.join(shards, "shard-%d" % i, "trajectories.jsonl")
            if os.path.exists(path):
                records += [json.loads(l) for l in open(path)]
        trajectories = {r["trajectory_id"] for r in records}
        check(len(trajectories) == 2 * len(seeds), "the shards ran every seed x sample once (%d trajectories)"
              % len(trajectories))
        rc, out, err = ptxbench("report", shards, "--out", os.path.join(tmp, "shards-report"))
        check(rc == 0 and "repairs: fixed 0/%d" % (2 * len(seeds)) in out,
              "the shards report as one repairs run:\n" + out + err[-300:])

        # A full repairs run, then its export.
        full = os.path.join(tmp, "full")
        rc, out, err = ptxbench("repairs", "--from", student, "--teacher", teacher, "--samples", "1",
                                "--turns", "1", "--no-gpu", "--progress", "lines", "--out", full)
        check(rc == 0, "repairs exits 0 (got %d): %s" % (rc, err[-500:]))
        records = [json.loads(l) for l in open(os.path.join(full, "trajectories.jsonl"))]
        student_keys = {(r["trajectory_id"], r["turn"]) for r in
                        (json.loads(l) for l in open(os.path.join(student, "trajectories.jsonl")))}
        check(records and all((r["repair_of"]["student_trajectory_id"], r["repair_of"]["student_turn"]) in
                              student_keys for r in records), "every record names a student turn it repairs")
        rc, out, err = ptxbench("resume", full, "--progress", "lines")
        check(rc == 0 and "0 turns recorded" in out, "resume of a finished repairs run does nothing")
        rc, out, err = ptxbench("export", full, "--format", "repair-pairs", "--out", os.path.join(tmp, "p.jsonl"))
        check(rc == 0 and "### Selection coverage of" in out and "teacher did not fix it" in out,
              "the card shows the selection coverage and the unfixed count:\n" + out[-1500:])

        # Nothing selected: exit 2 with the reason.
        rc, out, err = ptxbench("repairs", "--from", student, "--teacher", teacher, "--category", "timeout",
                                "--no-gpu", "--out", os.path.join(tmp, "none"))
        check(rc == 2 and "no failed student turn was selected" in err, "nothing selected exits 2 (got %d)" % rc)
    finally:
        server.terminate()
        server.wait()
        shutil.rmtree(tmp, ignore_errors=True)
    if failures:
        print("%d check(s) failed" % len(failures))
        sys.exit(1)


if __name__ == "__main__":
    main()
