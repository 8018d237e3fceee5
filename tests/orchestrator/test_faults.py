"""Fault tolerance against a real local Ray head (token auth): SIGKILL + resume, retry cap,
unreachable cluster, duplicate submission ids. Runs use the `noop` backend: no model, but the
same ledger → scheduler → Ray Jobs → `python -m orchestrator.engine.stages` → verify path."""

from __future__ import annotations

import json
import os
import random
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from wtcommon.polling import wait_until

REPO = Path(__file__).resolve().parents[2]
CAMPAIGN = str(Path(sys.executable).with_name("campaign"))

pytestmark = pytest.mark.slow


def _env(tok: Path) -> dict[str, str]:
    return {**os.environ, "RAY_AUTH_TOKEN_PATH": str(tok), "RAY_AUTH_MODE": "token"}


def _db(wd: Path, q: str) -> list[tuple]:
    with sqlite3.connect(wd / "ledger.db") as c:
        return c.execute(q).fetchall()


def _wait_for_runs(wd: Path, campaign: str, timeout_s: float = 120) -> None:
    def listed() -> bool:
        try:
            return bool(_db(wd, f"select count(*) from runs where campaign='{campaign}'")[0][0])
        except sqlite3.Error:  # the ledger may not exist yet, or be mid-migration
            return False

    if wait_until(listed, timeout_s, 0.2):
        return
    raise AssertionError(f"{campaign} never reached the ledger in {wd}")


def test_token_file_is_private(head) -> None:
    _, tok = head
    assert oct(tok.stat().st_mode & 0o777) == "0o600" and len(tok.read_text()) == 64


