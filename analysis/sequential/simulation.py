"""Vectorised simulation of a sequential design: many comparisons at once, for its operating
characteristics (type-I error, power, seeds used; tests and benchmarks/adaptive_seeds_sim.py), and
the fixed-n paired t test it is measured against.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy import stats

from analysis.sequential import SequentialError
from analysis.sequential.design import SequentialDesign


@dataclass(frozen=True)
class SimResult:
    """Per simulated comparison: decision code, stopping look, seeds used. Shapes (n_sims,)."""

    decision: np.ndarray  # 1 superior, -1 inferior, 2 equivalent, 3 futile, 0 inconclusive
    seeds_used: np.ndarray
    stop_look: np.ndarray


def simulate(diffs: np.ndarray, design: SequentialDesign) -> SimResult:
    """Apply the design to simulated paired differences, all comparisons at once.

    diffs: (n_sims, max_seeds) paired differences in seed order. Vectorised over comparisons;
    the loop is over the (few) looks only.
    """
    diffs = np.asarray(diffs, dtype=float)
    if diffs.ndim != 2 or diffs.shape[1] < design.max_seeds:
        raise SequentialError(f"diffs: need shape (n_sims, >= {design.max_seeds}), got {diffs.shape}")
    n_sims = diffs.shape[0]
    cb = design.stat_bounds()
    eb = design.stat_bounds(which="equivalence") if design.equivalence_margin is not None else None
    decision = np.zeros(n_sims, dtype=int)
    stop = np.full(n_sims, len(design.looks) - 1)
    used = np.full(n_sims, design.max_seeds)
    open_ = np.ones(n_sims, dtype=bool)
    csum, csq = np.cumsum(diffs, axis=1), np.cumsum(diffs**2, axis=1)
    margin = design.equivalence_margin
    for k, n in enumerate(design.looks):
        mean = csum[:, n - 1] / n
        var = (csq[:, n - 1] - n * mean**2) / (n - 1)
        se = np.sqrt(np.maximum(var, 0.0) / n)
        crit = float(cb[k])
        with np.errstate(divide="ignore", invalid="ignore"):
            stat = np.where(se > 0, mean / se, 0.0)
        eff = open_ & (np.abs(stat) >= crit)
        decision[eff] = np.where(stat[eff] > 0, 1, -1)
        newly = eff
        if eb is not None and margin is not None and np.isfinite(eb[k]):  # eb exists iff a margin does
            e_crit = float(eb[k])
            eq = open_ & ~eff & (mean - e_crit * se > -margin) & (mean + e_crit * se < margin)
            decision[eq] = 2
            newly = newly | eq
        if design.futility_cp is not None and k < len(design.looks) - 1 and n >= design.futility_min_seeds:
            fut = open_ & ~newly & (design.conditional_power(stat, n) < design.futility_cp)
            decision[fut] = 3
            newly = newly | fut
        stop[newly] = k
        used[newly] = n
        open_ &= ~newly
    return SimResult(decision=decision, seeds_used=used, stop_look=stop)


def fixed_t_test(diffs: np.ndarray, n: int, alpha: float = 0.05) -> np.ndarray:
    """The fixed-n paired t test on the first n seeds: 1 / -1 significant sign, 0 not. (n_sims,)."""
    d = np.asarray(diffs, dtype=float)[:, :n]
    mean, sd = d.mean(axis=1), d.std(axis=1, ddof=1)
    stat = np.where(sd > 0, mean / (sd / math.sqrt(n)), 0.0)
    crit = stats.t.ppf(1 - alpha / 2, n - 1)
    return np.where(np.abs(stat) >= crit, np.sign(stat), 0).astype(int)
