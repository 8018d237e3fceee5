"""SQLAlchemy ledger: SQLite in WAL mode by default (`sqlite:///<workdir>/ledger.db`), any URL.

All writes are single short transactions (on SQLite `BEGIN IMMEDIATE`, so a read-then-write never
races another writer); state changes use compare-and-set on the current state, so two orchestrators
(or a restarted one) can never both advance the same run. Schema creation and the campaign upsert
are retried on a conflict with a concurrent writer (two orchestrators starting on a fresh ledger).

Generations: a run whose run_id gets a new run_key (a changed spec) is *superseded*: it keeps its
row (and state, if it was recorded) with `superseded_by` set, `runs()` leaves it out, so it is never
scheduled or collected again. Each campaign has an `instance_id` created once per ledger (= per work
dir with the default SQLite ledger) that submission ids carry, and a driver lease so a second
orchestrator on the same campaign waits instead of racing the first.

Fencing: the driver lease has an epoch, incremented on every takeover. A ledger object that took the
lease remembers its epoch, and every write it makes about that campaign checks it inside the write
transaction: a stale epoch (another orchestrator took over while this one was stopped) raises LeaseLost
and writes nothing, so a driver that outlived its lease can never change the ledger again.

The parts, one module each: the tables and their migration (`sql_schema`), the engine, transactions and
fence (`sql_store.SQLStore`), campaigns and run rows (`sql_runs.RunRows`), driver and run leases
(`sql_leases.Leases`), attempts, events and looks (`sql_history.History`); `SQLLedger` composes them.
"""

from __future__ import annotations

from orchestrator.engine.ledger.base import Ledger
from orchestrator.engine.ledger.sql_history import History
from orchestrator.engine.ledger.sql_leases import Leases
from orchestrator.engine.ledger.sql_runs import RunRows


class SQLLedger(RunRows, Leases, History, Ledger):
    """The `Ledger` on an SQLAlchemy URL: each part of it a class of its own over one `SQLStore`."""
