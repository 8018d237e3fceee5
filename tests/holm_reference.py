"""statsmodels' `multipletests`, the tests' independent reference for the family-wise corrections, without the
`gc.collect()` its Holm branch runs on every call (statsmodels/stats/multitest.py, 0.14): 0.4-0.5 s each in a test
process that holds torch, so 40 hypothesis examples spent 19 s there (issue 56). Its results do not depend on it."""

from __future__ import annotations

import gc
from typing import Any

import statsmodels.stats.multitest as _mt


def multipletests(*args: Any, **kwargs: Any) -> Any:
    """`statsmodels.stats.multitest.multipletests`, with `gc.collect` a no-op while it runs (it imports `gc` inside
    the function, so the module's own `collect` is what is swapped)."""
    saved = gc.collect
    gc.collect = lambda *a, **k: 0
    try:
        return _mt.multipletests(*args, **kwargs)
    finally:
        gc.collect = saved
