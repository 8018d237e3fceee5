"""verl on CPU: same seed -> same step-1 rollouts and metrics, and a run SIGKILLed after its first checkpoint
resumes (`trainer.resume_mode=auto`) from it with the mixer's state restored (issue 11, "Done when")."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
pytestmark = [pytest.mark.slow, pytest.mark.timeout(2400)]  # several CPU verl runs on 2 cores

TRAIN = """
import sys, yaml
from pathlib import Path
from orchestrator.training.backend import TrainRequest
from orchestrator.training.local import load_model_config, load_recipe
from orchestrator.training.verl_launcher import VerlBackend
out = Path(sys.argv[1])
req = TrainRequest(run_id="r/reward_gap/s3", run_key="rg3", seed=3, out_dir=out,
                   policy=yaml.safe_load(open("campaigns/policy/reward_gap.yaml")), recipe=load_recipe("verl_cpu_tiny"),
                   model_path="builtin:tiny_qwen2", total_steps=2, save_freq=1,
                   extra={"model": load_model_config("tiny_qwen2"), "mlflow_uri": f"sqlite:///{out}/mlflow.db"})
VerlBackend().train(req)
"""


def _start(out: Path) -> subprocess.Popen:
    out.mkdir(parents=True, exist_ok=True)
    return subprocess.Popen([sys.executable, "-c", TRAIN, str(out)], cwd=REPO, stdout=open(out / "driver.log", "ab"),
                            stderr=subprocess.STDOUT)


def _metrics(out: Path, name: str = "metrics.jsonl") -> dict[int, dict]:
    rows: dict[int, dict] = {}
    for line in (out / name).read_text().splitlines():
        obj = json.loads(line)
        rows[int(obj["step"])] = obj["data"]
    return rows


def _stop(proc: subprocess.Popen, out: Path) -> None:
    """Kill a launch left running by a failed assertion: verl's process group (its own session), then the driver."""
    if proc.poll() is None:
        pid = out / "train.pid"
        if pid.exists():
            try:
                os.killpg(int(pid.read_text()), signal.SIGKILL)
            except ProcessLookupError:
                pass
        proc.kill()
        proc.wait()


def test_same_seed_same_step_and_resume_after_sigkill(tmp_path):
    full, killed = tmp_path / "full", tmp_path / "killed"
    a, b = _start(full), _start(killed)
    try:
        _check(full, killed, a, b)
    finally:
        _stop(a, full)
        _stop(b, killed)


def _check(full: Path, killed: Path, a: subprocess.Popen, b: subprocess.Popen) -> None:
    tracker = killed / "verl_checkpoints" / "latest_checkpointed_iteration.txt"
    t0 = time.time()
    logged = killed / "verl_metrics" / "launch_000.jsonl"

    def step1_done() -> bool:  # checkpoint 1 written and step 1 logged (verl logs after saving)
        return tracker.exists() and tracker.read_text().strip() == "1" and logged.exists() and bool(logged.read_text().strip())

    while not step1_done():
        assert b.poll() is None, (killed / "train.log").read_text()[-3000:]
        assert time.time() - t0 < 900, "no first checkpoint"
        time.sleep(0.5)
    os.killpg(int((killed / "train.pid").read_text()), signal.SIGKILL)  # verl's whole process group
    b.kill()
    b.wait()
    assert a.wait(timeout=900) == 0, (full / "train.log").read_text()[-3000:]
    first = _metrics(killed, "verl_metrics/launch_000.jsonl")  # what the killed launch logged
    assert 1 in first, "the killed launch logged no step 1"
    assert "windtunnel/mix_state_restored_step" not in first[1]  # a fresh start restores nothing

    b2 = _start(killed)  # same out dir: resume_mode=auto finds global_step_1
    try:
        assert b2.wait(timeout=900) == 0, (killed / "train.log").read_text()[-3000:]
    finally:
        _stop(b2, killed)
    resumed, ref = _metrics(killed), _metrics(full)
    assert resumed[2]["windtunnel/mix_state_restored_step"] == 1.0  # the mixer's state came back
    assert "Resuming from" in (killed / "train.log").read_text()  # verl's own resume (`trainer_base.py:_load_checkpoint`)
    # determinism: same seed -> identical step-1 rollouts (scores, lengths) and actor update; and the resumed
    # step 2 (restored weights, optimizer, dataloader, mixer, rollout seeds) equals the uninterrupted one
    keys = ["critic/score/mean", "response_length/mean", "actor/grad_norm", "actor/pg_loss"]
    for step in (1, 2):
        for key in keys + [k for k in ref[2] if k.startswith("windtunnel/target_prop_")]:
            assert resumed[step][key] == pytest.approx(ref[step][key], rel=1e-4, abs=1e-6), (step, key)
    # the mixer's target and realised domain proportions are in verl's logged metrics
    assert any(k.startswith("windtunnel/target_prop_") for k in ref[2])
    assert any(k.startswith("windtunnel/realised_prop_") for k in ref[2])
