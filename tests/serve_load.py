#!/usr/bin/env python3
"""Load test of `ptxbench serve` from the Python client (clients/python), as an RL trainer drives it.

usage: serve_load.py PTXBENCH [--clients N] [--answers M] [--gpu auto|on|off] [--pool core|all] [--out DIR]
                     [--url URL --seed S] [more: --help]

What it does, in order:
  1. the corpus: every committed answer with a known task: tasks/solutions/<task>/<name>/response.md (reference
     solutions and probes, as solutions_check.py finds them), tests/adversarial/<case>/response.md (the
     reward-hacking corpus of test_adversarial.cpp: endless loops, printf floods, traps, illegal addresses, ...)
     and tests/data/answers/*.md (model-style answers of test_answers.cpp, on gemm_n7168_k5120). `--pool core`
     (the default) leaves out the attention backward tasks and keeps two forward solutions per attention task,
     so one GPU does the run in a few minutes; `all` keeps everything.
  2. M answers drawn from it (seeded): the whole pool once when M is at least twice its size (else 60% of M,
     the hanging kernels always in), the rest resends: the same text
     (shared evaluation) or the same kernel under other prose (the verdict cache). Some resends of the hanging
     kernels get a short deadline (--short-deadline), so the service must answer them with its own timeout
     verdict at that deadline while the evaluation goes on for the others.
  3. `ptxbench serve --seed S` on port 0 (or --url: a running service or balancer started with that seed), and
     N client threads, each with its own `ptxbench_client.Client`, each sending one answer at a time (POST, then
     blocking GETs) like a reward function's workers. A sampler reads GET /v1/queue every --queue-every s.
     With the GPU stages on, a `ptxbench-worker` of the service is killed (SIGKILL) after 30% and 60% of the
     answers (--kill-at): the service must go on answering.
  4. `ptxbench eval --seed S --json` once on each distinct answer (--eval-jobs at a time), after the load.
  5. Checks, printed as a table, exit 1 when one fails:
     - every request answered (final) within its deadline (+ --grace s), none hung;
     - each verdict the same as `ptxbench eval`'s on that answer (a resend under other prose: its original's):
       status, the axes correct / targets_executed, generalizes, the stage statuses and the kernel hash; the
       speedup is a measurement: null on both sides or a number on both (the spread is printed); adversarial
       cases whose expected.json accepts several statuses agree when both are among them; requests the service
       answered with a timeout at their deadline are checked for time only;
     - GET /v1/queue: figures during the run (max queued, running, oldest wait), no evaluation errors;
     - GET /healthz "ok" afterwards, nothing queued or undelivered; SIGTERM then exits 0 (own service only).
     Printed: verdicts per GPU-hour (answers and evaluations), p50/p95/max latency, how the GPU verdicts got
     their worker (pre-started or not), the kills and what the requests then in flight got.
Exit 0 all checks passed, 1 a check failed, 2 bad usage, 3 the service did not start.
"""
import argparse
import json
import math
import os
import queue
import random
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "clients", "python"))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from ptxbench_client import Client, PtxbenchError  # noqa: E402
from solutions_check import has_gpu  # noqa: E402

HANG_CASES = {"endless_loop", "probe_endless_loop", "printf_flood"}
ANSWERS_TASK = "gemm_n7168_k5120"  # tests/test_answers.cpp evaluates tests/data/answers on it


def env_default(name, default, kind=str):
    value = os.environ.get("SERVE_LOAD_" + name)
    return kind(value) if value not in (None, "") else default


