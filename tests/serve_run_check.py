#!/usr/bin/env python3
"""`ptxbench run` with a remote evaluator (`evaluator.url` -> `ptxbench serve`), on the CPU (GPU stages
skipped): the run's verdicts equal a local run's of the same config (status, stage statuses, kernel hash per
turn), run.json names the service (never the token); a bearer token from evaluator.token_env, a wrong one
refused before any turn; a service that is down at the start or killed mid-run is a clear error (no hang),
and `ptxbench resume` finishes the run once the service is back.

Usage: serve_run_check.py PTXBENCH_BINARY"""

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
PTXBENCH = sys.argv[1]
TOKEN = "serve-run-check-token"
TASKS = ["gemm_n4096_k4096", "gemm_n7168_k5120"]
FAILURES = []


def check(cond, what):
    print(("ok   " if cond else "FAIL ") + what, flush=True)
    if not cond:
        FAILURES.append(what)


ENV = {k: v for k, v in os.environ.items() if "proxy" not in k.lower()}


class Proc:
    """A child that prints its address on the first line: the fake model server or `ptxbench serve`."""

    def __init__(self, argv):
        self.proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=ENV)
        self.first = self.proc.stdout.readline()
        self.err = []
        threading.Thread(target=lambda: self.err.extend(self.proc.stderr), daemon=True).start()

    def stop(self, sig=signal.SIGTERM):
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
        self.proc.wait(timeout=60)


def fake_model(tmp, name):
    p = Proc([sys.executable, os.path.join(HERE, "fake_openai_server.py"), "--log", os.path.join(tmp, name + ".jsonl")])
    return p, "http://127.0.0.1:%d/v1" % int(p.first)


def serve(port=0, *extra):
    p = Proc([PTXBENCH, "serve", "--port", str(port), "--no-gpu", "--workers", "2", "--token", TOKEN,
              "--drain-seconds", "5", "--linger-seconds", "1", *extra])
    if "listening on" not in p.first:
        raise SystemExit("serve did not start: %r %s" % (p.first, "".join(p.err)))
    return p, p.first.split("listening on ")[1].strip()


def write_config(tmp, name, model_url, turns, service_url=None, token_env="PTXB_CHECK_TOKEN", retry=3):
    evaluator = {"run_gpu": False, "run_seed": 12345}
    if service_url:
        evaluator.update({"url": service_url, "token_env": token_env, "deadline_seconds": 120,
                          "retry_seconds": retry, "in_flight": 2})
    config = {"endpoints": [{"name": "demo", "kind": "openai", "base_url": model_url, "model": "demo-10"}],
              "tasks": TASKS, "samples": 1, "turns": turns, "evaluator": evaluator,
              "concurrency": {"compile_workers": 1}}
    path = os.path.join(tmp, name + ".json")
    with open(path, "w") as f:
        json.dump(config, f)
    return path


def ptxbench(*args, env=None, timeout=300):
    p = subprocess.run([PTXBENCH, *args], capture_output=True, text=True, env=dict(ENV, **(env or {})),
                       timeout=timeout)
    return p.returncode, p.stdout, p.stderr


def records(run_dir):
    out = {}
    path = os.path.join(run_dir, "trajectories.jsonl")
    if not os.path.exists(path):
        return out
    for line in open(path):
        r = json.loads(line)
        out[(r["trajectory_id"], r["turn"])] = r
    return out


def verdict_facts(record):
    v = record.get("verdict") or {}
    return (v.get("status"), v.get("kernel_hash"),
            {name: s.get("status") for name, s in (v.get("stages") or {}).items()})


