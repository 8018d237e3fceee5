"""Ledger: state machine, idempotent upsert by run_key, changed-spec diff, generations, leases,
concurrent writers; against SQLite and a real throwaway PostgreSQL server (Debian's initdb/pg_ctl on
a private unix socket; skipped, saying why, only when those binaries are absent)."""

from __future__ import annotations

import glob
import itertools
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from orchestrator.engine.ledger import IllegalTransition, NotInLedger, RunState, open_ledger
from orchestrator.engine.ledger.states import ALLOWED, check
from tests.components import started
from wtcommon.errors import WindtunnelError

S = RunState
# one worker under pytest-xdist (`make test`), so the session's PostgreSQL server is started once
pytestmark = pytest.mark.xdist_group("pg_server")


def _runs(keys: dict[str, str]) -> list[dict]:
    return [{"run_key": k, "run_id": rid, "gpus": 8, "spec_json": "{}"} for rid, k in keys.items()]


def _pg_bin(name: str) -> str | None:
    found = shutil.which(name)
    if found:
        return found
    cands = sorted(glob.glob(f"/usr/lib/postgresql/*/bin/{name}"), key=lambda p: int(p.split("/")[4]))
    return cands[-1] if cands else None


@pytest.fixture(scope="session")
def pg_server():
    """A PostgreSQL server for this session on a unix socket in a private temp dir (no TCP port):
    the base URL without a database name. initdb refuses root, so as root it runs as `postgres`."""
    initdb, pg_ctl = _pg_bin("initdb"), _pg_bin("pg_ctl")
    if not (initdb and pg_ctl):
        pytest.skip("PostgreSQL server binaries (initdb, pg_ctl) not found: `apt-get install postgresql` "
                    "(.ci/run does) to run the ledger tests against PostgreSQL")
    d = Path(tempfile.mkdtemp(prefix="wtpg", dir="/tmp"))  # short: a unix socket path is at most 107 bytes
    pre: list[str] = []
    if os.geteuid() == 0:
        shutil.chown(d, "postgres")
        pre = ["runuser", "-u", "postgres", "--"]
    run = lambda *a: subprocess.run([*pre, *a], capture_output=True, text=True, timeout=120)  # noqa: E731
    r = run(initdb, "-D", str(d / "data"), "-A", "trust", "-U", "wt", "--no-sync", "-E", "UTF8")
    assert r.returncode == 0, r.stderr[-2000:]
    r = run(pg_ctl, "-D", str(d / "data"), "-l", str(d / "log"), "-w", "-o",
            f"-c listen_addresses='' -k {d} -p 5432 -F", "start")
    assert r.returncode == 0, r.stderr[-2000:] + (d / "log").read_text()[-2000:]
    started("postgresql", f"{initdb} + pg_ctl start, unix socket in {d}")
    try:
        yield f"postgresql://wt@/{{db}}?host={d}&port=5432"
    finally:
        run(pg_ctl, "-D", str(d / "data"), "-m", "immediate", "stop")
        shutil.rmtree(d, ignore_errors=True)


_dbs = itertools.count()


def _fresh_pg(base: str) -> str:
    """A new empty database on the session's server (each test starts from nothing)."""
    import sqlalchemy as sa

    name = f"t{os.getpid()}_{next(_dbs)}"
    eng = sa.create_engine(base.format(db="postgres").replace("postgresql://", "postgresql+psycopg://"),
                           isolation_level="AUTOCOMMIT")
    with eng.connect() as c:
        c.exec_driver_sql(f"CREATE DATABASE {name}")
    eng.dispose()
    return base.format(db=name)


@pytest.fixture(params=["sqlite", "postgresql"])
def ledger_url(request, tmp_path: Path) -> str:
    if request.param == "sqlite":
        (tmp_path / "wd").mkdir()
        return f"sqlite:///{tmp_path / 'wd' / 'ledger.db'}"
    return _fresh_pg(request.getfixturevalue("pg_server"))


@pytest.fixture
def ledger(ledger_url: str):
    led = open_ledger(ledger_url)
    yield led
    led.close()


