"""A local Ray head on 127.0.0.1 owned by a work directory, reused across orchestrator restarts.

`ray start --head` is run as an argv list with free ports, `--temp-dir=<workdir>/ray`, dashboard
on loopback, and `RAY_AUTH_MODE=token` with the token in `<workdir>/ray_auth_token` (mode 0600)
— the same settings the client and the jobs use. `<workdir>/ray_head.json` records the address,
so a restarted orchestrator reattaches to the same head (and its running jobs).

A start is recoverable: the record is written (state "starting": temp dir and every port) before `ray
start` runs and again with its PID, all under the work dir's lock (`ray_head.lock`). A command killed
while the head starts leaves that record; the next one adopts the head if it came up, else stops every
process of that temp dir by PID (never `ray stop`), so no second head is ever started beside a first.

Private: a guard process (`orchestrator.cluster.head_guard`) lives as long as the head and keeps its
temp dir and everything under it 0700 (Ray makes its directories 0777 again when jobs run).

Ports: every port Ray opens is chosen here and recorded (`PORT_FLAGS`, the two metrics ports Ray only
takes from the environment, and the workers' port range); the node's address is 127.0.0.1
(RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0, else Ray swaps 127.0.0.1 for the host's address), so the services
that bind the node address listen on loopback. README "What listens where" lists each port.
"""

from __future__ import annotations

import json
import os
import secrets
import socket
import stat
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from orchestrator.engine.executor.base import ClusterUnreachable
from orchestrator.engine.workdir import Workdir
from wtcommon.atomic import atomic_write_json
from wtcommon.hashing import text_hash
from wtcommon.polling import wait_until
from wtcommon.ports import free_port, port_free
from orchestrator.cluster import ray_temp
from orchestrator.cluster.processes import terminate_then_kill


def _free_port() -> int:
    return free_port("127.0.0.1")


def token_file(workdir: Path) -> Path:
    """The workdir's Ray token (created once, mode 0600; 256-bit hex like Ray's own generator)."""
    path = Path(workdir).resolve() / "ray_auth_token"
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w") as f:
            f.write(secrets.token_hex(32))
    os.chmod(path, 0o600)
    return path


def _ray_bin() -> str:
    return str(Path(sys.executable).with_name("ray"))


def _env(workdir: Path) -> dict[str, str]:
    repo = str(Path(__file__).resolve().parents[2])
    return {**os.environ, "RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN_PATH": str(token_file(workdir)),
            "PYTHONPATH": repo + (os.pathsep + os.environ["PYTHONPATH"] if os.environ.get("PYTHONPATH") else ""),
            "RAY_USAGE_STATS_ENABLED": "0"}


def _alive(address: str) -> bool:
    host, port = address.split("//")[-1].split(":")
    try:
        with socket.create_connection((host, int(port)), timeout=1):
            return True
    except OSError:
        return False


def _temp_dir(workdir: Path) -> Path:
    """`<workdir>/ray`, or a short /tmp path when that is too long for Ray's unix sockets (107 chars)."""
    if os.environ.get("WT_RAY_TMP"):
        return Path(os.environ["WT_RAY_TMP"])
    tmp = workdir / "ray"
    if len(str(tmp)) > 40:
        tmp = Path("/tmp") / f"wt-ray-{text_hash(str(workdir), 10)}"
    return tmp


START_TIMEOUT_ENV = "WINDTUNNEL_RAY_START_TIMEOUT"
DEFAULT_START_TIMEOUT_S = 240.0  # `ray start` was seen taking 72 s on a loaded 2-core machine


def start_timeout_s() -> float:
    """Seconds a local head may take to start: $WINDTUNNEL_RAY_START_TIMEOUT, else 240."""
    raw = os.environ.get(START_TIMEOUT_ENV, "")
    try:
        value = float(raw) if raw else DEFAULT_START_TIMEOUT_S
    except ValueError:
        raise ClusterUnreachable(f"{START_TIMEOUT_ENV}={raw!r} is not a number of seconds; e.g. "
                                 f"{START_TIMEOUT_ENV}=600") from None
    if not value > 0:
        raise ClusterUnreachable(f"{START_TIMEOUT_ENV}={raw!r} must be a positive number of seconds")
    return value


