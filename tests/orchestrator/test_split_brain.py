"""No split brain, no leaked heads (issue 29), against real parts: a real ledger, a real local Ray head with
token auth, the real MLflow store, and `campaign` processes on noop campaigns."""

from __future__ import annotations

import os
import signal
import sqlite3
import stat
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

REPO = Path(__file__).resolve().parents[2]
CAMPAIGN = str(Path(sys.executable).with_name("campaign"))

pytestmark = pytest.mark.slow


def _dump(db: Path) -> list[str]:
    """Every row of an SQLite database, as SQL: equal dumps = nothing was written."""
    with sqlite3.connect(db) as c:
        return list(c.iterdump())


def test_a_driver_stopped_past_its_lease_stops_at_its_next_step_and_writes_nothing(
        tree: Path, tmp_path: Path, head, monkeypatch, small_campaign) -> None:
    """Driver A (in this process) submits jobs, then stalls past its 15 s lease (as under SIGSTOP: between two
    steps); `campaign resume` (B, a real process) takes the campaign over, drives it and exits. When A goes
    on, its next step raises LeaseLost naming the takeover, and the ledger, the MLflow store and the set of
    Ray jobs are exactly as B left them: no write, no job submission after the takeover. Costs about 40 s
    of CPU (8 noop runs, two orchestrators)."""
    from orchestrator.cluster.local_head import head_temp_dir
    from orchestrator.engine.ledger import LeaseLost
    from orchestrator.engine.scheduler.loop import SchedulerConfig
    from orchestrator.session import Session

    addr, tok = head
    monkeypatch.setenv("RAY_AUTH_TOKEN_PATH", str(tok))
    monkeypatch.setenv("RAY_AUTH_MODE", "token")
    camp = small_campaign("fence")
    wd = tmp_path / "wd"
    env = {**os.environ, "RAY_AUTH_TOKEN_PATH": str(tok), "RAY_AUTH_MODE": "token"}
    sub = subprocess.run([CAMPAIGN, "submit", str(camp), "--ray-address", addr, "--workdir", str(wd), "--no-wait"],
                         env=env, cwd=REPO, capture_output=True, text=True, timeout=300)
    assert sub.returncode == 0, sub.stderr[-2000:]
    sess = Session(workdir=wd, ray_address=addr)
    sched = sess.scheduler("fence", SchedulerConfig(max_parallel=2, poll_s=0.2, lease_ttl_s=15.0, backoff_s=0.2))
    seen: dict[str, object] = {}

    def jobs() -> set[str]:
        return {j.submission_id for j in sess.executor.client.list_jobs() if "fence" in (j.submission_id or "")}

    def stall(counts: dict[str, int]) -> None:
        if seen or not (counts.get("training") or counts.get("evaluating")):
            return
        held = sess.ledger.driver("fence")
        assert held is not None
        time.sleep(max(0.0, held[1] - time.time()) + 0.5)  # A is stopped past its lease
        b = subprocess.run([CAMPAIGN, "resume", "fence", "--workdir", str(wd), "--timeout", "4"], env=env, cwd=REPO,
                           capture_output=True, text=True, timeout=300)
        assert b.returncode == 0, b.stderr[-2000:]
        seen["mode"] = stat.S_IMODE(os.stat(head_temp_dir(tok.parent)).st_mode)
        seen["ledger"], seen["mlflow"], seen["jobs"] = _dump(wd / "ledger.db"), _dump(wd / "mlflow.db"), jobs()

    with pytest.raises(LeaseLost, match="another orchestrator drove it meanwhile") as lost:
        sched.run(on_tick=stall)
    assert seen, "A never stalled: no job was active at a tick"
    assert lost.value.epoch + 1 == lost.value.current  # B's takeover, one epoch later
    assert _dump(wd / "ledger.db") == seen["ledger"]  # no ledger write after the takeover ...
    assert _dump(wd / "mlflow.db") == seen["mlflow"]  # ... no MLflow write ...
    assert jobs() == seen["jobs"]  # ... and no job submitted
    assert seen["mode"] == 0o700  # the head's temp dir while jobs run
    ev = [e.detail for e in sess.ledger.events("fence") if e.kind == "driver_lease"]
    assert len(ev) == 2 and ev[1].startswith(f"epoch {lost.value.current}: ") and "expired" in ev[1], ev
    sess.close()