def test_default_is_sqlite_wal_in_workdir(tmp_path: Path) -> None:
    led = open_ledger(tmp_path / "wd")
    led.upsert_campaign("c", "{}", _runs({"c/a/s1": "k1"}))
    assert (tmp_path / "wd" / "ledger.db").exists()
    with led.engine.connect() as c:
        assert c.exec_driver_sql("PRAGMA journal_mode").scalar() == "wal"
    led.close()


def test_full_lifecycle_and_illegal_transitions(ledger) -> None:
    ledger.upsert_campaign("c", "{}", _runs({"c/a/s1": "k1"}))
    for dst in (S.queued, S.training, S.trained, S.evaluating, S.recorded):
        ledger.transition("c", "k1", dst)
    assert ledger.get("c", "k1").state == "recorded"
    with pytest.raises(IllegalTransition):
        ledger.transition("c", "k1", S.queued)  # recorded is final
    ledger.upsert_campaign("c", "{}", _runs({"c/a/s1": "k1", "c/b/s1": "k2"}))
    with pytest.raises(IllegalTransition):
        ledger.transition("c", "k2", S.recorded)  # planned → recorded skips the stages
    with pytest.raises(IllegalTransition):
        ledger.transition("c", "k2", S.training, expect=S.queued)  # compare-and-set on the current state
    events = [(e.src, e.dst) for e in ledger.events("c", "k1") if e.kind == "transition"]
    assert events == [("planned", "queued"), ("queued", "training"), ("training", "trained"),
                      ("trained", "evaluating"), ("evaluating", "recorded")]


def test_an_unknown_run_or_campaign_is_named_in_the_error_tree(ledger) -> None:
    ledger.upsert_campaign("c", "{}", _runs({"c/a/s1": "k1"}))
    for ask in (lambda: ledger.get("c", "nope"), lambda: ledger.transition("c", "nope", S.queued),
                lambda: ledger.campaign_instance("other")):
        with pytest.raises(NotInLedger) as exc:
            ask()
        assert isinstance(exc.value, WindtunnelError) and isinstance(exc.value, KeyError)  # old callers still match
        assert not str(exc.value).startswith("'") and ("nope" in str(exc.value) or "'other'" in str(exc.value))


def test_failed_records_stage_and_reason(ledger) -> None:
    ledger.upsert_campaign("c", "{}", _runs({"c/a/s1": "k1"}))
    ledger.transition("c", "k1", S.queued)
    ledger.start_attempt("c", "k1", S.queued, S.training, "train", "wt-k1-train-a1")
    row = ledger.transition("c", "k1", S.failed, stage="train", reason="OOM at step 3")
    assert (row.state, row.stage, row.reason, row.attempts) == ("failed", "train", "OOM at step 3", 1)


def test_upsert_is_idempotent_and_reports_new_changed_unchanged_removed(ledger) -> None:
    first = {"c/a/s1": "k1", "c/a/s2": "k2", "c/b/s1": "k3"}
    d = ledger.upsert_campaign("c", "{}", _runs(first))
    assert (len(d.new), len(d.changed), len(d.unchanged)) == (3, 0, 0)
    d = ledger.upsert_campaign("c", "{}", _runs(first))
    assert (len(d.new), len(d.changed), len(d.unchanged)) == (0, 0, 3)
    assert len(ledger.runs("c")) == 3
    second = {"c/a/s1": "k1", "c/a/s2": "k2-new", "c/c/s1": "k4"}  # one changed, one new, one removed
    d = ledger.upsert_campaign("c", "{}", _runs(second))
    assert d.new == ["c/c/s1"] and d.changed == ["c/a/s2"] and d.unchanged == ["c/a/s1"] and d.removed == ["c/b/s1"]
    old = ledger.get("c", "k2")
    assert old.state == "cancelled" and "superseded" in old.reason
    assert {r.run_key for r in ledger.runs("c", [S.planned])} == {"k1", "k2-new", "k3",
                                                                  "k4"}  # removed runs stay until cancelled