def parse_args():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("ptxbench", nargs="?", default=os.environ.get("PTXBENCH"),
                   help="the ptxbench binary (or $PTXBENCH)")
    p.add_argument("--clients", type=int, default=env_default("CLIENTS", 64, int))
    p.add_argument("--answers", type=int, default=env_default("ANSWERS", 500, int))
    p.add_argument("--gpu", choices=["auto", "on", "off"], default=env_default("GPU", "auto"),
                   help="GPU stages: on, off (--no-gpu), auto: on when nvidia-smi lists a GPU")
    p.add_argument("--pool", choices=["core", "all"], default=env_default("POOL", "core"))
    p.add_argument("--seed", type=int, default=env_default("SEED", 20261205, int), help="the run seed of both sides")
    p.add_argument("--workers", type=int, default=env_default("WORKERS", 6, int), help="serve --workers")
    p.add_argument("--deadline", type=float, default=env_default("DEADLINE", 600.0, float),
                   help="deadline_seconds of each request")
    p.add_argument("--short-deadline", type=float, default=env_default("SHORT_DEADLINE", 4.0, float),
                   help="deadline of the short-deadline resends of hanging kernels")
    p.add_argument("--grace", type=float, default=env_default("GRACE", 2.0, float),
                   help="seconds past its deadline a final answer may take to arrive")
    p.add_argument("--kill-at", default=env_default("KILL_AT", "0.3,0.6"),
                   help="fractions of answers after which a GPU worker is killed ('' = none; GPU stages only)")
    p.add_argument("--eval-jobs", type=int, default=env_default("EVAL_JOBS", 4, int),
                   help="ptxbench eval processes at a time (their GPU stages take turns on the GPU lock)")
    p.add_argument("--sanitizer", action="store_true", default=bool(env_default("SANITIZER", "")),
                   help="keep the compute-sanitizer rerun of faults, hangs and races (off by default on both sides:"
                        " it never changes a status or an axis and costs each hang its own hang limit again)")
    p.add_argument("--queue-every", type=float, default=0.5)
    p.add_argument("--url", default=env_default("URL", ""),
                   help="use this running service or balancer (started with --seed SEED) instead of starting one")
    p.add_argument("--token", default=os.environ.get("PTXBENCH_SERVE_TOKEN"))
    p.add_argument("--gpus", type=int, default=env_default("GPUS", 0, int),
                   help="GPUs behind --url, for verdicts per GPU-hour (own service: 1 with GPU stages)")
    p.add_argument("--out", default=env_default("OUT", ""), help="keep verdicts, eval output and logs here")
    p.add_argument("--serve-arg", action="append", default=[], help="extra argument for ptxbench serve")
    a = p.parse_args()
    if not a.ptxbench:
        p.error("the ptxbench binary is required (argument or $PTXBENCH)")
    if a.clients < 1 or a.answers < 1:
        p.error("--clients and --answers must be positive")
    return a


# --- the corpus -------------------------------------------------------------------------------------------
class Answer:
    def __init__(self, name, source, task, text, accept=None):
        self.name, self.source, self.task, self.text = name, source, task, text
        self.accept = accept  # statuses that all count as agreeing (adversarial cases with several)
        self.hangs = name.split("/")[-1] in HANG_CASES


def read(path):
    with open(path, encoding="utf-8") as f:
        return f.read()


def corpus(pool):
    out = []
    sol = os.path.join(ROOT, "tasks", "solutions")
    for task in sorted(os.listdir(sol)):
        if pool == "core" and task.startswith("mha_bwd"):
            continue
        with open(os.path.join(sol, task, "expected.json")) as f:
            names = [k for k in json.load(f) if not k.startswith("_")]
        if pool == "core" and task.startswith("mha_"):
            names = [n for n in names if n in ("simple_fwd", "flash_fwd")]
        for name in names:
            path = os.path.join(sol, task, name, "response.md")
            if os.path.exists(path):
                out.append(Answer(f"{task}/{name}", "solution" if not name.startswith("probe_") else "probe", task,
                                  read(path)))
    adv = os.path.join(ROOT, "tests", "adversarial")
    for case in sorted(os.listdir(adv)):
        exp_path = os.path.join(adv, case, "expected.json")
        if not os.path.exists(exp_path):
            continue
        with open(exp_path) as f:
            exp = json.load(f)
        if "settings" in exp and exp.get("response_from"):
            continue  # the same answer as another case under other settings (a service request has the defaults)
        path = os.path.join(adv, exp.get("response_from") or case, "response.md")
        statuses = exp["expected_status"]
        out.append(Answer(f"adversarial/{case}", "adversarial", exp["task"], read(path),
                          statuses if isinstance(statuses, list) and len(statuses) > 1 else None))
    answers = os.path.join(ROOT, "tests", "data", "answers")
    for name in sorted(os.listdir(answers)):
        if name.endswith(".md"):
            out.append(Answer(f"answers/{name[:-3]}", "answer", ANSWERS_TASK, read(os.path.join(answers, name))))
    return out


