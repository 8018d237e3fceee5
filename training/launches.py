"""The launches of one verl run and the compute they spent, killed launches included (issue 24, Build 4).

Why: a run killed and resumed is several launches of `verl.trainer.main_ppo`, each with its own metrics
file (`verl_metrics/launch_NNN.jsonl`). Reporting the last launch's wall time alone under-reports what the
run cost. Each launch appends a `start` line to `<train dir>/launches.jsonl` before verl starts and an `end`
line (exit code) when it exits, each line flushed to disk at once, so the record survives whatever kills
the launch afterwards.

A launch without an `end` line was killed with its launcher (SIGKILL, OOM killer, a lost node). Its end is
estimated as the modification time of its own metrics file (verl writes one line there at the end of every
step; the file is created just before the launch), never earlier than its start: a lower bound, the work
since its last logged step is not counted. A launch left running by a killed stage job and stopped by the
next attempt (`verl_launcher.stop_orphan`) gets an `end` line with the time it was stopped.

Lost work: the wall time of every launch that did not exit 0, and the tokens of every step a later launch
logged again (a resumed run repeats the steps after its last checkpoint).

Compute split (issue 50), as the local backend splits it (training/local.py): each attempt's base-model build
(`training.warmup.base_model` in `resolve_inputs`: the tiny model's build and warm-up when the cache is cold, the
synthetic corpus; a lock wait on another run's build included, as on the local backend) is a `build` line, the
FSDP -> HF checkpoint merge a `merge` line, each with its wall and CPU seconds. CPU seconds are the launcher
process's own plus those of the children it reaped (`RUSAGE_CHILDREN`): a launch's driver, its private Ray
runtime and workers where they exit through their parents; a lower bound (a process reparented after a kill,
another node of a multi-node run, the GPU are not counted), and a launch killed with its launcher has none.
"""

from __future__ import annotations

import json
import math
import os
import resource
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from wtcommon.metrics import read_metrics_jsonl

LAUNCHES_FILE = "launches.jsonl"


@dataclass(frozen=True)
class Launch:
    """One launch: its metrics file name, start, end (epoch s), exit code (None: killed) and how `end` was found:
    `exit` (recorded at exit), `stopped` (an orphan stopped by a later attempt), `metrics_mtime` (estimated)."""

    name: str
    start: float
    end: float
    rc: int | None
    end_from: str
    cpu_s: float | None = None  # CPU seconds of the launch's reaped process tree; None: not measured (killed)

    @property
    def wall_s(self) -> float:
        return max(0.0, self.end - self.start)

    @property
    def lost(self) -> bool:
        return self.rc != 0