def test_leases_block_other_owners_until_expiry(ledger_url: str) -> None:
    """On the ledger's injectable clock: expiry is reached by moving the clock, so the test never sleeps and a
    loaded machine cannot make it flaky."""
    from orchestrator.engine.ledger.sql import SQLLedger

    now = [1_000.0]
    ledger = SQLLedger(ledger_url, clock=lambda: now[0])
    ledger.upsert_campaign("c", "{}", _runs({"c/a/s1": "k1"}))
    assert ledger.claim("c", "k1", "A", ttl_s=30)
    assert not ledger.claim("c", "k1", "B", ttl_s=10)
    now[0] += 20
    assert ledger.heartbeat("A", ttl_s=30) == 1  # renewed: now expires at 1,050
    now[0] += 29
    assert not ledger.claim("c", "k1", "B", ttl_s=10)  # 1 s before the renewed expiry: still A's
    now[0] += 2
    assert ledger.claim("c", "k1", "B", ttl_s=10)  # expired: stale claims are reclaimed (L7)
    assert not ledger.claim("c", "k1", "A", ttl_s=10)
    ledger.release("c", "k1", "B")
    assert ledger.claim("c", "k1", "A", ttl_s=10)
    ledger.close()


def _paths_from_planned() -> dict[RunState, list[RunState]]:
    """A shortest legal path from `planned` to every state (breadth-first over ALLOWED)."""
    paths: dict[RunState, list[RunState]] = {S.planned: []}
    frontier = [S.planned]
    while frontier:
        nxt = []
        for src in frontier:
            for dst in sorted(ALLOWED[src], key=list(RunState).index):
                if dst not in paths:
                    paths[dst] = [*paths[src], dst]
                    nxt.append(dst)
        frontier = nxt
    return paths


def test_the_ledger_makes_every_allowed_transition_and_refuses_every_other(ledger) -> None:
    """All 8 x 8 (from, to) pairs through one real ledger: a pair in ALLOWED is made, any other raises
    IllegalTransition and leaves the row where it was (the table itself is the pure `states.check`)."""
    paths = _paths_from_planned()
    assert set(paths) == set(RunState)  # every state is reachable, so every pair is exercised
    pairs = list(itertools.product(RunState, RunState))
    ledger.upsert_campaign("c", "{}", _runs({f"c/a/s{i}": f"k{i}" for i in range(len(pairs))}))
    for i, (src, dst) in enumerate(pairs):
        for step in paths[src]:
            ledger.transition("c", f"k{i}", step)
        if dst in ALLOWED[src]:
            ledger.transition("c", f"k{i}", dst)
            assert ledger.get("c", f"k{i}").state == dst.value
        else:
            with pytest.raises(IllegalTransition):
                ledger.transition("c", f"k{i}", dst)
            assert ledger.get("c", f"k{i}").state == src.value


@settings(max_examples=300, deadline=None)
@given(st.lists(st.sampled_from(list(RunState)), min_size=1, max_size=12))
def test_check_allows_exactly_the_table_along_any_path(path) -> None:
    """`states.check`, the pure function every ledger transition goes through, on random request sequences."""
    state = S.planned
    for dst in path:
        if dst in ALLOWED[state]:
            check(state, dst)
            check(state.value, dst.value)  # the ledger passes stored strings as well as RunState members
            state = dst
        else:
            with pytest.raises(IllegalTransition, match=f"{state.value} → {dst.value}"):
                check(state, dst)


# -- generations, instances, concurrent orchestrators (issue 16) ---------------------------------------------