class Item:
    """One request to send: an answer, its text (the original, or under other prose), its deadline."""

    def __init__(self, index, answer, text, deadline, kind):
        self.index, self.answer, self.text, self.deadline, self.kind = index, answer, text, deadline, kind
        self.sent = self.final_at = None
        self.state = None  # the final VerdictState
        self.error = None
        self.in_flight_at_kill = []


def draw(pool, m, rng, deadline, short_deadline):
    """Distinct answers (the whole pool when m is at least twice its size, else 60% of m, the hanging kernels
    always among them), then resends of those; all in a shuffled order."""
    firsts = list(pool)
    rng.shuffle(firsts)
    firsts.sort(key=lambda a: not a.hangs)  # stable: the hanging kernels first, the rest shuffled
    firsts = firsts[:len(pool) if m >= 2 * len(pool) else max(1, min(m, int(m * 0.6)))]
    items = [(a, a.text, deadline, "original") for a in firsts]
    while len(items) < m:
        a = rng.choice(firsts)
        r = rng.random()
        if a.hangs and r < 0.5:
            items.append((a, a.text, short_deadline, "short_deadline"))
        elif r < 0.5:
            items.append((a, a.text, deadline, "same_text"))
        else:
            # The same kernel under other prose: another request key, the same verdict cache key.
            prose = f"Attempt {len(items)}: here is my kernel again, unchanged.\n\n"
            items.append((a, prose + a.text, deadline, "other_prose"))
    rng.shuffle(items)
    return [Item(i, *t) for i, t in enumerate(items)]


# --- the service ------------------------------------------------------------------------------------------
class Service:
    def __init__(self, ptxbench, args, log_path, gpu):
        argv = [ptxbench, "serve", "--port", "0", "--seed", str(args.seed), "--workers", str(args.workers),
                "--max-deadline", str(max(args.deadline, 3600)), "--linger-seconds", "2", *args.serve_arg]
        if not gpu:
            argv.append("--no-gpu")
        self.log = open(log_path, "w")
        self.proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=self.log, text=True)
        line = self.proc.stdout.readline()
        if "listening on" not in line:
            self.proc.kill()
            self.log.close()
            sys.stderr.write(f"ptxbench serve did not start ({line!r}); its log:\n{read(log_path)}")
            sys.exit(3)
        self.url = line.split("listening on ")[1].strip()
        threading.Thread(target=self.proc.stdout.read, daemon=True).start()

    def stop(self, timeout=120):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        try:
            return self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            return self.proc.wait()
        finally:
            self.log.close()


def descendants(pid):
    """(pid, comm, argv) of every descendant of pid, from /proc."""
    children = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = read(f"/proc/{entry}/stat")
            ppid = int(stat.rsplit(")", 1)[1].split()[1])
            comm = stat[stat.index("(") + 1:stat.rindex(")")]
            children.setdefault(ppid, []).append((int(entry), comm))
        except (OSError, ValueError, IndexError):
            continue
    out, todo = [], [pid]
    while todo:
        for child, comm in children.get(todo.pop(), []):
            try:
                argv = read(f"/proc/{child}/cmdline").split("\0")
            except OSError:
                argv = []
            out.append((child, comm, argv))
            todo.append(child)
    return out


