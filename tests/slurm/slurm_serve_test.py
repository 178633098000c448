#!/usr/bin/env python3
"""`ptxbench slurm serve` + `ptxbench slurm balancer` on a real single-node Slurm cluster (CTest label `slurm`).

Usage: slurm_serve_test.py PTXBENCH SOURCE_DIR [--keep]

The cluster is slurm_cluster_test.py's (munge, slurmctld, slurmd from Debian's packages on 127.0.0.1, no
cgroups), started and stopped here. Then:
  1. `ptxbench slurm serve --nodes 1 --gpus-per-node 0` submits the service job with sbatch (a bearer token
     passed by variable name, `--serve-arg=--seed=S`); the job's step starts `ptxbench serve`, which appends its
     endpoint line once it listens;
  2. `ptxbench slurm balancer` writes HAProxy's configuration from endpoints.txt; HAProxy starts on it;
  3. through the balancer: a verdict is requested (POST) and fetched (a blocking GET routed by the request id's
     prefix) and equals `ptxbench eval --seed S` on the same answer (status, stage statuses, kernel hash); the
     service's log, written by the Slurm step, shows the request; a wrong token is refused;
  4. tests/serve_load.py --url <balancer> (8 clients, 24 answers, GPU stages off): every request answered
     within its deadline, verdicts as `ptxbench eval`'s, the service healthy after;
  5. `scancel` the job: the service drains (its log says so), the job leaves the queue and HAProxy's health
     check then reports the server down (503 on a submission).
Exit 77 (skipped) without the Slurm/munge programs, haproxy, or root.
"""
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import slurm_cluster_test as sc  # noqa: E402  (the cluster: Cluster, skip, log, free_port)

SEED = 4242
TOKEN = "slurm-serve-test-token"
TASK = "gemm_n4096_k4096"


def http(url, method="GET", body=None, token=TOKEN, timeout=60):
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(url, data=data, method=method)
    if data is not None:
        req.add_header("Content-Type", "application/json")
    if token:
        req.add_header("Authorization", f"Bearer {token}")
    try:
        with urllib.request.urlopen(req, timeout=timeout) as r:
            return r.status, json.loads(r.read() or b"null")
    except urllib.error.HTTPError as e:
        raw = e.read()
        try:
            return e.code, json.loads(raw or b"null")
        except ValueError:
            return e.code, raw.decode(errors="replace")
    except (urllib.error.URLError, ConnectionError) as e:
        return 0, str(e)


def wait_until(what, check, timeout):
    end = min(time.monotonic() + timeout, sc.DEADLINE)
    while time.monotonic() < end:
        got = check()
        if got:
            return got
        time.sleep(0.3)
    raise RuntimeError(f"timed out waiting for {what}")


def facts(v):
    return (v["status"], v["kernel_hash"], {k: s["status"] for k, s in v["stages"].items()})