def _gcs_servers(tmp: str) -> list[int]:
    out = []
    for p in psutil.process_iter(["pid", "cmdline"]):
        cmd = p.info["cmdline"] or []
        if cmd and cmd[0].endswith("gcs_server") and any(tmp + "/" in a for a in cmd):
            out.append(p.info["pid"])
    return out


def test_killing_the_orchestrator_while_its_head_starts_leaves_one_head_and_none_after_stop(
        tree: Path, tmp_path: Path, small_campaign) -> None:
    """`campaign submit` is SIGKILLed while `ray start` of its work dir's head is under way (its GCS server
    already up); the next command (`campaign resume`) ends with exactly one head for that work dir, listening
    only on 127.0.0.1 and only on the ports it recorded, its temp dir 0700 after jobs ran; `campaign head
    stop` leaves no process of it. Costs about 60 s of CPU (one or two head starts, a few noop jobs)."""
    from orchestrator.cluster.local_head import head_processes, head_status, read_state

    camp = small_campaign("headkill", policies=["baseline"], seeds=[1, 2])
    wd = tmp_path / "wd"
    env = {k: v for k, v in os.environ.items() if k not in ("RAY_AUTH_TOKEN_PATH", "RAY_ADDRESS")}
    a = subprocess.Popen([CAMPAIGN, "submit", str(camp), "--workdir", str(wd)], env=env, cwd=REPO,
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.time() + 240
    while time.time() < deadline:
        info = read_state(wd)
        if info and info.get("state") == "starting" and _gcs_servers(info["temp_dir"]):
            break
        assert a.poll() is None, "submit ended before its head started"
        time.sleep(0.2)
    else:
        raise AssertionError("the head never started")
    a.send_signal(signal.SIGKILL)
    a.wait()
    tmp = info["temp_dir"]
    try:
        # --keep-head: resume stops a head it started or adopted (issue 27); here the head is inspected after it
        b = subprocess.run([CAMPAIGN, "resume", "headkill", "--workdir", str(wd), "--timeout", "6", "--keep-head"],
                           env=env, cwd=REPO, capture_output=True, text=True, timeout=400)
        assert b.returncode == 0, (b.stdout + b.stderr)[-3000:]
        st = head_status(wd)
        assert st["state"] == "running" and len(_gcs_servers(st["temp_dir"])) == 1, st
        assert st["temp_dir"] == tmp and st["temp_dir_mode"] == "0700"
        workers = range(st["ports"]["min-worker-port"], st["ports"]["max-worker-port"] + 1)
        ports = set(st["ports"].values()) | set(workers)
        listening = [(c.laddr.ip, c.laddr.port) for p in head_processes(Path(tmp), st["gcs"].rsplit(":", 1)[-1])
                     for c in _listening(p)]
        assert listening and all(ip in ("127.0.0.1", "::ffff:127.0.0.1") for ip, _ in listening), listening
        assert {port for _, port in listening} <= ports, sorted(listening)
    finally:
        stop = subprocess.run([CAMPAIGN, "head", "stop", "--workdir", str(wd)], cwd=REPO, capture_output=True,
                              text=True, timeout=120)
    assert stop.returncode == 0 and "stopped the local Ray head" in stop.stdout, stop.stdout + stop.stderr
    assert _gcs_servers(tmp) == [] and head_processes(Path(tmp), st["gcs"].rsplit(":", 1)[-1]) == []
    status = subprocess.run([CAMPAIGN, "head", "status", "--workdir", str(wd)], cwd=REPO, capture_output=True,
                            text=True, timeout=60)
    assert status.returncode == 0 and "stopped" in status.stdout


def _listening(p: psutil.Process) -> list:
    try:
        return [c for c in p.net_connections(kind="tcp") if c.status == psutil.CONN_LISTEN]
    except (psutil.NoSuchProcess, psutil.AccessDenied):
        return []