def _append(train_dir: Path, line: dict[str, Any]) -> None:
    """One line, appended and fsynced: the record must outlive a SIGKILL of the launcher right after."""
    fd = os.open(Path(train_dir) / LAUNCHES_FILE, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    try:
        os.write(fd, (json.dumps(line, sort_keys=True) + "\n").encode())
        os.fsync(fd)
    finally:
        os.close(fd)


def record_start(train_dir: Path, metrics_file: Path, t: float | None = None, *,
                 ray_temp_dir: Path | None = None) -> None:
    line: dict[str, Any] = {"event": "start", "launch": Path(metrics_file).name, "t": time.time() if t is None else t,
                            "pid": os.getpid()}
    if ray_temp_dir is not None:
        line["ray_temp_dir"] = str(ray_temp_dir)
    _append(train_dir, line)


def record_end(train_dir: Path, metrics_file: Path, rc: int | None, *, how: str = "exit",
               t: float | None = None, cpu_s: float | None = None) -> None:
    line: dict[str, Any] = {"event": "end", "launch": Path(metrics_file).name, "rc": rc, "how": how,
                            "t": time.time() if t is None else t}
    if cpu_s is not None:
        line["cpu_s"] = cpu_s
    _append(train_dir, line)


def cpu_seconds() -> float:
    """This process's CPU seconds plus those of the children it has reaped (user + system)."""
    ch = resource.getrusage(resource.RUSAGE_CHILDREN)
    return time.process_time() + ch.ru_utime + ch.ru_stime


def record_phase(train_dir: Path, event: str, wall_s: float, cpu_s: float) -> None:
    """A `build` or `merge` line: that phase's wall and CPU seconds in this attempt."""
    _append(train_dir, {"event": event, "wall_s": wall_s, "cpu_s": cpu_s, "t": time.time()})


@contextmanager
def timed(train_dir: Path, event: str) -> Iterator[None]:
    """Time the block (wall, `cpu_seconds`) and record it as an `event` line once it returns."""
    Path(train_dir).mkdir(parents=True, exist_ok=True)
    t0, c0 = time.time(), cpu_seconds()
    yield
    record_phase(train_dir, event, time.time() - t0, cpu_seconds() - c0)


def _lines(train_dir: Path) -> list[dict[str, Any]]:
    path = Path(train_dir) / LAUNCHES_FILE
    return read_metrics_jsonl(path, torn_tail="skip", raw=True)[0] if path.exists() else []


def unfinished(train_dir: Path) -> list[str]:
    """Names of the launches with a start line and no end line (killed, or still running)."""
    started: dict[str, None] = {}
    for ln in _lines(train_dir):
        if ln.get("event") == "start":
            started[str(ln["launch"])] = None
        elif ln.get("event") == "end":
            started.pop(str(ln["launch"]), None)
    return list(started)


def ray_temp_dirs(train_dir: Path) -> list[Path]:
    """The private-runtime temp dirs of earlier launches that still exist: a launch killed with its launcher
    never removed its own. Called when no launch of the run is alive (after `stop_orphan`)."""
    dirs = [Path(str(ln["ray_temp_dir"])) for ln in _lines(train_dir)
            if ln.get("event") == "start" and ln.get("ray_temp_dir")]
    return [d for d in dict.fromkeys(dirs) if d.is_dir()]


def read_launches(train_dir: Path) -> list[Launch]:
    """Every recorded launch in start order; a launch without an end line has its end estimated (module
    docstring). Metrics files named by no start line (launches before this record existed) are left out."""
    train_dir = Path(train_dir)
    starts: dict[str, float] = {}
    ends: dict[str, tuple[float, int | None, str, float | None]] = {}
    for ln in _lines(train_dir):
        name = str(ln.get("launch"))
        if ln.get("event") == "start":
            starts[name] = float(ln["t"])
        elif ln.get("event") == "end":
            cpu = ln.get("cpu_s")
            ends[name] = (float(ln["t"]), ln.get("rc"), str(ln.get("how", "exit")), None if cpu is None else float(cpu))
    out = []
    for name, start in sorted(starts.items(), key=lambda kv: kv[1]):
        if name in ends:
            end, rc, how, cpu_s = ends[name]
            out.append(Launch(name, start, end, None if rc is None else int(rc), how, cpu_s))
            continue
        mf = train_dir / "verl_metrics" / name
        end = max(start, mf.stat().st_mtime) if mf.exists() else start
        out.append(Launch(name, start, end, None, "metrics_mtime"))
    return out


def _rollout_tokens(row: dict, seqs_per_step: float) -> float:
    """A step's generated tokens: the trainer's own count where it logs one (`windtunnel/rollout_tokens`: dynamic
    sampling's every round, dropped groups included), else verl's kept batch (`response_length/mean` x
    sequences per step)."""
    if "windtunnel/rollout_tokens" in row:
        return float(row["windtunnel/rollout_tokens"])
    return float(row.get("response_length/mean", math.nan)) * seqs_per_step


def compute_account(train_dir: Path, n_gpus: int, seqs_per_step: float) -> dict[str, float]:
    """`wall_s`, `gpu_s`, `rollout_tokens`, `update_tokens` summed over every launch of the run, with the
    `lost_*` part of each, `launches` and `killed_launches` (ended without an exit code: killed, stopped or
    interrupted).

    Tokens come from each launch's own metrics file (`windtunnel/rollout_tokens` where logged, else
    `response_length/mean` × sequences per step; verl's `windtunnel/update_tokens`); a row missing either key
    makes that total NaN, never 0."""
    train_dir = Path(train_dir)
    launches = read_launches(train_dir)
    per_launch = []
    for la in launches:
        mf = train_dir / "verl_metrics" / la.name
        per_launch.append(read_metrics_jsonl(mf, torn_tail="skip")[0] if mf.exists() else [])
    last_launch_of_step: dict[int, int] = {}
    for i, rows in enumerate(per_launch):
        for r in rows:
            if isinstance(r.get("step"), int):
                last_launch_of_step[r["step"]] = i
    tokens = {"rollout_tokens": 0.0, "update_tokens": 0.0, "lost_rollout_tokens": 0.0, "lost_update_tokens": 0.0}
    n_rows = 0
    for i, rows in enumerate(per_launch):
        for r in rows:
            if not isinstance(r.get("step"), int):
                continue
            n_rows += 1
            redone = last_launch_of_step[r["step"]] != i
            for key, metric in (("rollout_tokens", None), ("update_tokens", "windtunnel/update_tokens")):
                v = (_rollout_tokens(r, seqs_per_step) if metric is None else float(r.get(metric, math.nan)))
                tokens[key] += v
                if redone:
                    tokens[f"lost_{key}"] += v
    if not n_rows:  # no step logged at all: the token counts are unknown, not zero
        tokens = dict.fromkeys(tokens, math.nan)
    wall = sum((la.wall_s for la in launches), 0.0)
    lost = sum((la.wall_s for la in launches if la.lost), 0.0)
    return {"wall_s": wall, "gpu_s": wall * n_gpus, "lost_wall_s": lost, "lost_gpu_s": lost * n_gpus,
            **tokens, "launches": float(len(launches)), "killed_launches": float(sum(la.rc is None for la in launches)),
            **compute_split(launches, _lines(train_dir))}


def compute_split(launches: list[Launch], lines: list[dict[str, Any]]) -> dict[str, float]:
    """The local backend's split of a run's compute (training/local.py) for a verl run: `build_s` /
    `build_cpu_s` (every attempt's base-model build; NaN when none was recorded), `train_wall_s` (the launches'
    wall, what `wall_s` and `gpu_s` count) and `train_cpu_s` (the launches with a measured CPU time;
    `unmeasured_cpu_launches` the others), `merge_s` / `merge_cpu_s` (checkpoint merges), and `cpu_s`, the three
    CPU parts together. `wall_s` stays the launches' alone, so train_wall_s = wall_s here (the local backend's
    wall_s holds its build: train_wall_s = wall_s - build_s there); the build is outside both on either backend."""
    def total(event: str, key: str) -> float:
        vals = [float(ln[key]) for ln in lines if ln.get("event") == event and key in ln]
        return sum(vals, 0.0) if vals else (math.nan if event == "build" else 0.0)

    train_cpu = sum((la.cpu_s for la in launches if la.cpu_s is not None), 0.0)
    build_cpu, merge_cpu = total("build", "cpu_s"), total("merge", "cpu_s")
    return {"build_s": total("build", "wall_s"), "build_cpu_s": build_cpu,
            "train_wall_s": sum((la.wall_s for la in launches), 0.0), "train_cpu_s": train_cpu,
            "unmeasured_cpu_launches": float(sum(la.cpu_s is None for la in launches)),
            "merge_s": total("merge", "wall_s"), "merge_cpu_s": merge_cpu,
            "cpu_s": (0.0 if math.isnan(build_cpu) else build_cpu) + train_cpu + merge_cpu}