def slurm_node_part(tmp):
    """`ptxbench slurm serve`'s script, its node part run here without Slurm: the service starts, its endpoint
    line appears once it listens, `slurm balancer` routes polls of its ids to it, and it answers there."""
    port = free_port()
    sdir = os.path.join(tmp, "slurm-serve")
    rc, script, err = ptxbench("slurm", "serve", "--dir", sdir, "--nodes", "1", "--gpus-per-node", "0", "--port",
                               str(port), "--token-env", "PTXB_CHECK_TOKEN", "--dry-run")
    check(rc == 0, "slurm serve --dry-run prints the script: " + err[-300:])
    os.makedirs(os.path.join(sdir, "logs"))
    with open(os.path.join(sdir, "serve.sbatch"), "w") as f:
        f.write(script)
    env = dict(ENV, PTXB_CHECK_TOKEN=TOKEN, SLURM_NODEID="0", SLURM_JOB_ID="77", SLURMD_NODENAME="127.0.0.1")
    node = subprocess.Popen(["bash", os.path.join(sdir, "serve.sbatch"), "node"], env=env, start_new_session=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        endpoints = os.path.join(sdir, "endpoints.txt")
        deadline = time.time() + 60
        while time.time() < deadline and not os.path.exists(endpoints):
            time.sleep(0.1)
        line = open(endpoints).read() if os.path.exists(endpoints) else ""
        check(line == "127.0.0.1:%d n0g0 77\n" % port, "the node wrote its endpoint line when ready: %r" % line)
        rc, cfg, err = ptxbench("slurm", "balancer", sdir)
        check(rc == 0 and ("use_backend poll_n0g0 if { path_beg /v1/verdicts/vn0g0. }" in cfg) and
              ("server n0g0 127.0.0.1:%d check" % port) in cfg, "slurm balancer routes the node's polls: " + err)
        # The service answers with the token from the job's environment, and its ids carry the prefix.
        import urllib.request
        req = urllib.request.Request("http://127.0.0.1:%d/v1/verdicts" % port, method="POST",
                                     data=json.dumps({"task": TASKS[0], "response": "no kernel"}).encode(),
                                     headers={"Authorization": "Bearer " + TOKEN, "Content-Type": "application/json"})
        with urllib.request.urlopen(req, timeout=30) as r:
            rid = json.loads(r.read())["id"]
        check(rid.startswith("vn0g0."), "request ids carry the service's prefix (%s)" % rid)
    finally:
        os.killpg(node.pid, signal.SIGTERM)
        node.wait(timeout=60)


def free_port():
    import socket
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def behind_haproxy(tmp, local):
    """Two services behind HAProxy with the configuration `slurm balancer` writes; a run through it gets
    the local verdicts. Skipped where haproxy is not installed."""
    haproxy = shutil.which("haproxy")
    if not haproxy:
        print("skip HAProxy: not installed")
        return
    services = [serve(0, "--id-prefix", "n%dg0" % i) for i in range(2)]
    with open(os.path.join(tmp, "endpoints.txt"), "w") as f:
        for i, (_, u) in enumerate(services):
            f.write("%s n%dg0 1\n" % (u.split("//")[1], i))
    port = free_port()
    rc, out, err = ptxbench("slurm", "balancer", tmp, "--bind", "127.0.0.1:%d" % port, "--out",
                            os.path.join(tmp, "haproxy.cfg"))
    check(rc == 0, "slurm balancer wrote the configuration: " + err)
    lb = subprocess.Popen([haproxy, "-db", "-f", os.path.join(tmp, "haproxy.cfg")], stdout=subprocess.DEVNULL,
                          stderr=subprocess.PIPE, text=True)
    try:
        import urllib.request
        deadline, up = time.time() + 30, False
        while time.time() < deadline and not up:
            try:
                urllib.request.urlopen("http://127.0.0.1:%d/healthz" % port, timeout=2).read()
                up = True
            except Exception:
                time.sleep(0.2)
        check(up, "HAProxy answers /healthz")
        time.sleep(6)  # the first health checks mark both services up
        model, url = fake_model(tmp, "haproxy")
        run_dir = os.path.join(tmp, "via-haproxy")
        rc, out, err = ptxbench("run", "--config", write_config(tmp, "haproxy", url, 3, "http://127.0.0.1:%d" % port),
                                "--out", run_dir, "--progress", "lines", env={"PTXB_CHECK_TOKEN": TOKEN})
        model.stop()
        check(rc == 0, "a run through HAProxy exits 0 (rc %d): %s" % (rc, err[-600:]))
        via = records(run_dir)
        check(sorted(via) == sorted(local) and all(verdict_facts(via[k]) == verdict_facts(local[k]) for k in via),
              "its verdicts equal the local run's")
    finally:
        lb.terminate()
        lb.wait(timeout=30)
        for p, _ in services:
            p.stop()


def main():
    tmp = tempfile.mkdtemp(prefix="ptxbench-serve-run-")
    token_env = {"PTXB_CHECK_TOKEN": TOKEN}
    service, url = serve()
    procs = [service]
    try:
        # The same config evaluated here and by the service, each against a fresh fake model (its answers
        # are drawn per model, task and turn, so both runs see the same answers).
        model, model_url = fake_model(tmp, "local")
        procs.append(model)
        rc, out, err = ptxbench("run", "--config", write_config(tmp, "local", model_url, 3), "--out",
                                os.path.join(tmp, "local"), "--progress", "lines")
        check(rc == 0, "local run exits 0 (rc %d): %s" % (rc, err[-800:]))
        model.stop()
        model, model_url = fake_model(tmp, "remote")
        procs.append(model)
        rc, out, err = ptxbench("run", "--config", write_config(tmp, "remote", model_url, 3, url), "--out",
                                os.path.join(tmp, "remote"), "--progress", "lines", env=token_env)
        check(rc == 0, "run on the service exits 0 (rc %d): %s" % (rc, err[-800:]))
        local, remote = records(os.path.join(tmp, "local")), records(os.path.join(tmp, "remote"))
        check(len(local) == 6 and sorted(local) == sorted(remote),
              "both runs recorded the same 6 turns (%d, %d)" % (len(local), len(remote)))
        statuses = set()
        for key in sorted(local):
            if key not in remote:
                continue
            statuses.add(local[key]["verdict"]["status"] if local[key].get("verdict") else None)
            check(verdict_facts(local[key]) == verdict_facts(remote[key]),
                  "%s turn %d: the service's verdict equals the local one %s" % (key[0], key[1], verdict_facts(remote[key])[:2]))
            check(bool(remote[key].get("feedback")) == bool(local[key].get("feedback")),
                  "%s turn %d: feedback written as locally" % key)
        check(len(statuses) >= 2, "the answers gave more than one outcome: %s" % sorted(map(str, statuses)))
        run_json = json.load(open(os.path.join(tmp, "remote", "run.json")))
        text = open(os.path.join(tmp, "remote", "run.json")).read()
        check(run_json.get("evaluator_service", {}).get("url") == url, "run.json names the service's URL")
        check(run_json["evaluator_service"].get("token_env") == "PTXB_CHECK_TOKEN" and
              run_json["evaluator_service"].get("authenticated") is True, "run.json: token_env named, authenticated")
        check(TOKEN not in text, "run.json never holds the token")
        check(run_json["config"]["evaluator"].get("url") == url, "run.json's config keeps evaluator.url")
        local_json = json.load(open(os.path.join(tmp, "local", "run.json")))
        check("evaluator_service" not in local_json and "url" not in local_json["config"]["evaluator"],
              "a local run's run.json has no service")

        # A wrong token is refused before any turn is sent.
        t0 = time.time()
        rc, out, err = ptxbench("run", "--config", write_config(tmp, "badtoken", model_url, 1, url), "--out",
                                os.path.join(tmp, "badtoken"), env={"PTXB_CHECK_TOKEN": "wrong"})
        check(rc != 0 and "refused the token" in err, "a wrong token is a clear error (rc %d): %s" % (rc, err[-300:]))
        rc, out, err = ptxbench("run", "--config", write_config(tmp, "notoken", model_url, 1, url), "--out",
                                os.path.join(tmp, "notoken"))
        check(rc != 0 and "PTXB_CHECK_TOKEN is not set" in err, "an unset token variable is named: " + err[-300:])
        # Something that is not a ptxbench serve.
        rc, out, err = ptxbench("run", "--config", write_config(tmp, "garbage", model_url, 1, model_url.rsplit("/", 1)[0]),
                                "--out", os.path.join(tmp, "garbage"), env=token_env)
        check(rc != 0 and "not a ptxbench serve" in err, "a URL that is no service is a clear error: " + err[-300:])

        # Killed mid-run: the run stops with a clear error within retry_seconds, then resumes.
        port = int(url.rsplit(":", 1)[1])
        run_dir = os.path.join(tmp, "killed")
        model, model_url = fake_model(tmp, "killed")
        procs.append(model)
        run = subprocess.Popen([PTXBENCH, "run", "--config", write_config(tmp, "killed", model_url, 6, url),
                                "--out", run_dir, "--progress", "lines"], stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True, env=dict(ENV, **token_env))
        deadline = time.time() + 120
        while time.time() < deadline and not records(run_dir) and run.poll() is None:
            time.sleep(0.02)
        service.stop(signal.SIGKILL)
        killed_at = time.time()
        out, err = run.communicate(timeout=120)
        check(run.returncode != 0, "the run with its service killed does not succeed (rc %d)" % run.returncode)
        check("evaluator service" in err and "ptxbench resume" in err,
              "it says the service failed and how to go on: " + err[-600:])
        check(time.time() - killed_at < 60, "it stopped within a minute (%.1f s)" % (time.time() - killed_at))
        before = len(records(run_dir))
        check(before < 12, "the run stopped before its end (%d of 12 turns recorded)" % before)
        service, url2 = serve(port)
        procs.append(service)
        rc, out, err = ptxbench("resume", run_dir, "--progress", "lines", env=token_env)
        check(rc == 0, "resume with the service back exits 0 (rc %d): %s" % (rc, err[-800:]))
        done = records(run_dir)
        lines = sum(1 for _ in open(os.path.join(run_dir, "trajectories.jsonl")))
        check(len(done) == 12 and lines == 12, "the resumed run holds all 12 turns once (%d keys, %d lines)" % (len(done), lines))
        check(all(r.get("verdict") for r in done.values()), "every turn has its verdict")
        slurm_node_part(tmp)
        os.makedirs(os.path.join(tmp, "lb"))
        behind_haproxy(os.path.join(tmp, "lb"), local)
    finally:
        for p in procs:
            try:
                p.stop()
            except Exception:
                p.proc.kill()
        shutil.rmtree(tmp, ignore_errors=True)
    print("%d failure(s)" % len(FAILURES))
    sys.exit(1 if FAILURES else 0)


if __name__ == "__main__":
    main()
