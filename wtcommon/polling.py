"""Waiting for a condition with a deadline: one loop instead of a hand-written one per caller."""

from __future__ import annotations

import time
from collections.abc import Callable


def wait_until(condition: Callable[[], bool], timeout_s: float, interval_s: float = 0.1) -> bool:
    """Poll `condition` every `interval_s` until it is true (True) or `timeout_s` has passed (False); it is
    checked at least once, and once more at the deadline, so a condition met in the last interval counts."""
    deadline = time.monotonic() + timeout_s
    while True:
        if condition():
            return True
        if time.monotonic() >= deadline:
            return False
        time.sleep(min(interval_s, max(0.0, deadline - time.monotonic())))