def test_a_changed_spec_supersedes_the_old_generation_whatever_its_state(ledger) -> None:
    ledger.upsert_campaign("c", "{}", _runs({"c/a/s1": "k1", "c/a/s2": "k2", "c/a/s3": "k3"}))
    for dst in (S.queued, S.training, S.trained, S.evaluating, S.recorded):
        ledger.transition("c", "k1", dst)  # finished
    ledger.transition("c", "k2", S.queued)
    ledger.transition("c", "k2", S.training)  # in flight
    d = ledger.upsert_campaign("c", "{}", _runs({"c/a/s1": "k1b", "c/a/s2": "k2b", "c/a/s3": "k3b"}))
    assert sorted(d.changed) == ["c/a/s1", "c/a/s2", "c/a/s3"]
    assert {r.run_key for r in ledger.runs("c")} == {"k1b", "k2b", "k3b"}
    assert ledger.runs("c", [S.recorded]) == []  # the recorded old run is no longer collected
    old = {r.run_key: r for r in ledger.superseded("c")}
    assert {k: (r.state, r.superseded_by) for k, r in old.items()} == {
        "k1": ("recorded", "k1b"), "k2": ("cancelled", "k2b"), "k3": ("cancelled", "k3b")}
    # reverting the spec makes the old generation current again (a recorded run is reused as is)
    d = ledger.upsert_campaign("c", "{}", _runs({"c/a/s1": "k1", "c/a/s2": "k2b", "c/a/s3": "k3b"}))
    assert d.changed == ["c/a/s1"]
    assert {r.run_key: r.state for r in ledger.runs("c")} == {"k1": "recorded", "k2b": "planned", "k3b": "planned"}
    assert ledger.get("c", "k1b").superseded_by == "k1"


def test_an_older_ledger_is_migrated_and_a_newer_one_refused(ledger_url: str) -> None:
    """A ledger from before the schema version (its looks table created inline by analysis) opens, keeps
    its looks and gets version 2; a ledger stamped by a later Windtunnel is refused, not misread."""
    import sqlalchemy as sa

    from orchestrator.engine.ledger import LedgerError
    from orchestrator.engine.ledger.sql_schema import SCHEMA_VERSION

    led = open_ledger(ledger_url)
    assert led.schema_version() == SCHEMA_VERSION == 2
    led.record_looks("c", [{"look": 0, "comparison": "c/m/r:p-b", "n": 3, "decision": "continue",
                            "mean": 1.0, "rci_low": None, "rci_high": None, "design_json": "{}", "row_json": "{}"}])
    with led.engine.begin() as c:  # what a version-1 ledger looks like: no schema_info table
        c.exec_driver_sql("DROP TABLE schema_info")
    led.close()
    led = open_ledger(ledger_url)
    assert led.schema_version() == 2 and [r["comparison"] for r in led.looks("c")] == ["c/m/r:p-b"]
    with led.engine.begin() as c:
        c.execute(sa.text("UPDATE schema_info SET value = 3 WHERE key = 'version'"))
    led.close()
    with pytest.raises(LedgerError, match="schema version 3 was written by a newer Windtunnel"):
        open_ledger(ledger_url)


def test_looks_are_written_whole_or_refused_by_their_check(ledger) -> None:
    row = {"look": 0, "comparison": "x", "n": 3, "decision": "continue", "mean": 0.5, "rci_low": -1.0,
           "rci_high": 2.0, "design_json": "{}", "row_json": "{}"}

    def refuse(stored: list[dict]) -> None:
        if stored:
            raise ValueError("design changed")

    assert ledger.record_looks("c", [row], check=refuse) == 1
    assert ledger.record_looks("c", [row]) == 1  # the same key again replaces, never duplicates
    with pytest.raises(ValueError):
        ledger.record_looks("c", [row, {**row, "comparison": "y"}], check=refuse)
    assert [r["comparison"] for r in ledger.looks("c")] == ["x"] and ledger.looks("other") == []


def test_campaign_instance_id_is_created_once_per_ledger(ledger, tmp_path: Path) -> None:
    ledger.upsert_campaign("c", "{}", _runs({"c/a/s1": "k1"}))
    iid = ledger.campaign_instance("c")
    ledger.upsert_campaign("c", "{}", _runs({"c/a/s1": "k1", "c/a/s2": "k2"}))
    assert ledger.campaign_instance("c") == iid and len(iid) == 8
    other = open_ledger(tmp_path / "other")  # the same campaign in another work dir
    other.upsert_campaign("c", "{}", _runs({"c/a/s1": "k1"}))
    assert other.campaign_instance("c") != iid
    other.close()


_RACER = """
import sys, time
from orchestrator.engine.ledger import open_ledger
url, t0 = sys.argv[1], float(sys.argv[2])
time.sleep(max(0.0, t0 - time.time()))
led = open_ledger(url)
runs = [{"run_key": f"k{i}", "run_id": f"c/a/s{i}", "gpus": 0, "spec_json": "{}"} for i in range(20)]
d = led.upsert_campaign("race", "{}", runs)
print(len(d.new) + len(d.unchanged), led.campaign_instance("race"))
"""