def test_sigkill_at_random_points_then_resume_loses_and_duplicates_nothing(
        tree: Path, tmp_path: Path, head, small_campaign) -> None:
    addr, tok = head
    camp = small_campaign("kill")  # 4 policies × 2 seeds = 8 runs
    wd = tmp_path / "wd"
    rng = random.Random(int(os.environ.get("WT_FAULT_SEED", "7")))
    base = [CAMPAIGN, "--ray-address", addr, "--workdir", str(wd), "--max-parallel", "4"]
    cmds = [[CAMPAIGN, "submit", str(camp), *base[1:]]] + [[CAMPAIGN, "resume", "kill", *base[1:]]] * 2
    for cmd in cmds[:2]:  # the submitting orchestrator and the first resume are both SIGKILLed
        p = subprocess.Popen(cmd, env=_env(tok), cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        _wait_for_runs(wd, "kill")  # kill while driving, not while the CLI still imports (a loaded machine)
        time.sleep(rng.uniform(1.0, 10.0))
        p.send_signal(signal.SIGKILL)
        p.wait()
    done = subprocess.run(cmds[2], env=_env(tok), cwd=REPO, capture_output=True, text=True, timeout=240)
    assert done.returncode == 0, done.stderr[-2000:]
    states = _db(wd, "select run_id, state from runs where campaign='kill'")
    assert len(states) == 8 and {s for _, s in states} == {"recorded"}
    # every run trained and evaluated exactly once (the noop stages log each real execution)
    for (key,) in _db(wd, "select run_key from runs where campaign='kill'"):
        lines = (wd / "runs" / "kill" / key / "executions.log").read_text().split()
        assert lines[0::3].count("train") == 1 and lines[0::3].count("evaluate") == 1, key
    att = _db(wd, "select stage, status, count(*) from attempts where campaign='kill' group by 1, 2")
    assert sorted(att) == [("evaluate", "succeeded", 8), ("train", "succeeded", 8)]
    recs = subprocess.run([sys.executable, "-c",
                           f"import pandas as pd; print(len(pd.read_parquet('{wd}/results/kill/records.parquet')))"],
                          capture_output=True, text=True)
    assert int(recs.stdout) == 8 * 12  # one record per run × benchmark
    # MLflow, written live by whichever orchestrator drove: one run per cell despite the kills, all ended
    with sqlite3.connect(wd / "mlflow.db") as c:
        ml = c.execute("select t.value, r.status, r.end_time - r.start_time from runs r join tags t on "
                       "t.run_uuid = r.run_uuid and t.key = 'windtunnel.run_key' join experiments e on "
                       "e.experiment_id = r.experiment_id where e.name = 'kill'").fetchall()
    keys = {k for (k,) in _db(wd, "select run_key from runs where campaign='kill'")}
    assert len(ml) == 8 and {k for k, _, _ in ml} == keys, ml
    assert {st for _, st, _ in ml} == {"FINISHED"} and min(d for _, _, d in ml) > 1000  # real durations (ms)


def test_always_failing_job_stops_at_retry_cap(tree: Path, tmp_path: Path, head, small_campaign) -> None:
    addr, tok = head
    # a cap of 2: one retry after the first failure, then the dead letter (each attempt is a Ray job)
    camp = small_campaign("failing", recipe="noop_fail", policies=["baseline"], seeds=[1],
                     retries={"max_attempts": 2, "backoff_s": 0.1, "backoff_max_s": 0.2})
    wd = tmp_path / "wd"
    p = subprocess.run([CAMPAIGN, "submit", str(camp), "--ray-address", addr, "--workdir", str(wd)],
                       env=_env(tok), cwd=REPO, capture_output=True, text=True, timeout=300)
    assert p.returncode == 1, p.stderr[-2000:]
    (state, stage, reason), = _db(wd, "select state, stage, reason from runs")
    assert (state, stage) == ("failed", "train") and "retry cap 2" in reason and "configured to fail" in reason
    assert _db(wd, "select status, count(*) from attempts group by 1") == [("failed", 2)]
    st = subprocess.run([CAMPAIGN, "status", "failing", "--workdir", str(wd), "--json"], capture_output=True, text=True)
    assert json.loads(st.stdout)["states"] == {"failed": 1}


def test_unreachable_cluster_is_not_a_failed_run(tree: Path, tmp_path: Path) -> None:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # closed once the block ends: nothing listens there
    wd = tmp_path / "wd"
    p = subprocess.run([CAMPAIGN, "submit", str(tree / "small.yaml"), "--ray-address", f"http://127.0.0.1:{port}",
                        "--workdir", str(wd)], cwd=REPO, capture_output=True, text=True, timeout=120)
    assert p.returncode == 3 and "unreachable" in p.stderr, p.stderr
    assert "Traceback" not in p.stderr
    assert not (wd / "ledger.db").exists()  # found while checking the runs fit the live cluster: nothing written
    # a campaign already registered, driven against the unreachable cluster: exit 3, no run marked failed
    from orchestrator.session import Session, plan

    spec, runs = plan(tree / "small.yaml")
    sess = Session(wd)
    sess.submit(spec, runs)
    sess.close()
    p = subprocess.run([CAMPAIGN, "resume", "small", "--ray-address", f"http://127.0.0.1:{port}", "--workdir",
                        str(wd)], cwd=REPO, capture_output=True, text=True, timeout=120)
    assert p.returncode == 3 and "unreachable" in p.stderr and "Traceback" not in p.stderr, p.stderr
    assert {s for (s,) in _db(wd, "select state from runs")} <= {"planned", "queued"}
    assert _db(wd, "select count(*) from attempts") == [(0,)]


def test_duplicate_submission_id_is_recognised(head) -> None:
    from orchestrator.engine.executor import DuplicateSubmission, RayJobsExecutor

    addr, tok = head
    ex = RayJobsExecutor(addr, token_file=tok)
    sid = f"wt-dup-{os.getpid()}-{time.time_ns()}"
    ex.submit(sid, [sys.executable, "-c", "print('once')"])
    with pytest.raises(DuplicateSubmission):
        ex.submit(sid, [sys.executable, "-c", "print('twice')"])
    wait_until(lambda: ex.status(sid).done, 60, 0.3)
    assert ex.status(sid).state == "SUCCEEDED" and "once" in ex.logs(sid) and "twice" not in ex.logs(sid)
    assert ex.status("wt-never-submitted").state == "MISSING"
