"""The one reader of a training run's metrics JSONL (`metrics.jsonl`, verl's per-launch files).

One object per line, one line per step. A writer appends lines while the run trains and may be killed
mid-line, so only the *last* line can be torn; `torn_tail` says what a reader does with it:

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


class MetricsFileError(ValueError):
    """A metrics JSONL line that is not a JSON object; the message names the file and the line."""


def read_metrics_jsonl(path: str | Path, *, torn_tail: Literal["skip", "raise"], offset: int = 0
                       ) -> tuple[list[dict[str, Any]], int]:
    """(rows from byte `offset`, the offset after the last line read). Blank lines are skipped.

    With `torn_tail="skip"` a last line without its newline is not consumed (the returned offset stops
    before it, so an incremental reader reads it again once it is complete)."""
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
            rows.append(obj)
        elif not (torn_tail == "skip" and i == last):
            where = f"line {i + 1}" if offset == 0 else f"line {i + 1} after byte {offset}"
            raise MetricsFileError(f"{p}: {where}: {problem}; each line must be one JSON object")
    return rows, offset + end
