"""`wtcommon.polling.wait_until`: the one deadline loop (verl launcher, local head, tests)."""

from __future__ import annotations

import pytest

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


class FakeClock:
    """A clock that moves only when the loop sleeps: the test takes no wall time and its count is exact."""

    def __init__(self) -> None:
        self.t = 100.0
        self.sleeps: list[float] = []

    def __call__(self) -> float:
        return self.t

    def sleep(self, s: float) -> None:
        self.sleeps.append(s)
        self.t += s


def test_on_a_fake_clock_it_polls_every_interval_and_once_more_at_the_deadline():
    clock, polls = FakeClock(), []
    assert not wait_until(lambda: polls.append(clock.t) is not None, timeout_s=1.0, interval_s=0.25,
                          clock=clock, sleep=clock.sleep)
    assert polls == [100.0, 100.25, 100.5, 100.75, 101.0] and clock.sleeps == [0.25] * 4
    clock = FakeClock()
    assert not wait_until(lambda: False, timeout_s=1.0, interval_s=0.4, clock=clock, sleep=clock.sleep)
    assert clock.sleeps == pytest.approx([0.4, 0.4, 0.2])  # the last sleep ends at the deadline
