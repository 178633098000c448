#!/usr/bin/env python3
"""End-to-end test of `ptxbench slurm` on a real single-node Slurm cluster (CTest label `slurm`).

Usage: slurm_cluster_test.py PTXBENCH SOURCE_DIR [--keep]

Starts a private cluster from Debian's packages (munge, slurmctld, slurmd) in a temporary directory:
its own munge key and socket, a slurm.conf on 127.0.0.1 with free ports, no cgroups
(proctrack/linuxproc, task/none), select/cons_tres, no accounting storage (so sacct is unavailable,
as on many small clusters). The daemons run in the foreground as children of this script and are
stopped at the end, also when a step fails (and they get SIGTERM if this script dies: PR_SET_PDEATHSIG).

Then, with the scripted model on built-in tasks and GPU stages skipped:
  1. the run in one process (the baseline) and its report;
  2. `slurm submit --shards 3`, wait, report over the top-level directory: counts equal the baseline's;
     `merge` gives the same report; shards of two different runs are refused;
  3. a second submission; one shard is cancelled with `scancel` mid-run (it has records, not all);
     `slurm status` shows it CANCELLED and to resubmit; `slurm resubmit` resumes it: its earlier
     records are kept as they were, no (trajectory, turn) is missing or twice, the report equals the
     baseline's.
Exit 77 (skipped) with the reason when the packages are missing or the script is not root.
"""
import csv
import ctypes
import io
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time

SKIP = 77
DEADLINE = time.monotonic() + 480  # below the CTest timeout, so cleanup always runs here
PROGRAMS = ["munged", "mungekey", "slurmctld", "slurmd", "sbatch", "squeue", "scancel", "scontrol", "sinfo"]


def log(msg):
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", flush=True)


def skip(reason):
    print(f"SKIPPED: {reason}", flush=True)
    sys.exit(SKIP)


def die_with_parent():
    # The daemons get SIGTERM when this script dies, whatever kills it.
    libc = ctypes.CDLL("libc.so.6", use_errno=True)
    libc.prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
    os.setsid()


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Cluster:
    def __init__(self, root):
        self.root = root
        self.procs = []
        self.env = dict(os.environ, SLURM_CONF=os.path.join(root, "slurm.conf"))

    def spawn(self, name, argv):
        out = open(os.path.join(self.root, "log", f"{name}.out"), "w")
        p = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, env=self.env,
                             preexec_fn=die_with_parent)
        self.procs.append((name, p))
        return p

    def wait_for(self, what, check, timeout):
        end = min(time.monotonic() + timeout, DEADLINE)
        while time.monotonic() < end:
            for name, p in self.procs:
                if p.poll() is not None:
                    raise RuntimeError(f"{name} exited ({p.returncode}) while waiting for {what}; see "
                                       f"{self.root}/log/{name}.out:\n{self.tail(name)}")
            if check():
                return
            time.sleep(0.2)
        raise RuntimeError(f"timed out waiting for {what}")

    def tail(self, name):
        try:
            with open(os.path.join(self.root, "log", f"{name}.out")) as f:
                return "".join(f.readlines()[-15:])
        except OSError:
            return ""

    def start(self):
        r = self.root
        os.makedirs(os.path.join(r, "log"))
        munge_dir = os.path.join(r, "munge")
        os.makedirs(munge_dir, mode=0o700)
        sock = os.path.join(munge_dir, "munge.sock")
        subprocess.run(["mungekey", "--create", "--keyfile", os.path.join(munge_dir, "munge.key")], check=True)
        self.spawn("munged", ["munged", "--foreground", "--force", f"--socket={sock}",
                              f"--key-file={munge_dir}/munge.key", f"--pid-file={munge_dir}/munged.pid",
                              f"--seed-file={munge_dir}/munged.seed", f"--log-file={r}/log/munged.log"])
        self.wait_for("the munge socket", lambda: os.path.exists(sock), 20)

        node = subprocess.run(["slurmd", "-C"], capture_output=True, text=True, check=True).stdout.split("\n")[0]
        hw = dict(kv.split("=", 1) for kv in node.split() if "=" in kv)
        host = socket.gethostname().split(".")[0]
        self.cpus = int(hw.get("CPUs", "1"))
        conf = f"""# written by slurm_cluster_test.py
ClusterName=ptxbtest
SlurmctldHost={host}(127.0.0.1)
SlurmctldPort={free_port()}
SlurmdPort={free_port()}
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket={sock}
StateSaveLocation={r}/state
SlurmdSpoolDir={r}/spool
SlurmctldPidFile={r}/slurmctld.pid
SlurmdPidFile={r}/slurmd.pid
SlurmctldLogFile={r}/log/slurmctld.log
SlurmdLogFile={r}/log/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
SchedulerType=sched/backfill
AccountingStorageType=accounting_storage/none
JobAcctGatherType=jobacct_gather/none
JobCompType=jobcomp/none
MpiDefault=none
ReturnToService=2
InactiveLimit=0
KillWait=10
MinJobAge=600
NodeName={host} NodeAddr=127.0.0.1 CPUs={hw.get('CPUs', 1)} Boards={hw.get('Boards', 1)} SocketsPerBoard={hw.get('SocketsPerBoard', 1)} CoresPerSocket={hw.get('CoresPerSocket', 1)} ThreadsPerCore={hw.get('ThreadsPerCore', 1)} RealMemory=1000 State=UNKNOWN
PartitionName=ptxb Nodes={host} Default=YES MaxTime=INFINITE State=UP
"""
        os.makedirs(os.path.join(r, "state"))
        os.makedirs(os.path.join(r, "spool"))
        with open(self.env["SLURM_CONF"], "w") as f:
            f.write(conf)
        self.spawn("slurmctld", ["slurmctld", "-D", "-f", self.env["SLURM_CONF"]])
        self.wait_for("slurmctld", lambda: "UP" in self.run(["scontrol", "ping"], check=False).stdout, 30)
        self.spawn("slurmd", ["slurmd", "-D", "-f", self.env["SLURM_CONF"]])
        self.wait_for("the node to be idle",
                      lambda: self.run(["sinfo", "-h", "-N", "-o", "%T"], check=False).stdout.strip() == "idle", 60)

    def run(self, argv, check=True, timeout=120):
        p = subprocess.run(argv, capture_output=True, text=True, env=self.env, timeout=timeout)
        if check and p.returncode != 0:
            raise RuntimeError(f"{' '.join(argv)} exited {p.returncode}:\n{p.stdout}\n{p.stderr}")
        return p

    def stop(self):
        # Jobs first (their processes are not the daemons' children), then the daemons.
        try:
            self.run(["scancel", "--partition=ptxb"], check=False, timeout=20)
            end = time.monotonic() + 20
            while time.monotonic() < end and self.run(["squeue", "-h"], check=False, timeout=10).stdout.strip():
                time.sleep(0.5)
        except Exception as e:  # the daemons may be gone already
            log(f"cleanup: {e}")
        for name, p in reversed(self.procs):
            if p.poll() is None:
                p.terminate()
        for name, p in reversed(self.procs):
            try:
                p.wait(timeout=15)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
        log("daemons stopped: " + ", ".join(f"{n} ({p.returncode})" for n, p in self.procs))


