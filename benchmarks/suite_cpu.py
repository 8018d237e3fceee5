"""Where the test suite's CPU goes: runs a command (default `make test-fast`) and charges every process's CPU
to what it is (pytest worker, stage job, Ray job supervisor, verl actor, Ray daemon, ...).

Why: on a 2-core machine the suite is CPU-bound, so its wall time is its CPU divided by the cores, and only
less CPU makes it faster. Wall-clock durations per test mislead (a test is 3-4x slower beside others than
alone); this measures the CPU of every process, Ray's daemons and job workers included, which pytest's
own accounting never sees (they are not its children).

How: every 0.5 s (--interval) every process on the machine has its /proc/<pid>/stat read (utime+stime)
with its command line, keyed by (pid, start time) so a reused pid is a new process; a Ray worker is charged
to its latest `ray::` title (JobSupervisor, TaskRunner, ...). Every process, not only the command's
descendants, because Ray's daemons are re-parented to init: run it on an otherwise idle machine. CPU already
spent by processes alive at the start is not counted. A process that lives less than one interval can be
missed, so the table also prints the machine's CPU from /proc/stat over the same time, and the share of it
the table explains.

Prints the table, then the ratio of the machine's CPU to the budget `--budget-min` minutes on `--cores`
cores (the `make test` target: 8 minutes on 2 cores = 960 s of CPU); a ratio above 1 cannot meet the
budget at any parallelism. Linux only.

    python benchmarks/suite_cpu.py                       # make test-fast
    python benchmarks/suite_cpu.py -- make test          # the whole suite (about 15 minutes here)
    python benchmarks/suite_cpu.py -- .venv/bin/python -m pytest -q tests/verl/test_verl_campaign.py
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

HZ = os.sysconf("SC_CLK_TCK")

# (pattern over the command line, kind): first match wins (job entrypoints and verl's driver before Ray's
# daemons: verl's argv carries `ray_init.include_dashboard=False`)
KINDS: list[tuple[str, str]] = [
    (r"^ray::JobSupervisor", "Ray job supervisor (one per Ray job)"),
    (r"^ray::IDLE", "Ray worker, idle or starting"),
    (r"^ray::", "Ray actor / task (verl's workers, ...)"),
    (r"default_worker\.py|setup_worker\.py", "Ray worker, idle or starting"),
    (r"bin/ray start", "`ray start`"),
    (r"orchestrator\.stages train", "stage: train (job entrypoint)"),
    (r"orchestrator\.stages evaluate", "stage: evaluate (job entrypoint)"),
    (r"verl\.trainer\.main_ppo", "verl main_ppo (driver of a verl launch)"),
    (r"verl_merge|verl\.model_merger", "verl checkpoint merge"),
    (r"gcs_server|/raylet/raylet|dashboard|log_monitor|monitor\.py|runtime_env/agent|ray\.util\.client\.server",
     "Ray daemons (GCS, raylet, dashboard, agents, monitors)"),
    (r"exec\(eval\(sys\.stdin", "pytest-xdist worker (the tests themselves)"),
    (r"-m pytest|/pytest ", "pytest controller"),
    (r"bin/campaign ", "`campaign` CLI subprocess (orchestrators of end-to-end tests)"),
    (r"multiprocessing", "multiprocessing children (grader pools, ...)"),
    (r"postgres", "PostgreSQL"),
]


def kind_of(cmdline: str) -> str:
    for pattern, kind in KINDS:
        if re.search(pattern, cmdline):
            return kind
    return "other"


@dataclass
class Proc:
    cmdline: str
    cpu_at_start: float  # CPU seconds already spent when first seen at the start (not charged)
    cpu: float


def _stat(pid: str) -> tuple[str, float] | None:
    """(start time, utime+stime in seconds) of a process, None when it is gone."""
    try:
        raw = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = raw[raw.rindex(")") + 2:].split()
    return fields[19], (int(fields[11]) + int(fields[12])) / HZ


def _cmdline(pid: str) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace").strip()
    except OSError:
        return ""


def scan(procs: dict[tuple[str, str], Proc], *, at_start: bool = False) -> None:
    for pid in filter(str.isdigit, os.listdir("/proc")):
        st = _stat(pid)
        if st is None:
            continue
        key = (pid, st[0])
        p = procs.get(key)
        if p is None:
            cmd = _cmdline(pid)
            if cmd:  # kernel threads have none
                procs[key] = Proc(cmd, st[1] if at_start else 0.0, st[1])
            continue
        p.cpu = st[1]
        if "worker.py" in p.cmdline or p.cmdline.startswith("ray::IDLE"):  # a Ray worker takes its task's title
            cmd = _cmdline(pid)
            if cmd.startswith("ray::"):
                p.cmdline = cmd


def machine_cpu() -> float:
    """user + nice + system seconds of every core since boot."""
    fields = Path("/proc/stat").read_text().splitlines()[0].split()
    return sum(int(x) for x in fields[1:4]) / HZ


def table(procs: dict[tuple[str, str], Proc]) -> pd.DataFrame:
    df = pd.DataFrame([{"kind": kind_of(p.cmdline), "cpu_s": p.cpu - p.cpu_at_start} for p in procs.values()])
    out = df.groupby("kind").agg(processes=("cpu_s", "size"), cpu_s=("cpu_s", "sum"))
    out = out[out["cpu_s"] >= 0.05].sort_values("cpu_s", ascending=False)
    out["share"] = out["cpu_s"] / out["cpu_s"].sum()
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--interval", type=float, default=0.5, help="seconds between samples")
    ap.add_argument("--budget-min", type=float, default=8.0, help="wall-time budget in minutes")
    ap.add_argument("--cores", type=int, default=os.cpu_count() or 1, help="cores the budget assumes")
    ap.add_argument("command", nargs="*", help="the command to measure (after --); default: make test-fast")
    args = ap.parse_args()
    command = args.command or ["make", "test-fast"]

    procs: dict[tuple[str, str], Proc] = {}
    scan(procs, at_start=True)
    t0, c0 = time.time(), machine_cpu()
    child = subprocess.Popen(command)
    while child.poll() is None:
        time.sleep(args.interval)
        scan(procs)
    wall, cpu = time.time() - t0, machine_cpu() - c0
    scan(procs)

    out = table(procs)
    with pd.option_context("display.max_colwidth", 70, "display.width", 140):
        print(out.to_string(formatters={"cpu_s": "{:.1f}".format, "share": "{:.1%}".format}))
    budget = args.budget_min * 60 * args.cores
    print(f"\ncommand: {' '.join(command)} (exit {child.returncode})")
    print(f"wall {wall:.0f} s; machine CPU {cpu:.0f} s = {cpu / wall:.2f} of {args.cores} cores busy; "
          f"the table explains {out['cpu_s'].sum() / cpu:.0%} of it")
    print(f"ratio machine CPU / budget ({args.budget_min:g} min x {args.cores} cores = {budget:.0f} s): "
          f"{cpu / budget:.2f}{'  (> 1: no parallelism meets the budget)' if cpu > budget else ''}")
    return child.returncode


if __name__ == "__main__":
    sys.exit(main())