def kill_a_worker(service_pid, patience=20.0):
    """SIGKILLs one ptxbench-worker under the service, preferring one that holds a job (not --prestart
    waiting: the oldest). Returns a description, or None when none appeared within `patience` s."""
    end = time.monotonic() + patience
    while time.monotonic() < end:
        workers = [(pid, argv) for pid, comm, argv in descendants(service_pid) if comm.startswith("ptxbench-worke")]
        if workers:
            pid, argv = min(workers)  # the lowest pid: started first, most likely the one running a job
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                continue
            return f"pid {pid} ({' '.join(a for a in argv[1:3] if a)}; {len(workers)} worker(s) then)"
        time.sleep(0.05)
    return None


# --- the load ---------------------------------------------------------------------------------------------
def run_load(url, args, items, service_pid, gpu):
    todo = queue.Queue()
    for it in items:
        todo.put(it)
    done_count = [0]
    lock = threading.Lock()
    samples, kills = [], []
    stop = threading.Event()
    in_flight = set()

    def client_loop():
        client = Client(url, token=args.token, max_concurrency=2, http_timeout=60, max_retries=30,
                        max_wait=30.0)
        while True:
            try:
                it = todo.get_nowait()
            except queue.Empty:
                return
            req = {"task": it.answer.task, "response": it.text, "deadline_seconds": it.deadline}
            if not args.sanitizer:
                req["settings"] = {"sanitizer": False}
            it.sent = time.monotonic()
            with lock:
                in_flight.add(it.index)
            try:
                rid = client.submit([req])[0]
                it.state = client.wait(rid, it.deadline + args.grace + 30)
            except PtxbenchError as e:
                it.error = str(e)
            it.final_at = time.monotonic()
            with lock:
                in_flight.discard(it.index)
                done_count[0] += 1

    def sampler():
        client = Client(url, token=args.token, max_retries=2, http_timeout=10)
        while not stop.is_set():
            try:
                q = client.queue()
                q["_t"] = time.monotonic()
                samples.append(q)
            except PtxbenchError as e:
                samples.append({"_t": time.monotonic(), "_error": str(e)})
            stop.wait(args.queue_every)

    def killer():
        marks = [float(x) for x in args.kill_at.split(",") if x.strip()]
        for mark in marks:
            while not stop.is_set() and done_count[0] < mark * len(items):
                time.sleep(0.05)
            if stop.is_set():
                return
            what = kill_a_worker(service_pid)
            with lock:
                flying = sorted(in_flight)
            kills.append({"at_answers": done_count[0], "worker": what, "in_flight": flying,
                          "t": time.monotonic()})

    threads = [threading.Thread(target=client_loop, daemon=True) for _ in range(args.clients)]
    side = [threading.Thread(target=sampler, daemon=True)]
    if gpu and service_pid and args.kill_at.strip():
        side.append(threading.Thread(target=killer, daemon=True))
    t0 = time.monotonic()
    for t in side + threads:
        t.start()
    for t in threads:
        t.join()
    wall = time.monotonic() - t0
    stop.set()
    for t in side:
        t.join(timeout=30)
    return wall, samples, kills, t0


# --- ptxbench eval ----------------------------------------------------------------------------------------
def eval_all(ptxbench, answers, args, gpu, workdir):
    def one(a):
        path = os.path.join(workdir, a.name.replace("/", "__") + ".md")
        with open(path, "w", encoding="utf-8") as f:
            f.write(a.text)
        argv = [ptxbench, "eval", "--task", a.task, "--response", path, "--json", "--seed", str(args.seed)]
        if not gpu:
            argv.append("--no-gpu")
        if not args.sanitizer:
            argv.append("--no-sanitizer")
        t = time.monotonic()
        r = subprocess.run(argv, capture_output=True, text=True, timeout=900)
        try:
            return a.name, json.loads(r.stdout), time.monotonic() - t
        except ValueError:
            return a.name, {"_error": f"exit {r.returncode}: {r.stderr[-400:]}"}, time.monotonic() - t

    with ThreadPoolExecutor(max_workers=max(1, args.eval_jobs)) as pool:
        return {name: (v, s) for name, v, s in pool.map(one, answers)}


