"""What a stage process is doing now, for `campaign status`: one small JSON file per run, replaced atomically.

Why: a run's ledger state says `training` for the whole stage, and for minutes of it nothing else moves (a base
model being built, a lock held by another run's build, an evaluation generating). The stage sets
`$WINDTUNNEL_PHASE_FILE` (the run dir's `phase.json`); code deep in a stage says what it does without knowing the
run; a process without the variable (a library call, a test) writes nothing."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

PHASE_ENV = "WINDTUNNEL_PHASE_FILE"
PHASE_FILE = "phase.json"


def set_phase(phase: str, **fields: Any) -> None:
    """Record `phase` (e.g. "building the base model") with its start time, where the stage asked for it."""
    target = os.environ.get(PHASE_ENV)
    if not target:
        return
    from wtcommon.atomic import atomic_write_text

    try:
        atomic_write_text(Path(target), json.dumps({"phase": phase, "since": time.time(), **fields}))
    except OSError:
        pass  # progress display only: never fail a stage over it


def read_phase(run_dir: Path) -> dict[str, Any] | None:
    """The run's last recorded phase, or None (none written, or unreadable mid-replace on odd filesystems)."""
    try:
        d = json.loads((Path(run_dir) / PHASE_FILE).read_text())
    except (OSError, ValueError):
        return None
    return d if isinstance(d, dict) and isinstance(d.get("phase"), str) else None
