"""The SQL ledger's connection to its database: the engine for a URL, write transactions with the driver
epoch fence, and retries of a write that lost a race with another writer.

Every part of `SQLLedger` (runs, leases, history) writes through `SQLStore._tx`, so the SQLite write lock
and the fencing check are taken in one place.
"""

from __future__ import annotations

import os
import time
from contextlib import contextmanager
from typing import TypeVar
from collections.abc import Callable, Iterator

import sqlalchemy as sa
from sqlalchemy import event

from orchestrator.engine.ledger.base import LeaseLost, LedgerError
from orchestrator.engine.ledger.sql_schema import campaigns_t, create_schema, schema_t

T = TypeVar("T")


def _conflict(exc: Exception) -> bool:
    """A write that lost a race with another writer and may simply be retried."""
    if isinstance(exc, sa.exc.IntegrityError):
        return True
    msg = str(exc).lower()
    return any(k in msg for k in ("database is locked", "already exists", "deadlock", "could not serialize",
                                  "duplicate column", "unique constraint", "uniqueviolation"))


def retry(fn: Callable[[], T], tries: int = 6) -> T:
    """`fn()`, called again (with a growing pause) while it loses a race with a concurrent writer."""
    for i in range(tries):
        try:
            return fn()
        except (sa.exc.IntegrityError, sa.exc.OperationalError, sa.exc.ProgrammingError) as exc:
            if i == tries - 1 or not _conflict(exc):
                raise
            time.sleep(0.05 * 2 ** i)
    raise AssertionError("unreachable")


class SQLStore:
    """The database under a ledger: opened (and its schema created or migrated) on construction. `_fences`
    holds the driver leases this object took, which every write about their campaign checks."""

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
            retry(lambda: create_schema(self.engine, url))
        except (sa.exc.OperationalError, sa.exc.InterfaceError) as exc:
            shown = sa.engine.make_url(url).render_as_string(hide_password=True)
            raise LedgerError(f"ledger {shown}: cannot open it ({str(exc.orig).strip().splitlines()[0]})") from None

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

    def close(self) -> None:
        self.engine.dispose()


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
