"""What a test reads back after a `campaign submit` subprocess: the campaign's runs and attempts from the work
dir's ledger (opened and closed here), a guard that never leaves the subprocess running, each verl run's metrics
and train dir, and the mid-run SIGKILL the verl campaign tests resume from."""

from __future__ import annotations

import json
import signal
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import yaml

from orchestrator.engine.ledger import Attempt, RunRow, open_ledger
from training.verl_launcher import cancel


def runs_and_attempts(workdir: Path, campaign: str) -> tuple[list[RunRow], list[Attempt]]:
    """The campaign's current runs (in grid order) and every attempt, read in one ledger session."""
    led = open_ledger(workdir)
    try:
        return led.runs(campaign), led.attempts(campaign)
    finally:
        led.close()


@contextmanager
def reaped(proc: subprocess.Popen) -> Iterator[subprocess.Popen]:
    """Kill and wait for `proc` on the way out if it is still running (a failed assertion must not leave it)."""
    try:
        yield proc
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def verl_metrics(path: Path) -> dict[int, dict]:
    """verl's per-step metrics file as {step: metrics} (its lines nest them under `data`)."""
    return {int(o["step"]): o.get("data") or {} for o in map(json.loads, path.read_text().splitlines())}


def train_dir_of(runs: Path, policy: str) -> Path | None:
    """The train dir of the campaign run whose resolved policy is `policy`, once it exists."""
    for d in runs.glob("*/train"):
        pol = d / "policy.yaml"
        if pol.exists() and (yaml.safe_load(pol.read_text()) or {}).get("name") == policy:
            return d
    return None


def kill_after_first_checkpoint(proc: subprocess.Popen, runs: Path, policy: str, timeout: float = 1200) -> Path:
    """SIGKILL verl's whole process group (as the launcher records it in train.pid) once the run's checkpoint 1
    is written and its step 1 logged (verl logs after saving), before step 2's checkpoint."""
    t0 = time.time()
    while True:
        assert proc.poll() is None, "the campaign ended before the run to kill was killed"
        assert time.time() - t0 < timeout, f"{policy}: no first checkpoint"
        train = train_dir_of(runs, policy)
        if train is not None:
            tracker = train / "verl_checkpoints" / "latest_checkpointed_iteration.txt"
            logged = sorted((train / "verl_metrics").glob("launch_*.jsonl"))
            if (tracker.exists() and tracker.read_text().strip() == "1" and logged
                    and logged[-1].read_text().strip()):
                assert cancel(train, signal.SIGKILL)
                return train
        time.sleep(0.2)
