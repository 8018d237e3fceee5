"""The `noop` training backend: no model, the same stage, ledger and executor path as a real one.

Why: fault, scheduling and tracking tests need runs that take the whole campaign path (Ray Jobs,
stage locks, verified outputs, retries) in a second. The recipe steers it: `sleep_s` (how long
training takes), `fail: config` (a deterministic configuration error, never retried) or any other
true `fail` (a transient failure, retried). Each real execution appends a line to the run dir's
`executions.log`, so a test can prove nothing ran twice.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

from orchestrator.training.backend import Checkpoint, TrainingBackend, TrainingConfigError, TrainRequest, TrainResult


def log_execution(run_dir: Path, stage: str) -> None:
    """One line per real execution of `stage` in `run_dir/executions.log` (pid and time)."""
    run_dir.mkdir(parents=True, exist_ok=True)
    with open(run_dir / "executions.log", "a") as f:
        f.write(f"{stage} {os.getpid()} {time.time()}\n")


class NoopBackend(TrainingBackend):
    """A checkpoint per run holding its run_key, and one metrics line per step."""

    name = "noop"
    needs_train_files = False  # no data is read

    def train(self, req: TrainRequest) -> TrainResult:
        r = req.recipe
        log_execution(req.out_dir.parent, "train")
        time.sleep(float(r.get("sleep_s", 0)))
        if r.get("fail") == "config":
            raise TrainingConfigError(f"noop recipe configured to fail deterministically (run {req.run_id})")
        if r.get("fail"):
            raise RuntimeError(f"noop recipe configured to fail (run {req.run_id})")
        ckpt = req.out_dir / "checkpoints" / f"global_step_{req.total_steps}"
        ckpt.mkdir(parents=True, exist_ok=True)
        (ckpt / "config.json").write_text(json.dumps({"noop": True, "run_key": req.run_key}))
        (ckpt / "model.safetensors").write_bytes(req.run_key.encode())
        metrics = req.out_dir / "metrics.jsonl"
        metrics.write_text("".join(json.dumps({"step": s, "noop": 1.0}) + "\n" for s in range(1, req.total_steps + 1)))
        compute = {"wall_s": float(r.get("sleep_s", 0)), "gpu_s": 0.0, "rollout_tokens": 0, "update_tokens": 0}
        return TrainResult([Checkpoint(req.total_steps, ckpt)], metrics, compute)
