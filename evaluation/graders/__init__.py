"""Graders written once: the training reward (`evaluation.reward`) and the evaluator both call these.

`grade(grader, response, gold)` -> `GradeResult(score, parsed, status)`;
`grade_batch(...)` grades many items. Every grader runs under a time budget (`BUDGET_S`) enforced by the
parent of a process pool (`evaluation.graders.pool`): an output that exceeds it is status `timeout`.
Each grader module states its final-answer rules in its docstring and carries a `GRADER_VERSION`
(`GRADER_VERSIONS`), which the evaluator writes into its records and item logs so scores graded under
different rules can be told apart.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import cast

from evaluation.graders import knights_knaves as _kk
from evaluation.graders import math as _math
from evaluation.graders import multiple_choice as _mc
from evaluation.graders.pool import grade_inprocess, shared_pool
from evaluation.graders.result import STATUSES, GradeResult

GRADERS: tuple[str, ...] = ("math", "multiple_choice", "knights_knaves")
GRADER_VERSIONS: dict[str, str] = {
    "math": _math.GRADER_VERSION,
    "multiple_choice": _mc.GRADER_VERSION,
    "knights_knaves": _kk.GRADER_VERSION,
}
# seconds per item; the regex graders take < 50 ms on any 20,000-character string
# (benchmarks/grading_throughput.py), so their budget only guards against a defect
BUDGET_S: dict[str, float] = {"math": _math.BUDGET_S, "multiple_choice": 2.0, "knights_knaves": 2.0}


def _check(grader: str) -> None:
    if grader not in GRADERS:
        raise ValueError(f"unknown grader {grader!r}; use one of {list(GRADERS)}")


def grader_version(grader: str) -> str:
    """`<grader>-v<version>`, the label written next to scores."""
    _check(grader)
    return f"{grader}-v{GRADER_VERSIONS[grader]}"


def grade(
    grader: str, response: str, ground_truth: str, *, n_options: int | None = None, timeout_s: float | None = None
) -> GradeResult:
    """Grade one response within the grader's budget (`timeout_s` overrides `BUDGET_S[grader]`).

    `n_options` sets the letter set of a multiple-choice item (default 4)."""
    _check(grader)
    budget = BUDGET_S[grader] if timeout_s is None else timeout_s
    return shared_pool(1).grade_items(grader, [response], [ground_truth], [n_options], timeout_s=budget)[0]


def grade_batch(
    grader: str,
    responses: Sequence[str],
    golds: Sequence[str],
    n_options: int | Sequence[int | None] | None = None,
    processes: int = 2,
    timeout_s: float | None = None,
) -> list[GradeResult]:
    """Grade many items; `n_options` is one value or one per item (MC only).

    `processes=0` grades in this process without a budget (measuring the floor only)."""
    _check(grader)
    if len(responses) != len(golds):
        raise ValueError(f"grade_batch: {len(responses)} responses but {len(golds)} golds")
    opts: list[int | None] = (list(n_options) if isinstance(n_options, (list, tuple))
                              else [cast(int | None, n_options)] * len(golds))
    if len(opts) != len(golds):
        raise ValueError(f"grade_batch: {len(opts)} n_options for {len(golds)} items")
    if processes == 0:
        return [grade_inprocess(grader, r, g, o) for r, g, o in zip(responses, golds, opts, strict=True)]
    budget = BUDGET_S[grader] if timeout_s is None else timeout_s
    return shared_pool(processes).grade_items(grader, responses, golds, opts, timeout_s=budget)


__all__ = ["BUDGET_S", "GRADERS", "GRADER_VERSIONS", "STATUSES", "GradeResult", "grade", "grade_batch",
           "grader_version"]