def test_orchestrators_starting_together_on_a_fresh_ledger_do_not_crash(ledger_url: str) -> None:
    """Schema creation and the campaign upsert race: every process succeeds, nothing is duplicated."""
    t0 = time.time() + 4.0
    procs = [subprocess.Popen([sys.executable, "-c", _RACER, ledger_url, str(t0)], stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True) for _ in range(6)]
    outs = [p.communicate(timeout=120) for p in procs]
    assert [p.returncode for p in procs] == [0] * 6, [e[-800:] for _, e in outs]
    assert {o.split()[0] for o, _ in outs} == {"20"} and len({o.split()[1] for o, _ in outs}) == 1
    led = open_ledger(ledger_url)
    assert len(led.runs("race")) == 20 and led.campaigns() == ["race"]
    led.close()


def _scheduler(ledger, tmp_path: Path, **kw):
    """A scheduler whose executor points at a closed port: any cluster call would raise ClusterUnreachable."""
    from orchestrator.engine.executor import RayJobsExecutor
    from orchestrator.engine.scheduler.loop import Scheduler, SchedulerConfig

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    return Scheduler(ledger, "c", RayJobsExecutor(f"127.0.0.1:{port}"), tmp_path, SchedulerConfig(poll_s=0.05), **kw)


def test_reconcile_never_transitions_from_a_stale_row(ledger, tmp_path: Path) -> None:
    ledger.upsert_campaign("c", "{}", _runs({"c/a/s1": "k1"}))
    for dst in (S.queued, S.training, S.trained, S.evaluating):
        ledger.transition("c", "k1", dst)
    stale = ledger.get("c", "k1")
    ledger.transition("c", "k1", S.recorded, expect=S.evaluating)  # the other orchestrator finished it
    sched = _scheduler(ledger, tmp_path)
    assert sched._reconcile(stale) is False  # no IllegalTransition, no cluster call on a finished run
    row = ledger.get("c", "k1")
    assert (row.state, row.lease_owner) == ("recorded", "")  # and no lease left on the recorded run


def test_second_orchestrator_reports_the_first_ones_lease_and_waits(ledger, tmp_path: Path) -> None:
    from orchestrator.engine.ledger import CampaignBusy

    ledger.upsert_campaign("c", "{}", _runs({"c/a/s1": "k1"}))
    first = subprocess.Popen(["sleep", "60"])  # a live process on this host holds the lease
    try:
        holder = f"{socket.gethostname()}:{first.pid}"
        assert ledger.driver("c") is None and ledger.claim_driver("c", holder, ttl_s=60)[0]
        assert ledger.driver("c")[0] == holder  # what `campaign status` shows
        seen: list[tuple[str, float]] = []
        second = _scheduler(ledger, tmp_path, on_busy=lambda h, e: seen.append((h, e)))
        with pytest.raises(CampaignBusy, match=f"driven by orchestrator {holder}"):
            second.acquire(wait=False)
        assert second.run(timeout_s=0.3) == {"planned": 1}  # waited, changed nothing, returned cleanly
        assert [h for h, _ in seen] == [holder] and ledger.get("c", "k1").state == "planned"
    finally:
        first.kill()
        first.wait()
    assert second.acquire(wait=False)  # the holder died (SIGKILL): taken over at once, no TTL wait
    second.ledger.release_driver("c", second.owner)


def test_postgresql_url_without_its_driver_is_a_clear_error() -> None:
    code = ("import sys; sys.modules['psycopg'] = None\n"
            "from orchestrator.engine.ledger import LedgerError, open_ledger\n"
            "try:\n    open_ledger('postgresql://wt@localhost/ledger')\n"
            "except LedgerError as e:\n    print(e)\n")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0 and "Traceback" not in r.stderr, r.stderr
    assert "'psycopg'" in r.stdout and "windtunnel[postgres]" in r.stdout