def facts(v):
    stages = {k: s.get("status") for k, s in (v.get("stages") or {}).items() if k not in ("sanitizer", "profile")}
    gen = v.get("generalizes")
    return {"status": v.get("status"), "correct": v["axes"].get("correct"),
            "targets_executed": v["axes"].get("targets_executed"),
            "generalizes": gen.get("value") if isinstance(gen, dict) else None,
            "speedup_measured": v["axes"].get("speedup") is not None,
            "kernel_hash": v.get("kernel_hash"), "stages": stages}


def compare(it, expected):
    """'' when the service's verdict agrees with eval's; else what differs."""
    got, want = facts(it.state["verdict"]), facts(expected)
    accept = it.answer.accept
    if accept and got["status"] in accept and want["status"] in accept:
        return ""  # a case whose expected.json takes several outcomes (timing-dependent)
    diffs = [f"{k}: {got[k]} vs eval {want[k]}" for k in got if got[k] != want[k]]
    return "; ".join(diffs)


def percentile(xs, p):
    if not xs:
        return float("nan")
    xs = sorted(xs)
    k = (len(xs) - 1) * p
    lo, hi = math.floor(k), math.ceil(k)
    return xs[lo] + (xs[hi] - xs[lo]) * (k - lo)


def killed_by_test(v):
    return any("was killed by signal" in (s.get("summary") or "") for s in (v.get("stages") or {}).values())


