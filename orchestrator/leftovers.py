"""What a session leaves behind on this machine: `/dev/shm` entries and live processes that were not there before.

Why: shared-memory segments and named semaphores outlive the process that made them when it ends without its exit
hooks (a Ray actor or stage job being ended), and the next run on the machine inherits them; a process left running
holds memory and ports. The test suite and `campaign demo` take a snapshot when they start and name whatever is
new when they end (issue 56: a CPU demo left 14 `sem.loky-*` semaphores, a CI-like run 60)."""

from __future__ import annotations

import os
import time
from dataclasses import dataclass, field
from pathlib import Path

from wtcommon.polling import wait_until

SHM = Path("/dev/shm")


def shm_entries() -> set[str]:
    """Names in /dev/shm (empty where there is none)."""
    try:
        return set(os.listdir(SHM))
    except OSError:
        return set()


def _cmdline(pid: int) -> str | None:
    try:
        raw = Path(f"/proc/{pid}/cmdline").read_bytes()
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    if stat.rsplit(")", 1)[-1].split()[0] == "Z":  # a zombie holds nothing; its parent has not reaped it yet
        return None
    return raw.replace(b"\0", b" ").decode(errors="replace").strip()


def _pids() -> set[int]:
    return {int(p.name) for p in Path("/proc").iterdir() if p.name.isdigit()}


def _ancestors(pid: int) -> set[int]:
    out = set()
    while pid > 1:
        out.add(pid)
        try:
            stat = Path(f"/proc/{pid}/stat").read_text()
        except OSError:
            break
        pid = int(stat.rsplit(")", 1)[-1].split()[1])
    return out


def _environ(pid: int) -> bytes:
    try:
        return Path(f"/proc/{pid}/environ").read_bytes()
    except OSError:
        return b""


def mark_session(name: str = "WT_SESSION") -> str:
    """Put a marker in this process's environment that every process it starts inherits (Ray daemons and the
    workers and jobs they start included), so what the session started can be told from anything else running on
    the machine. Returns `NAME=VALUE`."""
    value = os.environ.get(name) or f"{os.getpid()}-{time.time_ns()}"
    os.environ[name] = value
    return f"{name}={value}"


@dataclass
class Snapshot:
    """/dev/shm names and process ids at a moment; `leftovers()` names what is new and still there."""

    shm: set[str] = field(default_factory=shm_entries)
    pids: set[int] = field(default_factory=_pids)

    def leftovers(self, marker: str, *, grace_s: float = 20.0) -> list[str]:
        """New /dev/shm entries and new live processes that carry `marker` in their environment (`mark_session`;
        not this process or its ancestors), after waiting up to `grace_s` for them to go (processes end and unlink
        asynchronously)."""
        tag = marker.encode()
        found: list[str] = []

        def gone() -> bool:
            me = os.getpid()
            mine = _ancestors(me)
            procs = []
            for pid in sorted(_pids() - self.pids - mine):
                if me in _ancestors(pid):  # a child of this live process (an in-process engine's helper): it
                    continue              # goes with it; a leftover is what outlives its parent
                cmd = _cmdline(pid)
                if cmd and tag in _environ(pid).split(b"\0"):
                    procs.append(f"process {pid}: {cmd[:160]}")
            found[:] = [f"/dev/shm/{n}" for n in sorted(shm_entries() - self.shm)] + procs
            return not found

        wait_until(gone, grace_s, interval_s=1.0)
        return found


__all__ = ["SHM", "Snapshot", "mark_session", "shm_entries"]
