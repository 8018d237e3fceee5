"""Strict JSON output (cli/jsonsafe.py): NaN and ±Infinity become null, at any depth, numpy included."""

from __future__ import annotations

import json
import math

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from cli.jsonsafe import dumps, json_safe

numbers = st.floats(allow_nan=True, allow_infinity=True) | st.integers() | st.builds(np.float64, st.floats())
nested = st.recursive(numbers | st.none() | st.text(max_size=3),
                      lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=3), inner,
                                                                                  max_size=3), max_leaves=12)


@given(nested)
def test_dumps_is_strict_json_and_keeps_every_finite_number(obj):
    text = dumps(obj)
    back = json.loads(text, parse_constant=lambda c: (_ for _ in ()).throw(AssertionError(c)))

    def same(a, b) -> bool:
        if isinstance(a, (float, np.floating)):
            return b is None if not math.isfinite(float(a)) else b == float(a)
        if isinstance(a, dict):
            return a.keys() == b.keys() and all(same(a[k], b[k]) for k in a)
        if isinstance(a, (list, tuple)):
            return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b, strict=True))
        return a == b

    assert same(obj, back)


def test_numpy_scalars_and_tuples():
    assert json_safe({"a": np.float32("nan"), "b": (np.int64(3), float("-inf"))}) == {"a": None, "b": [3, None]}