def running_head(workdir: Path) -> str | None:
    """The dashboard address of this workdir's head if it is running and alive, else None (never starts one;
    a head still recorded as starting is not running yet: `ensure_head` adopts or stops it)."""
    info = read_state(workdir)
    if info is None or info.get("state", "running") != "running" or "dashboard" not in info:
        return None
    return str(info["dashboard"]) if _alive(str(info["dashboard"])) else None


def head_temp_dir(workdir: Path) -> Path | None:
    """The temp dir of this workdir's (running or stopped) head, where Ray keeps its job logs."""
    state = Workdir(workdir).head_state_file
    if state.exists():
        try:
            return Path(json.loads(state.read_text())["temp_dir"])
        except (ValueError, KeyError):
            return None
    tmp = _temp_dir(Path(workdir).resolve())
    return tmp if tmp.exists() else None


# `ray start` flags of the ports it opens (each chosen free here, recorded in ray_head.json) ...
PORT_FLAGS = ("port", "dashboard-port", "dashboard-agent-listen-port", "dashboard-agent-grpc-port",
              "runtime-env-agent-port", "metrics-export-port", "ray-client-server-port", "node-manager-port",
              "object-manager-port")
# ... and the two Ray takes only from the environment (its defaults 44217/44227 go to the first head on a machine)
ENV_PORTS = {"autoscaler-metrics-port": "AUTOSCALER_METRIC_PORT", "dashboard-metrics-port": "DASHBOARD_METRIC_PORT"}
WORKER_PORTS = 64  # one per Ray worker process (job drivers, supervisors, actors, idle workers)


def _worker_range() -> tuple[int, int]:
    """A free block of WORKER_PORTS ports below the kernel's ephemeral range: workers bind their port when
    they start, long after it was picked, and an outgoing connection never takes a port from there."""
    import random

    try:
        lo = int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        lo = 32768
    top = max(lo, 12000 + WORKER_PORTS) - WORKER_PORTS
    for _ in range(200):
        base = random.randrange(10000, top)
        if all(port_free(p) for p in range(base, base + WORKER_PORTS)):
            return base, base + WORKER_PORTS - 1
    raise ClusterUnreachable(f"no {WORKER_PORTS} consecutive free ports below {lo} for the local head's workers")


def _state_path(workdir: Path) -> Path:
    return Workdir(workdir).head_state_file


def read_state(workdir: Path) -> dict | None:
    """The work dir's head record (`ray_head.json`), or None when there is none (or it is unreadable)."""
    try:
        info = json.loads(_state_path(workdir).read_text())
    except (OSError, ValueError):
        return None
    return info if isinstance(info, dict) and "temp_dir" in info else None


def _write_state(workdir: Path, info: dict) -> None:
    atomic_write_json(_state_path(workdir), info)


@contextmanager
def head_lock(workdir: Path) -> Iterator[None]:
    """The work dir's head lock: one command at a time starts, adopts or stops its head. Released by the
    kernel when the holder dies (a SIGKILLed orchestrator never blocks the next command)."""
    import fcntl

    path = Path(workdir).resolve() / "ray_head.lock"
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


def ensure_head(workdir: Path, *, num_cpus: int = 4, num_gpus: int = 0, timeout_s: float | None = None,
                attempts: int = 2) -> str:
    """Address (http://127.0.0.1:port) of this workdir's head, starting one if none is alive.

    Under the work dir's head lock: a live head is reused; a head a killed command left starting is
    adopted once it answers, else stopped by PID with whatever else runs in its temp dir, before a new one
    starts. A start that fails (Ray's "node timed out during startup" on a loaded machine) is cleaned up,
    so no half-started daemon is left behind, and tried again with fresh ports up to `attempts` times.
    The start may take `timeout_s` (default: `start_timeout_s()`).
    """
    workdir = Path(workdir).resolve()
    timeout_s = start_timeout_s() if timeout_s is None else timeout_s
    alive = running_head(workdir)
    if alive:
        _ensure_guard(workdir)
        return alive
    workdir.mkdir(parents=True, exist_ok=True)
    with head_lock(workdir):
        alive = running_head(workdir) or _adopt(workdir, timeout_s)
        if alive:
            _ensure_guard(workdir)
            return alive
        _stop_leftovers(workdir)
        for attempt in range(1, attempts + 1):
            try:
                return _start_head(workdir, num_cpus=num_cpus, num_gpus=num_gpus, timeout_s=timeout_s)
            except ClusterUnreachable:
                if attempt == attempts:  # its processes are stopped; the error quotes its start log
                    ray_temp.release(_temp_dir(workdir), workdir, Workdir(workdir).job_logs)
                    raise
    raise AssertionError("unreachable")


