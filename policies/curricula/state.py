"""Curriculum state on disk: arrays in an .npz (loaded with allow_pickle=False), scalars in a JSON sidecar.

Never pickle: a checkpoint is read back on resume, possibly by another machine, and a pickle runs code."""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import numpy as np

from policies.curricula.base import Curriculum
from policies.errors import PolicyConfigError
from wtcommon.atomic import atomic_write_bytes, atomic_write_json


def sidecar_path(path: str | Path) -> Path:
    """`state.npz` -> `state.json`: the scalars beside the arrays."""
    return Path(path).with_suffix(".json")


def save_state(path: str | Path, curriculum: Curriculum) -> None:
    """Write `curriculum.state_dict()` atomically: arrays to `path` (.npz), the rest to its JSON sidecar."""
    state = curriculum.state_dict()
    arrays = {k: v for k, v in state.items() if isinstance(v, np.ndarray)}
    scalars = {k: v for k, v in state.items() if not isinstance(v, np.ndarray)}
    buf = io.BytesIO()
    np.savez(buf, **arrays)  # type: ignore[arg-type]
    atomic_write_bytes(path, buf.getvalue())
    atomic_write_json(sidecar_path(path), scalars)


def load_state(path: str | Path) -> dict[str, Any]:
    """The state dict `save_state` wrote (arrays and scalars), for `Curriculum.load_state_dict`."""
    p, side = Path(path), sidecar_path(path)
    if not p.is_file() or not side.is_file():
        raise PolicyConfigError(f"{p}: curriculum state not found (needs {p.name} and {side.name})")
    try:
        with np.load(p, allow_pickle=False) as data:
            state: dict[str, Any] = {k: data[k] for k in data.files}
        state.update(json.loads(side.read_text(encoding="utf-8")))
    except (OSError, ValueError) as exc:
        raise PolicyConfigError(f"{p}: unreadable curriculum state ({exc})") from None
    return state
