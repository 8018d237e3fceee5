"""Run ledger: campaigns, runs, attempts, events behind a small interface; SQLite WAL by default."""

from __future__ import annotations

from pathlib import Path

from orchestrator.ledger.base import CampaignBusy, Ledger, LedgerError, LeaseLost, RunRow, UpsertDiff
from orchestrator.ledger.sql import SQLLedger
from orchestrator.ledger.states import IllegalTransition, RunState

__all__ = ["CampaignBusy", "LedgerError", "LeaseLost", "Ledger", "RunRow", "UpsertDiff", "SQLLedger",
           "IllegalTransition", "RunState", "open_ledger", "default_url"]


def default_url(workdir: Path) -> str:
    return f"sqlite:///{Path(workdir).resolve() / 'ledger.db'}"


def open_ledger(url_or_workdir: str | Path) -> Ledger:
    """A ledger from an SQLAlchemy URL, or the default SQLite file inside a work directory."""
    s = str(url_or_workdir)
    if "://" in s:
        return SQLLedger(s)
    Path(s).mkdir(parents=True, exist_ok=True)
    return SQLLedger(default_url(Path(s)))
