"""`wtcommon.polling.wait_until`: the one deadline loop (verl launcher, local head, tests)."""

from __future__ import annotations

from wtcommon.polling import wait_until


def test_a_condition_met_later_is_seen_and_one_never_met_times_out():
    seen = []
    assert wait_until(lambda: seen.append(1) is None and len(seen) == 3, timeout_s=60, interval_s=0.01)
    assert len(seen) == 3  # returned as soon as the condition held, no further polls
    calls = []
    assert not wait_until(lambda: calls.append(1) is not None, timeout_s=0.1, interval_s=0.02)
    assert len(calls) >= 2  # polled, including once at the deadline


def test_the_condition_is_checked_at_least_once_even_with_no_time():
    assert wait_until(lambda: True, timeout_s=0)
    assert not wait_until(lambda: False, timeout_s=0)