def _adopt(workdir: Path, timeout_s: float) -> str | None:
    """A head whose start a killed command left recorded as "starting": wait for its `ray start` to finish,
    then keep it if its dashboard answers (recorded as running, temp dir private, guard started)."""
    info = read_state(workdir)
    if info is None or info.get("state") != "starting" or "dashboard" not in info:
        return None
    pid = int(info.get("start_pid") or 0)
    if pid and _is_ray_start(pid, info["temp_dir"]):
        wait_until(lambda: not _is_ray_start(pid, info["temp_dir"]), timeout_s, interval_s=0.2)
    if _is_ray_start(pid, info["temp_dir"]) or not wait_until(lambda: _alive(info["dashboard"]), 5, interval_s=0.2):
        return None
    gcs = str(info["gcs"]).rsplit(":", 1)[-1]
    names = [c[0] for c in _cmdlines(head_processes(Path(info["temp_dir"]), gcs)) if c]
    if not any(n.endswith("raylet") for n in names) or not any(n.endswith("gcs_server") for n in names):
        return None  # `ray start` ended before the node was whole: stopped and started again instead
    _finish_start(workdir, info)
    return str(info["dashboard"])


def _is_ray_start(pid: int, temp_dir: str) -> bool:
    import psutil

    try:
        cmd = psutil.Process(pid).cmdline()
    except (psutil.NoSuchProcess, psutil.AccessDenied, ValueError):
        return False
    return "start" in cmd and f"--temp-dir={temp_dir}" in cmd


def _stop_leftovers(workdir: Path) -> None:
    """Stop what is left of an earlier head of this work dir (a half-started or dead head, its record
    possibly missing): every process of its temp dir and its Ray Client server, by PID."""
    info = read_state(workdir)
    tmp = Path(info["temp_dir"]) if info else _temp_dir(workdir)
    gcs = str(info.get("gcs", "")).rsplit(":", 1)[-1] if info else ""
    start_pid = int(info.get("start_pid") or 0) if info else 0
    if start_pid and _is_ray_start(start_pid, str(tmp)):
        _kill_pids([start_pid])
    if head_processes(tmp, gcs):
        _kill_head_processes(tmp, gcs)
    _state_path(workdir).unlink(missing_ok=True)


def _kill_pids(pids: list[int]) -> None:
    import psutil

    procs = []
    for pid in pids:
        try:
            procs.append(psutil.Process(pid))
        except psutil.NoSuchProcess:
            continue
    for p in procs:
        try:
            p.kill()
        except psutil.NoSuchProcess:
            pass
    psutil.wait_procs(procs, timeout=3)


def _ports() -> dict[str, int]:
    """Distinct free ports for every flag and environment port, and the workers' range."""
    names = [*PORT_FLAGS, *ENV_PORTS]
    ports: dict[str, int] = {}
    while len(ports) < len(names):
        p = _free_port()
        if p not in ports.values():
            ports[names[len(ports)]] = p
    ports["min-worker-port"], ports["max-worker-port"] = _worker_range()
    return ports


