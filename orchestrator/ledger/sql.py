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
"""

from __future__ import annotations

import json
import os
import secrets
import time
from contextlib import contextmanager
from typing import Any, TypeVar
from collections.abc import Callable, Iterable, Iterator

import sqlalchemy as sa
from sqlalchemy import event

from orchestrator.ledger.base import LeaseLost, Ledger, LedgerError, RunRow, UpsertDiff
from orchestrator.ledger.states import REOPEN, AttemptStatus, IllegalTransition, RunState, check

S = RunState
T = TypeVar("T")
SUPERSEDED_REASON = "superseded by a changed spec"

meta = sa.MetaData()
campaigns_t = sa.Table(
    "campaigns", meta,
    sa.Column("name", sa.String, primary_key=True),
    sa.Column("spec_json", sa.Text, nullable=False),
    sa.Column("created_at", sa.Float, nullable=False),
    sa.Column("updated_at", sa.Float, nullable=False),
    sa.Column("instance_id", sa.String, nullable=False, default=""),
    sa.Column("driver", sa.String, nullable=False, default=""),
    sa.Column("driver_expires", sa.Float, nullable=False, default=0.0),
    sa.Column("driver_epoch", sa.Integer, nullable=False, default=0),  # fencing token: +1 on every takeover
)
runs_t = sa.Table(
    "runs", meta,
    sa.Column("campaign", sa.String, primary_key=True),
    sa.Column("run_key", sa.String, primary_key=True),
    sa.Column("run_id", sa.String, nullable=False, index=True),
    sa.Column("state", sa.String, nullable=False, index=True),
    sa.Column("order", sa.Integer, nullable=False),
    sa.Column("gpus", sa.Integer, nullable=False),
    sa.Column("spec_json", sa.Text, nullable=False),
    sa.Column("stage", sa.String, nullable=False, default=""),
    sa.Column("reason", sa.Text, nullable=False, default=""),
    sa.Column("attempts", sa.Integer, nullable=False, default=0),
    sa.Column("submission_id", sa.String, nullable=False, default=""),
    sa.Column("lease_owner", sa.String, nullable=False, default=""),
    sa.Column("lease_expires", sa.Float, nullable=False, default=0.0),
    sa.Column("next_try_at", sa.Float, nullable=False, default=0.0),
    sa.Column("failure_class", sa.String, nullable=False, default=""),
    sa.Column("mlflow_run_id", sa.String, nullable=False, default=""),
    sa.Column("compute_json", sa.Text, nullable=False, default="{}"),
    sa.Column("outputs_json", sa.Text, nullable=False, default="{}"),
    sa.Column("updated_at", sa.Float, nullable=False, default=0.0),
    sa.Column("superseded_by", sa.String, nullable=False, default=""),
)
attempts_t = sa.Table(
    "attempts", meta,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("campaign", sa.String, nullable=False),
    sa.Column("run_key", sa.String, nullable=False, index=True),
    sa.Column("attempt", sa.Integer, nullable=False),
    sa.Column("stage", sa.String, nullable=False),
    sa.Column("submission_id", sa.String, nullable=False, unique=True),
    sa.Column("started_at", sa.Float, nullable=False),
    sa.Column("ended_at", sa.Float),
    sa.Column("status", sa.String, nullable=False, default=AttemptStatus.running.value),
    sa.Column("reason", sa.Text, nullable=False, default=""),
    sa.Column("failure_class", sa.String, nullable=False, default=""),
)
events_t = sa.Table(
    "events", meta,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("ts", sa.Float, nullable=False),
    sa.Column("campaign", sa.String, nullable=False, index=True),
    sa.Column("run_key", sa.String, nullable=False, default=""),
    sa.Column("kind", sa.String, nullable=False),
    sa.Column("src", sa.String, nullable=False, default=""),
    sa.Column("dst", sa.String, nullable=False, default=""),
    sa.Column("detail", sa.Text, nullable=False, default=""),
)
# Interim looks of sequential seed designs (analysis/sequential/ decides; the ledger keeps them
# immutable per named design). Same table and columns as the one older versions created inline.
looks_t = sa.Table(
    "sequential_looks", meta,
    sa.Column("campaign", sa.String, primary_key=True), sa.Column("look", sa.Integer, primary_key=True),
    sa.Column("comparison", sa.String, primary_key=True), sa.Column("n", sa.Integer),
    sa.Column("decision", sa.String), sa.Column("mean", sa.Float), sa.Column("rci_low", sa.Float),
    sa.Column("rci_high", sa.Float), sa.Column("design_json", sa.Text), sa.Column("row_json", sa.Text),
    sa.Column("ts", sa.Float),
)
schema_t = sa.Table("schema_info", meta, sa.Column("key", sa.String, primary_key=True),
                    sa.Column("value", sa.Integer, nullable=False))

# 1: tables and columns before the version was stored (later columns are added in place on open);
# 2: + sequential_looks owned by the ledger, + schema_info. Opening an older ledger migrates it;
# a newer one (written by a later Windtunnel) is refused rather than misread.
SCHEMA_VERSION = 2

_JSON_FIELDS = {"compute": "compute_json", "outputs": "outputs_json"}


def _row(r: Any) -> RunRow:
    m = dict(r._mapping)
    return RunRow(
        campaign=m["campaign"], run_key=m["run_key"], run_id=m["run_id"], state=m["state"], order=m["order"],
        gpus=m["gpus"], spec_json=m["spec_json"], stage=m["stage"], reason=m["reason"], attempts=m["attempts"],
        submission_id=m["submission_id"], lease_owner=m["lease_owner"], lease_expires=m["lease_expires"],
        next_try_at=m["next_try_at"], failure_class=m["failure_class"], mlflow_run_id=m["mlflow_run_id"],
        compute=json.loads(m["compute_json"] or "{}"), outputs=json.loads(m["outputs_json"] or "{}"),
        updated_at=m["updated_at"], superseded_by=m.get("superseded_by", ""),
    )


def _conflict(exc: Exception) -> bool:
    """A write that lost a race with another writer and may simply be retried."""
    if isinstance(exc, sa.exc.IntegrityError):
        return True
    msg = str(exc).lower()
    return any(k in msg for k in ("database is locked", "already exists", "deadlock", "could not serialize",
                                  "duplicate column", "unique constraint", "uniqueviolation"))


def _retry(fn: Callable[[], T], tries: int = 6) -> T:
    for i in range(tries):
        try:
            return fn()
        except (sa.exc.IntegrityError, sa.exc.OperationalError, sa.exc.ProgrammingError) as exc:
            if i == tries - 1 or not _conflict(exc):
                raise
            time.sleep(0.05 * 2 ** i)
    raise AssertionError("unreachable")


class SQLLedger(Ledger):
    def __init__(self, url: str, clock: Callable[[], float] = time.time):
        """`clock`: the wall clock that stamps rows and decides lease expiry (a test passes a settable one, so
        an expiry is reached by advancing it, not by sleeping)."""
        self.url = url
        self._now = clock
        self._sqlite = url.startswith("sqlite")
        self._fences: dict[str, tuple[str, int]] = {}  # campaign -> (owner, epoch) of the lease this object took
        self.engine = _engine(url)
        if self._sqlite:
            @event.listens_for(self.engine, "connect")
            def _pragma(dbapi_conn, _rec):
                cur = dbapi_conn.cursor()
                cur.execute("PRAGMA journal_mode=WAL")
                cur.execute("PRAGMA synchronous=NORMAL")
                cur.execute("PRAGMA busy_timeout=30000")
                cur.close()
            db = sa.engine.make_url(url).database
            if (db and db != ":memory:" and not db.startswith("file:")
                    and not os.path.isdir(os.path.dirname(os.path.abspath(db)))):
                raise LedgerError(f"ledger URL {url!r}: directory {os.path.dirname(os.path.abspath(db))} does not "
                                  "exist; "
                                  "create it or give another path")
        try:
            _retry(self._create_schema)
        except (sa.exc.OperationalError, sa.exc.InterfaceError) as exc:
            shown = sa.engine.make_url(url).render_as_string(hide_password=True)
            raise LedgerError(f"ledger {shown}: cannot open it ({str(exc.orig).strip().splitlines()[0]})") from None

    def _create_schema(self) -> None:
        """create_all plus added columns for a ledger made by an older version (ALTER TABLE ADD COLUMN)."""
        meta.create_all(self.engine)
        insp = sa.inspect(self.engine)
        for table in (campaigns_t, runs_t):
            have = {c["name"] for c in insp.get_columns(table.name)}
            for col in table.columns:
                if col.name in have:
                    continue
                default = "''" if isinstance(col.type, sa.String) else "0"
                ddl = (f'ALTER TABLE {table.name} ADD COLUMN "{col.name}" {col.type.compile(self.engine.dialect)} '
                       f"NOT NULL DEFAULT {default}")
                with self.engine.begin() as c:
                    c.exec_driver_sql(ddl)
        with self.engine.begin() as c:
            row = c.execute(sa.select(schema_t.c.value).where(schema_t.c.key == "version")).first()
            if row is not None and row[0] > SCHEMA_VERSION:
                raise LedgerError(f"ledger {self.url}: schema version {row[0]} was written by a newer Windtunnel "
                                  f"(this one reads up to {SCHEMA_VERSION}); upgrade Windtunnel to open it")
            if row is None:
                c.execute(schema_t.insert().values(key="version", value=SCHEMA_VERSION))
            elif row[0] < SCHEMA_VERSION:
                c.execute(schema_t.update().where(schema_t.c.key == "version").values(value=SCHEMA_VERSION))

    def schema_version(self) -> int:
        with self.engine.connect() as c:
            return int(c.execute(sa.select(schema_t.c.value).where(schema_t.c.key == "version")).scalar_one())

    @contextmanager
    def _tx(self, campaign: str | None = None) -> Iterator[sa.Connection]:
        """A write transaction; on SQLite it takes the write lock first (BEGIN IMMEDIATE) so that a
        read-then-write inside it cannot interleave with another writer. A write about a campaign this
        object drives checks the driver epoch first, in the same transaction (LeaseLost when stale)."""
        with self.engine.begin() as c:
            if self._sqlite:
                c.exec_driver_sql("BEGIN IMMEDIATE")
            if campaign is not None and campaign in self._fences:
                self._fenced(c, campaign)
            yield c

    def _fenced(self, c: sa.Connection, name: str) -> None:
        """Raise LeaseLost unless this object's lease of `name` is the current one. The row is locked (FOR UPDATE;
        SQLite: the write lock) so a takeover cannot interleave."""
        owner, epoch = self._fences[name]
        r = c.execute(sa.select(campaigns_t.c.driver, campaigns_t.c.driver_epoch)
                      .where(campaigns_t.c.name == name).with_for_update()).first()
        holder, current = (str(r[0]), int(r[1])) if r else ("", -1)
        if holder != owner or current != epoch:
            raise LeaseLost(name, owner, epoch, holder, current)

    # -- campaigns and runs ----------------------------------------------------------------
    def upsert_campaign(self, name: str, spec_json: str, runs: Iterable[dict[str, Any]]) -> UpsertDiff:
        runs = list(runs)
        return _retry(lambda: self._upsert(name, spec_json, runs))

    def _upsert(self, name: str, spec_json: str, runs: list[dict[str, Any]]) -> UpsertDiff:
        now = self._now()
        diff = UpsertDiff()
        with self._tx(name) as c:
            if c.execute(sa.select(campaigns_t.c.name).where(campaigns_t.c.name == name)).first():
                c.execute(campaigns_t.update().where(campaigns_t.c.name == name)
                          .values(spec_json=spec_json, updated_at=now))
            else:
                c.execute(campaigns_t.insert().values(name=name, spec_json=spec_json, created_at=now, updated_at=now,
                                                      instance_id=_new_instance_id(), driver="", driver_expires=0.0))
            existing = {
                r.run_key: (r.run_id, r.state, r.superseded_by, r.reason)
                for r in c.execute(sa.select(runs_t.c.run_key, runs_t.c.run_id, runs_t.c.state, runs_t.c.superseded_by,
                                             runs_t.c.reason).where(runs_t.c.campaign == name))
            }
            stored = dict(c.execute(sa.select(runs_t.c.run_key, runs_t.c.spec_json).where(runs_t.c.campaign == name))
                          .all())
            # the current row of each run_id: not superseded (and not cancelled, as before generations)
            live_by_id = {rid: k for k, (rid, st, sup, _) in existing.items() if not sup and st != S.cancelled}
            current_by_id = {rid: k for k, (rid, st, sup, _) in existing.items() if not sup}
            new_rows, events = [], []
            supersede: dict[str, str] = {}  # old run_key -> new run_key
            revive: list[str] = []
            seen_ids = set()
            for i, r in enumerate(runs):
                seen_ids.add(r["run_id"])
                cur = current_by_id.get(r["run_id"])
                if r["run_key"] in existing:
                    if existing[r["run_key"]][2]:  # a superseded generation comes back (spec reverted)
                        revive.append(r["run_key"])
                        if cur and cur != r["run_key"]:
                            supersede[cur] = r["run_key"]
                        diff.changed.append(r["run_id"])
                    else:
                        diff.unchanged.append(r["run_id"])
                    if stored.get(r["run_key"]) != r["spec_json"]:  # same training, other evaluation/references
                        c.execute(runs_t.update().where((runs_t.c.campaign == name)
                                                        & (runs_t.c.run_key == r["run_key"]))
                                  .values(spec_json=r["spec_json"], updated_at=now))
                        diff.refreshed.append(r["run_id"])
                    continue
                old = live_by_id.get(r["run_id"])
                (diff.changed if old else diff.new).append(r["run_id"])
                if cur:
                    supersede[cur] = r["run_key"]
                new_rows.append({
                    "campaign": name, "run_key": r["run_key"], "run_id": r["run_id"], "state": S.planned.value,
                    "order": i, "gpus": int(r.get("gpus", 0)), "spec_json": r["spec_json"], "stage": "", "reason": "",
                    "attempts": 0, "submission_id": "", "lease_owner": "", "lease_expires": 0.0, "next_try_at": 0.0,
                    "failure_class": "", "mlflow_run_id": "", "compute_json": "{}", "outputs_json": "{}",
                    "updated_at": now, "superseded_by": "",
                })
                events.append({"ts": now, "campaign": name, "run_key": r["run_key"], "kind": S.planned.value, "src": "",
                               "dst": S.planned.value, "detail": r["run_id"]})
            for k, successor in supersede.items():
                st = existing[k][1]
                # whatever its state: a superseded run is never scheduled or collected again
                vals: dict[str, Any] = {"superseded_by": successor, "updated_at": now, "lease_owner": "",
                                        "lease_expires": 0.0}
                dst = st
                if st not in (S.recorded, S.cancelled):
                    vals |= {"state": S.cancelled.value, "reason": SUPERSEDED_REASON}
                    dst = S.cancelled.value
                c.execute(runs_t.update().where((runs_t.c.campaign == name) & (runs_t.c.run_key == k)).values(**vals))
                events.append({"ts": now, "campaign": name, "run_key": k, "kind": "superseded", "src": st,
                               "dst": dst, "detail": successor})
            for k in revive:
                st, reason = existing[k][1], existing[k][3]
                vals = {"superseded_by": "", "updated_at": now}
                if st == S.cancelled and reason == SUPERSEDED_REASON:
                    vals |= {"state": S.queued.value, "reason": "current again (spec reverted)", "next_try_at": 0.0}
                c.execute(runs_t.update().where((runs_t.c.campaign == name) & (runs_t.c.run_key == k)).values(**vals))
                events.append({"ts": now, "campaign": name, "run_key": k, "kind": "revived", "src": st,
                               "dst": vals.get("state", st), "detail": ""})
            diff.removed = sorted(rid for rid in live_by_id if rid not in seen_ids)
            if new_rows:
                c.execute(runs_t.insert(), new_rows)
            if events:
                c.execute(events_t.insert(), events)
        return diff

    # -- campaign instance and driver lease --------------------------------------------------
    def campaign_instance(self, name: str) -> str:
        """The campaign's instance id in this ledger, created once (a ledger from an older version
        gets one on first use); submission ids carry it so two work dirs never share a job."""
        with self.engine.connect() as c:
            r = c.execute(sa.select(campaigns_t.c.instance_id).where(campaigns_t.c.name == name)).first()
        if r is None:
            raise KeyError(f"campaign {name!r} is not in the ledger at {self.url}")
        if r[0]:
            return str(r[0])
        with self._tx(name) as c:
            c.execute(campaigns_t.update().where((campaigns_t.c.name == name) & (campaigns_t.c.instance_id == ""))
                      .values(instance_id=_new_instance_id()))
            return str(c.execute(sa.select(campaigns_t.c.instance_id).where(campaigns_t.c.name == name)).scalar_one())

    def claim_driver(self, name: str, owner: str, ttl_s: float, *, steal_from: str = "") -> tuple[bool, str, float]:
        """Take the campaign's driver lease (free, expired, ours, or `steal_from`'s): (ok, holder, expires).
        Anything but renewing the live lease this object holds is a takeover: the epoch goes up by one, and
        this object's later writes about the campaign carry (and are checked against) the new epoch."""
        now = self._now()
        with self._tx() as c:
            r = c.execute(sa.select(campaigns_t.c.driver, campaigns_t.c.driver_expires, campaigns_t.c.driver_epoch)
                          .where(campaigns_t.c.name == name).with_for_update()).first()
            if r is None:
                raise KeyError(f"campaign {name!r} is not in the ledger at {self.url}")
            holder, expires, epoch = str(r[0]), float(r[1]), int(r[2])
            if holder and holder != owner and expires >= now and holder != steal_from:
                return False, holder, expires
            renew = holder == owner and expires >= now and self._fences.get(name) == (owner, epoch)
            if not renew:
                epoch += 1
                why = ("free" if not holder else f"taken from {holder}, whose lease "
                       + ("had expired" if expires < now else "belonged to a dead process"))
                if holder == owner:
                    why = "taken again by its holder after it expired" if expires < now else "taken again"
                c.execute(events_t.insert().values(ts=now, campaign=name, run_key="", kind="driver_lease", src="",
                                                   dst="", detail=f"epoch {epoch}: {owner} ({why})"))
            c.execute(campaigns_t.update().where(campaigns_t.c.name == name)
                      .values(driver=owner, driver_expires=now + ttl_s, driver_epoch=epoch))
            self._fences[name] = (owner, epoch)
            return True, owner, now + ttl_s

    def driver_epoch(self, name: str) -> int:
        with self.engine.connect() as c:
            r = c.execute(sa.select(campaigns_t.c.driver_epoch).where(campaigns_t.c.name == name)).first()
        return int(r[0]) if r else 0

    def check_driver(self, name: str) -> None:
        """LeaseLost when this object's lease of `name` was taken over (no-op if it holds none). An expired
        lease nobody took is still this driver's here (a long step is no takeover); `heartbeat`, at the
        start of each step, is where an expired lease stops the driver."""
        if name not in self._fences:
            return
        with self.engine.connect() as c:
            self._fenced(c, name)

    def driver(self, name: str) -> tuple[str, float] | None:
        """(holder, expires) of the campaign's driver lease, or None when nobody holds one."""
        with self.engine.connect() as c:
            r = c.execute(sa.select(campaigns_t.c.driver, campaigns_t.c.driver_expires)
                          .where(campaigns_t.c.name == name)).first()
        return (str(r[0]), float(r[1])) if r and r[0] else None

    def release_driver(self, name: str, owner: str) -> None:
        """Give the lease up; a lease this object took under an older epoch than the current one is not
        released (it is someone else's now)."""
        fence = self._fences.pop(name, None)
        cond = (campaigns_t.c.name == name) & (campaigns_t.c.driver == owner)
        if fence is not None and fence[0] == owner:
            cond = cond & (campaigns_t.c.driver_epoch == fence[1])
        with self._tx() as c:
            c.execute(campaigns_t.update().where(cond).values(driver="", driver_expires=0.0))

    def superseded(self, campaign: str) -> list[RunRow]:
        """Rows of earlier generations (kept for the record; never scheduled or collected)."""
        with self.engine.connect() as c:
            q = sa.select(runs_t).where((runs_t.c.campaign == campaign) & (runs_t.c.superseded_by != ""))
            return [_row(r) for r in c.execute(q.order_by(runs_t.c.order))]

    def running_attempts(self, campaign: str) -> list[dict[str, Any]]:
        """Attempts still marked running, with the state, submission id and generation of their run."""
        q = (sa.select(attempts_t, runs_t.c.state.label("run_state"), runs_t.c.submission_id.label("run_submission"),
                       runs_t.c.superseded_by)
             .join(runs_t, (runs_t.c.campaign == attempts_t.c.campaign) & (runs_t.c.run_key == attempts_t.c.run_key))
             .where((attempts_t.c.campaign == campaign) & (attempts_t.c.status == AttemptStatus.running.value)))
        with self.engine.connect() as c:
            return [dict(r._mapping) for r in c.execute(q)]

    def campaigns(self) -> list[str]:
        with self.engine.connect() as c:
            return [r[0] for r in c.execute(sa.select(campaigns_t.c.name).order_by(campaigns_t.c.created_at))]

    def campaign_spec(self, name: str) -> str | None:
        with self.engine.connect() as c:
            r = c.execute(sa.select(campaigns_t.c.spec_json).where(campaigns_t.c.name == name)).first()
        return r[0] if r else None

    def runs(self, campaign: str, states: Iterable[str] | None = None) -> list[RunRow]:
        """The campaign's current-generation runs (superseded rows are left out: see `superseded`)."""
        q = sa.select(runs_t).where((runs_t.c.campaign == campaign) & (runs_t.c.superseded_by == ""))
        if states is not None:
            q = q.where(runs_t.c.state.in_([RunState(s).value for s in states]))
        with self.engine.connect() as c:
            return [_row(r) for r in c.execute(q.order_by(runs_t.c.order))]

    def get(self, campaign: str, run_key: str) -> RunRow:
        with self.engine.connect() as c:
            r = c.execute(sa.select(runs_t).where((runs_t.c.campaign == campaign)
                                                  & (runs_t.c.run_key == run_key))).first()
        if r is None:
            raise KeyError(f"run {run_key} not in campaign {campaign}")
        return _row(r)

    @staticmethod
    def _values(fields: dict[str, Any]) -> dict[str, Any]:
        out = {}
        for k, v in fields.items():
            out[_JSON_FIELDS.get(k, k)] = json.dumps(v, sort_keys=True, default=str) if k in _JSON_FIELDS else v
        return out

    def transition(self, campaign: str, run_key: str, to: RunState | str, *, expect: RunState | str | None = None,
                   stage: str | None = None, reason: str | None = None, **fields: Any) -> RunRow:
        to = RunState(to)
        now = self._now()
        with self._tx(campaign) as c:
            cur = c.execute(sa.select(runs_t.c.state).where((runs_t.c.campaign == campaign)
                                                            & (runs_t.c.run_key == run_key))).first()
            if cur is None:
                raise KeyError(f"run {run_key} not in campaign {campaign}")
            src = RunState(cur[0])
            if expect is not None and src != RunState(expect):
                raise IllegalTransition(f"run {run_key}: expected state {RunState(expect).value}, found {src.value}")
            check(src, to)
            vals = {"state": to.value, "updated_at": now, **self._values(fields)}
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

    def reopen(self, campaign: str, run_key: str, to: RunState | str, reason: str, **fields: Any) -> RunRow:
        """recorded → trained|queued when its outputs no longer verify (the only way out of recorded)."""
        to = RunState(to)
        if to not in REOPEN:
            raise IllegalTransition(f"run {run_key}: a recorded run reopens only to {sorted(s.value for s in REOPEN)}")
        now = self._now()
        with self._tx(campaign) as c:
            res = c.execute(runs_t.update().where(
                (runs_t.c.campaign == campaign) & (runs_t.c.run_key == run_key) & (runs_t.c.state == S.recorded.value)
                & (runs_t.c.superseded_by == "")).values(state=to.value, reason=reason, next_try_at=0.0, updated_at=now,
                                                          **self._values(fields)))
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
                      .values(updated_at=self._now(), **self._values(fields)))

    # -- leases ------------------------------------------------------------------------------
    def claim(self, campaign: str, run_key: str, owner: str, ttl_s: float) -> bool:
        now = self._now()
        with self._tx(campaign) as c:
            res = c.execute(runs_t.update().where(
                (runs_t.c.campaign == campaign) & (runs_t.c.run_key == run_key)
                & ((runs_t.c.lease_owner == "") | (runs_t.c.lease_expires < now) | (runs_t.c.lease_owner == owner))
            ).values(lease_owner=owner, lease_expires=now + ttl_s))
            return res.rowcount == 1

    def heartbeat(self, owner: str, ttl_s: float) -> int:
        """Renew `owner`'s driver and run leases. A campaign this object drives whose lease was taken over raises
        LeaseLost first, renewing nothing: the driver must stop, not carry on. A lease that merely expired (a
        step slower than the TTL on a loaded machine) and that nobody took is renewed: no other driver can have
        written meanwhile, since a takeover raises the epoch that every write checks."""
        with self._tx() as c:
            mine = [(n, e) for n, (o, e) in self._fences.items() if o == owner]
            for name, _ in mine:
                self._fenced(c, name)
            c.execute(campaigns_t.update().where(campaigns_t.c.driver == owner)
                      .values(driver_expires=self._now() + ttl_s))
            return c.execute(runs_t.update().where(runs_t.c.lease_owner == owner)
                             .values(lease_expires=self._now() + ttl_s)).rowcount

    def release(self, campaign: str, run_key: str, owner: str) -> None:
        with self._tx(campaign) as c:
            c.execute(runs_t.update().where((runs_t.c.campaign == campaign) & (runs_t.c.run_key == run_key)
                                            & (runs_t.c.lease_owner == owner))
                      .values(lease_owner="", lease_expires=0.0))

    # -- attempts and events -----------------------------------------------------------------
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

    def start_attempt(self, campaign: str, run_key: str, src: RunState | str, dst: RunState | str, stage: str,
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

    def attempts(self, campaign: str, run_key: str | None = None) -> list[dict[str, Any]]:
        q = sa.select(attempts_t).where(attempts_t.c.campaign == campaign)
        if run_key:
            q = q.where(attempts_t.c.run_key == run_key)
        with self.engine.connect() as c:
            return [dict(r._mapping) for r in c.execute(q.order_by(attempts_t.c.id))]

    def event(self, campaign: str, kind: str, detail: str = "", run_key: str = "") -> None:
        with self._tx(campaign) as c:
            c.execute(events_t.insert().values(ts=self._now(), campaign=campaign, run_key=run_key, kind=kind, src="",
                                               dst="", detail=detail))

    def events(self, campaign: str, run_key: str | None = None) -> list[dict[str, Any]]:
        q = sa.select(events_t).where(events_t.c.campaign == campaign)
        if run_key:
            q = q.where(events_t.c.run_key == run_key)
        with self.engine.connect() as c:
            return [dict(r._mapping) for r in c.execute(q.order_by(events_t.c.id))]

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

        return _retry(write)

    def looks(self, campaign: str) -> list[dict[str, Any]]:
        with self.engine.connect() as c:
            q = looks_t.select().where(looks_t.c.campaign == campaign).order_by(looks_t.c.look, looks_t.c.comparison)
            return [dict(r._mapping) for r in c.execute(q)]

    def close(self) -> None:
        self.engine.dispose()


def _new_instance_id() -> str:
    return secrets.token_hex(4)


def _engine(url: str) -> sa.Engine:
    """An engine for `url`; a bare `postgresql://` uses psycopg 3 (the `[postgres]` extra), and a
    missing driver is a LedgerError that says what to install, not a ModuleNotFoundError."""
    try:
        u = sa.engine.make_url(url)
    except sa.exc.ArgumentError as exc:
        raise LedgerError(f"ledger URL {url!r} is not an SQLAlchemy URL ({exc}); use sqlite:///<path>/ledger.db "
                          "or postgresql://user@host/db") from None
    if u.drivername in ("postgresql", "postgres"):
        u = u.set(drivername="postgresql+psycopg")
    try:
        return sa.create_engine(u, future=True, pool_pre_ping=not url.startswith("sqlite"))
    except ModuleNotFoundError as exc:
        extra = " (pip install 'windtunnel[postgres]')" if u.get_backend_name() == "postgresql" else ""
        raise LedgerError(f"ledger URL {u.render_as_string(hide_password=True)!r} needs the database driver "
                          f"{exc.name!r}, which is not installed{extra}") from None
    except sa.exc.NoSuchModuleError as exc:
        raise LedgerError(f"ledger URL {url!r}: unknown database ({exc}); use sqlite:// or postgresql://") from None