def test_a_ledger_from_before_generations_is_migrated_in_place(ledger_url: str) -> None:
    """A ledger.db written before superseded_by / instance_id / the driver lease existed opens, keeps its
    rows and gains the columns (ALTER TABLE ADD COLUMN), and the campaign gets an instance id on first use."""
    led = open_ledger(ledger_url)
    led.upsert_campaign("c", "{}", _runs({"c/a/s1": "k1"}))
    led.transition("c", "k1", S.queued)
    with led.engine.begin() as c:  # back to the old schema
        c.exec_driver_sql('ALTER TABLE runs DROP COLUMN superseded_by')
        for col in ("instance_id", "driver", "driver_expires"):
            c.exec_driver_sql(f'ALTER TABLE campaigns DROP COLUMN {col}')
    led.close()
    led = open_ledger(ledger_url)
    assert [(r.run_key, r.state, r.superseded_by) for r in led.runs("c")] == [("k1", "queued", "")]
    iid = led.campaign_instance("c")
    assert len(iid) == 8 and led.campaign_instance("c") == iid
    led.upsert_campaign("c", "{}", _runs({"c/a/s1": "k1b"}))
    assert [r.run_key for r in led.superseded("c")] == ["k1"]
    led.close()


def test_a_job_id_of_another_campaign_instance_is_never_reattached(ledger, tmp_path: Path) -> None:
    """A row whose submission id lacks this ledger's instance id (a ledger copied from another work dir,
    or written before instance ids) runs its stage again under its own id instead of adopting that job."""
    from orchestrator.engine.executor.base import submission_id

    ledger.upsert_campaign("c", "{}", _runs({"c/a/s1": "k1"}))
    ledger.transition("c", "k1", S.queued)
    foreign = submission_id("k1", "train", 1, "c")  # the pre-instance format: shared by every work dir
    ledger.start_attempt("c", "k1", S.queued, S.training, "train", foreign)
    sched = _scheduler(ledger, tmp_path)
    assert not sched.ours(foreign) and sched.ours(submission_id("k1", "train", 2, "c", sched.instance))
    assert sched._reconcile(ledger.get("c", "k1")) is False  # no cluster call for someone else's job
    row = ledger.get("c", "k1")
    assert (row.state, row.lease_owner, row.next_try_at) == ("queued", "", 0.0)
    (att,) = ledger.attempts("c", "k1")
    assert att.status == "failed" and "another campaign instance" in att.reason


def _snapshot(led) -> tuple:
    """Everything the ledger holds about campaign "c": runs, attempts, events, driver lease and epoch."""
    return ([vars(r) for r in led.runs("c") + led.superseded("c")], led.attempts("c"), led.events("c"),
            led.driver("c"), led.driver_epoch("c"))


