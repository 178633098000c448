#!/usr/bin/env python3
"""ptxbench against a real OpenAI-compatible server: LiteLLM's proxy (PyPI `litellm[proxy]`, installed by
scripts/install_deps.sh) started here on 127.0.0.1 with mock models (litellm_params.mock_response) and a
master key. Checked end to end through the command line, without a GPU:
  - a plain run and a streamed run: every turn recorded with the answer, compiled, tokens either the
    server's or marked estimated (LiteLLM's mock usage, 10 + 20 tokens for a 20 KB answer, is implausible);
  - a wrong key and an unknown model: exit code 4, the error shown once, with a hint naming the cause;
  - a server restart mid-run: the turns sent while it was down are request failures (exit 4), and
    `ptxbench resume` after the restart retries them and exits 0.
Exit 77 (skipped) with the reason when LiteLLM is not installed or does not start.

Usage: realserver_litellm.py PTXBENCH_EXE
"""
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request

# LiteLLM fetches a model price list from the internet at import unless told to use its bundled copy:
# the test talks to 127.0.0.1 only.
os.environ["LITELLM_LOCAL_MODEL_COST_MAP"] = "True"
os.environ["LITELLM_TELEMETRY"] = "False"
HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
KEY = "sk-ptxbench-realserver-0123456789"
TASK = "gemm_n4096_k4096"
failures = []
passed = 0


def check(cond, what):
    global passed
    print(("ok   " if cond else "FAIL ") + what, flush=True)
    if cond:
        passed += 1
    else:
        failures.append(what)


def skip(reason):
    print("SKIPPED: " + reason, flush=True)
    sys.exit(77)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Proxy:
    def __init__(self, config, port, log):
        self.config, self.port, self.log, self.proc = config, port, log, None

    def start(self, timeout=240):
        t0 = time.time()
        exe = shutil.which("litellm")
        cmd = [exe] if exe else [sys.executable, "-m", "litellm"]
        out = open(self.log, "a")
        # Its own process group, so a stop reaches the server's workers too.
        self.proc = subprocess.Popen(cmd + ["--config", self.config, "--host", "127.0.0.1", "--port",
                                            str(self.port), "--num_workers", "1", "--telemetry", "False"],
                                     stdout=out, stderr=subprocess.STDOUT, start_new_session=True,
                                     env={k: v for k, v in os.environ.items() if "proxy" not in k.lower()})
        url = "http://127.0.0.1:%d/health/liveliness" % self.port
        while time.time() - t0 < timeout:
            if self.proc.poll() is not None:
                skip("litellm exited with %d at start; log tail:\n%s" % (self.proc.returncode, tail(self.log)))
            try:
                with urllib.request.urlopen(url, timeout=2) as r:
                    if r.status == 200:
                        return time.time() - t0
            except OSError:
                time.sleep(0.5)
        self.stop()
        skip("litellm did not answer within %d s; log tail:\n%s" % (timeout, tail(self.log)))

    def stop(self):
        if self.proc and self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(20)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait()


def tail(path, n=15):
    try:
        return "".join(open(path, errors="replace").readlines()[-n:])
    except OSError:
        return ""


def records(run_dir):
    path = os.path.join(run_dir, "trajectories.jsonl")
    return [json.loads(line) for line in open(path)] if os.path.exists(path) else []


def latest(run_dir):
    """The last record per (trajectory, turn): a turn resume sent again replaces its failure."""
    out = {}
    for r in records(run_dir):
        out[(r["trajectory_id"], r["turn"])] = r
    return list(out.values())


def check_answers(run_dir, label, turns):
    rs = latest(run_dir)
    check(len(rs) == turns, "%s: %d turns recorded (want %d)" % (label, len(rs), turns))
    for r in rs:
        resp = r.get("response") or {}
        usage = resp.get("usage") or {}
        check(r.get("request_error") is None and resp.get("content"), "%s %s turn %d: an answer" %
              (label, r["trajectory_id"], r["turn"]))
        check(resp.get("finish_reason") in ("stop", "length"), "%s: finish_reason %r" %
              (label, resp.get("finish_reason")))
        tokens_ok = usage.get("estimated") is True or (usage.get("completion_tokens", 0) * 16 >=
                                                        len(resp.get("content", "")))
        check(tokens_ok, "%s: tokens are the server's or marked estimated (%s)" % (label, usage))
        stages = ((r.get("verdict") or {}).get("stages") or {})
        check((stages.get("compile") or {}).get("status") == "ok", "%s: the mock's kernel compiled" % label)


