"""Inside a Slurm allocation: turn its nodes into a Ray cluster, check it, drive the campaign, release the nodes.

`python -m orchestrator.cluster.slurm_job run ...` is the batch step's one command (orchestrator.cluster.slurm
writes it). On the first node it starts a Ray head (`LocalCluster` with the node's address: every port picked
free and explicit, the temp dir node-local under /tmp, token auth with the token in `W/slurm/job-<id>/`, on the
shared work dir as every node must read it); on every other node `srun --overlap` runs `... slurm_job worker`,
a `ray start --block` with its own free ports and temp dir. It waits until every node is alive in the GCS, runs
`campaign doctor`, then `campaign submit --no-doctor --drain-on-sigterm` (an unchanged spec adds nothing, so a
later allocation resumes), and at the end stops the head's processes by PID and the worker steps (never
`ray stop`, which would end every Ray of the node's other users).

SIGTERM (`--signal=B:TERM@S` before the time limit, a preemption, `scancel`) is forwarded to the driver, which
drains its in-flight stages as infra failures (exit 5); a SIGTERM before the driver started skips it. The job's
state goes to `W/slurm/jobs.json` (RUNNING with the address, then ENDED with the exit code).
"""

from __future__ import annotations

import argparse
import os
import signal
import socket
import subprocess
import sys
import threading
from pathlib import Path

from orchestrator.cluster.local_cluster import LocalCluster, _free_ports, _port_range, WORKER_PORTS, NODE_PORTS
from orchestrator.cluster.local_head import _ray_bin
from orchestrator.cluster.slurm import slurm_dir, update_job

NODE_WAIT_S = 300.0  # every node must join the head within this


def hostnames(nodelist: str) -> list[str]:
    """Slurm's compressed node list (`gpu[01-04]`) expanded by `scontrol show hostnames`."""
    p = subprocess.run(["scontrol", "show", "hostnames", nodelist], capture_output=True, text=True, timeout=60)
    if p.returncode != 0:
        raise RuntimeError(f"scontrol show hostnames {nodelist}: {p.stderr.strip()}")
    return p.stdout.split()


def node_address(node: str) -> str:
    """The IP other nodes reach `node` at: its `NodeAddr` in Slurm's configuration, resolved."""
    p = subprocess.run(["scontrol", "show", "node", "-o", node], capture_output=True, text=True, timeout=60)
    fields = dict(f.split("=", 1) for f in p.stdout.split() if "=" in f)
    return socket.gethostbyname(fields.get("NodeAddr", node))