def read_csv(path, drop_columns=()):
    with open(path) as f:
        rows = list(csv.reader(f))
    if not rows:
        return rows
    keep = [i for i, h in enumerate(rows[0]) if not any(d in h for d in drop_columns)]
    return [[row[i] for i in keep if i < len(row)] for row in rows]


def report_counts(report_dir):
    """The report's counts: every CSV, minus columns that measure time."""
    out = {}
    for name in sorted(os.listdir(report_dir)):
        if name.endswith(".csv"):
            out[name] = read_csv(os.path.join(report_dir, name), drop_columns=("second", "wall", "latency"))
    return out


def records(shard_dir):
    path = os.path.join(shard_dir, "trajectories.jsonl")
    if not os.path.exists(path):
        return []
    with open(path) as f:
        return [line for line in f.read().split("\n") if line]


class Test:
    def __init__(self, ptxbench, source, root, cluster):
        self.ptxbench, self.source, self.root, self.cluster = ptxbench, source, root, cluster

    def px(self, *args, check=True, timeout=240):
        p = self.cluster.run([self.ptxbench, *args], check=False, timeout=timeout)
        if check and p.returncode != 0:
            raise RuntimeError(f"ptxbench {' '.join(args)} exited {p.returncode}:\n{p.stdout}\n{p.stderr}")
        return p

    def status(self, top):
        return json.loads(self.px("slurm", "status", top, "--json").stdout)

    def wait_done(self, top, timeout=240):
        end = min(time.monotonic() + timeout, DEADLINE)
        while time.monotonic() < end:
            st = self.status(top)
            if all(s["complete"] and s["state"] not in ("PENDING", "RUNNING", "COMPLETING") for s in st["shards"]):
                return st
            time.sleep(0.5)
        raise RuntimeError(f"{top} did not finish:\n" + self.px("slurm", "status", top).stdout)

    def check_report(self, dirs, baseline, name):
        out = os.path.join(self.root, f"report-{name}")
        self.px("report", *dirs, "--out", out)
        got = report_counts(out)
        if got != baseline:
            for k in baseline:
                if got.get(k) != baseline[k]:
                    raise AssertionError(f"report {name}: {k} differs from the one-process run:\n"
                                         f"expected {baseline[k]}\ngot      {got.get(k)}")
            raise AssertionError(f"report {name}: files differ: {sorted(got)} vs {sorted(baseline)}")
        log(f"report over {name}: counts equal the one-process run's ({len(got)} CSV files)")

    def main(self):
        cfg = {
            "endpoints": [{"name": "scripted", "kind": "scripted",
                           "scripted_file": os.path.join(self.source, "examples", "scripted", "responses.json")}],
            # two GEMM tasks (a compile error, then a kernel that compiles) and one without a kernel
            "tasks": ["gemm_n7168_k5120", "gemm_n4096_k4096", "mha_fwd_d128"],
            "samples": 2,
            "turns": 4,
            "concurrency": {"requests_per_endpoint": 1, "compile_workers": 1},
            "evaluator": {"run_gpu": False},
        }
        config = os.path.join(self.root, "run.json")
        with open(config, "w") as f:
            json.dump(cfg, f)

        t0 = time.monotonic()
        single = os.path.join(self.root, "single")
        self.px("run", "--config", config, "--out", single, "--progress", "quiet")
        out = os.path.join(self.root, "report-single")
        self.px("report", single, "--out", out)
        baseline = report_counts(out)
        n_records = len(records(single))
        log(f"one process: {n_records} turn records in {time.monotonic() - t0:.1f} s")

        # --- 2. a 3-shard array job
        t1 = time.monotonic()
        top = os.path.join(self.root, "sharded")
        dry = self.px("slurm", "submit", "--config", config, "--shards", "3", "--out", top, "--dry-run")
        assert "--shard \"$shard/3\"" in dry.stdout and not os.path.exists(top), "dry run wrote or lacks the script"
        sub = self.px("slurm", "submit", "--config", config, "--shards", "3", "--out", top, "--cpus-per-shard", "1")
        log(sub.stdout.strip())
        st = self.wait_done(top)
        log("3 shards done in %.1f s:\n%s" % (time.monotonic() - t1, self.px("slurm", "status", top).stdout))
        assert sum(s["turns"] for s in st["shards"]) == n_records, "shards' records != one-process records"
        assert sorted(s["cells"] for s in st["shards"]) == [2, 2, 2], st
        self.check_report([top], baseline, "top-level directory")
        self.check_report([os.path.join(top, f"shard-{i}") for i in range(3)], baseline, "shard directories")
        merged = os.path.join(self.root, "merged")
        self.px("merge", top, "--out", merged)
        self.check_report([merged], baseline, "merged directory")
        both = self.px("report", top, merged, "--out", os.path.join(self.root, "report-twice"), check=False)
        assert both.returncode != 0 and "twice" in both.stderr, f"a run given twice was not refused: {both.stderr}"

        # Jobs Slurm no longer lists (purged after MinJobAge): sacct is asked and, with no accounting
        # storage, fails; the exit file the script wrote decides, else the state is unknown.
        purged = os.path.join(self.root, "purged")
        shutil.copytree(top, purged)
        with open(os.path.join(purged, "slurm.json")) as f:
            layout = json.load(f)
        old = layout["submissions"][0]["job_id"]
        layout["submissions"][0]["job_id"] = "999999"
        with open(os.path.join(purged, "slurm.json"), "w") as f:
            json.dump(layout, f)
        os.rename(os.path.join(purged, "logs", f"shard-0.{old}.exit"), os.path.join(purged, "logs", "shard-0.999999.exit"))
        st = self.status(purged)
        assert any("sacct unavailable" in n for n in st["notes"]), st["notes"]
        assert st["shards"][0]["state"] == "COMPLETED" and st["shards"][0]["state_source"] == "exit file", st
        assert st["shards"][1]["state"] == "UNKNOWN" and not st["shards"][1]["needs_resubmit"], st
        log("without accounting: " + st["notes"][0][:150])

        # --- 3. cancel one shard mid-run, resubmit it
        t2 = time.monotonic()
        top2 = os.path.join(self.root, "cancelled")
        self.px("slurm", "submit", "--config", config, "--shards", "3", "--out", top2, "--cpus-per-shard", "1")
        victim = None
        end = min(time.monotonic() + 120, DEADLINE)
        while victim is None and time.monotonic() < end:
            for s in self.status(top2)["shards"]:
                lines = records(os.path.join(top2, f"shard-{s['shard']}"))
                if s["state"] == "RUNNING" and 1 <= len(lines) and not s["complete"]:
                    self.cluster.run(["scancel", s["job"]])
                    victim = s
                    break
            time.sleep(0.05)
        assert victim is not None, "no shard was seen running with records to cancel"
        i = victim["shard"]
        shard_dir = os.path.join(top2, f"shard-{i}")
        end = min(time.monotonic() + 60, DEADLINE)
        while time.monotonic() < end:
            st = self.status(top2)
            if st["shards"][i]["state"] not in ("RUNNING", "COMPLETING", "PENDING"):
                break
            time.sleep(0.3)
        kept = records(shard_dir)
        s = st["shards"][i]
        log(f"cancelled shard {i} ({victim['job']}) with {len(kept)} of its records written:\n"
            + self.px("slurm", "status", top2).stdout)
        assert s["state"] == "CANCELLED" and s["needs_resubmit"], s
        assert 1 <= len(kept) < n_records // 3 + 1, f"shard {i} was not cancelled mid-run ({len(kept)} records)"
        re = self.px("slurm", "resubmit", top2)
        log(re.stdout.strip())
        assert f"shard {i}:" in re.stdout, re.stdout
        st = self.wait_done(top2)
        log("after the resubmission (%.1f s since submit):\n%s" % (time.monotonic() - t2,
                                                                 self.px("slurm", "status", top2).stdout))
        after = records(shard_dir)
        assert after[:len(kept)] == kept, "records written before the cancel were changed"
        with open(os.path.join(shard_dir, "run.json")) as f:
            resumes = json.load(f).get("resumes", [])
        assert len(resumes) >= 1, "the resubmitted shard did not resume"
        seen = set()
        for k in range(3):
            for line in records(os.path.join(top2, f"shard-{k}")):
                r = json.loads(line)
                key = (r["trajectory_id"], r["turn"])
                assert key not in seen, f"{key} recorded twice"
                seen.add(key)
        assert len(seen) == n_records, f"{len(seen)} (trajectory, turn) records, expected {n_records}"
        self.check_report([top2], baseline, "cancelled + resubmitted run")
        mixed = self.px("report", os.path.join(top, "shard-0"), os.path.join(top2, "shard-1"),
                        "--out", os.path.join(self.root, "report-mixed"), check=False)
        assert mixed.returncode != 0 and "different runs" in mixed.stderr, \
            f"shards of different runs were not refused: {mixed.stderr}"
        log("shards of two different runs refused: " + mixed.stderr.strip().split("\n")[-1][:160])


