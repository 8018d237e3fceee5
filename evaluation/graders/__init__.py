"""Graders written once: the training reward (`evaluation.reward`) and the evaluator both call these.

`grade(grader, response, gold)` -> `GradeResult(score, parsed, status)`;
`grade_batch(...)` grades many items (math in a process pool with a per-item timeout).
"""

from __future__ import annotations

from typing import Sequence

from evaluation.graders.knights_knaves import grade_knights_knaves
from evaluation.graders.math import grade_math, grade_math_batch
from evaluation.graders.multiple_choice import grade_multiple_choice
from evaluation.graders.result import STATUSES, GradeResult

GRADERS: tuple[str, ...] = ("math", "multiple_choice", "knights_knaves")


def _check(grader: str) -> None:
    if grader not in GRADERS:
        raise ValueError(f"unknown grader {grader!r}; use one of {list(GRADERS)}")


def grade(
    grader: str, response: str, ground_truth: str, *, n_options: int | None = None, timeout_s: float = 5.0
) -> GradeResult:
    """Grade one response. `n_options` sets the letter set of a multiple-choice item (default 4)."""
    _check(grader)
    if grader == "math":
        return grade_math(response, ground_truth, timeout_s=timeout_s)
    if grader == "multiple_choice":
        return grade_multiple_choice(response, ground_truth, n_options)
    return grade_knights_knaves(response, ground_truth)


def grade_batch(
    grader: str,
    responses: Sequence[str],
    golds: Sequence[str],
    n_options: int | Sequence[int | None] | None = None,
    processes: int = 2,
    timeout_s: float = 5.0,
) -> list[GradeResult]:
    """Grade many items; `n_options` is one value or one per item (MC only)."""
    _check(grader)
    if len(responses) != len(golds):
        raise ValueError(f"grade_batch: {len(responses)} responses but {len(golds)} golds")
    if grader == "math":
        return grade_math_batch(responses, golds, processes=processes, timeout_s=timeout_s)
    if grader == "multiple_choice":
        opts = list(n_options) if isinstance(n_options, (list, tuple)) else [n_options] * len(golds)
        if len(opts) != len(golds):
            raise ValueError(f"grade_batch: {len(opts)} n_options for {len(golds)} items")
        return [grade_multiple_choice(r, g, o) for r, g, o in zip(responses, golds, opts)]
    return [grade_knights_knaves(r, g) for r, g in zip(responses, golds)]


__all__ = ["GRADERS", "STATUSES", "GradeResult", "grade", "grade_batch"]
