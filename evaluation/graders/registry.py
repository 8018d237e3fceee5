"""Registry of graders by name, in the decorator idiom of `policies.registry`: each grader module registers its
in-process grading function with its version and time budget, so the set of graders, their versions and their
budgets are declared once, beside the rules they describe.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeVar

from evaluation.graders.conclusion import DEFAULT_TAGS, Markers, ThinkTags, read_conclusion
from evaluation.graders.result import GradeResult
from wtcommon.errors import UserError
from wtcommon.registry import Registry

F = TypeVar("F", bound=Callable[..., GradeResult])


@dataclass(frozen=True)
class Grader:
    """One grader: `grade(conclusion, gold[, n_options])` in this process without a budget; `takes_options` says
    whether it takes the item's option count (multiple choice); `budget_s` is the parent-enforced time per item;
    `markers`: the family's own final-answer statements, added to the conclusion reader's."""

    name: str
    grade: Callable[..., GradeResult]
    version: str
    budget_s: float
    takes_options: bool = False
    markers: Markers | None = None

    def grade_inprocess(self, response: str, gold: str, n_options: int | None = None,
                        tags: ThinkTags | None = DEFAULT_TAGS) -> GradeResult:
        """The family grades the response's conclusion (`evaluation.graders.conclusion`), never the raw text."""
        c = read_conclusion(response, tags, self.markers)
        return self.grade(c, gold, n_options) if self.takes_options else self.grade(c, gold)


class GraderError(UserError):
    """An unknown grader name, or a second grader under a taken one (a ValueError too, as before)."""


REGISTRY: Registry[Grader] = Registry("grader", GraderError, lambda g: g.grade)


def register_grader(name: str, *, version: str, budget_s: float, takes_options: bool = False,
                    markers: Markers | None = None) -> Callable[[F], F]:
    """Function decorator: register an in-process grading function of a `Conclusion` under `name`."""

    def deco(fn: F) -> F:
        REGISTRY[name] = Grader(name, fn, version, budget_s, takes_options, markers)  # another function: refused
        return fn

    return deco


def get_grader(name: str) -> Grader:
    """The registered grader `name`; a GraderError (a ValueError) naming the close and the known graders
    otherwise."""
    return REGISTRY.lookup(name)


__all__ = ["REGISTRY", "Grader", "GraderError", "get_grader", "register_grader"]
