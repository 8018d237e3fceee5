"""The rollout watch: what a verl launch is waiting on that can hang, since when, and for how long it may.

Why: verl's weight sync blocks on a ZMQ socket until the rollout server has loaded every bucket, and verl's
server start-up waits on the engine; when the server side fails (seen: vLLM's CPU build refusing verl's in-place
reload) the trainer waits for ever and the run hangs instead of failing. The trainer (policies/verl/trainer.py)
writes `<train dir>/rollout_watch.json` before each such wait and removes it after; the launcher
(training/rollout_guard.py) ends a launch whose watch is older than its bound, as an infrastructure failure. The
bounds are the run's environment: `WINDTUNNEL_ROLLOUT_STARTUP_S` (workers and rollout servers starting, default
900 s) and `WINDTUNNEL_WEIGHT_SYNC_S` (one weight sync, default 300 s); a recipe sets them in its `env:`."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

WATCH_FILE = "rollout_watch.json"
BOUNDS = {"start-up": ("WINDTUNNEL_ROLLOUT_STARTUP_S", 900.0), "weight sync": ("WINDTUNNEL_WEIGHT_SYNC_S", 300.0)}


def bound_s(kind: str, env: dict[str, str] | os._Environ[str] | None = None) -> float:
    """The bound of a `kind` of wait ("start-up" or "weight sync") from the environment, else its default."""
    name, default = BOUNDS[kind]
    raw = (os.environ if env is None else env).get(name)
    try:
        value = float(raw) if raw not in (None, "") else default
    except ValueError:
        value = default
    return value if value > 0 else default


def begin(train_dir: Path, kind: str, what: str) -> None:
    """Record that the launch now waits on `what` (a `kind` of wait, bounded by its variable)."""
    from wtcommon.atomic import atomic_write_text

    atomic_write_text(Path(train_dir) / WATCH_FILE, json.dumps(
        {"kind": kind, "what": what, "since": time.time(), "bound_s": bound_s(kind), "pid": os.getpid()}))


def end(train_dir: Path) -> None:
    """The wait is over."""
    (Path(train_dir) / WATCH_FILE).unlink(missing_ok=True)


def overdue(train_dir: Path, now: float | None = None) -> dict[str, Any] | None:
    """The recorded wait when it has lasted longer than its bound (with `waited_s`), else None."""
    try:
        rec = json.loads((Path(train_dir) / WATCH_FILE).read_text())
        waited = (time.time() if now is None else now) - float(rec["since"])
        bound = float(rec["bound_s"])
    except (OSError, ValueError, KeyError, TypeError):
        return None
    return {**rec, "waited_s": waited} if waited > bound else None
