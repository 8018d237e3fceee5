"""`submit --drain-on-sigterm` (what a Slurm allocation's driver runs, issue 52), on the session's local Ray head so
it is proven where Slurm is not installed: SIGTERM mid-training stops the stage's Ray job, records its attempt as
failed with class infra, puts the run back to queued without spending its retry budget and exits 5; `resume`
then trains it once more and records it. Cost: 74-84 s of wall time measured alone, ~20 s of it the session's head
(when no other test started it), then two noop train stages of 8 s and one evaluate stage through Ray Jobs."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from tests.campaign_ledger import runs_and_attempts

CAMPAIGN = str(Path(sys.executable).with_name("campaign"))


@pytest.mark.slow
def test_sigterm_drains_the_in_flight_stage_as_infra_and_resume_finishes(tree: Path, tmp_path: Path, head) -> None:
    addr, tok = head
    (tree / "recipe" / "noop8.yaml").write_text(yaml.safe_dump({"name": "noop8", "sleep_s": 8}))
    spec = yaml.safe_load((tree / "small.yaml").read_text())
    spec.update(name="drainme", recipe="noop8", policies=["baseline"], seeds=[1])
    camp = tree / "drainme.yaml"
    camp.write_text(yaml.safe_dump(spec))
    wd = tmp_path / "wd"
    env = {**os.environ, "RAY_AUTH_TOKEN_PATH": str(tok), "RAY_AUTH_MODE": "token"}
    driver = subprocess.Popen([CAMPAIGN, "submit", str(camp), "--ray-address", addr, "--workdir", str(wd),
                               "--no-doctor", "--drain-on-sigterm"], env=env, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True)
    try:
        t0 = time.time()
        while not list((wd / "runs" / "drainme").glob("*/executions.log")):  # the stage process is training
            assert driver.poll() is None and time.time() - t0 < 240, "the train stage never started"
            time.sleep(0.5)
        driver.send_signal(signal.SIGTERM)
        out, err = driver.communicate(timeout=120)
    finally:
        if driver.poll() is None:
            driver.kill()
    assert driver.returncode == 5, err[-2000:]
    assert "1 in-flight stage(s) drained and recorded as infra failures" in err and "Traceback" not in err
    (row,), (att,) = runs_and_attempts(wd, "drainme")
    assert (row.state, row.failure_class, att.status, att.failure_class) == ("queued", "infra", "failed", "infra")
    assert att.reason.startswith("SIGTERM") and "failures" not in row.outputs  # no retry spent on it
    log = wd / "runs" / "drainme" / row.run_key / "executions.log"
    time.sleep(9)  # the drained job was stopped: its sleep would have ended by now and written a checkpoint
    assert not (wd / "runs" / "drainme" / row.run_key / "train_done.json").exists()
    p = subprocess.run([CAMPAIGN, "resume", "drainme", "--workdir", str(wd)], env=env, capture_output=True,
                       text=True, timeout=300)
    assert p.returncode == 0, p.stderr[-2000:]
    (row,), atts = runs_and_attempts(wd, "drainme")
    assert row.state == "recorded" and [a.status for a in atts] == ["failed", "succeeded", "succeeded"]
    assert log.read_text().split()[::3] == ["train", "train", "evaluate"]
