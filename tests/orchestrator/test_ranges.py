"""The stated valid ranges of numeric options and spec fields (orchestrator/engine/ranges.py), property by property."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from orchestrator.engine.ranges import (
    STEPS_MAX,
    check_backoff,
    check_count,
    check_open_probability,
    check_points,
    check_seed,
    check_steps,
)
from orchestrator.engine.spec import RetrySpec


@given(st.floats(allow_nan=True, allow_infinity=True))
def test_points_are_finite_and_positive(x):
    assert (check_points("--margin", x) is None) == (math.isfinite(x) and x > 0)


@given(st.floats(allow_nan=True, allow_infinity=True))
def test_open_probabilities_lie_strictly_between_0_and_1(x):
    assert (check_open_probability("--alpha", x) is None) == (0 < x < 1)


@given(st.one_of(st.integers(-10, 2 * STEPS_MAX), st.floats(allow_nan=True), st.booleans(), st.text(max_size=3)))
def test_steps_are_whole_numbers_up_to_the_cap(v):
    ok = isinstance(v, int) and not isinstance(v, bool) and 1 <= v <= STEPS_MAX
    assert (check_steps("steps", v) is None) == ok


@given(st.integers(-5, 2**33))
def test_seeds_and_counts(v):
    assert (check_seed("--seed", v) is None) == (0 <= v < 2**32)
    assert (check_count("--trials", v) is None) == (v >= 1)


@given(st.floats(0, 1e6), st.floats(0, 1e6))
def test_backoff_cap_is_never_below_the_first_wait(first, cap):
    assert (check_backoff(first, cap) is None) == (cap >= first)
    if cap < first:
        with pytest.raises(ValueError, match="backoff_max_s"):
            RetrySpec(backoff_s=first, backoff_max_s=cap)
    else:
        assert RetrySpec(backoff_s=first, backoff_max_s=cap).backoff_max_s == cap


def test_every_message_names_the_option():
    for problem in (check_points("--effect", 0.0), check_open_probability("--alpha", 1.0),
                    check_steps("save_freq", 10**30), check_seed("--seed", -1), check_count("--trials", 0)):
        assert problem is not None and problem.split(":")[0] in ("--effect", "--alpha", "save_freq", "--seed",
                                                                  "--trials")
