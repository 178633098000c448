#!/usr/bin/env python3
"""`ptxbench serve`: identical kernels from different clients are evaluated once (CTest serve_cache_check, cpu).

usage: serve_cache_check.py PTXBENCH_BINARY

One service (GPU stages skipped, 3 evaluation threads); K clients, each its own `ptxbench_client.Client` on
its own thread, released together:
  1. the same text from every client at once: one evaluation, the others join it (deduplicated);
  2. the same kernel under different prose from every client at once: one evaluation; the others wait for it
     while it runs (kernel_shared) or reuse it from the verdict cache afterwards, all with its kernel hash
     and status, the later ones marked reused_from;
  3. a different kernel from every client: one evaluation each (nothing shared by mistake);
  4. the same kernel again after all that, from a new client: a cache hit, no evaluation.
Counts come from GET /v1/queue (finished - cache_hits = evaluations actually run).
"""
import os
import sys
import threading

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(ROOT, "clients", "python"))
sys.path.insert(0, HERE)
from ptxbench_client import Client  # noqa: E402
from serve_check import Server, check, FAILURES  # noqa: E402

K = 6
TASK = "gemm_n4096_k4096"
SOL = os.path.join(ROOT, "tasks", "solutions", TASK)


def together(url, requests):
    """Each request from its own client on its own thread, released at once; returns the final states."""
    out = [None] * len(requests)
    gate = threading.Barrier(len(requests))

    def one(i):
        client = Client(url, max_concurrency=1)
        gate.wait()
        out[i] = client.evaluate_many([requests[i]], timeout=120)[0]

    threads = [threading.Thread(target=one, args=(i,)) for i in range(len(requests))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return out


def ran(q):
    return q["finished"] - q["cache_hits"]


def main():
    text = open(os.path.join(SOL, "simple", "response.md")).read()
    others = [open(os.path.join(SOL, n, "response.md")).read() for n in ("mma_sync", "wgmma_tma", "probe_edge_tiles")]
    server = Server("--workers", "3", "--no-gpu", "--seed", "7")
    try:
        probe = Client(server.url)
        q0 = probe.queue()

        states = together(server.url, [{"task": TASK, "response": text}] * K)
        q1 = probe.queue()
        check(all(s["state"] == "done" for s in states), "1. same text: every client got a verdict")
        check(q1["deduplicated"] - q0["deduplicated"] == K - 1 and ran(q1) - ran(q0) == 1,
              f"1. same text from {K} clients: one evaluation, {K - 1} joined it "
              f"(deduplicated +{q1['deduplicated'] - q0['deduplicated']}, evaluations +{ran(q1) - ran(q0)})")
        first = states[0]["verdict"]

        prose = [{"task": TASK, "response": f"Client {i} says: my kernel, as before.\n\n" + text} for i in range(K)]
        states = together(server.url, prose)
        q2 = probe.queue()
        check(all(s["state"] == "done" for s in states), "2. same kernel, other prose: every client got a verdict")
        check(ran(q2) - ran(q1) == 0,
              f"2. same kernel under {K} different prose: no new evaluation (cache hits +"
              f"{q2['cache_hits'] - q1['cache_hits']}, waited for a running one: {q2['kernel_shared']})")
        check(all(s["verdict"]["kernel_hash"] == first["kernel_hash"] and s["verdict"]["status"] == first["status"]
                  and s["verdict"]["reused_from"] for s in states),
              "2. each has the first verdict's kernel hash and status and says it was reused")

        # The same kernel under new prose while it has never been evaluated: K texts of one new kernel at once.
        fresh = others[0]
        prose = [{"task": TASK, "response": f"Variant {i}.\n\n" + fresh} for i in range(K)]
        states = together(server.url, prose)
        q3 = probe.queue()
        hashes = {s["verdict"]["kernel_hash"] for s in states}
        check(ran(q3) - ran(q2) == 1 and len(hashes) == 1,
              f"2b. a new kernel under {K} different prose at once: evaluated once (evaluations +"
              f"{ran(q3) - ran(q2)}; waited for the running one: {q3['kernel_shared'] - q2['kernel_shared']}, "
              f"cache hits +{q3['cache_hits'] - q2['cache_hits']})")

        states = together(server.url, [{"task": TASK, "response": o} for o in others[1:]])
        q4 = probe.queue()
        check(ran(q4) - ran(q3) == len(others) - 1 and len({s["verdict"]["kernel_hash"] for s in states}) == 2,
              f"3. different kernels: one evaluation each (+{ran(q4) - ran(q3)})")

        again = Client(server.url).evaluate(TASK, response="Once more:\n\n" + text, timeout=60)
        q5 = probe.queue()
        check(again["state"] == "done" and again["verdict"]["reused_from"] and ran(q5) == ran(q4),
              "4. a new client resending the first kernel later: a cache hit")
        check(q5["errors"] == 0, "no evaluation errors")
    finally:
        rc = server.stop()
    check(rc == 0, f"SIGTERM: exit {rc}")
    if FAILURES:
        print(f"{len(FAILURES)} check(s) failed")
        return 1
    print("serve_cache_check: all checks passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