class Runner:
    """One allocation's life: start, check, drive, stop. `driver` is the running `campaign` child, if any."""

    def __init__(self, a: argparse.Namespace):
        self.a = a
        self.job_id = os.environ.get("SLURM_JOB_ID", "local")
        self.workdir = Path(a.workdir).resolve()
        self.stopping = threading.Event()
        self.driver: subprocess.Popen | None = None
        self.workers: list[subprocess.Popen] = []
        self.cluster: LocalCluster | None = None

    def on_sigterm(self, *_: object) -> None:
        self.stopping.set()
        if self.driver is not None and self.driver.poll() is None:
            self.driver.send_signal(signal.SIGTERM)

    def say(self, msg: str) -> None:
        print(f"[windtunnel slurm job {self.job_id}] {msg}", flush=True)

    def start_ray(self, nodes: list[str]) -> str:
        """The head here, a worker step on each other node; the dashboard address once all are alive."""
        root = slurm_dir(self.workdir) / f"job-{self.job_id}"
        self.cluster = LocalCluster(root, tmp_base=f"/tmp/wt-slurm-{self.job_id}", host=node_address(nodes[0]))
        # every port explicit, the two metrics ports Ray takes only from the environment too; the node address as
        # given (RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0: else Ray swaps a loopback address for the host's)
        metrics = _free_ports(("AUTOSCALER_METRIC_PORT", "DASHBOARD_METRIC_PORT"), set())
        self.cluster.add_node(num_gpus=self.a.gpus_per_node, num_cpus=self.a.cpus_per_node,
                              env={"RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0", **{k: str(v) for k, v in metrics.items()}})
        for node in nodes[1:]:
            argv = ["srun", "--nodes=1", "--ntasks=1", f"--nodelist={node}", "--overlap", sys.executable, "-m",
                    "orchestrator.cluster.slurm_job", "worker", "--address", self.cluster.gcs_address,
                    "--token", str(self.cluster.token_file), "--temp-dir", f"/tmp/wt-slurm-{self.job_id}/{node}",
                    "--gpus-per-node", str(self.a.gpus_per_node), "--cpus-per-node", str(self.a.cpus_per_node)]
            self.workers.append(subprocess.Popen(argv, stdin=subprocess.DEVNULL))
        if not self.cluster.wait_alive(len(nodes), NODE_WAIT_S):
            raise RuntimeError(f"not every node joined the head in {NODE_WAIT_S:.0f} s ({len(nodes)} expected)")
        return self.cluster.address

    def campaign(self, *args: str) -> int:
        """Run one `campaign` command against the allocation's cluster (SIGTERM reaches it through us)."""
        assert self.cluster is not None
        env = {**os.environ, "RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN_PATH": str(self.cluster.token_file)}
        argv = [str(Path(sys.executable).with_name("campaign")), *args]
        self.say("$ " + " ".join(argv[1:]))
        self.driver = subprocess.Popen(argv, env=env, stdin=subprocess.DEVNULL)
        rc = self.driver.wait()
        self.driver = None
        return rc

    def run(self) -> int:
        nodes = hostnames(os.environ.get("SLURM_JOB_NODELIST", socket.gethostname()))
        rc = 1
        try:
            address = self.start_ray(nodes)
            self.say(f"Ray cluster of {len(nodes)} node(s) up: {address}")
            update_job(self.workdir, self.job_id, "RUNNING", f"Ray {address} on {','.join(nodes)}")
            ledger = ["--ledger-url", self.a.ledger_url] if self.a.ledger_url else []
            rc = 5 if self.stopping.is_set() else self.campaign(
                "doctor", "--workdir", str(self.workdir), "--ray-address", address, "--timeout",
                str(self.a.doctor_timeout))
            if rc == 0 and not self.stopping.is_set():
                rc = self.campaign("submit", self.a.campaign, "--workdir", str(self.workdir), "--ray-address", address,
                                   "--no-doctor", "--drain-on-sigterm", *ledger)
        except Exception as exc:  # a start that failed: said in the job's log and record, nodes released below
            self.say(f"failed: {type(exc).__name__}: {exc}")
            rc = 3
        finally:
            self.stop_ray()
            update_job(self.workdir, self.job_id, "ENDED", f"exit {rc}" + (" after SIGTERM (drained)"
                                                                             if self.stopping.is_set() else ""))
        self.say(f"done, exit {rc}")
        return rc

    def stop_ray(self) -> None:
        for p in self.workers:  # srun passes the signal to its step: the worker's `ray start --block` ends it
            if p.poll() is None:
                p.terminate()
        for p in self.workers:
            try:
                p.wait(timeout=30)
            except subprocess.TimeoutExpired:
                p.kill()
        if self.cluster is not None:
            self.cluster.stop()


def worker(a: argparse.Namespace) -> int:
    """A worker node: `ray start --address=HEAD --block` with free ports and a temp dir of its own."""
    tmp = Path(a.temp_dir)
    tmp.mkdir(parents=True, exist_ok=True)
    host = node_address(os.environ.get("SLURMD_NODENAME") or socket.gethostname())  # the step's node, by its Slurm name
    lo = _port_range(WORKER_PORTS, set())
    ports = _free_ports(NODE_PORTS, set(range(lo, lo + WORKER_PORTS)))
    argv = [_ray_bin(), "start", f"--address={a.address}", f"--node-ip-address={host}", f"--temp-dir={tmp}",
            *[f"--{k}={v}" for k, v in ports.items()], f"--min-worker-port={lo}",
            f"--max-worker-port={lo + WORKER_PORTS - 1}", f"--num-cpus={a.cpus_per_node}",
            f"--num-gpus={a.gpus_per_node}", "--disable-usage-stats", "--block"]
    env = {**os.environ, "RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN_PATH": a.token, "RAY_USAGE_STATS_ENABLED": "0"}
    os.execve(argv[0], argv, env)
    return 0  # not reached


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m orchestrator.cluster.slurm_job",
                                 description="Run a Windtunnel campaign inside a Slurm allocation (the batch step).")
    sub = ap.add_subparsers(dest="cmd", required=True)
    run = sub.add_parser("run")
    run.add_argument("--workdir", required=True)
    run.add_argument("--campaign", required=True)
    run.add_argument("--ledger-url")
    run.add_argument("--doctor-timeout", type=float, default=300.0)
    wk = sub.add_parser("worker")
    wk.add_argument("--address", required=True)
    wk.add_argument("--token", required=True)
    wk.add_argument("--temp-dir", required=True)
    for p in (run, wk):
        p.add_argument("--gpus-per-node", type=int, default=0)
        p.add_argument("--cpus-per-node", type=int, default=8)
    a = ap.parse_args(argv)
    if a.cmd == "worker":
        return worker(a)
    runner = Runner(a)
    signal.signal(signal.SIGTERM, runner.on_sigterm)
    return runner.run()


if __name__ == "__main__":
    raise SystemExit(main())
