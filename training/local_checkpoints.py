"""The local trainer's checkpoints and where a run restarts: save, the last resumable checkpoint, the kept metrics.

Why a module of its own: these are what make `training.local.run_training` idempotent (a verified finished run
is returned as is, a killed one resumes from its last verified checkpoint); the step loop stays in `training.local`.
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

from training import resume_state as rs
from training.backend import Checkpoint, TrainResult
from training.checkpoints import save_checkpoint_meta, verify_checkpoint
from wtcommon.atomic import atomic_write_json


def save_checkpoint(model, tokenizer, out_dir: Path, step: int, meta: dict[str, Any],
                    state: Callable[[Path], None] | None = None) -> Checkpoint:
    """HF-format save into a temp dir (with the trainer's resumable `state` when given), `completed.json` (with
    weight sha256) written last, then rename."""
    final = out_dir / "checkpoints" / f"global_step_{step}"
    tmp = final.with_name(f".global_step_{step}.tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    model.save_pretrained(tmp)
    tokenizer.save_pretrained(tmp)
    if state is not None:
        state(tmp)
    save_checkpoint_meta(tmp, step, meta)
    shutil.rmtree(final, ignore_errors=True)
    os.replace(tmp, final)
    return Checkpoint(step, final)


def resume_point(out: Path, config_hash: str) -> Checkpoint | None:
    """The latest checkpoint of this exact request that verifies and holds the trainer's state, else None; the
    checkpoints after it (a save that the kill interrupted) are removed."""
    ckdir = out / "checkpoints"
    found = []
    for d in ckdir.glob("global_step_*") if ckdir.is_dir() else []:
        try:
            info = json.loads((d / "completed.json").read_text())
        except (OSError, ValueError):
            continue
        if info.get("config_hash") == config_hash and rs.has_trainer_state(d) and verify_checkpoint(d):
            found.append(Checkpoint(int(info["step"]), d))
    if not found:
        return None
    last = max(found, key=lambda c: c.step)
    for d in ckdir.iterdir():
        if d != last.path and not any(d == c.path for c in found if c.step < last.step):
            shutil.rmtree(d, ignore_errors=True)
    return last


def saved_checkpoints(out: Path) -> list[Checkpoint]:
    """The checkpoints a resumed run already holds (those `resume_point` kept), by step."""
    return sorted((Checkpoint(int(json.loads((d / "completed.json").read_text())["step"]), d)
                   for d in (out / "checkpoints").glob("global_step_*")), key=lambda c: c.step)


def kept_rows(path: Path, upto: int) -> list[dict[str, Any]]:
    """The metrics rows of steps <= `upto` from an interrupted run's file (a torn last line dropped)."""
    from wtcommon.metrics import read_metrics_jsonl

    if not path.is_file():
        return []
    rows, _ = read_metrics_jsonl(path, torn_tail="skip")
    return [r for r in rows if int(r.get("step", 0)) <= upto]


def finished_result(out: Path, config_hash: str) -> TrainResult | None:
    """The earlier result of this exact request, if its final checkpoint verifies."""
    rp = out / "result.json"
    if not rp.exists():
        return None
    res = json.loads(rp.read_text())
    if res.get("config_hash") != config_hash:
        return None
    cks = [Checkpoint(c["step"], Path(c["path"])) for c in res["checkpoints"]]
    if not cks or not all(verify_checkpoint(c.path) for c in cks):
        return None
    return TrainResult(cks, Path(res["metrics_path"]), res["compute"])


def write_result(out: Path, result: TrainResult, extra: dict[str, Any]) -> None:
    """`<out>/result.json` (what `finished_result` reads back), written atomically with the one writer."""
    atomic_write_json(out / "result.json", {**result.to_json(), **extra}, indent=1)
