"""Epoch-style uniform choice without replacement: the matched-random control and every rule's fallback.

Each prompt carries a `seen` flag for the current epoch; a step takes uniformly among unseen allowed prompts,
and when those run short it takes all of them and starts a new epoch over the allowed set for the rest. So a
per-domain caller gets per-domain epochs, and within a step no prompt repeats."""

from __future__ import annotations

import numpy as np


def take_fresh(rng: np.random.Generator, seen: np.ndarray, mask: np.ndarray, n: int) -> np.ndarray:
    """n unique ids from `mask`, unseen ones first (uniformly), marking them in `seen` (in place)."""
    unseen = mask & ~seen
    k = int(unseen.sum())
    if k >= n:
        ids = _uniform(rng, unseen, n)
    else:
        first = np.flatnonzero(unseen)
        seen[mask] = False  # a new epoch over the allowed set
        rest_mask = mask.copy()
        rest_mask[first] = False
        ids = np.concatenate([first, _uniform(rng, rest_mask, n - k)])
    seen[ids] = True
    return ids


def _uniform(rng: np.random.Generator, mask: np.ndarray, n: int) -> np.ndarray:
    cand = np.flatnonzero(mask)
    if n == cand.size:
        return rng.permutation(cand)
    return rng.choice(cand, size=n, replace=False)
