"""Verifiable checkpoints: `completed.json` (step, sha256 of every weight file, run metadata) is written
last into an HF directory, and a checkpoint counts only when every weight still matches it.

Shared by the local backend and the verl launcher (which merges verl's shards into HF directories), so
neither imports the other.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from training.backend import TrainingError
from wtcommon.hashing import sha256_file


def save_checkpoint_meta(ckpt_dir: Path, step: int, meta: dict[str, Any]) -> None:
    """Write `completed.json` (step, sha256 of every weight file, run metadata) into an HF directory."""
    weights = sorted(Path(ckpt_dir).glob("*.safetensors"))
    if not weights:
        raise TrainingError(f"{ckpt_dir}: no *.safetensors weights to record; the save or merge did not finish")
    info = {"step": step, "sha256": {w.name: sha256_file(w) for w in weights}, **meta}
    (Path(ckpt_dir) / "completed.json").write_text(json.dumps(info, indent=1, sort_keys=True))


def verify_checkpoint(path: Path) -> bool:
    """True when `completed.json` exists and every weight file matches its recorded sha256."""
    done = Path(path) / "completed.json"
    if not done.exists():
        return False
    info = json.loads(done.read_text())
    return bool(info.get("sha256")) and all(
        (Path(path) / name).exists() and sha256_file(Path(path) / name) == digest
        for name, digest in info["sha256"].items()
    )
