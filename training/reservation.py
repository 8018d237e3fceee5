"""A multi-node run's nodes: reserved in the shared cluster for the run's whole life, and (for verl) a private
Ray runtime that spans exactly those nodes.

Why a placement group: a run with `nnodes > 1` needs `gpus_per_node` GPUs on each of `nnodes` distinct nodes at
once. A Ray Job's entrypoint can hold GPUs on one node only, so the train stage (itself the job's driver,
attached to the shared cluster) reserves a STRICT_SPREAD placement group of `nnodes` bundles `{GPU: g, CPU: 1}`.
Bundle 0 is pinned to the stage's own node (Ray's `node:<ip>` resource), so the verl driver the stage starts
runs beside its first node. Ray's accounting then holds every GPU of the run until the stage ends (or dies: a
dead driver's placement groups are removed by Ray), and the scheduler sees them as used.

Why a private runtime per run (docs/verl_on_cpu.md, "Isolation" and "Two nodes"): verl's named actors
(TransferQueue's controller, the rollout servers) must not meet another run's. One actor per bundle, holding
the bundle's GPUs (so Ray sets its `CUDA_VISIBLE_DEVICES`), runs `ray start --block` of the run's private
runtime on its node: a head in bundle 0, a worker joining it in every other bundle. `--block` gives each a
reaper, so the private node dies with the actor; the actor dies with the stage (its owner). Every port is
chosen free on the node, every temp dir is a short one under the system temp dir (Ray's unix sockets allow 107
characters) and is removed when the node stops.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from training.backend import TrainingError
from wtcommon.polling import wait_until
from wtcommon.ports import free_port, port_free

if TYPE_CHECKING:
    from training.config import ModelConfig

RESERVE_TIMEOUT_ENV = "WINDTUNNEL_RESERVE_TIMEOUT"
DEFAULT_RESERVE_TIMEOUT_S = 600.0


class ReservationError(TrainingError):
    """The cluster could not hold the run's nodes in time (nodes busy or lost): an infrastructure failure,
    retried by the scheduler, never a configuration error."""


def reserve_timeout_s() -> float:
    raw = os.environ.get(RESERVE_TIMEOUT_ENV, "")
    try:
        return float(raw) if raw else DEFAULT_RESERVE_TIMEOUT_S
    except ValueError:
        return DEFAULT_RESERVE_TIMEOUT_S


@dataclass
class Reservation:
    """The placement group and, per bundle, the shared cluster's node id that holds it."""

    pg: Any
    node_ids: list[str]
    gpus_per_node: int
    extra: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {"nnodes": len(self.node_ids), "gpus_per_node": self.gpus_per_node, "node_ids": self.node_ids,
                "distinct_nodes": len(set(self.node_ids)), **self.extra}


@contextmanager
def reserve(gpus_per_node: int, nnodes: int, *, name: str, log: Callable[[str], None] = print,
            timeout_s: float | None = None) -> Iterator[Reservation]:
    """Hold `nnodes` bundles `{GPU: gpus_per_node, CPU: 1}` on distinct nodes of the cluster this process's Ray
    Job runs in (RAY_ADDRESS) until the block ends; ReservationError when Ray cannot place them in time."""
    import ray
    from ray.util.placement_group import placement_group, placement_group_table, remove_placement_group

    timeout_s = reserve_timeout_s() if timeout_s is None else timeout_s
    ray.init(address=os.environ.get("RAY_ADDRESS", "auto"), log_to_driver=False, logging_level=30)  # WARNING
    pg = None
    try:
        ip = ray.util.get_node_ip_address()
        bundles: list[dict[str, float]] = [{"GPU": float(gpus_per_node), "CPU": 1.0} for _ in range(nnodes)]
        bundles[0][f"node:{ip}"] = 0.001  # bundle 0 on the stage's own node: the verl driver runs here
        pg = placement_group(bundles, strategy="STRICT_SPREAD", name=name)
        log(f"windtunnel: reserving {nnodes} node(s) × {gpus_per_node} GPU(s) (STRICT_SPREAD) as {name}")
        if not pg.wait(timeout_s):
            raise ReservationError(f"Ray could not place {nnodes} node(s) × {gpus_per_node} GPU(s) on distinct "
                                   f"nodes within {timeout_s:.0f} s (nodes busy or lost; {RESERVE_TIMEOUT_ENV} "
                                   "sets the wait)")
        table = placement_group_table(pg)
        node_ids = [table["bundles_to_node_id"][i] for i in range(nnodes)]
        log(f"windtunnel: reserved bundles on nodes {json.dumps(node_ids)}")
        yield Reservation(pg, node_ids, gpus_per_node)
    finally:
        if pg is not None:
            try:
                remove_placement_group(pg)
            except Exception:  # the cluster is gone: its placement group with it
                pass
        ray.shutdown()


