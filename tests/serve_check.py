#!/usr/bin/env python3
"""`ptxbench serve` end to end on the CPU (GPU stages skipped without a GPU, and the verdicts say so):
a real answer's verdict against `ptxbench eval`, batches, polling and blocking waits, malformed requests
(400 naming the field), overload (429 with Retry-After), deadlines (timeout verdicts in time), bearer
auth, SIGTERM with jobs in flight (all answered, exit 0), the Python client's retries and its TRL GRPO
and verl reward functions. Usage: serve_check.py PTXBENCH_BINARY"""

import json
import os
import signal
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "clients", "python"))
from ptxbench_client import Client, PtxbenchError, compute_score, make_grpo_reward  # noqa: E402

PTXBENCH = sys.argv[1]
TASK = "gemm_n4096_k4096"
SOL = os.path.join(ROOT, "tasks", "solutions", TASK)
RESPONSE = open(os.path.join(SOL, "simple", "response.md")).read()
OTHER = open(os.path.join(SOL, "mma_sync", "response.md")).read()
FAILURES = []


def check(cond, what):
    print(("ok   " if cond else "FAIL ") + what, flush=True)
    if not cond:
        FAILURES.append(what)


class Server:
    def __init__(self, *args, env=None):
        self.proc = subprocess.Popen([PTXBENCH, "serve", "--port", "0", *args], stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE, text=True, env=dict(os.environ, **(env or {})))
        line = self.proc.stdout.readline()
        if "listening on" not in line:
            raise SystemExit(f"serve did not start: {line!r} {self.proc.stderr.read()}")
        self.url = line.split("listening on ")[1].strip()
        self.stderr = []
        threading.Thread(target=lambda: self.stderr.extend(self.proc.stderr), daemon=True).start()

    def stop(self, timeout=60):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        return self.proc.wait(timeout=timeout)


def http(url, method="GET", body=None, token=None, raw=None):
    data = raw if raw is not None else (None if body is None else json.dumps(body).encode())
    req = urllib.request.Request(url, data=data, method=method)
    if token:
        req.add_header("Authorization", f"Bearer {token}")
    try:
        with urllib.request.urlopen(req, timeout=120) as r:
            return r.status, json.loads(r.read()), r.headers
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read() or b"null"), e.headers


def wait_final(url, rid, limit=60):
    end = time.time() + limit
    while time.time() < end:
        _, s, _ = http(f"{url}/v1/verdicts/{rid}?wait=10")
        if s["final"]:
            return s
    raise SystemExit(f"{rid} not final in {limit} s")


