"""Graders written once: the training reward (`evaluation.reward`) and the evaluator both call these.

`grade(grader, response, gold)` -> `GradeResult(score, parsed, status)`; every family grades the response's
conclusion (`evaluation.graders.conclusion`: after the reasoning block, from the last final-answer statement);
`grade_batch(...)` grades many items. Every grader runs under a time budget (`BUDGET_S`) enforced by the
parent of a process pool (`evaluation.graders.pool`): an output that exceeds it is status `timeout`.
Each grader module states its final-answer rules in its docstring and registers its grading function with
`@register_grader` (`evaluation.graders.registry`: name, version, budget), the one declaration `GRADERS`,
`GRADER_VERSIONS` and `BUDGET_S` are read from. The evaluator writes the version into its records and item
logs so scores graded under different rules can be told apart.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import cast

# Importing each grader module registers it (`@register_grader`); this order is the order of `GRADERS`.
from evaluation.graders import math as _math  # noqa: F401
from evaluation.graders import multiple_choice as _mc  # noqa: F401
from evaluation.graders import knights_knaves as _kk  # noqa: F401
from evaluation.graders.conclusion import DEFAULT_TAGS, Conclusion, ThinkTags, read_conclusion
from evaluation.graders.pool import grade_inprocess, shared_pool
from evaluation.graders.registry import REGISTRY, get_grader
from evaluation.graders.result import STATUSES, GradeResult

# Views of the registry (one declaration per grader, in its module), kept as plain values for callers
GRADERS: tuple[str, ...] = tuple(REGISTRY)
GRADER_VERSIONS: dict[str, str] = {name: g.version for name, g in REGISTRY.items()}
BUDGET_S: dict[str, float] = {name: g.budget_s for name, g in REGISTRY.items()}  # seconds per item


def _check(grader: str) -> None:
    get_grader(grader)  # a ValueError naming the known graders


def grader_version(grader: str) -> str:
    """`<grader>-v<version>`, the label written next to scores."""
    _check(grader)
    return f"{grader}-v{GRADER_VERSIONS[grader]}"


def grade(
    grader: str, response: str, ground_truth: str, *, n_options: int | None = None, timeout_s: float | None = None,
    tags: ThinkTags | None = DEFAULT_TAGS,
) -> GradeResult:
    """Grade one response within the grader's budget (`timeout_s` overrides `BUDGET_S[grader]`).

    `n_options` sets the letter set of a multiple-choice item (default 4); `tags` the reasoning block's tags
    (None: the model writes none)."""
    _check(grader)
    budget = BUDGET_S[grader] if timeout_s is None else timeout_s
    return shared_pool(1).grade_items(grader, [response], [ground_truth], [n_options], timeout_s=budget,
                                      tags=tags)[0]


def grade_batch(
    grader: str,
    responses: Sequence[str],
    golds: Sequence[str],
    n_options: int | Sequence[int | None] | None = None,
    processes: int = 2,
    timeout_s: float | None = None,
    tags: ThinkTags | None = DEFAULT_TAGS,
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
        return [grade_inprocess(grader, r, g, o, tags) for r, g, o in zip(responses, golds, opts, strict=True)]
    budget = BUDGET_S[grader] if timeout_s is None else timeout_s
    return shared_pool(processes).grade_items(grader, responses, golds, opts, timeout_s=budget, tags=tags)


__all__ = ["BUDGET_S", "DEFAULT_TAGS", "GRADERS", "GRADER_VERSIONS", "STATUSES", "Conclusion", "GradeResult",
           "ThinkTags", "grade", "grade_batch", "grader_version", "read_conclusion"]
