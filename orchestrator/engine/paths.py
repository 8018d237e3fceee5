"""Where a run's files live: `<workdir>/runs/<campaign>/<run_key>`, a campaign's collected outputs
`<workdir>/results/<campaign>/`, and the check that every path the tool writes stays inside the work directory.
The one place those two folder names are spelled (tests/test_code_rules.py keeps it so).

A module of its own so that tracking, the scheduler and the stages find run dirs without importing each
other (tracking ↔ stages was an import cycle). The stage errors live in `wtcommon.errors`.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING
from training.errors import StageConfigError

if TYPE_CHECKING:
    from orchestrator.engine.grid import RunSpec


def inside(workdir: Path, *parts: str) -> Path:
    """`workdir/parts...` resolved, refused unless it stays inside the work directory (names are validated at
    plan time; this is the last line of defence for anything the tool writes)."""
    root = Path(workdir).resolve()
    path = root.joinpath(*parts).resolve()
    if path == root or not path.is_relative_to(root):
        raise StageConfigError(f"{'/'.join(parts)!r}: resolves to {path}, outside the work directory {root}")
    return path


RUNS, RESULTS = "runs", "results"


def runs_root(workdir: Path) -> Path:
    """`<workdir>/runs`: every campaign's run folders (what the analysis reads training evidence from)."""
    return Path(workdir) / RUNS


def campaign_runs(workdir: Path, campaign: str) -> Path:
    """`<workdir>/runs/<campaign>`: one campaign's run folders."""
    return inside(workdir, RUNS, campaign)


def run_dir(workdir: Path, spec: RunSpec) -> Path:
    """`<workdir>/runs/<campaign>/<run_key>`: per campaign, since records carry its labels."""
    return inside(workdir, RUNS, spec.campaign, spec.run_key)


def results_file(workdir: Path, campaign: str, name: str) -> Path:
    """`<workdir>/results/<campaign>/<name>`: a campaign's collected records and what is derived from them."""
    return inside(workdir, RESULTS, campaign, name)
