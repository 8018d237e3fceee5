"""The rollout watch and the launcher's guard (issue 48): a verl launch waiting on a rollout start-up or weight sync
past its bound is ended, all of it, as an infrastructure failure naming the wait; the shared-memory segments a
killed launch leaves are removed, those still in use are not. Real processes and real /dev/shm segments."""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from multiprocessing import shared_memory

import pytest

from orchestrator.engine.scheduler.retries import classify_failure
from training.rollout_guard import RolloutStallError, shm_segments, stall_message, sweep_shm
from training.verl_launcher import _run, _session
from wtcommon import rollout_watch


def test_a_wait_is_overdue_only_past_its_bound(tmp_path, monkeypatch):
    monkeypatch.setenv("WINDTUNNEL_WEIGHT_SYNC_S", "30")
    rollout_watch.begin(tmp_path, "weight sync", "the weight sync after step 3")
    rec = json.loads((tmp_path / rollout_watch.WATCH_FILE).read_text())
    assert rec["bound_s"] == 30 and rec["what"] == "the weight sync after step 3"
    assert rollout_watch.overdue(tmp_path, now=rec["since"] + 29) is None
    late = rollout_watch.overdue(tmp_path, now=rec["since"] + 31)
    assert late is not None and late["waited_s"] == pytest.approx(31)
    rollout_watch.end(tmp_path)
    assert rollout_watch.overdue(tmp_path, now=rec["since"] + 1e6) is None  # nothing waited on
    (tmp_path / rollout_watch.WATCH_FILE).write_text("{torn")
    assert rollout_watch.overdue(tmp_path) is None


def test_bounds_come_from_the_environment_else_their_defaults():
    assert rollout_watch.bound_s("start-up", {}) == 900.0
    assert rollout_watch.bound_s("weight sync", {"WINDTUNNEL_WEIGHT_SYNC_S": "45"}) == 45.0
    assert rollout_watch.bound_s("weight sync", {"WINDTUNNEL_WEIGHT_SYNC_S": "soon"}) == 300.0
    assert rollout_watch.bound_s("weight sync", {"WINDTUNNEL_WEIGHT_SYNC_S": "-1"}) == 300.0


def test_a_stall_is_an_infrastructure_failure_named_with_its_variable():
    msg = stall_message({"kind": "weight sync", "what": "the first weight sync", "bound_s": 20, "waited_s": 21.4})
    assert "within 20 s" in msg and "WINDTUNNEL_WEIGHT_SYNC_S" in msg
    assert classify_failure(f"windtunnel-stage-error: RolloutStallError: {msg}", "", 1) == "infra"


def test_an_overdue_launch_is_ended_whole_and_raises(tmp_path, monkeypatch):
    """A launch (a session with a child) whose trainer recorded a wait 1 s long: ended within seconds."""
    monkeypatch.setenv("WINDTUNNEL_ROLLOUT_STARTUP_S", "1")
    rollout_watch.begin(tmp_path, "start-up", "the rollout servers")
    child = "import subprocess, time; subprocess.Popen(['sleep', '120']); time.sleep(120)"
    t0 = time.time()
    with pytest.raises(RolloutStallError, match="did not finish the rollout servers within 1 s"):
        _run([sys.executable, "-c", child], {}, tmp_path / "train.log", tmp_path / "train.pid", watch_dir=tmp_path)
    assert time.time() - t0 < 30
    pid = int((tmp_path / "train.pid").read_text().split()[0])
    assert _session(pid) == []  # the leader and its child are gone
    assert "windtunnel: verl's rollout did not finish" in (tmp_path / "train.log").read_text()
    assert not (tmp_path / rollout_watch.WATCH_FILE).exists()


def test_the_sweep_removes_new_unused_segments_and_keeps_used_and_older_ones():
    older = shared_memory.SharedMemory(name=f"verl_weights_test_old_{time.time_ns()}", create=True, size=4096)
    try:
        before = shm_segments()
        assert older.name in before
        used = shared_memory.SharedMemory(name=f"verl_weights_test_used_{time.time_ns()}", create=True, size=4096)
        left = shared_memory.SharedMemory(name=f"psm_test_left_{time.time_ns()}", create=True, size=4096)
        left.close()  # a killed launch's segment: nobody maps it, nobody unlinked it
        try:
            removed = sweep_shm(before)
            assert left.name in removed and used.name not in removed and older.name not in removed
            assert used.name in shm_segments() and left.name not in shm_segments()
        finally:
            used.close()
            used.unlink()
    finally:
        older.close()
        older.unlink()


def test_a_killed_launch_leaves_no_named_semaphore_and_a_live_one_stays(tmp_path):
    """vLLM's executor makes a multiprocessing Lock (a named semaphore); a launch killed whole (its resource
    tracker with it) cannot unlink it: the launcher's sweep does. One this live process holds is kept."""
    import multiprocessing as mp

    held = mp.get_context("spawn").Lock()  # new during the launch, but mapped by a live process
    child = ("import multiprocessing as mp, os, signal, sys; lock = mp.get_context('spawn').Lock(); "
             "print(lock._semlock.name, flush=True); os.killpg(0, signal.SIGKILL)")
    rc = _run([sys.executable, "-c", child], {}, tmp_path / "train.log", tmp_path / "train.pid")
    assert rc != 0
    name = (tmp_path / "train.log").read_text().split()[0].lstrip("/")
    assert name.startswith(("mp-", "loky-"))
    assert f"sem.{name}" not in shm_segments() and not (Path("/dev/shm") / f"sem.{name}").exists()
    assert f"sem.{held._semlock.name.lstrip('/')}" in shm_segments()
