"""A benchmark no model can have memorised: arithmetic expressions drawn fresh from a seed, with exact answers.

Why: a gain on a benchmark the base model already holds may be recall (evaluation/memorization.py). A set drawn
from a seed chosen for the campaign cannot be in any pretraining corpus, so a gain there is not memory: the
control a memory-sensitive comparison is read against (RandomCalculation in arXiv 2507.10532).

Each item is `Compute $<expression>$.` with the math instruction (evaluation/prompts.py). An expression is a random
binary tree of depth 2 or 3 over `+ - \\times \\div`, its leaves integers in -9..20 (negatives in parentheses) or,
one leaf in four, a proper fraction `\\frac{p}{q}` (q in 2..9); every inner node is parenthesised, so the text
has one reading. The answer is computed with `fractions.Fraction` (no float anywhere), written as an integer or
`\\frac{p}{q}` in lowest terms (`-\\frac{p}{q}` when negative), and graded by the `math` grader. A draw that
divides by zero, whose answer has a numerator or denominator above 10^6, or whose text repeats an earlier item's,
is redrawn; the same seed gives the same items, in the same order.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from fractions import Fraction
from typing import Any, TypeAlias

import pandas as pd

from evaluation.prompts import math_prompt
from wtcommon.errors import UserError


class CleanBenchmarkError(UserError):
    """The clean benchmark's options (size, seed) in a suite are not usable; names the option."""

CLEAN_ID = "clean_arith"
GENERATOR_VERSION = 1
_OPS = ("+", "-", "\\times", "\\div")
_MAX_PART = 10**6

Tree: TypeAlias = "Fraction | tuple[str, Tree, Tree]"


@dataclass(frozen=True)
class CleanItem:
    expression: str  # LaTeX, as the prompt shows it
    answer: Fraction


def render_fraction(x: Fraction) -> str:
    """The gold answer: `7`, `-3`, `\\frac{5}{12}`, `-\\frac{5}{12}`."""
    if x.denominator == 1:
        return str(x.numerator)
    sign = "-" if x < 0 else ""
    return f"{sign}\\frac{{{abs(x.numerator)}}}{{{x.denominator}}}"


def _leaf(rng: random.Random) -> Fraction:
    if rng.random() < 0.25:
        q = rng.randint(2, 9)
        return Fraction(rng.randint(1, q - 1), q)
    return Fraction(rng.choice([n for n in range(-9, 21) if n != 0]))


def _tree(rng: random.Random, depth: int) -> Tree:
    """A tree whose root is an operation and whose leaves sit at most `depth` levels down."""
    def grow(d: int) -> Tree:
        if d == 0 or (d < depth and rng.random() < 0.35):
            return _leaf(rng)
        return (rng.choice(_OPS), grow(d - 1), grow(d - 1))
    return (rng.choice(_OPS), grow(depth - 1), grow(depth - 1))


def value(t: Tree) -> Fraction:
    """The exact value; ZeroDivisionError when a divisor is 0."""
    if isinstance(t, Fraction):
        return t
    op, a, b = t
    x, y = value(a), value(b)
    if op == "+":
        return x + y
    if op == "-":
        return x - y
    if op == "\\times":
        return x * y
    return x / y  # \div: Fraction raises ZeroDivisionError on 0


def latex(t: Tree, top: bool = True) -> str:
    if isinstance(t, Fraction):
        text = str(t.numerator) if t.denominator == 1 else f"\\frac{{{t.numerator}}}{{{t.denominator}}}"
        return f"({text})" if t < 0 else text
    op, a, b = t
    body = f"{latex(a, False)} {op} {latex(b, False)}"
    return body if top else f"({body})"


def generate_items(n: int, seed: int) -> list[CleanItem]:
    """`n` distinct items drawn from `seed` (module docstring)."""
    if n <= 0:
        raise CleanBenchmarkError(f"clean benchmark: n_items must be positive, got {n}")
    rng = random.Random(f"{CLEAN_ID}/v{GENERATOR_VERSION}/{seed}")
    items: dict[str, CleanItem] = {}
    while len(items) < n:
        t = _tree(rng, rng.choice((2, 3)))
        try:
            v = value(t)
        except ZeroDivisionError:
            continue
        if abs(v.numerator) > _MAX_PART or v.denominator > _MAX_PART:
            continue
        text = latex(t)
        items.setdefault(text, CleanItem(text, v))
    return list(items.values())


def problem(expression: str) -> str:
    return f"Compute ${expression}$."


def generated_rows(n: int, options: dict[str, Any]) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """The generator's rows (what a hub download gives the other builders) and their provenance. The seed is
    `options["seed"]` (the suite's, or the campaign's when `campaign data benchmarks` is given one)."""
    seed = options.get("seed", 0)
    if not isinstance(seed, int) or isinstance(seed, bool) or seed < 0:
        raise CleanBenchmarkError(f"{CLEAN_ID}: options.seed must be a non-negative integer, got {seed!r}")
    rows = [{"expression": it.expression, "answer": render_fraction(it.answer), "index": i, "seed": seed}
            for i, it in enumerate(generate_items(n, seed))]
    return rows, {"generator": f"evaluation/clean_benchmark.py v{GENERATOR_VERSION}", "seed": seed, "n": n}


def build_clean(rows: list[dict[str, Any]]) -> pd.DataFrame:
    """Benchmark items from the generator's rows: the prompt, the exact gold, no options."""
    return pd.DataFrame([{"item_id": f"{CLEAN_ID}-s{r['seed']}-{r['index']:04d}", "prompt": math_prompt(problem(
        r["expression"])), "answer": r["answer"], "n_options": 0} for r in rows],
        columns=["item_id", "prompt", "answer", "n_options"])


__all__ = ["CLEAN_ID", "GENERATOR_VERSION", "CleanItem", "build_clean", "generate_items", "generated_rows", "latex",
           "render_fraction", "value"]
