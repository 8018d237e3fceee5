"""The launcher's side of the rollout watch (wtcommon/rollout_watch.py) and the run's shared-memory segments.

A verl launch whose trainer has waited on a rollout start-up or a weight sync past its bound is ended (its whole
session, as `cancel` does) and fails as an infrastructure error naming the wait, so the scheduler retries it
instead of the run hanging. Shared memory: verl's CPU weight transfer packs each bucket into a
`/dev/shm/verl_weights_<uuid>` segment (`bucketed_weight_transfer.py:190`) and vLLM's engine its message queues
into `/dev/shm/psm_*` (Python's `SharedMemory`); a killed launch unlinks neither. vLLM's multiprocessing executor
makes a named semaphore (`context.Lock()`, `multiproc_executor.py`), `/dev/shm/sem.mp-*` or, once joblib's loky is
imported (it renames them), `sem.loky-*`: its resource tracker unlinks it only if it outlives the engine, and
ending the launch's session kills both (issue 56: two left by one vLLM campaign test). After every launch the segments
of those names that appeared during it and that no live process maps or holds open are removed; another run's
live segments are mapped by its processes and stay."""

from __future__ import annotations

import os
from pathlib import Path

from training.errors import TrainingError
from wtcommon import rollout_watch

SHM = Path("/dev/shm")
SHM_PREFIXES = ("verl_weights_", "psm_", "sem.mp-", "sem.loky-")


class RolloutStallError(TrainingError):
    """A rollout start-up or weight sync outlasted its bound: the launch was ended (an infrastructure failure,
    retried by the scheduler)."""


def stall_message(rec: dict) -> str:
    name = rollout_watch.BOUNDS.get(rec.get("kind", ""), ("the bound",))[0]
    return (f"verl's rollout did not finish {rec.get('what', 'a wait')} within {float(rec['bound_s']):.0f} s "
            f"(waited {float(rec['waited_s']):.0f} s): the launch was stopped as an infrastructure failure. "
            f"The rollout server's error, if it raised one, is above in this log; a slow machine needs a larger "
            f"{name} in the recipe's env:")


def shm_segments() -> set[str]:
    """The names of the shared-memory segments a verl/vLLM launch may leave behind, as they are now."""
    try:
        return {p.name for p in SHM.iterdir() if p.name.startswith(SHM_PREFIXES)}
    except OSError:
        return set()


def _in_use() -> set[str]:
    """Segment names some live process maps or holds open (/proc/*/maps and /proc/*/fd)."""
    used: set[str] = set()
    for proc in Path("/proc").glob("[0-9]*"):
        try:
            for line in (proc / "maps").read_text().splitlines():
                if "/dev/shm/" in line:
                    used.add(line.rsplit("/dev/shm/", 1)[1].split()[0])
            for fd in (proc / "fd").iterdir():
                target = os.readlink(fd)
                if target.startswith("/dev/shm/"):
                    used.add(target[len("/dev/shm/"):].split()[0])
        except OSError:
            continue
    return used


def sweep_shm(before: set[str]) -> list[str]:
    """Remove the segments that appeared since `before` and nobody uses any more; their names."""
    new = shm_segments() - before
    if not new:
        return []
    removed = []
    for name in sorted(new - _in_use()):
        try:
            (SHM / name).unlink()
            removed.append(name)
        except OSError:
            pass
    return removed


__all__ = ["RolloutStallError", "shm_segments", "stall_message", "sweep_shm"]
