"""The SQL ledger's history: each run's attempts (one per submitted stage job), the campaign's event log,
and the interim looks of sequential seed designs (immutable per named design once written).
"""

from __future__ import annotations

from typing import Any, TypeVar
from collections.abc import Callable

import sqlalchemy as sa

from orchestrator.engine.ledger.base import Attempt, Event, RunningAttempt
from orchestrator.engine.ledger.sql_schema import attempts_t, events_t, looks_t, runs_t
from orchestrator.engine.ledger.sql_store import SQLStore, retry
from orchestrator.engine.ledger.states import AttemptStatus, IllegalTransition, RunState, check

H = TypeVar("H", Attempt, Event)


class History(SQLStore):
    """Attempts, events and looks (the `attempts`, `events` and `sequential_looks` tables)."""

    # -- attempts ----------------------------------------------------------------------------
    def add_attempt(self, campaign: str, run_key: str, stage: str, submission_id: str) -> int:
        now = self._now()
        with self._tx(campaign) as c:
            n = c.execute(sa.select(runs_t.c.attempts).where((runs_t.c.campaign == campaign)
                                                             & (runs_t.c.run_key == run_key))).scalar_one() + 1
            c.execute(attempts_t.insert().values(campaign=campaign, run_key=run_key, attempt=n, stage=stage,
                                                 submission_id=submission_id, started_at=now,
                                                 status=AttemptStatus.running.value,
                                                 reason="", failure_class=""))
            c.execute(runs_t.update().where((runs_t.c.campaign == campaign) & (runs_t.c.run_key == run_key))
                      .values(attempts=n, submission_id=submission_id, updated_at=now))
            c.execute(events_t.insert().values(ts=now, campaign=campaign, run_key=run_key, kind="submitted", src="",
                                               dst="", detail=submission_id))
        return n

    def start_attempt(self, campaign: str, run_key: str, src: RunState, dst: RunState, stage: str,
                      submission_id: str) -> int:
        """Record a new attempt and move the run into its active state, in one transaction."""
        now = self._now()
        check(src, dst)
        with self._tx(campaign) as c:
            cur = c.execute(sa.select(runs_t.c.state, runs_t.c.attempts).where(
                (runs_t.c.campaign == campaign) & (runs_t.c.run_key == run_key))).first()
            if cur is None or cur[0] != RunState(src).value:
                raise IllegalTransition(f"run {run_key}: expected state {RunState(src).value}, found {cur and cur[0]}")
            n = cur[1] + 1
            c.execute(attempts_t.insert().values(campaign=campaign, run_key=run_key, attempt=n, stage=stage,
                                                 submission_id=submission_id, started_at=now,
                                                 status=AttemptStatus.running.value,
                                                 reason="", failure_class=""))
            c.execute(runs_t.update().where((runs_t.c.campaign == campaign) & (runs_t.c.run_key == run_key))
                      .values(attempts=n, submission_id=submission_id, state=RunState(dst).value, stage=stage,
                              reason="", updated_at=now))
            c.execute(events_t.insert().values(ts=now, campaign=campaign, run_key=run_key, kind="transition",
                                               src=RunState(src).value, dst=RunState(dst).value, detail=submission_id))
        return n

    def end_attempt(self, campaign: str, submission_id: str, status: AttemptStatus | str, reason: str = "",
                    failure_class: str = "") -> None:
        with self._tx(campaign) as c:
            c.execute(attempts_t.update().where((attempts_t.c.campaign == campaign)
                                                & (attempts_t.c.submission_id == submission_id))
                      .values(ended_at=self._now(), status=AttemptStatus(status).value, reason=reason,
                              failure_class=failure_class))

    def attempts(self, campaign: str, run_key: str | None = None) -> list[Attempt]:
        return self._history(attempts_t, Attempt, campaign, run_key)


    def running_attempts(self, campaign: str) -> list[RunningAttempt]:
        """Attempts still marked running, with the state, submission id and generation of their run."""
        q = (sa.select(attempts_t, runs_t.c.state.label("run_state"), runs_t.c.submission_id.label("run_submission"),
                       runs_t.c.superseded_by)
             .join(runs_t, (runs_t.c.campaign == attempts_t.c.campaign) & (runs_t.c.run_key == attempts_t.c.run_key))
             .where((attempts_t.c.campaign == campaign) & (attempts_t.c.status == AttemptStatus.running.value)))
        with self.engine.connect() as c:
            return [RunningAttempt(**r._mapping) for r in c.execute(q)]

    # -- events ------------------------------------------------------------------------------
    def event(self, campaign: str, kind: str, detail: str = "", run_key: str = "") -> None:
        with self._tx(campaign) as c:
            c.execute(events_t.insert().values(ts=self._now(), campaign=campaign, run_key=run_key, kind=kind, src="",
                                               dst="", detail=detail))

    def events(self, campaign: str, run_key: str | None = None) -> list[Event]:
        return self._history(events_t, Event, campaign, run_key)

    def _history(self, table: sa.Table, row: type[H], campaign: str, run_key: str | None) -> list[H]:
        """The campaign's rows of an append-only history table (one run's when `run_key`), oldest first."""
        q = sa.select(table).where(table.c.campaign == campaign)
        if run_key:
            q = q.where(table.c.run_key == run_key)
        with self.engine.connect() as c:
            return [row(**r._mapping) for r in c.execute(q.order_by(table.c.id))]

    # -- sequential looks ------------------------------------------------------------------
    def record_looks(self, campaign: str, rows: list[dict[str, Any]],
                     check: Callable[[list[dict[str, Any]]], None] | None = None) -> int:
        """Replace the rows of (campaign, look, comparison) given, in one transaction; `check` sees the
        campaign's stored looks first and raises to refuse the whole write."""
        def write() -> int:
            with self._tx(campaign) as c:
                if check is not None:
                    check([dict(r._mapping) for r in c.execute(looks_t.select().where(looks_t.c.campaign == campaign))])
                for r in rows:
                    key = ((looks_t.c.campaign == campaign) & (looks_t.c.look == r["look"])
                           & (looks_t.c.comparison == r["comparison"]))
                    c.execute(looks_t.delete().where(key))
                    c.execute(looks_t.insert().values(**{**r, "campaign": campaign, "ts": self._now()}))
            return len(rows)

        return retry(write)

    def looks(self, campaign: str) -> list[dict[str, Any]]:
        with self.engine.connect() as c:
            q = looks_t.select().where(looks_t.c.campaign == campaign).order_by(looks_t.c.look, looks_t.c.comparison)
            return [dict(r._mapping) for r in c.execute(q)]