def _start_head(workdir: Path, *, num_cpus: int, num_gpus: int, timeout_s: float) -> str:
    # Every port explicit: several heads on one machine (other users, tests) must not collide on
    # Ray's fixed defaults (agent 52365, client server 10001, metrics 44217/44227), or the job agent never starts.
    ports = _ports()
    gcs_port, dash_port = ports["port"], ports["dashboard-port"]
    tmp = _temp_dir(workdir)
    tmp.mkdir(parents=True, exist_ok=True)
    os.chmod(tmp, 0o700)  # Ray's sockets, logs and session files: this user only
    argv = [
        _ray_bin(), "start", "--head", "--node-ip-address=127.0.0.1", *[f"--{k}={ports[k]}" for k in PORT_FLAGS],
        f"--min-worker-port={ports['min-worker-port']}", f"--max-worker-port={ports['max-worker-port']}",
        "--dashboard-host=127.0.0.1", f"--temp-dir={tmp}",
        f"--num-cpus={num_cpus}", f"--num-gpus={num_gpus}", "--include-dashboard=true",
        "--disable-usage-stats",
    ]
    address = f"http://127.0.0.1:{dash_port}"
    env = {**_env(workdir), **{var: str(ports[name]) for name, var in ENV_PORTS.items()},
           "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0"}  # node address 127.0.0.1, not the host's
    info = {"state": "starting", "dashboard": address, "gcs": f"127.0.0.1:{gcs_port}", "temp_dir": str(tmp),
            "ports": ports, "start_pid": 0, "pids": []}
    _write_state(workdir, info)  # before `ray start`: a command killed from here on leaves a record
    try:
        # cwd: the work directory, so jobs never import a user's modules by accident of where the head
        # started; plugin modules reach jobs through runtime_env py_modules (orchestrator.engine.plugins)
        # its output goes to a file, not a pipe to us: killed now, we must not take `ray start` with us half way
        # (a write to a closed pipe would end it between two daemons); the next command adopts what it started
        with open(tmp / "ray_start.log", "w") as log:
            proc = subprocess.Popen(argv, env=env, cwd=str(workdir), stdin=subprocess.DEVNULL, stdout=log,
                                    stderr=subprocess.STDOUT)
        _write_state(workdir, {**info, "start_pid": proc.pid})
        try:
            proc.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
            raise
        if proc.returncode != 0:
            tail = (tmp / "ray_start.log").read_text(errors="replace").strip()[-800:]
            raise ClusterUnreachable(f"could not start a local Ray head: {tail}")
        if not wait_until(lambda: _alive(address), timeout_s, interval_s=0.2):
            raise ClusterUnreachable(f"local Ray head started but its dashboard {address} does not answer")
    except (ClusterUnreachable, subprocess.TimeoutExpired) as exc:
        _kill_head_processes(tmp, str(gcs_port))
        _state_path(workdir).unlink(missing_ok=True)
        if isinstance(exc, subprocess.TimeoutExpired):
            raise ClusterUnreachable(f"the local Ray head (`ray start`) did not finish in {timeout_s:.0f} s — a "
                                     f"loaded machine? Set {START_TIMEOUT_ENV}=600 (seconds) and run the command "
                                     "again; nothing was marked failed") from None
        raise
    _finish_start(workdir, {**info, "start_pid": proc.pid})
    return address


def _finish_start(workdir: Path, info: dict) -> None:
    """A head that answers: temp dir private again (`ray start` makes it 0777), its guard started, its
    PIDs recorded and the record marked running."""
    tmp = Path(info["temp_dir"])
    os.chmod(tmp, 0o700)
    gcs = str(info["gcs"]).rsplit(":", 1)[-1]
    pids = sorted(p.pid for p in head_processes(tmp, gcs))
    _write_state(workdir, {**info, "state": "running", "pids": pids})
    _ensure_guard(workdir)


def _ensure_guard(workdir: Path) -> None:
    """Start the head's permission guard unless one runs (it exits with the head's GCS server)."""
    info = read_state(workdir)
    if info is None or info.get("state") != "running":
        return
    tmp = Path(info["temp_dir"])
    procs = head_processes(tmp, "")
    cmds = _cmdlines(procs)
    if any("orchestrator.cluster.head_guard" in c for c in cmds):
        return
    gcs = [p for p, c in zip(procs, cmds, strict=True) if c and c[0].endswith("gcs_server")]
    if not gcs:
        return
    repo = str(Path(__file__).resolve().parents[2])
    subprocess.Popen([sys.executable, "-m", "orchestrator.cluster.head_guard", f"--temp-dir={tmp}",
                      f"--gcs-pid={gcs[0].pid}"], cwd=repo, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                     stderr=subprocess.DEVNULL, start_new_session=True)


def _cmdlines(procs: list) -> list[list[str]]:
    import psutil

    out = []
    for p in procs:
        try:
            out.append(p.cmdline())
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            out.append([])
    return out


