"""Where a run's files live: `<workdir>/runs/<campaign>/<run_key>`, and the check that every path the tool
writes stays inside the work directory.

A module of its own so that tracking, the scheduler and the stages find run dirs without importing each
other (tracking ↔ stages was an import cycle). The stage errors live in `wtcommon.errors`.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING
from wtcommon.errors import StageConfigError

if TYPE_CHECKING:
    from orchestrator.grid import RunSpec


def inside(workdir: Path, *parts: str) -> Path:
    """`workdir/parts...` resolved, refused unless it stays inside the work directory (names are validated at
    plan time; this is the last line of defence for anything the tool writes)."""
    root = Path(workdir).resolve()
    path = root.joinpath(*parts).resolve()
    if path == root or not path.is_relative_to(root):
        raise StageConfigError(f"{'/'.join(parts)!r}: resolves to {path}, outside the work directory {root}")
    return path


def run_dir(workdir: Path, spec: RunSpec) -> Path:
    """`<workdir>/runs/<campaign>/<run_key>`: per campaign, since records carry its labels."""
    return inside(workdir, "runs", spec.campaign, spec.run_key)