def nodes_of(model: ModelConfig | None) -> tuple[int, int]:
    """(gpus_per_node, nnodes) of a run's model config (None: one node, no GPUs declared)."""
    return (model.gpus_per_node or 0, model.nnodes) if model is not None else (0, 1)


@contextmanager
def reserved_nodes(model: ModelConfig | None, out_dir: Path, run_key: str,
                   log: Callable[[str], None] = print) -> Iterator[Reservation | None]:
    """`reserve` for a model with `nnodes > 1` (None for a one-node run, whose job entrypoint holds its GPUs);
    the placement is written to `<out_dir>/placement.json` (the run's proof of where it ran)."""
    per_node, nnodes = nodes_of(model)
    if nnodes == 1:
        yield None
        return
    if not os.environ.get("RAY_ADDRESS"):
        from training.backend import TrainingConfigError

        raise TrainingConfigError(f"nnodes: {nnodes}: a multi-node run trains as a Ray Job of a cluster (campaign "
                                  "submit), which reserves its nodes; it cannot run outside one")
    with reserve(per_node, nnodes, name=f"wt-{run_key}", log=log) as res:
        out_dir.mkdir(parents=True, exist_ok=True)
        (out_dir / "placement.json").write_text(json.dumps(res.to_json(), indent=1))
        yield res
        (out_dir / "placement.json").write_text(json.dumps(res.to_json(), indent=1))


# ---- the private runtime across the reserved nodes ---------------------------------------------------------

def _free_port() -> int:
    return free_port("")  # every interface: the private runtime's nodes listen on the node's address


def _bindable(port: int) -> bool:
    return port_free(port, "")


def _port_block(n: int) -> int:
    """The first port of `n` consecutive free ports for a node's worker processes: below the kernel's ephemeral
    range (where `_free_port`'s picks and every outgoing connection land) and above Ray's default worker range
    (10002-19999, used by every one-node private runtime of a verl run)."""
    import random

    starts = list(range(20000, 32000 - n, n))
    random.shuffle(starts)
    for lo in starts:
        if all(_bindable(p) for p in range(lo, lo + n)):
            return lo
    raise TrainingError(f"no {n} consecutive free ports in 20000-32000 for a private Ray node's workers")


WORKER_PORTS = 100


def node_argv(*, head_address: str | None, ip: str, gpus: int, cpus: int, temp_dir: str) -> list[str]:
    """`ray start --block` of one private node: every port explicit and free, no dashboard, no usage stats."""
    ray_bin = str(Path(sys.executable).with_name("ray"))
    names = ["node-manager-port", "object-manager-port", "dashboard-agent-listen-port", "dashboard-agent-grpc-port",
             "runtime-env-agent-port", "metrics-export-port"]
    if head_address is None:
        names += ["port", "ray-client-server-port"]
    ports: dict[str, int] = {}
    while len(ports) < len(names):  # distinct: the kernel may hand the same free port to two successive binds
        port = _free_port()
        if port not in ports.values():
            ports[names[len(ports)]] = port
    lo = _port_block(WORKER_PORTS)
    argv = [ray_bin, "start", "--block", f"--node-ip-address={ip}", *[f"--{k}={v}" for k, v in ports.items()],
            f"--num-gpus={gpus}", f"--num-cpus={cpus}", f"--temp-dir={temp_dir}", "--disable-usage-stats",
            f"--min-worker-port={lo}", f"--max-worker-port={lo + WORKER_PORTS - 1}"]
    if head_address is None:
        argv += ["--head", "--include-dashboard=false", "--dashboard-host=127.0.0.1"]
    else:
        argv += [f"--address={head_address}"]
    return argv


def _pdeathsig() -> None:  # pragma: no cover - runs in the child between fork and exec
    """The private node's `ray start` dies with the actor that started it (Linux PR_SET_PDEATHSIG)."""
    import ctypes
    import signal

    ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGTERM)
    os.setsid()


