"""Ledger: state machine, idempotent upsert by run_key, changed-spec diff, leases."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from orchestrator.ledger import IllegalTransition, RunState, open_ledger
from orchestrator.ledger.states import ALLOWED

S = RunState


def _runs(keys: dict[str, str]) -> list[dict]:
    return [{"run_key": k, "run_id": rid, "gpus": 8, "spec_json": "{}"} for rid, k in keys.items()]


@pytest.fixture
def ledger(tmp_path: Path):  # noqa: ANN201
    led = open_ledger(tmp_path / "wd")
    yield led
    led.close()


def test_default_is_sqlite_wal_in_workdir(tmp_path: Path) -> None:
    led = open_ledger(tmp_path / "wd")
    led.upsert_campaign("c", "{}", _runs({"c/a/s1": "k1"}))
    assert (tmp_path / "wd" / "ledger.db").exists()
    with led.engine.connect() as c:
        assert c.exec_driver_sql("PRAGMA journal_mode").scalar() == "wal"
    led.close()


def test_full_lifecycle_and_illegal_transitions(ledger) -> None:  # noqa: ANN001
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
    events = [(e["src"], e["dst"]) for e in ledger.events("c", "k1") if e["kind"] == "transition"]
    assert events == [("planned", "queued"), ("queued", "training"), ("training", "trained"),
                      ("trained", "evaluating"), ("evaluating", "recorded")]


def test_failed_records_stage_and_reason(ledger) -> None:  # noqa: ANN001
    ledger.upsert_campaign("c", "{}", _runs({"c/a/s1": "k1"}))
    ledger.transition("c", "k1", S.queued)
    ledger.start_attempt("c", "k1", S.queued, S.training, "train", "wt-k1-train-a1")
    row = ledger.transition("c", "k1", S.failed, stage="train", reason="OOM at step 3")
    assert (row.state, row.stage, row.reason, row.attempts) == ("failed", "train", "OOM at step 3", 1)


def test_upsert_is_idempotent_and_reports_new_changed_unchanged_removed(ledger) -> None:  # noqa: ANN001
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
    assert {r.run_key for r in ledger.runs("c", [S.planned])} == {"k1", "k2-new", "k3", "k4"}  # removed runs stay until cancelled


def test_leases_block_other_owners_until_expiry(ledger) -> None:  # noqa: ANN001
    ledger.upsert_campaign("c", "{}", _runs({"c/a/s1": "k1"}))
    assert ledger.claim("c", "k1", "A", ttl_s=0.3)
    assert not ledger.claim("c", "k1", "B", ttl_s=10)
    assert ledger.heartbeat("A", ttl_s=0.3) == 1
    time.sleep(0.4)
    assert ledger.claim("c", "k1", "B", ttl_s=10)  # expired: stale claims are reclaimed (L7)
    assert not ledger.claim("c", "k1", "A", ttl_s=10)
    ledger.release("c", "k1", "B")
    assert ledger.claim("c", "k1", "A", ttl_s=10)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.sampled_from(list(RunState)), min_size=1, max_size=12))
def test_only_allowed_transitions_ever_happen(tmp_path_factory, path) -> None:  # noqa: ANN001
    led = open_ledger(f"sqlite:///{tmp_path_factory.mktemp('h') / 'l.db'}")
    led.upsert_campaign("c", "{}", _runs({"c/a/s1": "k"}))
    state = S.planned
    for dst in path:
        if dst in ALLOWED[state]:
            led.transition("c", "k", dst)
            state = dst
        else:
            with pytest.raises(IllegalTransition):
                led.transition("c", "k", dst)
        assert led.get("c", "k").state == state.value
    led.close()
