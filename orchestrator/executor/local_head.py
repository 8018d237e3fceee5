"""A local Ray head on 127.0.0.1 owned by a work directory, reused across orchestrator restarts.

`ray start --head` is run as an argv list with free ports, `--temp-dir=<workdir>/ray`, dashboard
on loopback, and `RAY_AUTH_MODE=token` with the token in `<workdir>/ray_auth_token` (mode 0600)
— the same settings the client and the jobs use. `<workdir>/ray_head.json` records the address,
so a restarted orchestrator reattaches to the same head (and its running jobs).
"""

from __future__ import annotations

import json
import os
import secrets
import socket
import subprocess
import sys
from pathlib import Path

from orchestrator.executor.base import ClusterUnreachable
from wtcommon.atomic import atomic_write_text
from wtcommon.files import short_hash
from wtcommon.polling import wait_until


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


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
        tmp = Path("/tmp") / f"wt-ray-{short_hash(str(workdir), 10)}"
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
    """The dashboard address of this workdir's head if it is alive, else None (never starts one)."""
    state = Path(workdir).resolve() / "ray_head.json"
    if not state.exists():
        return None
    try:
        info = json.loads(state.read_text())
    except ValueError:
        return None
    return info["dashboard"] if _alive(info["dashboard"]) else None


def head_temp_dir(workdir: Path) -> Path | None:
    """The temp dir of this workdir's (running or stopped) head, where Ray keeps its job logs."""
    state = Path(workdir).resolve() / "ray_head.json"
    if state.exists():
        try:
            return Path(json.loads(state.read_text())["temp_dir"])
        except (ValueError, KeyError):
            return None
    tmp = _temp_dir(Path(workdir).resolve())
    return tmp if tmp.exists() else None


def ensure_head(workdir: Path, *, num_cpus: int = 4, num_gpus: int = 0, timeout_s: float | None = None,
                attempts: int = 2) -> str:
    """Address (http://127.0.0.1:port) of this workdir's head, starting one if none is alive.

    A start that fails (Ray's "node timed out during startup" on a loaded machine) is cleaned up,
    so no half-started daemon is left behind, and tried again with fresh ports up to `attempts` times.
    The start may take `timeout_s` (default: `start_timeout_s()`).
    """
    workdir = Path(workdir).resolve()
    timeout_s = start_timeout_s() if timeout_s is None else timeout_s
    alive = running_head(workdir)
    if alive:
        return alive
    for attempt in range(1, attempts + 1):
        try:
            return _start_head(workdir, num_cpus=num_cpus, num_gpus=num_gpus, timeout_s=timeout_s)
        except ClusterUnreachable:
            if attempt == attempts:
                raise
    raise AssertionError("unreachable")


def _start_head(workdir: Path, *, num_cpus: int, num_gpus: int, timeout_s: float) -> str:
    # Every port explicit: several heads on one machine (other users, tests) must not collide on
    # Ray's fixed defaults (agent 52365, client server 10001, metrics), or the job agent never starts.
    ports = {name: _free_port() for name in ("port", "dashboard-port", "dashboard-agent-listen-port",
                                             "dashboard-agent-grpc-port", "runtime-env-agent-port",
                                             "metrics-export-port", "ray-client-server-port",
                                             "node-manager-port", "object-manager-port")}
    gcs_port, dash_port = ports["port"], ports["dashboard-port"]
    tmp = _temp_dir(workdir)
    tmp.mkdir(parents=True, exist_ok=True)
    os.chmod(tmp, 0o700)  # Ray's sockets, logs and session files: this user only
    argv = [
        _ray_bin(), "start", "--head", "--node-ip-address=127.0.0.1", *[f"--{k}={v}" for k, v in ports.items()],
        "--dashboard-host=127.0.0.1", f"--temp-dir={tmp}",
        f"--num-cpus={num_cpus}", f"--num-gpus={num_gpus}", "--include-dashboard=true",
        "--disable-usage-stats",
    ]
    address = f"http://127.0.0.1:{dash_port}"
    try:
        # cwd: the work directory, so jobs never import a user's modules by accident of where the head
        # started; plugin modules reach jobs through runtime_env py_modules (orchestrator.plugins)
        proc = subprocess.run(argv, env=_env(workdir), cwd=str(workdir),
                              capture_output=True, text=True, timeout=timeout_s)
        if proc.returncode != 0:
            raise ClusterUnreachable(f"could not start a local Ray head: {proc.stderr.strip()[-800:]}")
        if not wait_until(lambda: _alive(address), timeout_s, interval_s=0.2):
            raise ClusterUnreachable(f"local Ray head started but its dashboard {address} does not answer")
    except (ClusterUnreachable, subprocess.TimeoutExpired) as exc:
        _kill_head_processes(tmp, str(gcs_port))
        if isinstance(exc, subprocess.TimeoutExpired):
            raise ClusterUnreachable(f"the local Ray head (`ray start`) did not finish in {timeout_s:.0f} s — a "
                                     f"loaded machine? Set {START_TIMEOUT_ENV}=600 (seconds) and run the command "
                                     "again; nothing was marked failed") from None
        raise
    os.chmod(tmp, 0o700)  # `ray start` makes its temp dir world-writable (0777): this user only, again
    state = workdir / "ray_head.json"
    atomic_write_text(state, json.dumps({"dashboard": address, "gcs": f"127.0.0.1:{gcs_port}", "temp_dir": str(tmp)}))
    return address


def stop_head(workdir: Path) -> None:
    """Stop only this workdir's head (by its GCS address), never every Ray on the machine."""
    workdir = Path(workdir).resolve()
    state = workdir / "ray_head.json"
    if not state.exists():
        return
    info = json.loads(state.read_text())
    _kill_head_processes(Path(info["temp_dir"]), str(info["gcs"]).rsplit(":", 1)[-1])
    state.unlink(missing_ok=True)


def _kill_head_processes(tmp: Path, gcs_port: str) -> None:
    """Terminate (then kill) every process of the head whose temp dir is `tmp`, with their children.

    `ray stop` has no per-address form, so the head's processes are found by the temp dir in their
    argv; the Ray Client server carries none (and is re-parented to init), so it is matched by the
    head's GCS port, or it outlives the head.
    """
    import psutil

    me = os.getpid()
    pids = []
    for p in psutil.process_iter(["pid", "cmdline"]):
        try:
            cmd = " ".join(p.info["cmdline"] or [])
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            continue
        client = "ray.util.client.server" in cmd and f":{gcs_port} " in cmd + " "
        if (str(tmp) in cmd or client) and p.info["pid"] != me:
            pids.append(p)
    for p in list(pids):  # job drivers and workers are children of the head's processes
        try:
            pids += [c for c in p.children(recursive=True) if c.pid != me and c not in pids]
        except psutil.NoSuchProcess:
            pass
    for p in pids:
        try:
            p.terminate()
        except psutil.NoSuchProcess:
            pass
    psutil.wait_procs(pids, timeout=3)  # some Ray daemons outwait SIGTERM; the head is being discarded
    for p in pids:
        try:
            p.kill()
        except psutil.NoSuchProcess:
            pass
