"""Did a curriculum change which prompts were rolled out? Its runs' logged prompt ids (`rollout_ids.jsonl`)
against those of the same-seed reference run: the intervention check's evidence for the `same_prompts` flag."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import numpy as np
import pandas as pd


def same_prompts(a: Mapping[int, np.ndarray], b: Mapping[int, np.ndarray]) -> bool | None:
    """True when two runs rolled out the same set of prompts at every step both logged; None when they share no
    step (nothing to compare). Order within a step is ignored: it changes no rollout's prompt."""
    common = sorted(set(a) & set(b))
    if not common:
        return None
    return all(np.array_equal(np.sort(a[s]), np.sort(b[s])) for s in common)


def prompts_changed(g: pd.DataFrame, summary: pd.DataFrame, ref: str,
                    ids_of: Callable[[Any], dict[int, np.ndarray]]) -> tuple[int, int]:
    """(runs compared with their same-seed reference run, runs whose prompts differed from it)."""
    compared = changed = 0
    for r in g.itertuples():
        m = summary[(summary["campaign"] == r.campaign) & (summary["model"] == r.model)
                    & (summary["regime"] == r.regime) & (summary["seed"] == r.seed) & (summary["policy"] == ref)]
        if not len(m):
            continue
        same = same_prompts(ids_of(r.rollout_ids_path), ids_of(m["rollout_ids_path"].iloc[0]))
        if same is not None:
            compared += 1
            changed += int(not same)
    return compared, changed