def main():
    if len(sys.argv) < 3:
        print(__doc__)
        return 2
    ptxbench, source = os.path.abspath(sys.argv[1]), os.path.abspath(sys.argv[2])
    os.environ["PATH"] = os.environ.get("PATH", "/usr/bin:/bin") + ":/usr/sbin:/sbin"
    missing = [p for p in sc.PROGRAMS if shutil.which(p) is None]
    if missing:
        sc.skip("Slurm/munge programs not installed: " + ", ".join(missing) +
                " (scripts/install_deps.sh installs munge slurmctld slurmd slurm-client)")
    haproxy = shutil.which("haproxy")
    if not haproxy:
        sc.skip("haproxy not installed (scripts/install_deps.sh installs it)")
    if os.geteuid() != 0:
        sc.skip("starting slurmd needs root (it runs jobs as their users)")
    root = tempfile.mkdtemp(prefix="ptxb-slurm-serve-", dir="/tmp")
    os.chmod(root, 0o755)
    cluster = sc.Cluster(root)
    lb = None
    started = time.monotonic()
    ok = False
    sdir = os.path.join(root, "serve")
    try:
        cluster.start()
        sc.log(f"cluster up in {time.monotonic() - started:.1f} s ({root})")
        cluster.env["PTXB_SLURM_TOKEN"] = TOKEN

        def px(*args, check=True, timeout=240):
            p = cluster.run([ptxbench, *args], check=False, timeout=timeout)
            if check and p.returncode != 0:
                raise RuntimeError(f"ptxbench {' '.join(args)} exited {p.returncode}:\n{p.stdout}\n{p.stderr}")
            return p

        # --- 1. the service job
        port = sc.free_port()
        sub = px("slurm", "serve", "--dir", sdir, "--nodes", "1", "--gpus-per-node", "0", "--cpus-per-node", "1",
                 "--port", str(port), "--token-env", "PTXB_SLURM_TOKEN", f"--serve-arg=--seed={SEED}",
                 "--serve-arg=--workers=2")
        sc.log(sub.stdout.strip())
        endpoints = os.path.join(sdir, "endpoints.txt")
        line = wait_until("the service's endpoint line",
                          lambda: os.path.exists(endpoints) and open(endpoints).read().strip(), 90)
        job = line.split()[2]
        sc.log(f"endpoints.txt: {line!r}")
        assert line.split()[1] == "n0g0" and line.split()[0].endswith(f":{port}"), line
        queue = cluster.run(["squeue", "-h", "-j", job, "-o", "%T %j"]).stdout.strip()
        assert queue == "RUNNING ptxbench-serve", f"job {job}: {queue!r}"

        # --- 2. the balancer
        lb_port = sc.free_port()
        cfg = os.path.join(root, "haproxy.cfg")
        px("slurm", "balancer", sdir, "--bind", f"127.0.0.1:{lb_port}", "--out", cfg)
        lb = subprocess.Popen([haproxy, "-db", "-f", cfg], stdout=open(os.path.join(root, "log", "haproxy.out"), "w"),
                              stderr=subprocess.STDOUT, preexec_fn=sc.die_with_parent)
        url = f"http://127.0.0.1:{lb_port}"
        wait_until("HAProxy to see the service healthy", lambda: http(url + "/v1/queue")[0] == 200, 30)

        # --- 3. one verdict through the balancer
        response = os.path.join(source, "tasks", "solutions", TASK, "simple", "response.md")
        with open(response) as f:
            text = f.read()
        status, body = http(url + "/v1/verdicts", "POST", {"task": TASK, "response": text,
                                                            "deadline_seconds": 120})
        assert status == 202, (status, body)
        rid = body["id"]
        assert rid.startswith("vn0g0."), rid
        state = None
        for _ in range(20):
            status, state = http(f"{url}/v1/verdicts/{rid}?wait=10")
            assert status == 200, (status, state)
            if state["final"]:
                break
        assert state["state"] == "done", state
        ev = subprocess.run([ptxbench, "eval", "--task", TASK, "--response", response, "--json", "--no-gpu",
                             "--seed", str(SEED)], capture_output=True, text=True, timeout=300)
        expected = json.loads(ev.stdout)
        assert facts(state["verdict"]) == facts(expected), (facts(state["verdict"]), facts(expected))
        assert state["verdict"]["settings"]["run_seed"] == SEED, state["verdict"]["settings"]
        sc.log(f"through the balancer: {rid} -> {state['verdict']['status']} (stages "
               f"{facts(state['verdict'])[2]}), the same as ptxbench eval --seed {SEED}")
        logs = [f for f in os.listdir(os.path.join(sdir, "logs")) if f.startswith(f"serve.{job}.") and f.endswith(".log")]
        assert logs, os.listdir(os.path.join(sdir, "logs"))
        status, body = http(url + "/v1/queue", token="wrong")
        assert status == 401, (status, body)

        # --- 4. a small load through the balancer
        load = subprocess.run([sys.executable, os.path.join(source, "tests", "serve_load.py"), ptxbench, "--url", url,
                               "--seed", str(SEED), "--gpu", "off", "--clients", "8", "--answers", "24",
                               "--eval-jobs", "2", "--deadline", "120", "--out", os.path.join(root, "load")],
                              capture_output=True, text=True, timeout=400,
                              env=dict(os.environ, PTXBENCH_SERVE_TOKEN=TOKEN))
        print(load.stdout[-3000:], flush=True)
        assert load.returncode == 0, f"serve_load.py through the balancer failed:\n{load.stderr[-2000:]}"

        # --- 5. scancel: the service drains, the job ends, HAProxy takes the server out
        cluster.run(["scancel", job])
        wait_until("the job to leave the queue", lambda: not cluster.run(["squeue", "-h", "-j", job],
                                                                         check=False).stdout.strip(), 120)
        log_text = open(os.path.join(sdir, "logs", sorted(logs)[0])).read()
        sc.log("service log after scancel: " + " | ".join(log_text.strip().split("\n")[-2:]))
        assert "drain" in log_text, log_text[-1000:]
        wait_until("HAProxy to take the server out",
                   lambda: http(url + "/v1/verdicts", "POST", {"task": TASK, "response": "x"})[0] == 503, 30)
        sc.log("after scancel: the balancer answers 503 (no healthy service)")
        ok = True
    finally:
        if lb and lb.poll() is None:
            lb.send_signal(signal.SIGTERM)
            lb.wait(timeout=10)
        cluster.stop()
        if not ok:
            for name in ("slurmctld", "slurmd"):
                print(f"--- {name} (last lines)\n{cluster.tail(name)}")
            logs_dir = os.path.join(sdir, "logs")
            if os.path.isdir(logs_dir):
                for f in sorted(os.listdir(logs_dir)):
                    with open(os.path.join(logs_dir, f), errors="replace") as fh:
                        print(f"--- logs/{f}\n" + "".join(fh.readlines()[-15:]))
        if "--keep" in sys.argv or not ok:
            sc.log(f"kept {root}")
        else:
            shutil.rmtree(root, ignore_errors=True)
    sc.log(f"PASSED in {time.monotonic() - started:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
