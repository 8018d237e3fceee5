"""The one result type every grader returns (score, parsed answer, parse status)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

Status = Literal["ok", "no_answer", "hedged", "truncated", "timeout", "error"]
STATUSES: tuple[str, ...] = ("ok", "no_answer", "hedged", "truncated", "timeout", "error")


@dataclass(frozen=True)
class GradeResult:
    """`score` in [0, 1]; `parsed` is the extracted answer (None when nothing was extracted).

    `status` separates "wrong" (ok, score 0) from "unparsable" (no_answer), "the conclusion offers answers
    that disagree" (hedged), "the reasoning block never closed" (truncated), "grader too slow" (timeout) and
    "bad gold / grader crash" (error), so a parse failure is never a silent zero.
    """

    score: float
    parsed: str | None
    status: Status

    @property
    def parsed_ok(self) -> bool:
        return self.status == "ok"
