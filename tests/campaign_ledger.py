"""What a test reads back after a `campaign submit` subprocess: the campaign's runs and attempts from the work
dir's ledger (opened and closed here), and a guard that never leaves the subprocess running."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from orchestrator.engine.ledger import Attempt, RunRow, open_ledger


def runs_and_attempts(workdir: Path, campaign: str) -> tuple[list[RunRow], list[Attempt]]:
    """The campaign's current runs (in grid order) and every attempt, read in one ledger session."""
    led = open_ledger(workdir)
    try:
        return led.runs(campaign), led.attempts(campaign)
    finally:
        led.close()


@contextmanager
def reaped(proc: subprocess.Popen) -> Iterator[subprocess.Popen]:
    """Kill and wait for `proc` on the way out if it is still running (a failed assertion must not leave it)."""
    try:
        yield proc
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
