"""Stopping processes we started, by PID: terminate, wait, then kill what outwaited SIGTERM."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any


def terminate_then_kill(procs: Iterable[Any], timeout_s: float = 3.0) -> None:
    """SIGTERM each `psutil.Process`, wait up to `timeout_s`, SIGKILL the survivors and reap them. Some Ray
    daemons outwait SIGTERM; what we stop here is being discarded, so nothing is left to chance."""
    import psutil

    procs = list(procs)
    for p in procs:
        try:
            p.terminate()
        except psutil.NoSuchProcess:
            pass
    _, alive = psutil.wait_procs(procs, timeout=timeout_s)
    for p in alive:
        try:
            p.kill()
        except psutil.NoSuchProcess:
            pass
    psutil.wait_procs(alive, timeout=timeout_s)
