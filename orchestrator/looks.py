"""Interim looks of sequential seed designs, kept in the ledger (table `sequential_looks`).

analysis/sequential/looks.py takes a look and builds its rows and the immutability check as pure
functions; this module stores and reads them through the ledger (its WAL and busy-timeout settings,
its schema version and migration), given a `Ledger` or a ledger URL.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from analysis.sequential.design import SequentialDesign
from analysis.sequential.looks import check_design, look_rows, looks_frame
from orchestrator.engine.ledger import open_ledger
from orchestrator.engine.ledger.base import Ledger

if TYPE_CHECKING:
    import pandas as pd

    from orchestrator.engine.workdir import Workdir


def _with_ledger(ledger: Ledger | str) -> tuple[Ledger, bool]:
    """(ledger, whether we opened it) for a Ledger or a URL."""
    return (ledger, False) if isinstance(ledger, Ledger) else (open_ledger(ledger), True)


def record_look(ledger: Ledger | str, campaign: str, decisions: pd.DataFrame, design: SequentialDesign, *,
                aggregate: str | None = None, design_name: str = "default") -> int:
    """Store a look's decisions (replacing the same look and comparison, so re-recording is idempotent);
    SequentialError when an earlier look under `design_name` used another design. Returns rows written."""
    led, opened = _with_ledger(ledger)
    try:
        return led.record_looks(campaign, look_rows(decisions, design, aggregate=aggregate, design_name=design_name),
                                check=check_design(campaign, design, aggregate=aggregate, design_name=design_name))
    finally:
        if opened:
            led.close()


def read_looks(ledger: Ledger | str, campaign: str) -> pd.DataFrame:
    """Every recorded interim look of a campaign (empty frame when none)."""
    led, opened = _with_ledger(ledger)
    try:
        return looks_frame(led.looks(campaign))
    finally:
        if opened:
            led.close()


def runs_its_own_looks(wd: Workdir, campaign: str) -> bool:
    """Whether `campaign` in this work dir's ledger runs a sequential seed design: then `submit`/`resume` take
    its looks and add its batches, and a look by hand (`campaign seeds-look`) is refused."""
    from orchestrator.engine.spec import CampaignSpec

    if not wd.has_ledger():
        return False
    led = open_ledger(wd)
    try:
        stored = led.campaign_spec(campaign)
    finally:
        led.close()
    return bool(stored and CampaignSpec.model_validate_json(stored).seed_design)


def look_at_records(records: Path, suite: str, design: dict, look: int,
                    aggregate: str | None = None) -> tuple[pd.DataFrame, SequentialDesign, str]:
    """Test every comparison of `records` at `look` under the sequential `design` (its mapping, as a campaign's
    `seed_design:` block): (decisions, the design, the aggregate looked at).
    A missing records file is a `UserError` (exit 2), as bad records or a bad design are."""
    from analysis.aggregates import run_table
    from analysis.records import read_records
    from analysis.sequential.looks import look_at_runs
    from evaluation.suite import load_suite
    from wtcommon.errors import as_user_error

    with as_user_error(FileNotFoundError):
        s = load_suite(suite)
        seq = SequentialDesign.from_mapping(design, where="seeds-look")
        agg = aggregate or s.aggregate_names[0]
        runs = run_table(read_records(records, suite=s), s)
        return look_at_runs(runs, seq, look, agg), seq, agg
