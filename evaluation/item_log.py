"""The item log: one gzip JSON line per graded item, written by an evaluation beside its records.

Every consumer (the item-level CIs of analysis/items.py, `campaign regrade`, the grader audit) reads the
same file, so its name, its health file beside it, the atomic writer and the line reader live here once.
Each reader still decides what a bad line means to it (collect every problem, or stop at the first) and
words its own fix; this module only says which line is not a JSON object and why.
"""

from __future__ import annotations

import dataclasses
import gzip
import json
import zlib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from wtcommon.atomic import atomic_path, atomic_write_text
from wtcommon.errors import UserError

SUFFIX = ".items.jsonl.gz"
GLOB = "*" + SUFFIX
HEALTH_SUFFIX = ".health.json"


def items_path_of(records: Path) -> Path:
    """The item log beside `records` (`<stem>.items.jsonl.gz`, the stem cut at its first dot)."""
    return records.with_name(records.name.split(".")[0] + SUFFIX)


def health_path_of(items: Path) -> Path:
    """The per-benchmark health file beside an item log (`<stem>.health.json`)."""
    return items.with_name(items.name.replace(SUFFIX, HEALTH_SUFFIX))


def stem_of(items: Path) -> str:
    """The stem an item log shares with its records file (`step_4` of `step_4.items.jsonl.gz`)."""
    return items.name[: -len(SUFFIX)]


def write_item_log(items: Path, rows: Iterable[Mapping[str, Any]], health: Iterable[Any]) -> None:
    """Write the item log and its health file (dataclasses, one per benchmark), each whole or untouched."""
    with atomic_path(items) as tmp, gzip.open(tmp, "wt", encoding="utf-8") as f:
        for r in rows:
            f.write(json.dumps(r, ensure_ascii=False, default=str) + "\n")
    body = json.dumps([dataclasses.asdict(h) for h in health], indent=2, default=str) + "\n"
    atomic_write_text(health_path_of(items), body)


class UnreadableItemLog(UserError):
    """The file is not readable gzip text; `reason` says why (each caller words its own fix)."""

    def __init__(self, path: Path, reason: str) -> None:
        super().__init__(f"{path}: not a readable gzip JSON-lines item log ({reason})")
        self.reason = reason


@dataclass(frozen=True)
class LogLine:
    """One non-blank line: its row when it is a JSON object; else `json_error` (the decoder's message) when it
    is not JSON at all, or neither (valid JSON that is not an object)."""

    number: int
    row: dict[str, Any] | None
    json_error: str | None = None

    @property
    def problem(self) -> str:
        """What is wrong with a line that has no row, in words."""
        return f"not JSON ({self.json_error})" if self.json_error is not None else "not a JSON object"


def read_lines(path: Path) -> list[LogLine]:
    """Every non-blank line of an item log, numbered from 1; UnreadableItemLog when gzip cannot read it or the
    file is empty (a zero-byte file is no log, not a log of no items: the writer always writes gzip's header)."""
    if Path(path).is_file() and Path(path).stat().st_size == 0:
        raise UnreadableItemLog(path, "empty file, 0 bytes")
    try:
        with gzip.open(path, "rt", encoding="utf-8") as fh:
            lines = fh.read().splitlines()
    except (OSError, EOFError, UnicodeDecodeError, zlib.error) as e:  # zlib.error: a corrupt deflate stream
        raise UnreadableItemLog(path, str(e)) from None
    out = []
    for i, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            r = json.loads(line)
        except json.JSONDecodeError as e:
            out.append(LogLine(i, None, e.msg))
            continue
        out.append(LogLine(i, r if isinstance(r, dict) else None))
    return out


__all__ = ["GLOB", "HEALTH_SUFFIX", "LogLine", "SUFFIX", "UnreadableItemLog", "health_path_of", "items_path_of",
           "read_lines", "stem_of", "write_item_log"]
