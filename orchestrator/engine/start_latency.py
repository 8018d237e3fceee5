"""Where a stage's start goes: the timestamps a stage process records and the parts they split its start into.

Why: "submit → stage start" was one number (p95 53 s on a loaded 2-core machine) that nobody could attribute to
Ray or to us. A stage entrypoint knows, at the cost of two small /proc reads and one appended line, when its
process and its parent (the shell Ray's job supervisor starts it in) were created, when Windtunnel's first line ran,
when its imports were done and when its stage code began; the scheduler's ledger knows when it decided
(the attempt's `started_at`) and Ray knows when it accepted the job (JobInfo `start_time`). `parts` turns one
stage's timestamps into consecutive intervals, each labelled ours, Ray's or the stage's own work, and `summarise`
gives p50/p95 per part over stages. The marks are wall-clock times of different processes: on one machine one
clock; across nodes they are only as good as the nodes' clock sync. Only the standard library at import (numpy
inside `summarise`): the stage entrypoint imports this module.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

LOG_NAME = "start_latency.jsonl"  # in the run dir: one line per stage execution (retries keep theirs)

# (part, start mark, end mark, whose): consecutive, so a stage's parts sum to decision → the backend's first line.
# "supervisor" is the entrypoint's parent: the shell Ray's job supervisor starts it in (Popen, shell=True), created
# once the supervisor is up and launches it. "stage" is the stage's own work before its backend starts (verifying
# outputs, loading the backend; evaluate: pandas and pyarrow for the records it writes): neither start-up nor Ray's.
CHAIN: tuple[tuple[str, str, str, str], ...] = (
    ("submit: decision → Ray accepted", "decided", "accepted", "ours"),
    ("Ray: accepted → supervisor launches", "accepted", "supervisor", "ray"),
    ("Ray: shell → entrypoint process", "supervisor", "process", "ray"),
    ("python start-up → first Windtunnel line", "process", "main", "ours"),
    ("Windtunnel imports", "main", "imported", "ours"),
    ("arguments, spec, lock → stage code", "imported", "begin", "ours"),
    ("stage's preparation → backend", "begin", "stage", "stage"),
)
WHOSE = ("ours", "ray", "stage")


def stat_fields(stat: str) -> tuple[int, int]:
    """(parent pid, start time in clock ticks since boot) from a /proc/<pid>/stat line (proc(5): fields 4 and
    22, counted after the parenthesised command name, which may itself hold spaces and parentheses)."""
    rest = stat[stat.rindex(")") + 2:].split()
    return int(rest[1]), int(rest[19])


def wall_time(start_ticks: int, uptime_s: float, now: float, hz: float) -> float:
    """A process's creation on the wall clock: `now` less its age (uptime − start ticks / hz). Read this way, not
    from /proc/stat's `btime` (whole seconds: up to 1 s off, the size of the budget measured)."""
    return now - (uptime_s - start_ticks / hz)


def process_starts(pid: int | None = None) -> tuple[float | None, float | None]:
    """(this process, its parent) creation times on the wall clock; (None, None) where /proc cannot tell."""
    try:
        hz = float(os.sysconf("SC_CLK_TCK"))
        ppid, own = stat_fields(Path(f"/proc/{pid or os.getpid()}/stat").read_text())
        _, parent = stat_fields(Path(f"/proc/{ppid}/stat").read_text())
        uptime, now = float(Path("/proc/uptime").read_text().split()[0]), time.time()
    except (OSError, ValueError, IndexError):
        return None, None
    return wall_time(own, uptime, now, hz), wall_time(parent, uptime, now, hz)


def record(run_dir: Path, stage: str, attempt: str, marks: dict[str, float]) -> None:
    """Append this stage execution's marks (plus its process and parent creation) to `<run_dir>/LOG_NAME`. A
    measurement only: a write that fails never fails the stage."""
    proc, parent = process_starts()
    line = {"stage": stage, "attempt": attempt, "pid": os.getpid(), "process": proc, "supervisor": parent, **marks}
    try:
        with open(Path(run_dir) / LOG_NAME, "a") as f:
            f.write(json.dumps(line) + "\n")
    except OSError:
        pass


def read_log(run_dir: Path) -> list[dict[str, Any]]:
    """Every recorded stage execution of a run dir, oldest first; a torn last line is skipped."""
    try:
        text = (Path(run_dir) / LOG_NAME).read_text()
    except OSError:
        return []
    out = []
    for ln in text.splitlines():
        try:
            d = json.loads(ln)
        except ValueError:
            continue
        if isinstance(d, dict):
            out.append(d)
    return out


def parts(marks: dict[str, float | None]) -> dict[str, float] | None:
    """One stage's consecutive intervals in seconds by part name (CHAIN), or None when a mark is missing."""
    if any(marks.get(m) is None for _, a, b, _ in CHAIN for m in (a, b)):
        return None
    return {name: float(marks[b]) - float(marks[a]) for name, a, b, _ in CHAIN}  # type: ignore[arg-type]


def shares(p: dict[str, float]) -> dict[str, float]:
    """A stage's parts summed by whose they are: {"ours": s, "ray": s, "stage": s}."""
    whose = {name: w for name, _, _, w in CHAIN}
    out = dict.fromkeys(WHOSE, 0.0)
    for name, s in p.items():
        out[whose[name]] += s
    return out


def summarise(stages: list[dict[str, float]]) -> dict[str, tuple[float, float]]:
    """(p50, p95) over stages of every part, of the per-stage sums by whose (ours, ray, stage) and of the total
    (each a per-stage sum first: the p95 of a sum, not a sum of p95s); numpy's default (linear) percentile."""
    import numpy as np

    if not stages:
        return {}
    cols = [name for name, *_ in CHAIN]
    a = np.array([[s[c] for c in cols] for s in stages], dtype=float)
    whose = np.array([w for *_, w in CHAIN])
    table = {**{c: a[:, i] for i, c in enumerate(cols)}, **{w: a[:, whose == w].sum(1) for w in WHOSE},
             "total": a.sum(1)}
    return {k: (float(np.percentile(v, 50)), float(np.percentile(v, 95))) for k, v in table.items()}
