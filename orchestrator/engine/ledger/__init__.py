"""Run ledger: campaigns, runs, attempts, events behind a small interface; SQLite WAL by default."""

from __future__ import annotations

from pathlib import Path

from orchestrator.engine.workdir import Workdir
from wtcommon.atomic import unwritable
from wtcommon.errors import UserError
from orchestrator.engine.ledger.base import (Attempt, CampaignBusy, Event, Ledger, LedgerError, LeaseLost, NotInLedger,
                                             RunningAttempt, RunRow, UpsertDiff)
from orchestrator.engine.ledger.sql import SQLLedger
from orchestrator.engine.ledger.states import IllegalTransition, RunState

__all__ = ["Attempt", "CampaignBusy", "Event", "NotInLedger", "RunningAttempt", "LedgerError", "LeaseLost", "Ledger",
           "RunRow", "UpsertDiff", "SQLLedger",
           "IllegalTransition", "RunState", "open_ledger"]


def open_ledger(where: str | Path | Workdir | Ledger) -> Ledger:
    """The one ledger opener, in the shape of Optuna's `get_storage`: a `Ledger` is returned as it is; an
    SQLAlchemy URL opens that database; a `Workdir` opens its ledger (the URL it was given, else its SQLite
    file, creating the directory); a path is a work directory."""
    if isinstance(where, Ledger):
        return where
    if isinstance(where, str) and "://" in where:
        return SQLLedger(where)
    wd = Workdir.of(where)
    if wd.given_ledger_url is None:
        if not wd.root.is_dir() and (why := unwritable(wd.root)) is not None:  # before anything is created
            raise UserError(f"--workdir {wd.root}: cannot create the work directory there: {why}")
        wd.root.mkdir(parents=True, exist_ok=True)
    return SQLLedger(wd.ledger_url)