def test_a_driver_whose_lease_was_taken_over_is_fenced_out(ledger_url: str) -> None:
    """Split brain: driver A stalls past its lease, B takes the campaign over (epoch + 1). From then on
    every write A's ledger makes about the campaign is refused with LeaseLost and changes nothing (its
    heartbeat included); a lease that merely expired with nobody taking it is renewed by A's heartbeat; A's
    release leaves B's lease alone."""
    import sqlalchemy as sa

    from orchestrator.engine.ledger import LeaseLost

    a, b = open_ledger(ledger_url), open_ledger(ledger_url)
    a.upsert_campaign("c", "{}", _runs({"c/a/s1": "k1", "c/a/s2": "k2"}))
    assert a.claim_driver("c", "A", ttl_s=60)[0]
    epoch = a.driver_epoch("c")
    a.transition("c", "k1", S.queued)
    a.check_driver("c")  # still A's
    assert not b.claim_driver("c", "B", ttl_s=60)[0]  # a live lease: B waits
    with b.engine.begin() as c:  # A is stopped (SIGSTOP, a stalled step) past its lease: it expired a second ago
        c.execute(sa.text("UPDATE campaigns SET driver_expires = :t WHERE name = 'c'"), {"t": time.time() - 1})
    assert a.heartbeat("A", ttl_s=60) >= 0  # expired but nobody took it: A renews it and drives on
    assert a.driver_epoch("c") == epoch and not b.claim_driver("c", "B", ttl_s=60)[0]
    with b.engine.begin() as c:  # stalled past its lease again, and this time B is waiting
        c.execute(sa.text("UPDATE campaigns SET driver_expires = :t WHERE name = 'c'"), {"t": time.time() - 1})
    assert b.claim_driver("c", "B", ttl_s=60)[0] and b.driver_epoch("c") == epoch + 1
    before = _snapshot(b)
    writes = {
        "heartbeat": lambda: a.heartbeat("A", ttl_s=60),
        "transition": lambda: a.transition("c", "k2", S.queued),
        "start_attempt": lambda: a.start_attempt("c", "k1", S.queued, S.training, "train", "sid-a"),
        "update": lambda: a.update("c", "k1", reason="A was here"),
        "claim": lambda: a.claim("c", "k1", "A", ttl_s=60),
        "release": lambda: a.release("c", "k1", "A"),
        "event": lambda: a.event("c", "note", "A was here"),
        "end_attempt": lambda: a.end_attempt("c", "sid-a", "failed"),
        "upsert": lambda: a.upsert_campaign("c", "{}", _runs({"c/a/s1": "k1", "c/a/s2": "k2", "c/a/s3": "k3"})),
    }
    for name, write in writes.items():
        with pytest.raises(LeaseLost, match=f"epoch {epoch}\\): orchestrator B took it over \\(epoch {epoch + 1}\\)"):
            write()
        assert _snapshot(b) == before, f"{name} of the fenced-out driver changed the ledger"
    a.release_driver("c", "A")
    assert _snapshot(b) == before  # B's lease untouched
    b.transition("c", "k2", S.queued)  # the current driver writes on
    assert b.get("c", "k2").state == "queued"
    leases = [e.detail for e in b.events("c") if e.kind == "driver_lease"]
    assert leases == [f"epoch {epoch}: A (free)", f"epoch {epoch + 1}: B (taken from A, whose lease had expired)"]
    a.close()
    b.close()


def test_a_scheduler_that_lost_its_lease_stops_before_touching_the_cluster(ledger, tmp_path: Path) -> None:
    """The driver's next step raises LeaseLost at its heartbeat: no cluster call (the executor points at a
    closed port and would raise ClusterUnreachable), no run moved, and `run` does not release B's lease."""
    from orchestrator.engine.ledger import LeaseLost

    ledger.upsert_campaign("c", "{}", _runs({"c/a/s1": "k1"}))
    first = _scheduler(ledger, tmp_path, owner="A")
    assert first.acquire(wait=False)
    other = open_ledger(ledger.url)
    assert other.claim_driver("c", "B", ttl_s=60, steal_from="A")[0]  # e.g. A's host looked dead to B
    with pytest.raises(LeaseLost, match="orchestrator B took it over"):
        first.step()
    assert ledger.get("c", "k1").state == "planned" and ledger.driver("c")[0] == "B"
    other.close()


def test_a_cluster_that_stops_answering_is_polled_again_before_the_scheduler_gives_up(ledger, tmp_path: Path) -> None:
    """A dashboard too busy to answer for a while must not end a campaign: `run` keeps polling for
    `unreachable_grace_s`, then raises ClusterUnreachable (exit 3) with no run marked failed, and the ledger says
    when the cluster stopped answering."""
    import time

    from orchestrator.engine.executor import ClusterUnreachable

    ledger.upsert_campaign("c", "{}", _runs({"c/a/s1": "k1"}))
    for dst in (S.queued, S.training):
        ledger.transition("c", "k1", dst)
    ledger.update("c", "k1", submission_id="wt-c-k1-train-a1")
    sched = _scheduler(ledger, tmp_path)
    sched.cfg.unreachable_grace_s = 1.5
    t0 = time.time()
    with pytest.raises(ClusterUnreachable):
        sched.run(timeout_s=60)
    assert time.time() - t0 >= 1.5  # polled again for the grace, not stopped at the first failed call
    assert ledger.get("c", "k1").state in ("training", "queued")  # no run marked failed
    assert [e.kind for e in ledger.events("c") if e.kind == "cluster_unreachable"] == ["cluster_unreachable"]
