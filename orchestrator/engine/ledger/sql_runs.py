"""The SQL ledger's campaigns and run rows: the campaign upsert (generations: supersede and revive), the run
queries, and every state change, made by compare-and-set on the current state.

Generations: a run whose run_id gets a new run_key (a changed spec) is *superseded*: it keeps its row (and
state, if it was recorded) with `superseded_by` set, `runs()` leaves it out, so it is never scheduled or
collected again; a spec reverted to an earlier generation revives that generation's row.
"""

from __future__ import annotations

from typing import Any
from collections.abc import Iterable

import sqlalchemy as sa

from orchestrator.engine.ledger.base import NotInLedger, RunRow, UpsertDiff
from orchestrator.engine.ledger.sql_schema import campaigns_t, column_values, events_t, new_instance_id, run_row, runs_t
from orchestrator.engine.ledger.sql_store import SQLStore, retry
from orchestrator.engine.ledger.states import REOPEN, IllegalTransition, RunState, check

S = RunState
SUPERSEDED_REASON = "superseded by a changed spec"


class RunRows(SQLStore):
    """Campaigns and their run rows (the `campaigns` and `runs` tables)."""

    def upsert_campaign(self, name: str, spec_json: str, runs: Iterable[dict[str, Any]]) -> UpsertDiff:
        runs = list(runs)
        return retry(lambda: self._upsert(name, spec_json, runs))

    def _upsert(self, name: str, spec_json: str, runs: list[dict[str, Any]]) -> UpsertDiff:
        """One attempt at the upsert, in one write transaction."""
        now = self._now()
        with self._tx(name) as c:
            if c.execute(sa.select(campaigns_t.c.name).where(campaigns_t.c.name == name)).first():
                c.execute(campaigns_t.update().where(campaigns_t.c.name == name)
                          .values(spec_json=spec_json, updated_at=now))
            else:
                c.execute(campaigns_t.insert().values(name=name, spec_json=spec_json, created_at=now, updated_at=now,
                                                      instance_id=new_instance_id(), driver="", driver_expires=0.0))
            return _Upsert(c, name, now).apply(runs)

    def superseded(self, campaign: str) -> list[RunRow]:
        """Rows of earlier generations (kept for the record; never scheduled or collected)."""
        with self.engine.connect() as c:
            q = sa.select(runs_t).where((runs_t.c.campaign == campaign) & (runs_t.c.superseded_by != ""))
            return [run_row(r) for r in c.execute(q.order_by(runs_t.c.order))]


    def campaigns(self) -> list[str]:
        with self.engine.connect() as c:
            return [r[0] for r in c.execute(sa.select(campaigns_t.c.name).order_by(campaigns_t.c.created_at))]

    def campaign_spec(self, name: str) -> str | None:
        with self.engine.connect() as c:
            r = c.execute(sa.select(campaigns_t.c.spec_json).where(campaigns_t.c.name == name)).first()
        return r[0] if r else None

    def runs(self, campaign: str, states: Iterable[RunState] | None = None) -> list[RunRow]:
        """The campaign's current-generation runs (superseded rows are left out: see `superseded`)."""
        q = sa.select(runs_t).where((runs_t.c.campaign == campaign) & (runs_t.c.superseded_by == ""))
        if states is not None:
            q = q.where(runs_t.c.state.in_([RunState(s).value for s in states]))
        with self.engine.connect() as c:
            return [run_row(r) for r in c.execute(q.order_by(runs_t.c.order))]

    def get(self, campaign: str, run_key: str) -> RunRow:
        with self.engine.connect() as c:
            r = c.execute(sa.select(runs_t).where((runs_t.c.campaign == campaign)
                                                  & (runs_t.c.run_key == run_key))).first()
        if r is None:
            raise NotInLedger(f"run {run_key} not in campaign {campaign}")
        return run_row(r)


    def transition(self, campaign: str, run_key: str, to: RunState, *, expect: RunState | None = None,
                   stage: str | None = None, reason: str | None = None, **fields: Any) -> RunRow:
        to = RunState(to)
        now = self._now()
        with self._tx(campaign) as c:
            cur = c.execute(sa.select(runs_t.c.state).where((runs_t.c.campaign == campaign)
                                                            & (runs_t.c.run_key == run_key))).first()
            if cur is None:
                raise NotInLedger(f"run {run_key} not in campaign {campaign}")
            src = RunState(cur[0])
            if expect is not None and src != RunState(expect):
                raise IllegalTransition(f"run {run_key}: expected state {RunState(expect).value}, found {src.value}")
            check(src, to)
            vals = {"state": to.value, "updated_at": now, **column_values(fields)}
            if stage is not None:
                vals["stage"] = stage
            if reason is not None:
                vals["reason"] = reason
            res = c.execute(runs_t.update().where(
                (runs_t.c.campaign == campaign) & (runs_t.c.run_key == run_key) & (runs_t.c.state == src.value))
                .values(**vals))
            if res.rowcount != 1:
                raise IllegalTransition(f"run {run_key}: state changed concurrently")
            c.execute(events_t.insert().values(ts=now, campaign=campaign, run_key=run_key, kind="transition",
                                               src=src.value, dst=to.value, detail=reason or stage or ""))
        return self.get(campaign, run_key)

    def reopen(self, campaign: str, run_key: str, to: RunState, reason: str, **fields: Any) -> RunRow:
        """recorded → trained|queued when its outputs no longer verify (the only way out of recorded)."""
        to = RunState(to)
        if to not in REOPEN:
            raise IllegalTransition(f"run {run_key}: a recorded run reopens only to {sorted(s.value for s in REOPEN)}")
        now = self._now()
        with self._tx(campaign) as c:
            res = c.execute(runs_t.update().where(
                (runs_t.c.campaign == campaign) & (runs_t.c.run_key == run_key) & (runs_t.c.state == S.recorded.value)
                & (runs_t.c.superseded_by == "")).values(state=to.value, reason=reason, next_try_at=0.0, updated_at=now,
                                                          **column_values(fields)))
            if res.rowcount != 1:
                raise IllegalTransition(f"run {run_key}: not a current recorded run")
            c.execute(events_t.insert().values(ts=now, campaign=campaign, run_key=run_key, kind="reopened",
                                               src=S.recorded.value, dst=to.value, detail=reason))
        return self.get(campaign, run_key)

    def update(self, campaign: str, run_key: str, **fields: Any) -> None:
        if "state" in fields:
            raise ValueError("use transition() to change state")
        with self._tx(campaign) as c:
            c.execute(runs_t.update().where((runs_t.c.campaign == campaign) & (runs_t.c.run_key == run_key))
                      .values(updated_at=self._now(), **column_values(fields)))


