"""Ray's temp dir in /tmp for a root too long for its unix socket paths (107 bytes), and its removal."""

from __future__ import annotations

import shutil
from pathlib import Path

from wtcommon.hashing import text_hash


def short_ray_temp(root: Path, prefix: str) -> Path:
    """`/tmp/<prefix>-<hash of root>`: the temp dir of a head or cluster whose own root is too long for Ray."""
    return Path("/tmp") / f"{prefix}-{text_hash(str(root), 10)}"


def remove_short_ray_temp(tmp: Path, root: Path, prefix: str) -> None:
    """Remove `tmp` if it is the /tmp fallback of `root`, once its processes are stopped, so a stopped head
    leaves no session folder behind; a temp dir inside the root is the user's and keeps its logs."""
    if Path(tmp) == short_ray_temp(root, prefix):
        shutil.rmtree(tmp, ignore_errors=True)
