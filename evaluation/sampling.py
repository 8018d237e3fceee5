"""Metrics of k sampled generations per item: avg@k, unbiased pass@j (j <= k) and maj@k (pure, vectorised).

* avg@k: mean score over the k samples of an item, then over items (k = 1: plain accuracy).
* pass@j: Chen et al. (2021), per item 1 - C(k-c, j) / C(k, j) with c correct of k samples, the unbiased
  estimate of "at least one of j fresh samples is correct" (the biased `best@j` of j samples is not used).
  Computed as 1 - prod_{i=k-c+1}^{k} (1 - j/i), which has no large binomials; exactly 1 when k - c < j.
* maj@k: the majority answer among the samples' extracted answers (samples without one do not vote); a tie
  goes to the answer whose first sample comes earliest; the item scores that sample's score (0 if no sample
  has an answer). Answers vote as the extracted strings, so equivalent forms ("1/2", "0.5") vote apart.

A sample counts as correct for pass@j when its score is >= 0.5 (the graders score 0 or 1).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np


def metric_names(bid: str, k: int) -> list[str]:
    """The per-benchmark metric names for k samples: `<id>@avg<k>`, `<id>@pass1`..`<id>@pass<k>`, `<id>@maj<k>`."""
    return [f"{bid}@avg{k}", *(f"{bid}@pass{j}" for j in range(1, k + 1)), f"{bid}@maj{k}"]


def pass_at_k_table(n: int) -> np.ndarray:
    """(n + 1, n) table T[c, j - 1] = unbiased pass@j with c of n samples correct (Chen et al. 2021)."""
    if n < 1:
        raise ValueError(f"n must be >= 1, got {n}")
    j = np.arange(1, n + 1, dtype=float)[None, :]  # (1, n)
    i = np.arange(1, n + 1, dtype=float)[:, None]  # (n, 1)
    terms = np.clip(1.0 - j / i, 0.0, None)  # (n, n): factor (1 - j/i) for i = 1..n
    # prod over i = n-c+1..n: reversed cumulative product; c = 0 is the empty product 1
    tail = np.vstack([np.ones((1, n)), np.cumprod(terms[::-1], axis=0)])  # row c: product of the top c factors
    out = 1.0 - tail
    c = np.arange(n + 1)[:, None]
    out[(n - c) < j] = 1.0
    return out


def pass_at_k(n: int, c: np.ndarray | Sequence[int], k: int) -> np.ndarray:
    """Unbiased pass@k per item for n samples with c correct (array); k must be in 1..n."""
    if not 1 <= k <= n:
        raise ValueError(f"pass@{k} needs 1 <= k <= n samples ({n})")
    c = np.asarray(c, dtype=int)
    if np.any((c < 0) | (c > n)):
        raise ValueError(f"correct counts must lie in 0..{n}")
    return pass_at_k_table(n)[c, k - 1]


def majority(answers: Sequence[str | None], scores: Sequence[float]) -> float:
    """maj@k of one item: the score of the first sample carrying the most frequent answer (ties: earliest)."""
    counts: dict[str, int] = {}
    first: dict[str, int] = {}
    for i, a in enumerate(answers):
        if a is None or a == "":
            continue
        counts[a] = counts.get(a, 0) + 1
        first.setdefault(a, i)
    if not counts:
        return 0.0
    best = max(counts, key=lambda a: (counts[a], -first[a]))
    return float(scores[first[best]])


def item_metrics(scores: np.ndarray, answers: Sequence[Sequence[str | None]]) -> dict[str, np.ndarray]:
    """Per item (rows of the (I, k) score matrix): `avg`, `pass<j>` for j = 1..k, and `maj` (values in [0, 1])."""
    scores = np.asarray(scores, dtype=float)
    if scores.ndim != 2 or scores.shape[1] < 1:
        raise ValueError(f"scores must be an (items, samples) matrix, got shape {scores.shape}")
    n_items, k = scores.shape
    if len(answers) != n_items or any(len(a) != k for a in answers):
        raise ValueError(f"answers must be {n_items} lists of {k} extracted answers")
    c = (scores >= 0.5).sum(axis=1)
    table = pass_at_k_table(k)[c]  # (I, k)
    out: dict[str, np.ndarray] = {"avg": scores.mean(axis=1)}
    for j in range(1, k + 1):
        out[f"pass{j}"] = table[:, j - 1]
    out["maj"] = np.array([majority(a, s) for a, s in zip(answers, scores, strict=True)], dtype=float)
    return out


def benchmark_metrics(bid: str, scores: np.ndarray, answers: Sequence[Sequence[str | None]]) -> dict[str, float]:
    """Named per-benchmark metrics (percent, 0-100): `<id>@avg<k>`, `<id>@pass<j>` (j = 1..k), `<id>@maj<k>`."""
    per = item_metrics(scores, answers)
    k = np.asarray(scores).shape[1]
    out = {f"{bid}@avg{k}": 100.0 * float(per["avg"].mean())}
    out.update({f"{bid}@pass{j}": 100.0 * float(per[f"pass{j}"].mean()) for j in range(1, k + 1)})
    out[f"{bid}@maj{k}"] = 100.0 * float(per["maj"].mean())
    return out