class _Upsert:
    """The runs part of one campaign upsert, inside its write transaction: which rows are new, unchanged,
    refreshed (same training, other evaluation), superseded or revived, and the events that say so."""

    def __init__(self, c: sa.Connection, name: str, now: float) -> None:
        self.c, self.name, self.now = c, name, now
        self.diff = UpsertDiff()
        self.existing = {
            r.run_key: (r.run_id, r.state, r.superseded_by, r.reason)
            for r in c.execute(sa.select(runs_t.c.run_key, runs_t.c.run_id, runs_t.c.state, runs_t.c.superseded_by,
                                         runs_t.c.reason).where(runs_t.c.campaign == name))
        }
        self.stored = dict(c.execute(sa.select(runs_t.c.run_key, runs_t.c.spec_json).where(runs_t.c.campaign == name))
                           .all())
        # the current row of each run_id: not superseded (and not cancelled, as before generations)
        self.live_by_id = {rid: k for k, (rid, st, sup, _) in self.existing.items() if not sup and st != S.cancelled}
        self.current_by_id = {rid: k for k, (rid, st, sup, _) in self.existing.items() if not sup}
        self.new_rows: list[dict[str, Any]] = []
        self.events: list[dict[str, Any]] = []
        self.supersede: dict[str, str] = {}  # old run_key -> new run_key
        self.revive: list[str] = []

    def apply(self, runs: list[dict[str, Any]]) -> UpsertDiff:
        """Write the upsert of `runs` (in plan order) and return what it changed."""
        seen_ids = set()
        for i, r in enumerate(runs):
            seen_ids.add(r["run_id"])
            if r["run_key"] in self.existing:
                self._known(r)
            else:
                self._new(i, r)
        self._supersede()
        self._revive()
        self.diff.removed = sorted(rid for rid in self.live_by_id if rid not in seen_ids)
        if self.new_rows:
            self.c.execute(runs_t.insert(), self.new_rows)
        if self.events:
            self.c.execute(events_t.insert(), self.events)
        return self.diff

    def _known(self, r: dict[str, Any]) -> None:
        """A run_key already in the ledger: unchanged, or an earlier generation that comes back."""
        cur = self.current_by_id.get(r["run_id"])
        if self.existing[r["run_key"]][2]:  # a superseded generation comes back (spec reverted)
            self.revive.append(r["run_key"])
            if cur and cur != r["run_key"]:
                self.supersede[cur] = r["run_key"]
            self.diff.changed.append(r["run_id"])
        else:
            self.diff.unchanged.append(r["run_id"])
        if self.stored.get(r["run_key"]) != r["spec_json"]:  # same training, other evaluation/references
            self.c.execute(runs_t.update().where((runs_t.c.campaign == self.name)
                                                 & (runs_t.c.run_key == r["run_key"]))
                           .values(spec_json=r["spec_json"], updated_at=self.now))
            self.diff.refreshed.append(r["run_id"])

    def _new(self, i: int, r: dict[str, Any]) -> None:
        """A new run_key: a planned row (a new run, or a changed one whose current row it supersedes)."""
        cur = self.current_by_id.get(r["run_id"])
        old = self.live_by_id.get(r["run_id"])
        (self.diff.changed if old else self.diff.new).append(r["run_id"])
        if cur:
            self.supersede[cur] = r["run_key"]
        self.new_rows.append({
            "campaign": self.name, "run_key": r["run_key"], "run_id": r["run_id"], "state": S.planned.value,
            "order": i, "gpus": int(r.get("gpus", 0)), "spec_json": r["spec_json"], "stage": "", "reason": "",
            "attempts": 0, "submission_id": "", "lease_owner": "", "lease_expires": 0.0, "next_try_at": 0.0,
            "failure_class": "", "mlflow_run_id": "", "compute_json": "{}", "outputs_json": "{}",
            "updated_at": self.now, "superseded_by": "",
        })
        self.events.append({"ts": self.now, "campaign": self.name, "run_key": r["run_key"], "kind": S.planned.value,
                            "src": "", "dst": S.planned.value, "detail": r["run_id"]})

    def _supersede(self) -> None:
        """Mark each replaced row superseded (and cancelled unless it was recorded or cancelled already)."""
        for k, successor in self.supersede.items():
            st = self.existing[k][1]
            # whatever its state: a superseded run is never scheduled or collected again
            vals: dict[str, Any] = {"superseded_by": successor, "updated_at": self.now, "lease_owner": "",
                                    "lease_expires": 0.0}
            dst = st
            if st not in (S.recorded, S.cancelled):
                vals |= {"state": S.cancelled.value, "reason": SUPERSEDED_REASON}
                dst = S.cancelled.value
            self.c.execute(runs_t.update().where((runs_t.c.campaign == self.name) & (runs_t.c.run_key == k))
                           .values(**vals))
            self.events.append({"ts": self.now, "campaign": self.name, "run_key": k, "kind": "superseded", "src": st,
                                "dst": dst, "detail": successor})

    def _revive(self) -> None:
        """Make each returning generation current again (queued, if only its supersession had cancelled it)."""
        for k in self.revive:
            st, reason = self.existing[k][1], self.existing[k][3]
            vals: dict[str, Any] = {"superseded_by": "", "updated_at": self.now}
            if st == S.cancelled and reason == SUPERSEDED_REASON:
                vals |= {"state": S.queued.value, "reason": "current again (spec reverted)", "next_try_at": 0.0}
            self.c.execute(runs_t.update().where((runs_t.c.campaign == self.name) & (runs_t.c.run_key == k))
                           .values(**vals))
            self.events.append({"ts": self.now, "campaign": self.name, "run_key": k, "kind": "revived", "src": st,
                                "dst": vals.get("state", st), "detail": ""})
