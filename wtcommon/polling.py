"""Waiting for a condition with a deadline: one loop instead of a hand-written one per caller."""

from __future__ import annotations

import time
from collections.abc import Callable


def wait_until(condition: Callable[[], bool], timeout_s: float, interval_s: float = 0.1, *,
               clock: Callable[[], float] = time.monotonic, sleep: Callable[[float], None] = time.sleep) -> bool:
    """Poll `condition` every `interval_s` until it is true (True) or `timeout_s` has passed (False); it is
    checked at least once, and once more at the deadline, so a condition met in the last interval counts.
    `clock` and `sleep` are injectable so a test drives the loop on a fake clock instead of waiting."""
    deadline = clock() + timeout_s
    while True:
        if condition():
            return True
        if clock() >= deadline:
            return False
        sleep(min(interval_s, max(0.0, deadline - clock())))
