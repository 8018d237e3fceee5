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
"""

from __future__ import annotations

import json
import math
import os
import time
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
               t: float | None = None) -> None:
    _append(train_dir, {"event": "end", "launch": Path(metrics_file).name, "rc": rc, "how": how,
                        "t": time.time() if t is None else t})


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
    ends: dict[str, tuple[float, int | None, str]] = {}
    for ln in _lines(train_dir):
        name = str(ln.get("launch"))
        if ln.get("event") == "start":
            starts[name] = float(ln["t"])
        elif ln.get("event") == "end":
            ends[name] = (float(ln["t"]), ln.get("rc"), str(ln.get("how", "exit")))
    out = []
    for name, start in sorted(starts.items(), key=lambda kv: kv[1]):
        if name in ends:
            end, rc, how = ends[name]
            out.append(Launch(name, start, end, None if rc is None else int(rc), how))
            continue
        mf = train_dir / "verl_metrics" / name
        end = max(start, mf.stat().st_mtime) if mf.exists() else start
        out.append(Launch(name, start, end, None, "metrics_mtime"))
    return out


def compute_account(train_dir: Path, n_gpus: int, seqs_per_step: float) -> dict[str, float]:
    """`wall_s`, `gpu_s`, `rollout_tokens`, `update_tokens` summed over every launch of the run, with the
    `lost_*` part of each, `launches` and `killed_launches` (ended without an exit code: killed, stopped or
    interrupted).

    Tokens come from each launch's own metrics file (`response_length/mean` × sequences per step, verl's
    `windtunnel/update_tokens`); a row missing either key makes that total NaN, never 0."""
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
                v = (float(r.get("response_length/mean", math.nan)) * seqs_per_step if metric is None
                     else float(r.get(metric, math.nan)))
                tokens[key] += v
                if redone:
                    tokens[f"lost_{key}"] += v
    if not n_rows:  # no step logged at all: the token counts are unknown, not zero
        tokens = dict.fromkeys(tokens, math.nan)
    wall = sum((la.wall_s for la in launches), 0.0)
    lost = sum((la.wall_s for la in launches if la.lost), 0.0)
    return {"wall_s": wall, "gpu_s": wall * n_gpus, "lost_wall_s": lost, "lost_gpu_s": lost * n_gpus,
            **tokens, "launches": float(len(launches)), "killed_launches": float(sum(la.rc is None for la in launches))}
