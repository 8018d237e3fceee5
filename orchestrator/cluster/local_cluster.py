"""An N-node Ray cluster on this one machine: a head and workers from `ray start`, each node with its own ports,
its own `--temp-dir` and logical GPUs — for multi-node tests, the scale benchmark and a user's trial of a
multi-node set-up before a real cluster.

Why this works on one machine (issue 22, probed on Ray 2.60): Ray tells nodes apart by their node-manager
port, so several raylets share 127.0.0.1 when every port is explicit (node manager, object manager, dashboard
agent listen + gRPC, runtime-env agent, metrics export, Ray Client server, a private worker-port range, and on
the head the GCS and dashboard) and each has its own temp dir (its sockets, logs and session). Ports are picked
free at start (other users run Ray on the same machine). Token auth as the local head
(`orchestrator.cluster.local_head`): `RAY_AUTH_MODE=token` with the token in `<root>/ray_auth_token`.

Processes are found by the node's temp dir in their argv (as `local_head` stops its head), recorded per node in
`<root>/local_cluster.json`, and stopped by PID — never `ray stop`, which kills every Ray on the machine.
`kill_raylet(i)` SIGKILLs one node's raylet only: what a node loss looks like to the rest of the cluster (the
node's other processes are left to notice; `stop()` ends whatever of them remains).
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from orchestrator.cluster import ray_temp
from orchestrator.engine.executor.base import ClusterUnreachable
from orchestrator.engine.workdir import Workdir
from orchestrator.cluster.local_head import _alive, _env, _free_port, _kill_head_processes, _ray_bin, token_file
from wtcommon.hashing import text_hash
from wtcommon.polling import wait_until
from wtcommon.ports import port_free
from orchestrator.cluster.processes import terminate_then_kill

STATE = "local_cluster.json"
WORKER_PORTS = 200  # a private range of worker ports per node: a task or actor holds one port while it lives
NODE_PORTS = ("node-manager-port", "object-manager-port", "dashboard-agent-listen-port", "dashboard-agent-grpc-port",
              "runtime-env-agent-port", "metrics-export-port", "ray-client-server-port")
HEAD_PORTS = ("port", "dashboard-port")


@dataclass
class Node:
    """One `ray start` of the cluster: its name (`head`, `w1`, ...), ports, temp dir, resources and processes."""

    name: str
    temp_dir: str
    ports: dict[str, int]
    num_cpus: int
    num_gpus: int
    env: dict[str, str] = field(default_factory=dict)  # extra environment of this node's processes
    # this node's processes when it was started (or last looked), as [pid, create time]: a PID the system has
    # since given to another process (another user's) is never signalled
    processes: list[list[float]] = field(default_factory=list)

    @property
    def pids(self) -> list[int]:
        return [int(p) for p, _ in self.processes]

    @property
    def node_manager_port(self) -> int:
        return self.ports["node-manager-port"]


def _port_range(n: int, taken: set[int]) -> int:
    """The first of `n` consecutive ports that are free now and not in `taken` (a node's worker-port range)."""
    for _ in range(200):
        start = _free_port()
        if start + n >= 65000 or taken & set(range(start, start + n)):
            continue
        if all(port_free(p) for p in range(start, start + n)):
            return start
    raise ClusterUnreachable(f"no {n} consecutive free ports on 127.0.0.1 for a Ray node's workers")


def _free_ports(names: tuple[str, ...], taken: set[int]) -> dict[str, int]:
    """A free port per name, none in `taken` (which grows with them)."""
    out: dict[str, int] = {}
    for name in names:
        p = _free_port()
        while p in taken:
            p = _free_port()
        taken.add(p)
        out[name] = p
    return out


def _processes_of(temp_dir: str) -> list[int]:
    """PIDs whose argv names `temp_dir` or a path under it (the node's raylet, agents, log monitor; on the head
    also GCS, dashboard, monitor) — every daemon a node starts carries its session dir under the temp dir.
    Matched by whole path, so node `w1` is not taken for `w10`."""
    import psutil

    me, pids = os.getpid(), []
    for p in psutil.process_iter(["pid", "cmdline"]):
        try:
            args = p.info["cmdline"] or []
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            continue
        if p.info["pid"] != me and any(_names(a, temp_dir) for a in args):
            pids.append(p.info["pid"])
    return sorted(pids)


def _names(arg: str, path: str) -> bool:
    """Whether one argv element is `path`, `--opt=path`, or a path under `path`."""
    value = arg.split("=", 1)[1] if arg.startswith("-") and "=" in arg else arg
    return value == path or value.startswith(path + "/") or (path + "/") in arg


def _with_children(pids: list[int]) -> list[list[float]]:
    """`pids` and their descendants (a raylet's agents and workers carry no temp dir in their argv), each as
    [pid, create time]."""
    import psutil

    out: dict[int, float] = {}
    for pid in pids:
        try:
            p = psutil.Process(pid)
            out[pid] = p.create_time()
            out |= {c.pid: c.create_time() for c in p.children(recursive=True)}
        except psutil.NoSuchProcess:
            continue
    return [[pid, t] for pid, t in sorted(out.items())]


class LocalCluster:
    """A head plus workers on 127.0.0.1, each node with explicit ports and its own temp dir.

    `root` holds the token, the state file and (when short enough for Ray's 107-byte socket paths) the nodes'
    temp dirs; a long root gets a short `/tmp/wtc-*` folder for them. `LocalCluster.attach(root)` reopens a
    running cluster from its state file (another process started it, e.g. another pytest-xdist worker).
    """

    def __init__(self, root: Path, nodes: list[Node] | None = None, tmp_base: str | None = None,
                 host: str = "127.0.0.1"):
        self.root = Path(root).resolve()
        self.nodes: list[Node] = nodes or []
        self.tmp_base = tmp_base or self._tmp_base()
        self.host = host  # the nodes' address (a Slurm allocation's head: its node's, slurm_job.py)

    # -- addresses ----------------------------------------------------------------------------------------------
    @property
    def head(self) -> Node:
        return self.nodes[0]

    @property
    def gcs_address(self) -> str:
        """`<host>:<port>` for `ray.init(address=...)` and `ray start --address`."""
        return f"{self.host}:{self.head.ports['port']}"

    @property
    def address(self) -> str:
        """The dashboard (Jobs API) address, what `campaign --ray-address` takes."""
        return f"http://{self.host}:{self.head.ports['dashboard-port']}"

    @property
    def token_file(self) -> Path:
        return token_file(self.root)

    def env(self, extra: dict[str, str] | None = None) -> dict[str, str]:
        """The environment every node (and a client of the cluster) runs with: token auth, no usage stats, the
        repository on PYTHONPATH (`local_head._env`), plus `extra`."""
        return {**_env(self.root), **(extra or {})}

    def _tmp_base(self) -> str:
        if len(str(self.root)) <= 40:
            return str(self.root / "ray")
        return f"/tmp/wtc-{text_hash(str(self.root), 10)}"

    # -- start / stop -------------------------------------------------------------------------------------------
    def start(self, n_nodes: int, *, num_gpus: int = 4, num_cpus: int = 4, node_env: dict[int, dict[str, str]] | None
              = None, timeout_s: float = 240.0) -> LocalCluster:
        """Start a head and `n_nodes - 1` workers with `num_gpus` logical GPUs and `num_cpus` CPUs each; node i
        (0 = head) gets `node_env[i]` added to its environment. A failed start stops what was started."""
        if self.nodes:
            raise RuntimeError(f"{self.root}: this cluster is already started ({len(self.nodes)} nodes)")
        node_env = node_env or {}
        try:
            for i in range(n_nodes):
                self.add_node(num_gpus=num_gpus, num_cpus=num_cpus, env=node_env.get(i), timeout_s=timeout_s)
        except BaseException:
            self.stop()
            raise
        return self

    def add_node(self, *, num_gpus: int = 4, num_cpus: int = 4, env: dict[str, str] | None = None,
                 timeout_s: float = 240.0, attempts: int = 2) -> Node:
        """Start one more node (the head when there is none yet) and record it; returns it. A start that fails (Ray's
        "node timed out during startup" on a loaded machine) is cleaned up and tried again, as the local head's is."""
        for attempt in range(1, attempts + 1):
            try:
                return self._start_node(num_gpus=num_gpus, num_cpus=num_cpus, env=env, timeout_s=timeout_s)
            except ClusterUnreachable:
                if attempt == attempts:
                    raise
        raise AssertionError("unreachable")

    def _start_node(self, *, num_gpus: int, num_cpus: int, env: dict[str, str] | None, timeout_s: float) -> Node:
        self.root.mkdir(parents=True, exist_ok=True)
        is_head = not self.nodes
        name = "head" if is_head else f"w{len(self.nodes)}"
        taken = {p for n in self.nodes for p in n.ports.values()}
        for n in self.nodes:  # every node's worker ports, not only the ends of the range
            taken |= set(range(n.ports["min-worker-port"], n.ports["max-worker-port"] + 1))
        lo = _port_range(WORKER_PORTS, taken)
        taken |= set(range(lo, lo + WORKER_PORTS))
        ports = _free_ports((HEAD_PORTS if is_head else ()) + NODE_PORTS, taken)
        ports |= {"min-worker-port": lo, "max-worker-port": lo + WORKER_PORTS - 1}
        tmp = Path(self.tmp_base) / name
        tmp.mkdir(parents=True, exist_ok=True)
        os.chmod(tmp, 0o700)
        node = Node(name, str(tmp), ports, num_cpus, num_gpus, dict(env or {}))
        argv = [_ray_bin(), "start", f"--node-ip-address={self.host}", *[f"--{k}={v}" for k, v in ports.items()],
                f"--temp-dir={tmp}", f"--num-cpus={num_cpus}", f"--num-gpus={num_gpus}", "--disable-usage-stats"]
        if is_head:
            argv[2:2] = ["--head", f"--dashboard-host={self.host}", "--include-dashboard=true"]
        else:
            argv.insert(2, f"--address={self.gcs_address}")
        self.nodes.append(node)
        try:
            proc = subprocess.run(argv, env=self.env(node.env), cwd=str(self.root), capture_output=True, text=True,
                                  timeout=timeout_s)
            if proc.returncode != 0:
                raise ClusterUnreachable(f"`ray start` of node {name} failed: {proc.stderr.strip()[-800:]}")
            if is_head and not _wait(lambda: _alive(self.address), timeout_s):
                raise ClusterUnreachable(f"the head started but its dashboard {self.address} does not answer")
        except subprocess.TimeoutExpired:
            self._kill_node(node)
            self.nodes.pop()
            raise ClusterUnreachable(f"`ray start` of node {name} did not finish in {timeout_s:.0f} s") from None
        except BaseException:
            self._kill_node(node)
            self.nodes.pop()
            raise
        os.chmod(tmp, 0o700)  # `ray start` makes its temp dir world-writable: this user only
        node.processes = _with_children(_processes_of(node.temp_dir))
        self._save()
        return node

    def raylet_pid(self, index: int) -> int | None:
        """PID of node `index`'s raylet (None when it is not running)."""
        import psutil

        for pid in _processes_of(self.nodes[index].temp_dir):
            try:
                p = psutil.Process(pid)
                if Path(p.cmdline()[0]).name == "raylet":
                    return pid
            except (psutil.NoSuchProcess, psutil.AccessDenied, IndexError):
                continue
        return None

    def kill_raylet(self, index: int) -> int:
        """SIGKILL node `index`'s raylet (a node loss as the rest of the cluster sees it) and wait until it is
        gone; returns its PID.
        The node's processes at that moment, its workers included, are recorded so `stop()` ends them."""
        if index == 0:
            raise ValueError("kill_raylet(0) would take the head down; kill a worker node (index >= 1)")
        node = self.nodes[index]
        pid = self.raylet_pid(index)
        if pid is None:
            raise RuntimeError(f"node {node.name} has no running raylet")
        seen = {int(p) for p, _ in node.processes}
        node.processes += [e for e in _with_children(_processes_of(node.temp_dir)) if int(e[0]) not in seen]
        self._save()
        import psutil

        try:
            raylet = psutil.Process(pid)
            raylet.send_signal(signal.SIGKILL)
            psutil.wait_procs([raylet], timeout=30)  # gone (or a zombie) before the caller looks
        except psutil.NoSuchProcess:
            pass
        return pid

    def stop(self) -> None:
        """Stop every process this cluster started, node by node (workers first), by PID; remove the state file,
        and a /tmp temp base once its job logs are kept in the root (`ray_temp.release`)."""
        for node in reversed(self.nodes):
            self._kill_node(node)
        if self.nodes and ray_temp.outside(Path(self.tmp_base), self.root):
            ray_temp.release(Path(self.head.temp_dir), self.root, Workdir(self.root).job_logs)
            shutil.rmtree(self.tmp_base, ignore_errors=True)
        (self.root / STATE).unlink(missing_ok=True)
        self.nodes = []

    def _kill_node(self, node: Node) -> None:
        """Terminate, then kill, the node's processes: those naming its temp dir, their children, and the ones
        recorded earlier (e.g. the workers of a raylet `kill_raylet` killed) that are still the same processes."""
        import psutil

        if node is self.nodes[0]:  # the head's Ray Client server carries no temp dir: `local_head` finds it
            _kill_head_processes(Path(node.temp_dir), str(node.ports["port"]))
        procs: dict[int, psutil.Process] = {}
        for pid, created in _with_children(_processes_of(node.temp_dir)) + node.processes:
            try:
                p = psutil.Process(int(pid))
                if abs(p.create_time() - created) < 1e-3 and p.status() != psutil.STATUS_ZOMBIE:
                    procs[p.pid] = p
            except psutil.NoSuchProcess:
                continue
        terminate_then_kill(procs.values())

    # -- state --------------------------------------------------------------------------------------------------
    def _save(self) -> None:
        body = {"tmp_base": self.tmp_base, "host": self.host, "nodes": [asdict(n) for n in self.nodes]}
        tmp = self.root / (STATE + ".tmp")
        tmp.write_text(json.dumps(body, indent=1))
        os.replace(tmp, self.root / STATE)

    @classmethod
    def attach(cls, root: Path, *, alive: bool = True) -> LocalCluster | None:
        """The cluster recorded under `root` if its head answers (`alive=False`: whatever is recorded, to stop
        what is left of a cluster whose head died), else None."""
        path = Path(root).resolve() / STATE
        if not path.exists():
            return None
        try:
            body: dict[str, Any] = json.loads(path.read_text())
            c = cls(root, [Node(**n) for n in body["nodes"]], body["tmp_base"], body.get("host", "127.0.0.1"))
        except (ValueError, KeyError, TypeError):
            return None
        return c if c.nodes and (not alive or _alive(c.address)) else None

    def alive_nodes(self) -> int:
        """Nodes the GCS reports alive (asks the head's dashboard; needs the token)."""
        import requests

        tok = self.token_file.read_text().strip()
        r = requests.get(f"{self.address}/nodes?view=summary", headers={"Authorization": f"Bearer {tok}"}, timeout=10)
        r.raise_for_status()
        summary = r.json()["data"]["summary"]
        return sum(1 for n in summary if n.get("raylet", {}).get("state") == "ALIVE")

    def wait_alive(self, n: int, timeout_s: float = 120.0) -> bool:
        """Wait until exactly `n` nodes are alive in the GCS (after a start, or after `kill_raylet`)."""
        return _wait(lambda: self.alive_nodes() == n, timeout_s)

    def __enter__(self) -> LocalCluster:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()



def _wait(cond, timeout_s: float, interval_s: float = 0.5) -> bool:
    """`wait_until`, counting a daemon that does not answer yet (an exception) as not ready."""
    def safe() -> bool:
        try:
            return bool(cond())
        except Exception:
            return False

    return wait_until(safe, timeout_s, interval_s)


def _main(argv: list[str] | None = None) -> int:
    """`python -m orchestrator.cluster.local_cluster up DIR [--nodes 3 --gpus 4 --cpus 4] | down DIR`."""
    import argparse

    ap = argparse.ArgumentParser(prog="python -m orchestrator.cluster.local_cluster",
                                 description="A multi-node Ray cluster on this machine (a trial, not production).")
    sub = ap.add_subparsers(dest="cmd", required=True)
    up = sub.add_parser("up", help="start a head and workers; prints the address and the token file")
    up.add_argument("root", type=Path)
    up.add_argument("--nodes", type=int, default=3)
    up.add_argument("--gpus", type=int, default=4, help="logical GPUs per node")
    up.add_argument("--cpus", type=int, default=4, help="CPUs per node")
    down = sub.add_parser("down", help="stop every process of the cluster started under ROOT (by PID)")
    down.add_argument("root", type=Path)
    a = ap.parse_args(argv)
    if a.cmd == "up":
        if LocalCluster.attach(a.root) is not None:
            print(f"{a.root}: a cluster is already running there; `down` it first", file=sys.stderr)
            return 2
        c = LocalCluster(a.root).start(a.nodes, num_gpus=a.gpus, num_cpus=a.cpus)
        print(f"{len(c.nodes)} nodes up; dashboard {c.address}, GCS {c.gcs_address}")
        print(f"export RAY_AUTH_TOKEN_PATH={c.token_file}")
        print(f"campaign doctor --ray-address {c.address} --workdir WORKDIR")
        return 0
    running = LocalCluster.attach(a.root, alive=False)
    if running is None:
        print(f"{a.root}: no running cluster recorded there", file=sys.stderr)
        return 2
    running.stop()
    print(f"stopped {a.root}")
    return 0


if __name__ == "__main__":
    raise SystemExit(_main())
