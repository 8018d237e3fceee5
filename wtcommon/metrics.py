"""The one reader of a training run's metrics JSONL (`metrics.jsonl`, verl's per-launch files).

One object per line, one line per step, in either shape our backends write:

* flat (the local and noop backends): `{"step": 3, "policy/kept_frac": 0.5, ...}`;
* verl's file logger (`verl/utils/tracking.py::FileLogger.log`): `{"step": 3, "data": {"windtunnel/kept_frac":
  0.5, "actor/grad_norm": 0.12, ...}}`.

Every reader gets flat rows (`flat_row`): verl's `data` is lifted to the top level with its metric names
as verl wrote them, so MLflow, the intervention check, the report's training curves and tuning all see
verl's metrics (issue 24). Only a file-level copy (merging verl's launch files) asks for `raw` rows.

A writer appends lines while the run trains and may be killed mid-line, so only the *last* line can be
torn; `torn_tail` says what a reader does with it:

* `"skip"` (readers of a file that may still be written: MLflow ingest, tuning's intermediate values,
  merging verl's launch files): a last line without its newline, or one that is not a JSON object, is
  left out;
* `"raise"` (readers of a finished run: the intervention analysis): it is an error like any other.

Any other line that is not a JSON object is always a `MetricsFileError` naming the file and the line:
a corrupt file in the middle is never silently shortened.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Literal
from wtcommon.errors import UserError


class MetricsFileError(UserError):
    """A metrics JSONL line that is not a JSON object; the message names the file and the line."""


def flat_row(obj: dict[str, Any]) -> dict[str, Any]:
    """One metrics line in the flat shape: verl's `{"step": N, "data": {...}}` becomes `{"step": N, **data}`
    (names kept as written; a top-level key wins over a `data` key of the same name); a flat row is returned
    as it is."""
    data = obj.get("data")
    if not isinstance(data, dict):
        return obj
    return {**data, **{k: v for k, v in obj.items() if k != "data"}}


def read_metrics_jsonl(path: str | Path, *, torn_tail: Literal["skip", "raise"], offset: int = 0,
                       raw: bool = False) -> tuple[list[dict[str, Any]], int]:
    """(flat rows from byte `offset`, the offset after the last line read). Blank lines are skipped.

    With `torn_tail="skip"` a last line without its newline is not consumed (the returned offset stops
    before it, so an incremental reader reads it again once it is complete). `raw=True`: each line's object
    as written (verl's nested `data` kept), for a reader that copies lines rather than reading metrics."""
    if torn_tail not in ("skip", "raise"):
        raise ValueError(f"torn_tail must be 'skip' or 'raise', got {torn_tail!r}")
    p = Path(path)
    with open(p, "rb") as f:
        f.seek(offset)
        data = f.read()
    end = len(data)
    if torn_tail == "skip" and data and not data.endswith(b"\n"):
        end = data.rfind(b"\n") + 1  # an unfinished last line: neither returned nor consumed
    lines = data[:end].split(b"\n")
    if lines and lines[-1] == b"":
        lines.pop()
    last = max((i for i, line in enumerate(lines) if line.strip()), default=-1)
    rows: list[dict[str, Any]] = []
    for i, line in enumerate(lines):
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
            problem = None if isinstance(obj, dict) else f"expected a JSON object, got {type(obj).__name__}"
        except ValueError as e:  # JSONDecodeError, or bytes that are not UTF-8
            problem = f"not valid JSON ({getattr(e, 'msg', e)})"
        if problem is None:
            rows.append(obj if raw else flat_row(obj))
        elif not (torn_tail == "skip" and i == last):
            where = f"line {i + 1}" if offset == 0 else f"line {i + 1} after byte {offset}"
            raise MetricsFileError(f"{p}: {where}: {problem}; each line must be one JSON object")
    return rows, offset + end


def training_metrics_files(train_dir: str | Path) -> list[Path]:
    """The files a run's training metrics are in while it trains: verl's per-launch files
    (`<train>/verl_metrics/launch_*.jsonl`, merged into `metrics.jsonl` only when the run ends) while they exist,
    else `<train>/metrics.jsonl`, where the local and noop backends write each step. The files may not exist yet."""
    train = Path(train_dir)
    return sorted((train / "verl_metrics").glob("launch_*.jsonl")) or [train / "metrics.jsonl"]


def training_rows(train_dir: str | Path) -> list[dict[str, Any]]:
    """Every complete flat row logged so far, launch after launch (a resumed run repeats the steps after its
    checkpoint); a torn last line is left out."""
    return [row for f in training_metrics_files(train_dir) if f.is_file()
            for row in read_metrics_jsonl(f, torn_tail="skip")[0]]


# what the README says to check after a smoke test: a selector keeps < 1, a reweighter spreads weights, a mixer moves
POLICY_METRICS = ("kept_frac", "weight_std", "realised_prop")


def policy_metric_means(path: str | Path) -> tuple[dict[str, float], int]:
    """The policy's own metrics in a run's metrics.jsonl (`kept_frac`, `weight_std`, a mixer's realised
    proportions), each as its mean over the steps that logged it, and how many steps did; ({}, 0) when the
    file is missing, unreadable or holds none (a summary line, never a reason to fail a finished run)."""
    p = Path(path)
    try:
        rows = read_metrics_jsonl(p, torn_tail="skip")[0] if p.is_file() else []
    except MetricsFileError:
        return {}, 0
    keys = sorted({k for r in rows for k, v in r.items() if isinstance(v, (int, float)) and not isinstance(v, bool)
                   and any(m in k.rsplit("/", 1)[-1] for m in POLICY_METRICS)})
    means = {k: sum(vals) / len(vals) for k in keys
             if (vals := [float(r[k]) for r in rows if isinstance(r.get(k), (int, float))])}
    steps = len({r.get("step") for r in rows if any(k in r for k in keys)})
    return means, steps