def head_status(workdir: Path) -> dict:
    """What `campaign head status` shows: state (running, starting, not answering, stopped), address,
    temp dir and its mode, every recorded port, and the head's live processes (PID and name)."""
    workdir = Path(workdir).resolve()
    info = read_state(workdir) or {}
    tmp = Path(info["temp_dir"]) if info else _temp_dir(workdir)
    gcs = str(info.get("gcs", "")).rsplit(":", 1)[-1]
    procs = head_processes(tmp, gcs)
    names = {p.pid: _name(p) for p in procs}
    if info.get("state") == "running" and _alive(str(info.get("dashboard", ""))):
        state = "running"
    elif info.get("state") == "starting":
        state = "starting" if procs else "stopped"
    else:
        state = "not answering" if procs else "stopped"
    mode = f"{stat.S_IMODE(tmp.stat().st_mode):04o}" if tmp.exists() else ""
    return {"state": state, "address": info.get("dashboard", ""), "gcs": info.get("gcs", ""), "temp_dir": str(tmp),
            "temp_dir_mode": mode, "ports": info.get("ports", {}), "pids": names}


def _name(p) -> str:
    import psutil

    try:
        cmd = p.cmdline()
    except (psutil.NoSuchProcess, psutil.AccessDenied):
        return "?"
    if not cmd:
        return "?"
    for mod in ("dashboard.py", "log_monitor.py", "monitor.py", "ray.util.client.server",
                "orchestrator.cluster.head_guard"):
        if any(mod in a for a in cmd):
            return mod.rsplit(".", 1)[0] if mod.endswith(".py") else mod
    return Path(cmd[0]).name


def head_processes(tmp: Path, gcs_port: str) -> list:
    """The live processes of the head whose temp dir is `tmp`: those naming it in their argv, the Ray
    Client server (matched by the GCS port), and all their descendants (agents, job drivers, workers)."""
    import psutil

    me = os.getpid()
    t = str(tmp)
    found: dict[int, Any] = {}
    for p in psutil.process_iter(["pid", "cmdline"]):
        try:
            args = p.info["cmdline"] or []
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            continue
        cmd = " ".join(args)
        ours = any(a == t or a.endswith("=" + t) or t + "/" in a for a in args)
        client = bool(gcs_port) and "ray.util.client.server" in cmd and f":{gcs_port} " in cmd + " "
        if (ours or client) and p.info["pid"] != me:
            found[p.pid] = p
    for p in list(found.values()):
        try:
            for c in p.children(recursive=True):
                if c.pid != me:
                    found.setdefault(c.pid, c)
        except psutil.NoSuchProcess:
            pass
    return list(found.values())


def stop_head(workdir: Path) -> list[int]:
    """Stop only this workdir's head (a running or half-started one) by the PIDs of its processes, never
    every Ray on the machine (`ray stop`); the PIDs stopped."""
    workdir = Path(workdir).resolve()
    info = read_state(workdir)
    tmp = Path(info["temp_dir"]) if info else _temp_dir(workdir)
    if info is None and not tmp.exists():
        return []
    with head_lock(workdir):
        gcs = str(info.get("gcs", "")).rsplit(":", 1)[-1] if info else ""
        start_pid = int(info.get("start_pid") or 0) if info else 0
        pids = [start_pid] if start_pid and _is_ray_start(start_pid, str(tmp)) else []
        _kill_pids(pids)
        pids += [p.pid for p in head_processes(tmp, gcs)]
        _kill_head_processes(tmp, gcs)
        ray_temp.release(tmp, workdir, Workdir(workdir).job_logs)  # a /tmp temp dir: its job logs kept, then gone
        _state_path(workdir).unlink(missing_ok=True)
    return sorted(set(pids))


def _kill_head_processes(tmp: Path, gcs_port: str) -> None:
    """Terminate (then kill) every process of the head whose temp dir is `tmp`, with their children.

    `ray stop` has no per-address form, so the head's processes are found by the temp dir in their
    argv; the Ray Client server carries none (and is re-parented to init), so it is matched by the
    head's GCS port, or it outlives the head. Repeated until two scans half a second apart find none: a
    `ray start` killed half way may still be spawning daemons, and a process caught mid-exec shows no argv.
    """

    empty = 0
    for _ in range(8):
        pids = head_processes(tmp, gcs_port)
        if not pids:
            empty += 1
            if empty == 2:
                return
            time.sleep(0.5)
            continue
        empty = 0
        terminate_then_kill(pids)
