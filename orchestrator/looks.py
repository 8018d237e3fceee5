"""Interim looks of sequential seed designs, kept in the ledger (table `sequential_looks`).

analysis/sequential/looks.py takes a look and builds its rows and the immutability check as pure
functions; this module stores and reads them through the ledger (its WAL and busy-timeout settings,
its schema version and migration), given a `Ledger` or a ledger URL.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from analysis.sequential.design import SequentialDesign
from analysis.sequential.looks import check_design, look_rows, looks_frame
from orchestrator.ledger import open_ledger
from orchestrator.ledger.base import Ledger

if TYPE_CHECKING:
    import pandas as pd


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
