"""Registry of graders by name, in the decorator idiom of `policies.registry`: each grader module registers its
in-process grading function with its version and time budget, so the set of graders, their versions and their
budgets are declared once, beside the rules they describe.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeVar

from evaluation.graders.result import GradeResult

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


REGISTRY: dict[str, Grader] = {}


def register_grader(name: str, *, version: str, budget_s: float, takes_options: bool = False) -> Callable[[F], F]:
    """Function decorator: register an in-process grading function under `name`."""

    def deco(fn: F) -> F:
        existing = REGISTRY.get(name)
        if existing is not None and existing.grade.__qualname__ != fn.__qualname__:
            raise ValueError(f"grader {name!r} is already registered by {existing.grade.__qualname__}")
        REGISTRY[name] = Grader(name, fn, version, budget_s, takes_options)
        return fn

    return deco


def get_grader(name: str) -> Grader:
    """The registered grader `name`; a ValueError naming the known graders otherwise."""
    if not isinstance(name, str) or name not in REGISTRY:
        raise ValueError(f"unknown grader {name!r}; use one of {list(REGISTRY)}")
    return REGISTRY[name]


__all__ = ["REGISTRY", "Grader", "get_grader", "register_grader"]