# --- main -------------------------------------------------------------------------------------------------
def main():
    args = parse_args()
    ptxbench = os.path.abspath(args.ptxbench)
    gpu = has_gpu() if args.gpu == "auto" else args.gpu == "on"
    out = args.out or tempfile.mkdtemp(prefix="ptxb-serve-load-")
    os.makedirs(out, exist_ok=True)
    rng = random.Random(args.seed)
    pool = corpus(args.pool)
    items = draw(pool, args.answers, rng, args.deadline, args.short_deadline)
    distinct = {it.answer.name: it.answer for it in items}
    kinds = {k: sum(1 for it in items if it.kind == k) for k in ("original", "same_text", "other_prose",
                                                                    "short_deadline")}
    print(f"serve load: {args.clients} clients, {len(items)} answers ({len(distinct)} distinct of a pool of "
          f"{len(pool)}: {kinds}), seed {args.seed}, GPU stages {'on' if gpu else 'off'}, out {out}", flush=True)

    service = None
    if args.url:
        url, service_pid = args.url.rstrip("/"), None
    else:
        service = Service(ptxbench, args, os.path.join(out, "serve.log"), gpu)
        url, service_pid = service.url, service.proc.pid
    checks = []  # (name, ok, detail)

    def check(name, ok, detail=""):
        checks.append((name, bool(ok), detail))

    probe = Client(url, token=args.token, max_retries=5)
    health0 = probe.healthz()
    gpu_note = health0.get("gpu_stages")
    print(f"service {url}: healthz {health0.get('status')}, GPU stages: {gpu_note}", flush=True)
    exit_code = None
    try:
        wall, samples, kills, t0 = run_load(url, args, items, service_pid, gpu)
        print(f"load done in {wall:.1f} s", flush=True)
        # The evaluations whose requests all timed out go on; wait for the service to be idle.
        end = time.monotonic() + 300
        while time.monotonic() < end:
            q = probe.queue()
            if q["queued"] == 0 and q["running"] == 0:
                break
            time.sleep(0.5)
        final_queue = probe.queue()
        health = probe.healthz()
    finally:
        if service:
            exit_code = service.stop()

    t_eval = time.monotonic()
    answers_dir = os.path.join(out, "answers")
    os.makedirs(answers_dir, exist_ok=True)
    evals = eval_all(ptxbench, list(distinct.values()), args, gpu, answers_dir)
    eval_wall = time.monotonic() - t_eval
    print(f"ptxbench eval on {len(evals)} distinct answers in {eval_wall:.1f} s", flush=True)

    # --- checks
    answered = [it for it in items if it.state and it.state.get("final")]
    late = [it for it in answered if it.final_at - it.sent > it.deadline + args.grace]
    hung = [it for it in items if not (it.state and it.state.get("final"))]
    check("answered (a final state)", len(answered) == len(items), f"{len(answered)}/{len(items)}")
    check("within deadline + grace", not late and not hung,
          f"{len(answered) - len(late)}/{len(items)}; hung (client gave up or error): {len(hung)}"
          + (f" e.g. {hung[0].answer.name}: {hung[0].error or hung[0].state}" if hung else "")
          + (f" late e.g. {late[0].answer.name} {late[0].final_at - late[0].sent:.1f} s" if late else ""))
    timeouts = [it for it in answered if it.state["state"] == "timeout"]
    done = [it for it in answered if it.state["state"] == "done"]
    errors = [it for it in answered if it.state["state"] == "error"]
    check("no evaluation errors", not errors, f"{len(errors)}" + (f": {errors[0].state.get('error')}" if errors else ""))
    unexpected_timeouts = [it for it in timeouts if it.kind != "short_deadline"]
    short = [it for it in items if it.kind == "short_deadline"]
    check("service timeouts only where the deadline was short", not unexpected_timeouts,
          f"{len(timeouts)} timeout answers ({len(short)} short-deadline requests)"
          + (f"; unexpected: {[it.answer.name for it in unexpected_timeouts][:4]}" if unexpected_timeouts else ""))
    if timeouts:
        lat = [it.final_at - it.sent - it.deadline for it in timeouts]
        check("timeout answers at their deadline", max(lat) <= args.grace,
              f"answered {min(lat):+.2f}..{max(lat):+.2f} s from the deadline")

    agree, differ, killed, speed = 0, [], [], []
    for it in done:
        v = it.state["verdict"]
        if killed_by_test(v):
            killed.append(it)
            continue
        expected, _ = evals[it.answer.name]
        if "_error" in expected:
            differ.append((it, "eval failed: " + expected["_error"]))
            continue
        d = compare(it, expected)
        if d:
            differ.append((it, d))
        else:
            agree += 1
            a, b = v["axes"].get("speedup"), expected["axes"].get("speedup")
            if a and b:
                speed.append(abs(math.log(a / b)))
    check("same verdict as ptxbench eval", not differ,
          f"{agree}/{len(done) - len(killed)} done verdicts agree"
          + "".join(f"\n      differs: {it.answer.name} ({it.kind}): {d}" for it, d in differ[:8]))
    if speed:
        print(f"speedup, service vs eval: median ratio spread {math.exp(statistics.median(speed)):.3f}x, "
              f"max {math.exp(max(speed)):.3f}x over {len(speed)} timed verdicts", flush=True)

    good = [s for s in samples if "_error" not in s]
    check("GET /v1/queue answered during the run", good and len(good) == len(samples),
          f"{len(good)}/{len(samples)} samples")
    check("no internal evaluation errors (queue)", final_queue.get("errors") == 0, f"errors {final_queue.get('errors')}")
    check("healthz ok afterwards", health.get("status") == "ok", json.dumps(health)[:120])
    check("afterwards: nothing queued, running or undelivered",
          final_queue["queued"] == 0 and final_queue["running"] == 0 and final_queue.get("undelivered", 0) == 0,
          f"queued {final_queue['queued']}, running {final_queue['running']}, "
          f"undelivered {final_queue.get('undelivered')}")
    if service:
        check("SIGTERM: drained, exit 0", exit_code == 0, f"exit {exit_code}")
    if gpu and service_pid and args.kill_at.strip():
        check("workers killed mid-run", all(k["worker"] for k in kills) and kills,
              "; ".join(f"after {k['at_answers']} answers: {k['worker'] or 'no worker seen'}" for k in kills))

    # --- figures
    lat_all = [it.final_at - it.sent for it in answered]
    fresh = final_queue["finished"] - final_queue["cache_hits"]
    gpus = args.gpus or (1 if gpu else 0)
    hours = wall / 3600
    per_gpu_hour = (lambda n: f"{n / (hours * gpus):,.0f}") if gpus else (lambda n: f"{n / hours:,.0f}/h (no GPU)")
    workers = {}
    for it in done:
        w = (it.state["verdict"].get("profile") or {}).get("worker")
        if w and not it.state["verdict"].get("reused_from"):
            workers[w] = workers.get(w, 0) + 1

    def qmax(key):
        vals = [s.get(key) or 0 for s in good]
        return max(vals) if vals else 0

    rows = [
        ("answers", f"{len(items)} ({len(distinct)} distinct; {kinds['same_text']} same text, "
                    f"{kinds['other_prose']} same kernel other prose, {kinds['short_deadline']} short deadline)"),
        ("clients", str(args.clients)),
        ("GPU stages", str(gpu_note)),
        ("wall", f"{wall:.1f} s (eval of the distinct answers: {eval_wall:.1f} s)"),
        ("latency p50 / p95 / max", f"{percentile(lat_all, .5):.2f} / {percentile(lat_all, .95):.2f} / "
                                    f"{max(lat_all) if lat_all else float('nan'):.2f} s"),
        ("states", f"done {len(done)}, timeout {len(timeouts)}, error {len(errors)}, not final {len(hung)}"),
        ("evaluations", f"{final_queue['finished']} finished ({final_queue['cache_hits']} verdict-cache hits), "
                        f"{final_queue['deduplicated']} requests shared one, {final_queue['expired']} expired queued"),
        ("verdicts per GPU-hour", f"answers {per_gpu_hour(len(answered))}, evaluations {per_gpu_hour(fresh)}"),
        ("queue during the run", f"max queued {qmax('queued')}, max running {qmax('running')}, max oldest wait "
                                 f"{max([s.get('oldest_wait_seconds') or 0 for s in good] or [0]):.1f} s, "
                                 f"{len(good)} samples; service's verdicts_per_hour at the end "
                                 f"{final_queue.get('verdicts_per_hour', 0):,.0f}"),
        ("GPU workers of fresh verdicts", ", ".join(f"{k} {v}" for k, v in sorted(workers.items())) or "none"),
    ]
    if kills:
        retried = [it for it in done if (it.state["verdict"].get("profile") or {}).get("service_retry")]
        rows.append(("workers killed", f"{len(kills)}; evaluated again by the service after the kill: "
                                       f"{len(retried)} ({', '.join(it.answer.name for it in retried[:4])}); "
                                       f"answered 'worker killed' (killed twice): {len(killed)}"))
    with open(os.path.join(out, "requests.jsonl"), "w") as f:
        for it in items:
            f.write(json.dumps({"answer": it.answer.name, "kind": it.kind, "deadline": it.deadline,
                                "latency": None if it.final_at is None else it.final_at - it.sent,
                                "state": (it.state or {}).get("state"), "error": it.error,
                                "verdict": (it.state or {}).get("verdict")}) + "\n")
    with open(os.path.join(out, "queue_samples.jsonl"), "w") as f:
        for s in samples:
            f.write(json.dumps(dict(s, _t=s["_t"] - t0)) + "\n")
    with open(os.path.join(out, "eval.json"), "w") as f:
        json.dump({k: v for k, (v, _) in evals.items()}, f)

    print("\n== figures")
    for k, v in rows:
        print(f"  {k:<30} {v}")
    print("\n== checks")
    for name, ok, detail in checks:
        print(f"  {'PASS' if ok else 'FAIL'}  {name:<52} {detail}")
    failed = [c for c in checks if not c[1]]
    print(f"\nserve load: {'PASSED' if not failed else f'FAILED ({len(failed)} checks)'}; details in {out}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
