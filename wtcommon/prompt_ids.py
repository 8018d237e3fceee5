"""The per-run log of which prompts each step rolled out (`rollout_ids.jsonl`), read by the intervention check
and written by the training backends; here because both sides (analysis, training) read it."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from wtcommon.errors import UserError

IDS_FILE = "rollout_ids.jsonl"


class PromptIdsError(UserError):
    """A prompt-id log line that is not `{"step": int, "ids": [int, ...]}` (other than a torn last line)."""


def read_prompt_ids(path: str | Path, upto: int | None = None) -> dict[int, np.ndarray]:
    """{step: ids} from a `rollout_ids.jsonl`, steps <= `upto` when given. A torn last line (a killed run's) is
    dropped; a bad line before it raises `PromptIdsError` naming the file and line."""
    p = Path(path)
    out: dict[int, np.ndarray] = {}
    if not p.is_file():
        return out
    lines = p.read_text().splitlines()
    for i, line in enumerate(lines, 1):
        try:
            obj = json.loads(line)
            step, ids = int(obj["step"]), np.asarray(obj["ids"], dtype=np.int64)
        except (ValueError, KeyError, TypeError) as exc:
            if i == len(lines):
                break
            raise PromptIdsError(f"{p}: line {i}: not a prompt-id record ({exc}); expected "
                                 '{"step": N, "ids": [...]}') from None
        if upto is None or step <= upto:
            out[step] = ids
    return out


class PromptIdLog:
    """`<out>/rollout_ids.jsonl`: one line `{"step": s, "ids": [...]}` per step, appended and flushed, so a
    resumed run keeps the lines up to its checkpoint and continues the file."""

    def __init__(self, out_dir: Path, *, resume_step: int | None) -> None:
        self.path = Path(out_dir) / IDS_FILE
        kept = read_prompt_ids(self.path, upto=resume_step) if resume_step is not None else {}
        self._f = open(self.path, "w")
        for s in sorted(kept):
            self._write(s, kept[s])

    def _write(self, step: int, ids: np.ndarray) -> None:
        self._f.write(json.dumps({"step": int(step), "ids": [int(i) for i in ids]}) + "\n")
        self._f.flush()

    def log(self, step: int, ids: np.ndarray) -> None:
        self._write(step, ids)

    def close(self) -> None:
        self._f.close()
