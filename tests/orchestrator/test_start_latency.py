"""orchestrator.engine.start_latency as pure functions: /proc parsing, the chain of parts, their p50/p95 (issue 36)."""

from __future__ import annotations

import os
import time

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from orchestrator.engine import start_latency as sl

MARKS = ("decided", "accepted", "supervisor", "process", "main", "imported", "begin", "stage")


def test_stat_fields_reads_ppid_and_start_after_a_command_name_with_spaces_and_parentheses() -> None:
    tail = " ".join(str(i) for i in range(7, 23))  # fields 7..22: starttime (22) is the last here
    line = f"4242 (ray::Job (x) y) S 4100 4242 4242 {tail} 99 100\n"
    assert sl.stat_fields(line) == (4100, 22)


def test_wall_time_is_now_less_the_process_age() -> None:
    # started 250 ticks (100 Hz: 2.5 s) after boot, uptime 10 s: 7.5 s old
    assert sl.wall_time(250, 10.0, 1000.0, 100.0) == pytest.approx(992.5)


def test_process_starts_of_this_process_are_in_the_past_and_its_parent_started_first() -> None:
    own, parent = sl.process_starts()
    if own is None:
        pytest.skip("no /proc on this platform")
    assert parent is not None and parent <= own + 0.02 <= time.time() + 0.02
    import psutil  # its create_time uses /proc/stat's whole-second btime: agrees within a second

    assert own == pytest.approx(psutil.Process().create_time(), abs=1.1)
    assert parent == pytest.approx(psutil.Process(os.getppid()).create_time(), abs=1.1)


@settings(max_examples=50, deadline=None)
@given(st.lists(st.floats(0, 100, allow_nan=False), min_size=len(MARKS) - 1, max_size=len(MARKS) - 1))
def test_parts_are_consecutive_and_sum_to_decision_to_stage(gaps: list[float]) -> None:
    marks = dict(zip(MARKS, np.cumsum([1000.0, *gaps]), strict=True))
    p = sl.parts(marks)
    assert p is not None and list(p) == [name for name, *_ in sl.CHAIN]
    assert sum(p.values()) == pytest.approx(marks["stage"] - marks["decided"])
    sh = sl.shares(p)
    assert sh["ray"] == pytest.approx(gaps[1] + gaps[2])  # accepted → supervisor → process: Ray's
    assert sh["stage"] == pytest.approx(gaps[-1])  # the stage's own work before its backend
    assert sh["ours"] + sh["ray"] + sh["stage"] == pytest.approx(sum(gaps))


def test_a_missing_mark_gives_no_parts() -> None:
    marks = {m: float(i) for i, m in enumerate(MARKS)}
    assert sl.parts(marks) is not None
    assert sl.parts({**marks, "accepted": None}) is None
    assert sl.parts({k: v for k, v in marks.items() if k != "stage"}) is None


def test_summarise_takes_percentiles_of_per_stage_sums() -> None:
    rng = np.random.default_rng(3)
    stages = [dict(zip([n for n, *_ in sl.CHAIN], rng.exponential(1.0, len(sl.CHAIN)), strict=True))
              for _ in range(40)]
    s = sl.summarise(stages)
    ours = [sl.shares(p)["ours"] for p in stages]
    ray = [sl.shares(p)["ray"] for p in stages]
    assert s["ours"] == pytest.approx((np.percentile(ours, 50), np.percentile(ours, 95)))
    assert s["ray"] == pytest.approx((np.percentile(ray, 50), np.percentile(ray, 95)))
    total = [sum(p.values()) for p in stages]
    assert s["total"] == pytest.approx((np.percentile(total, 50), np.percentile(total, 95)))
    name = sl.CHAIN[4][0]
    assert s[name][1] == pytest.approx(np.percentile([p[name] for p in stages], 95))
    assert s["total"][1] <= sum(s[n][1] for n, *_ in sl.CHAIN) + 1e-9  # p95 of a sum ≤ sum of p95s here
    assert sl.summarise([]) == {}


def test_record_appends_one_line_per_execution_and_read_log_skips_a_torn_line(tmp_path) -> None:
    sl.record(tmp_path, "train", "wt-a1", {"main": 1.0, "imported": 2.0, "begin": 3.0})
    sl.record(tmp_path, "train", "wt-a2", {"main": 4.0, "imported": 5.0, "begin": 6.0})
    with open(tmp_path / sl.LOG_NAME, "a") as f:
        f.write('{"stage": "evalu')  # a process killed mid-write
    log = sl.read_log(tmp_path)
    pid = os.getpid()
    assert [(m["attempt"], m["begin"], m["pid"]) for m in log] == [("wt-a1", 3.0, pid), ("wt-a2", 6.0, pid)]
    assert sl.read_log(tmp_path / "nowhere") == []
    sl.record(tmp_path / "nowhere", "train", "", {})  # an unwritable place: the stage is not failed