def main():
    if len(sys.argv) < 3:
        print(__doc__)
        return 2
    ptxbench, source = os.path.abspath(sys.argv[1]), os.path.abspath(sys.argv[2])
    os.environ["PATH"] = os.environ.get("PATH", "/usr/bin:/bin") + ":/usr/sbin:/sbin"  # the daemons live in sbin
    missing = [p for p in PROGRAMS if shutil.which(p) is None]
    if missing:
        skip("Slurm/munge programs not installed: " + ", ".join(missing) +
             " (scripts/install_deps.sh installs munge slurmctld slurmd slurm-client)")
    if os.geteuid() != 0:
        skip("starting slurmd needs root (it runs jobs as their users)")
    root = tempfile.mkdtemp(prefix="ptxb-slurm-", dir="/tmp")  # no blanks: the path lands on #SBATCH lines
    os.chmod(root, 0o755)
    cluster = Cluster(root)
    started = time.monotonic()
    ok = False
    try:
        cluster.start()
        log(f"cluster up in {time.monotonic() - started:.1f} s ({root}, {cluster.cpus} CPUs)")
        Test(ptxbench, source, root, cluster).main()
        ok = True
    finally:
        cluster.stop()
        if not ok:
            for name in ("slurmctld", "slurmd"):
                print(f"--- {name} (last lines)\n{cluster.tail(name)}")
            for d in ("sharded", "cancelled"):
                logs = os.path.join(root, d, "logs")
                if os.path.isdir(logs):
                    for f in sorted(os.listdir(logs)):
                        with open(os.path.join(logs, f), errors="replace") as fh:
                            print(f"--- {d}/logs/{f}\n" + "".join(fh.readlines()[-10:]))
        if "--keep" in sys.argv or not ok:
            log(f"kept {root}")
        else:
            shutil.rmtree(root, ignore_errors=True)
    log(f"PASSED in {time.monotonic() - started:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