def main():
    exe = os.path.abspath(sys.argv[1])
    try:
        import litellm  # noqa: F401
    except ImportError as e:
        skip("LiteLLM is not installed (pip install 'litellm[proxy]'; scripts/install_deps.sh does): %s" % e)
    tmp = tempfile.mkdtemp(prefix="ptxbench-litellm-")
    answer = open(os.path.join(ROOT, "examples", "scripted", "gemm_turn1_fixed.md")).read()
    config = os.path.join(tmp, "litellm.yaml")
    with open(config, "w") as f:
        # JSON is YAML: no YAML writer needed.
        json.dump({"model_list": [
            {"model_name": "mock-kernel", "litellm_params": {"model": "openai/mock-kernel", "api_key": "unused",
                                                             "mock_response": answer}},
            # The restart case needs requests that take a while: a resent kernel reuses its verdict, so
            # without a delay the whole run can finish before the proxy is stopped.
            {"model_name": "mock-kernel-slow",
             "litellm_params": {"model": "openai/mock-kernel-slow", "api_key": "unused",
                                "mock_response": answer, "mock_delay": 0.5}},
        ], "general_settings": {"master_key": KEY}}, f)
    port = free_port()
    base = "http://127.0.0.1:%d/v1" % port
    proxy = Proxy(config, port, os.path.join(tmp, "litellm.log"))
    env = {k: v for k, v in os.environ.items() if "proxy" not in k.lower()}
    env["PTXBENCH_LITELLM_KEY"] = KEY
    env["PTXBENCH_WRONG_KEY"] = "sk-wrong-0000"
    t_all = time.time()

    def ptxbench(*args, timeout=600):
        p = subprocess.run([exe, *args], capture_output=True, text=True, env=env, timeout=timeout)
        return p.returncode, p.stdout, p.stderr

    common = ["--tasks", TASK, "--no-gpu", "--progress", "lines", "--compile-workers", "1"]
    try:
        started = proxy.start()
        print("litellm up in %.1f s" % started, flush=True)

        # Plain and streamed runs: 2 samples x 2 turns each (the mock never reaches the GPU target).
        for label, extra in (("plain", []), ("stream", ["--stream"])):
            run_dir = os.path.join(tmp, label)
            t0 = time.time()
            rc, out, err = ptxbench("run", "--endpoint", base, "--model", "mock-kernel", "--api-key-env",
                                    "PTXBENCH_LITELLM_KEY", "--samples", "2", "--turns", "2", "--seed", "7",
                                    "--out", run_dir, *common, *extra)
            print("%s run: %.1f s" % (label, time.time() - t0), flush=True)
            check(rc == 0, "%s run exits 0 (got %d): %s" % (label, rc, err[-800:]))
            check_answers(run_dir, label, 4)
            seeds = sorted({(r["sample"], r.get("seed")) for r in records(run_dir)})
            check(seeds == [(0, 7), (1, 8)], "%s: seed + sample index recorded: %s" % (label, seeds))

        # A wrong key and an unknown model: non-model failures, exit 4, each error shown once.
        for label, args, phrase in (
                ("wrong key", ["--model", "mock-kernel", "--api-key-env", "PTXBENCH_WRONG_KEY"],
                 "check the key in $PTXBENCH_WRONG_KEY"),
                ("unknown model", ["--model", "no-such-model", "--api-key-env", "PTXBENCH_LITELLM_KEY"],
                 "is not served at")):
            run_dir = os.path.join(tmp, label.replace(" ", "_"))
            rc, out, err = ptxbench("run", "--endpoint", base, *args, "--samples", "2", "--turns", "1",
                                    "--out", run_dir, *common)
            check(rc == 4, "%s: exit 4 (got %d)" % (label, rc))
            check(err.count(phrase) == 1, "%s: the error is shown once and names the cause (%r):\n%s" %
                  (label, phrase, err[-1500:]))
            check(all(r["stop_reason"] == "request_failed" for r in records(run_dir)) and records(run_dir),
                  "%s: every turn recorded as request_failed" % label)

        # A restart mid-run: the proxy goes down after the first recorded turn (turn 0 of one trajectory;
        # the other trajectories' turn 1 is sent only once their turn 0 is compiled and recorded).
        run_dir = os.path.join(tmp, "restart")
        run_config = os.path.join(tmp, "restart.json")
        with open(run_config, "w") as f:
            json.dump({"endpoints": [{"name": "litellm", "base_url": base, "model": "mock-kernel-slow",
                                      "api_key_env": "PTXBENCH_LITELLM_KEY", "max_retries": 1,
                                      "backoff_initial_ms": 100, "backoff_max_ms": 200,
                                      "max_in_flight": 1}],
                       "tasks": [TASK], "samples": 3, "turns": 2,
                       "concurrency": {"endpoint_failures_before_dead": 100}}, f)
        run = subprocess.Popen([exe, "run", "--config", run_config, "--out", run_dir, "--no-gpu", "--progress",
                                "lines", "--compile-workers", "1"], stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True, env=env)
        t0 = time.time()
        while not records(run_dir) and time.time() - t0 < 300 and run.poll() is None:
            time.sleep(0.05)
        proxy.stop()
        out, err = run.communicate(timeout=600)
        done = latest(run_dir)
        failed = [r for r in done if r["stop_reason"] == "request_failed"]
        check(run.returncode == 4 and failed, "restart: turns sent while the proxy was down fail, exit 4 "
              "(got %d, %d failed)" % (run.returncode, len(failed)))
        restarted = proxy.start()
        print("litellm restarted in %.1f s" % restarted, flush=True)
        rc, out, err = ptxbench("resume", run_dir, "--progress", "lines")
        check(rc == 0, "restart: resume exits 0 (got %d): %s" % (rc, err[-800:]))
        check("Retried %d turn(s)" % len(failed) in out, "restart: resume says how many it retried:\n" + out)
        check_answers(run_dir, "restart", 6)
    finally:
        proxy.stop()
        shutil.rmtree(tmp, ignore_errors=True)
    print("realserver wall time: %.1f s" % (time.time() - t_all))
    print("%d passed, %d failed" % (passed, len(failures)))
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