class PrivateNode:
    """One node of a run's private runtime, started inside a bundle of the run's placement group."""

    def __init__(self) -> None:
        self.proc: Any = None
        self.temp_dir = ""

    def start(self, head_address: str | None, gpus: int, cpus: int, log_path: str, ready_s: float,
              run_env: dict[str, str], tries: int = 3) -> dict[str, Any]:
        """Start the node; again (fresh ports and temp dir) when it missed Ray's fixed 30 s start-up wait for its
        raylet, which a loaded 2-core machine did."""
        for i in range(tries):
            try:
                return self._start(head_address, gpus, cpus, log_path, ready_s, run_env)
            except RuntimeError as exc:
                self.stop()
                if i == tries - 1 or "timed out during startup" not in str(exc):
                    raise
        raise AssertionError("unreachable")

    def _start(self, head_address: str | None, gpus: int, cpus: int, log_path: str, ready_s: float,
               run_env: dict[str, str]) -> dict[str, Any]:
        import subprocess
        import tempfile

        import ray

        ip = ray.util.get_node_ip_address()
        self.temp_dir = tempfile.mkdtemp(prefix="wt-pn-")
        os.chmod(self.temp_dir, 0o700)
        argv = node_argv(head_address=head_address, ip=ip, gpus=gpus, cpus=cpus, temp_dir=self.temp_dir)
        gcs = next((a.split("=", 1)[1] for a in argv if a.startswith("--port=")), "")
        # the run's own variables (verl's CPU platform, the policy plugin's settings) reach every worker the
        # private node starts, as they reach a one-node runtime's through verl's own process
        env = {k: v for k, v in os.environ.items() if k not in ("RAY_ADDRESS", "RAY_JOB_CONFIG_JSON_ENV_VAR")}
        env.update(run_env)
        log = open(log_path, "ab")
        offset = log.tell()  # this start's part of the log (an earlier try's lines stay above it)
        self.proc = subprocess.Popen(argv, env=env, stdout=log, stderr=subprocess.STDOUT, preexec_fn=_pdeathsig)
        proc = self.proc

        def up() -> bool:
            if proc.poll() is not None:
                tail = Path(log_path).read_bytes()[offset:][-4000:].decode(errors="replace")
                why = " (timed out during startup)" if "timed out during startup" in tail else ""
                raise RuntimeError(f"private Ray node exited with {proc.returncode}{why}; see {log_path}")
            return b"Ray runtime started" in Path(log_path).read_bytes()[offset:]

        if not wait_until(up, ready_s, interval_s=0.5):
            raise RuntimeError(f"private Ray node did not start within {ready_s:.0f} s; see {log_path}")
        node_id = ray.get_runtime_context().get_node_id()
        return {"ip": ip, "gcs": f"{ip}:{gcs}" if gcs else "", "node_id": node_id, "pid": proc.pid,
                "gpu_ids": [str(g) for g in ray.get_gpu_ids()]}

    def stop(self) -> None:
        import shutil
        import signal

        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(30)
            except Exception:
                self.proc.kill()
        shutil.rmtree(self.temp_dir, ignore_errors=True)


@contextmanager
def private_runtime(res: Reservation, *, cpus_per_node: int, log_dir: Path, env: dict[str, str],
                    ready_s: float = 300.0, log: Callable[[str], None] = print) -> Iterator[str]:
    """Start the run's private Ray runtime on its reserved nodes, every node with the run's `env`; yield the
    private head's GCS address."""
    import ray
    from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy

    actor_cls: Any = ray.remote(PrivateNode)
    actors: list[Any] = []
    info: list[dict[str, Any]] = []
    try:
        for i in range(len(res.node_ids)):
            opts = {"num_cpus": 1, "num_gpus": res.gpus_per_node,
                    "scheduling_strategy": PlacementGroupSchedulingStrategy(res.pg, placement_group_bundle_index=i)}
            actors.append(actor_cls.options(**opts).remote())
        head: dict[str, Any] = ray.get(actors[0].start.remote(None, res.gpus_per_node, cpus_per_node,
                                              str(log_dir / "private_node_0.log"), ready_s, env))
        info.append(head)
        info += ray.get([a.start.remote(head["gcs"], res.gpus_per_node, cpus_per_node,
                                        str(log_dir / f"private_node_{i}.log"), ready_s, env)
                         for i, a in enumerate(actors[1:], start=1)])
        res.extra["private_nodes"] = [{k: v for k, v in n.items() if k != "pid"} for n in info]
        log(f"windtunnel: private runtime at {head['gcs']} on shared nodes "
            f"{json.dumps([n['node_id'] for n in info])}")
        yield head["gcs"]
    finally:
        for a in reversed(actors):
            try:
                ray.get(a.stop.remote(), timeout=60)
            except Exception:
                pass
            ray.kill(a)
