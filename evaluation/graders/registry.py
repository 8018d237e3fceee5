"""Registry of graders by name, in the decorator idiom of `policies.registry`: each grader module registers its
in-process grading function with its version and time budget, so the set of graders, their versions and their
budgets are declared once, beside the rules they describe.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeVar

from evaluation.graders.result import GradeResult
from wtcommon.errors import UserError
from wtcommon.registry import Registry

F = TypeVar("F", bound=Callable[..., GradeResult])


@dataclass(frozen=True)
class Grader:
    """One grader: `grade(response, gold[, n_options])` in this process without a budget; `takes_options` says
    whether it takes the item's option count (multiple choice); `budget_s` is the parent-enforced time per item."""

    name: str
    grade: Callable[..., GradeResult]
    version: str
    budget_s: float
    takes_options: bool = False

    def grade_inprocess(self, response: str, gold: str, n_options: int | None = None) -> GradeResult:
        return self.grade(response, gold, n_options) if self.takes_options else self.grade(response, gold)


class GraderError(UserError):
    """An unknown grader name, or a second grader under a taken one (a ValueError too, as before)."""


REGISTRY: Registry[Grader] = Registry("grader", GraderError, lambda g: g.grade)


def register_grader(name: str, *, version: str, budget_s: float, takes_options: bool = False) -> Callable[[F], F]:
    """Function decorator: register an in-process grading function under `name`."""

    def deco(fn: F) -> F:
        REGISTRY[name] = Grader(name, fn, version, budget_s, takes_options)  # a different function: refused
        return fn

    return deco


def get_grader(name: str) -> Grader:
    """The registered grader `name`; a GraderError (a ValueError) naming the close and the known graders
    otherwise."""
    return REGISTRY.lookup(name)


__all__ = ["REGISTRY", "Grader", "GraderError", "get_grader", "register_grader"]
