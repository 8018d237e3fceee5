"""Valid ranges of numeric CLI options and campaign-spec fields: one validator per kind of number.

Why: a NaN or infinite margin turns every comparison "equivalent" and prints invalid JSON, a zero effect makes
the seeds-needed column divide by zero, and `steps: 1e9` plans 2.8e24 days. Each validator returns a one-line
problem naming the option (or field) and its valid range, or None; the CLI turns it into exit 2 before
anything is read or written, the spec loader into a SpecError naming the file and key.

Ranges (README "Valid ranges"):
- points (`--margin`, `--effect`, `--sd`): finite and > 0;
- a score to reach (`--target`): on the 0-100 scale, > 0 and <= 100;
- probabilities of an open interval (`--alpha`, `--futility-cp`, `--threshold`): finite, 0 < p < 1;
- counts (`--trials`, ...): integers >= 1;
- a generator seed (`--seed`): an integer in [0, 2**32);
- steps (`steps`, `save_freq`, `--steps`, `--save-freq`): an integer in [1, STEPS_MAX];
- `retries`: backoff_max_s >= backoff_s.
"""

from __future__ import annotations

import math
from typing import Any

# 100 times the study's longest run (1,000 steps, STUDY.md "long_training"); a larger value is a typo
# (1e9, 10**30) that would plan for longer than any cluster lease
STEPS_MAX = 100_000
SEED_LIMIT = 2**32  # numpy/torch generator seeds are uint32


def check_positive(name: str, value: float | int | None, *, allow_zero: bool = False) -> str | None:
    """A one-line problem for a number that is NaN, infinite or not positive (>= 0 with allow_zero), else None."""
    if value is None:
        return None
    if isinstance(value, float) and not math.isfinite(value):
        return f"{name}: got {value}; give a finite number {'>= 0' if allow_zero else '> 0'}"
    if value < 0 or (value == 0 and not allow_zero):
        return f"{name}: got {value}; must be {'>= 0' if allow_zero else '> 0'}"
    return None


def check_points(name: str, value: float | None) -> str | None:
    """A margin, effect or SD in score points: finite and > 0 (None: not given)."""
    problem = check_positive(name, value)
    return None if problem is None else f"{problem} (points, e.g. 1.0)"


def check_score(name: str, value: float | None) -> str | None:
    """A benchmark score to reach (`--target`): on the records' 0-100 scale, > 0 and <= 100 (None: not given).
    Above 100 no run can reach it; at 0 every run has reached it before its first checkpoint."""
    if value is None:
        return None
    if not (math.isfinite(value) and 0 < value <= 100):
        return f"{name}: got {value}; a score is on the 0-100 scale: give one > 0 and <= 100 (e.g. 25)"
    return None


def check_open_probability(name: str, value: float | None) -> str | None:
    """A probability strictly between 0 and 1 (None: not given)."""
    if value is None:
        return None
    if not (math.isfinite(value) and 0 < value < 1):
        return f"{name}: got {value}; must be a probability strictly between 0 and 1 (e.g. 0.05)"
    return None


def check_count(name: str, value: int | None, *, minimum: int = 1) -> str | None:
    """A count (trials, workers, items): an integer >= minimum (None: not given)."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        return f"{name}: got {value!r}; must be an integer >= {minimum}"
    return None


def check_seed(name: str, value: int | None) -> str | None:
    """A generator seed: an integer in [0, 2**32) (None: not given)."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value < SEED_LIMIT:
        return f"{name}: got {value!r}; seeds are integers >= 0 and < 2**32"
    return None


def check_steps(name: str, value: Any) -> str | None:
    """Training steps (or a checkpoint interval): a whole number in [1, STEPS_MAX] (None: not given).

    A float (`1e9`, `300.0`), a string or a bool is refused: YAML reads `1e9` as a float, and a step count is
    never fractional."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        return f"{name}: got {value!r}; must be a whole number of steps between 1 and {STEPS_MAX:,}"
    if not 1 <= value <= STEPS_MAX:
        return f"{name}: got {value}; must be between 1 and {STEPS_MAX:,} steps"
    return None


def check_backoff(backoff_s: float, backoff_max_s: float) -> str | None:
    """Retry backoff: both finite and >= 0, and the cap not below the first wait."""
    for key, v in (("backoff_s", backoff_s), ("backoff_max_s", backoff_max_s)):
        problem = check_positive(key, v, allow_zero=True)
        if problem:
            return problem
    if backoff_max_s < backoff_s:
        return (f"backoff_max_s ({backoff_max_s:g}) is below backoff_s ({backoff_s:g}); the cap must be >= the "
                "first wait: raise backoff_max_s or lower backoff_s")
    return None