def main():
    # `ptxbench eval` on the same text, for comparison.
    eval_run = subprocess.run([PTXBENCH, "eval", "--task", TASK, "--response", os.path.join(SOL, "simple", "response.md"),
                               "--json"], capture_output=True, text=True, timeout=300)
    expected = json.loads(eval_run.stdout)

    bad = subprocess.run([PTXBENCH, "serve", "--port", "0", "--reward", "correct=1,colour=2"], capture_output=True,
                         text=True, timeout=60)
    check(bad.returncode == 2 and "colour" in bad.stderr, "--reward with an unknown key -> exit 2 naming it")

    a = Server("--workers", "2", "--reward", "compiled=0.1,correct=0.4,targets=0.2,speedup=0.3,speedup_cap=2")
    try:
        status, health, _ = http(f"{a.url}/healthz")
        check(status == 200 and health["status"] == "ok", "healthz answers ok")
        gpu_runs = health["gpu_stages"] == "run"
        status, tasks, _ = http(f"{a.url}/v1/tasks")
        check(status == 200 and TASK in [t["id"] for t in tasks["tasks"]], "tasks lists the GEMM task")
        status, queue, _ = http(f"{a.url}/v1/queue")
        check(status == 200, "queue is open without a token when none is set")

        # One real answer: its verdict's CPU stages match `ptxbench eval`.
        status, sub, _ = http(f"{a.url}/v1/verdicts", "POST", {"task": TASK, "response": RESPONSE})
        check(status == 202 and sub["id"] == sub["ids"][0], "single submission accepted with an id")
        state = wait_final(a.url, sub["id"])
        v = state["verdict"]
        check(state["state"] == "done", f"verdict done ({state['state']})")
        for stage in ("parse", "static", "compile"):
            check(v["stages"][stage]["status"] == expected["stages"][stage]["status"],
                  f"{stage} status matches ptxbench eval ({v['stages'][stage]['status']})")
        check(v["kernel_hash"] == expected["kernel_hash"], "kernel hash matches ptxbench eval")
        r = state["reward"]
        check(r["compiled"] is True and isinstance(r["scalar"], float), "reward: compiled, with a scalar")
        for key in ("correct", "targets_executed", "targets", "speedup", "speedup_ci95", "suspicious",
                    "suspicious_flags", "generalizes", "feedback", "measured_on_gpu"):
            check(key in r, f"reward part {key}")
        if not gpu_runs:
            check(r["measured_on_gpu"] is False and v["stages"]["correctness"]["status"] == "skipped"
                  and r["gpu_skipped_reason"], "GPU stages skipped, and the verdict says why")
            check(r["correct"] is None and abs(r["scalar"] - 0.1) < 1e-9, "unmeasured axes count 0 (scalar 0.1)")
        check(len(r["feedback"]) > 20, "feedback text present")

        # The same request again shares the evaluation.
        status, sub2, _ = http(f"{a.url}/v1/verdicts", "POST", {"task": TASK, "response": RESPONSE})
        check(sub2["deduplicated"] == [True], "identical request deduplicated")
        s2 = wait_final(a.url, sub2["id"])
        check(s2["verdict"] == v, "deduplicated request gets the same verdict")

        # The same kernel in other prose reuses its verdict (the evaluator's verdict cache).
        status, subc, _ = http(f"{a.url}/v1/verdicts", "POST", {"task": TASK, "response": RESPONSE + "\n\nThat is all."})
        sc = wait_final(a.url, subc["id"])
        check(subc["deduplicated"] == [False] and sc["reward"]["reused"] is True
              and sc["verdict"]["kernel_hash"] == v["kernel_hash"], "same kernel, other prose: verdict reused")

        # A kernel given apart from prose compiles like the response holding it.
        kernel = {"language": "ptx", "source": open(os.path.join(SOL, "simple", "kernel.ptx")).read(),
                  "manifest": json.load(open(os.path.join(SOL, "simple", "manifest.json")))}
        status, subk, _ = http(f"{a.url}/v1/verdicts", "POST", {"task": TASK, "kernel": kernel, "settings": {"gpu": False}})
        sk = wait_final(a.url, subk["id"])
        check(sk["verdict"]["kernel_hash"] == v["kernel_hash"] and sk["reward"]["compiled"], "kernel form compiles alike")

        # Batch, polled without waiting and with a blocking wait.
        batch = {"requests": [{"task": TASK, "response": RESPONSE, "settings": {"seed": 7}},
                              {"task": TASK, "response": "no kernel here"},
                              {"task": TASK, "response": OTHER, "deadline_seconds": 120}]}
        status, subb, _ = http(f"{a.url}/v1/verdicts", "POST", batch)
        check(status == 202 and len(subb["ids"]) == 3, "batch of 3 accepted")
        _, first, _ = http(f"{a.url}/v1/verdicts/{subb['ids'][0]}")
        check(first["state"] in ("queued", "running", "done") and "final" in first, "poll answers at once")
        states = [wait_final(a.url, i) for i in subb["ids"]]
        check([s["state"] for s in states] == ["done"] * 3, "batch all done")
        check(states[1]["verdict"]["status"] == "no_kernel" and states[1]["reward"]["scalar"] == 0.0,
              "text without a kernel: no_kernel, reward 0")
        check(states[0]["verdict"]["settings"]["run_seed"] == 7, "per-request seed used")

        # Malformed input: 400 naming the field.
        cases = [
            (b"{not json", ""),
            (json.dumps({"response": RESPONSE}).encode(), "task"),
            (json.dumps({"task": "gemm_nope", "response": RESPONSE}).encode(), "task"),
            (json.dumps({"task": TASK}).encode(), "response"),
            (json.dumps({"task": TASK, "response": "x", "kernel": {}}).encode(), "response"),
            (json.dumps({"task": TASK, "response": "x", "deadline_seconds": -1}).encode(), "deadline_seconds"),
            (json.dumps({"task": TASK, "response": "x", "colour": 1}).encode(), "colour"),
            (json.dumps({"requests": [{"task": TASK, "response": "x"},
                                      {"task": TASK, "response": "x", "settings": {"seed": "a"}}]}).encode(),
             "requests[1].settings.seed"),
            (json.dumps({"requests": []}).encode(), "requests"),
            (json.dumps({"task": TASK, "kernel": {"source": "```", "manifest": {}}}).encode(), "kernel.source"),
            (json.dumps({"task": TASK, "response": "x", "settings": {"worker_path": "/bin/sh"}}).encode(),
             "settings.worker_path"),
        ]
        for raw, field in cases:
            status, body, _ = http(f"{a.url}/v1/verdicts", "POST", raw=raw)
            check(status == 400 and body["error"]["field"] == field,
                  f"400 naming '{field}' (got {status} {body['error'] if body else body})")
        status, body, _ = http(f"{a.url}/v1/verdicts/{sub['id']}?wait=abc")
        check(status == 400 and body["error"]["field"] == "wait", "bad wait -> 400 naming wait")
        status, body, _ = http(f"{a.url}/v1/verdicts/{sub['id']}?wait=100000")
        check(status == 400 and body["error"]["field"] == "wait", "wait above --max-wait -> 400")
        status, body, _ = http(f"{a.url}/v1/verdicts/nope")
        check(status == 404, "unknown id -> 404")
        status, body, _ = http(f"{a.url}/v1/verdicts", "GET")
        check(status == 405, "wrong method -> 405")

        # The Python client's TRL GRPO reward end to end (strings and conversational completions).
        reward_fn = make_grpo_reward(url=a.url, timeout=120)
        rewards = reward_fn(prompts=["p1", "p2", "p3"],
                            completions=[RESPONSE, "no kernel", [{"role": "assistant", "content": OTHER}]],
                            task=[TASK, TASK, TASK])
        check(len(rewards) == 3 and all(isinstance(x, float) for x in rewards), f"GRPO rewards {rewards}")
        check(rewards[1] == 0.0 and rewards[0] > rewards[1] and rewards[2] > rewards[1], "GRPO rewards order")
        os.environ["PTXBENCH_SERVE_URL"] = a.url
        score = compute_score("ptxbench", RESPONSE, TASK, {"timeout": 120})
        check(score == rewards[0], f"verl compute_score {score}")

        _, queue, _ = http(f"{a.url}/v1/queue")
        check(queue["finished"] >= 5 and queue["verdicts_per_hour"] > 0 and queue["deduplicated"] >= 1 and queue["cache_hits"] >= 1
              and "oldest_wait_seconds" in queue and queue["queued"] == 0, f"queue figures {queue}")
    finally:
        rc = a.stop()
    check(rc == 0, f"server A exits 0 on SIGTERM (got {rc})")

    # One evaluation thread, a tiny queue, a token.
    b = Server("--workers", "1", "--max-queue", "4", "--drain-seconds", "60", env={"PTXBENCH_SERVE_TOKEN": "s3cret"})
    try:
        status, _, hdr = http(f"{b.url}/v1/queue")
        check(status == 401 and "Bearer" in (hdr.get("WWW-Authenticate") or ""), "no token -> 401")
        status, _, _ = http(f"{b.url}/v1/queue", token="wrong")
        check(status == 401, "wrong token -> 401")
        status, _, _ = http(f"{b.url}/healthz")
        check(status == 200, "healthz needs no token")
        client = Client(b.url, token="s3cret", max_retries=30)
        check(client.queue()["max_queue"] == 4, "right token -> 200")

        # Overload: more fresh evaluations than the queue holds -> 429 with Retry-After, nothing accepted.
        many = {"requests": [{"task": TASK, "response": RESPONSE, "settings": {"seed": 100 + i}} for i in range(6)]}
        status, body, hdr = http(f"{b.url}/v1/verdicts", "POST", many, token="s3cret")
        check(status == 429 and int(hdr.get("Retry-After", "0")) >= 1, f"overload -> 429 with Retry-After ({status})")
        check(client.queue()["accepted"] == 0, "a refused batch accepts nothing")

        # Deadline: behind three evaluations on the one thread, a 0.3 s request times out in time.
        ahead = client.submit([{"task": TASK, "response": RESPONSE, "settings": {"seed": 200 + i}} for i in range(3)])
        t0 = time.time()
        late = client.submit([{"task": TASK, "response": OTHER, "settings": {"seed": 299}, "deadline_seconds": 0.3}])[0]
        s = client.get(late, wait=20)
        took = time.time() - t0
        check(s["state"] == "timeout" and s["verdict"]["status"] == "timeout" and s["reward"]["deadline_exceeded"]
              and s["reward"]["scalar"] == 0.0, f"deadline -> timeout verdict ({s['state']})")
        check(took < 0.3 + 1.0, f"timeout answered within the deadline's reach ({took:.2f} s)")

        # The client retries 429 as Retry-After says, until the queue has room.
        t0 = time.time()
        more = client.submit([{"task": TASK, "response": OTHER, "settings": {"seed": 300 + i}} for i in range(3)])
        check(len(more) == 3, f"client got past 429 by retrying ({time.time() - t0:.1f} s)")

        # SIGTERM with jobs in flight: every accepted request answered, new ones refused, exit 0.
        inflight = ahead + more
        results = {}

        def waiter(rid):
            results[rid] = client.wait(rid, 120)

        threads = [threading.Thread(target=waiter, args=(rid,)) for rid in inflight]
        for t in threads:
            t.start()
        time.sleep(0.2)
        b.proc.send_signal(signal.SIGTERM)
        time.sleep(0.3)
        status, body, hdr = http(f"{b.url}/v1/verdicts", "POST", {"task": TASK, "response": "x"}, token="s3cret")
        check(status == 503 and hdr.get("Retry-After"), f"draining: new submissions refused with 503 ({status})")
        for t in threads:
            t.join(timeout=150)
        check(len(results) == len(inflight) and all(r["state"] == "done" for r in results.values()),
              f"every in-flight request answered: {sorted(r['state'] for r in results.values())}")
        rc = b.proc.wait(timeout=60)
        check(rc == 0, f"exit 0 after the drain (got {rc})")
    finally:
        b.stop()

    if FAILURES:
        print(f"{len(FAILURES)} check(s) failed:\n  " + "\n  ".join(FAILURES))
        return 1
    print("all serve checks passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
