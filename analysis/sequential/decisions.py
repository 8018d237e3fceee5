"""One look of a sequential design: the decision for every comparison from its paired differences so far
(superior, inferior, equivalent, futile or continue), and the repeated CI at a look, the adjusted interval
the report shows at the stopping look.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Literal

import numpy as np

from analysis.sequential import SequentialError
from analysis.sequential.design import SequentialDesign

DecisionKind = Literal["superior", "inferior", "equivalent", "futile", "continue", "inconclusive"]


@dataclass(frozen=True)
class Decision:
    """One comparison at one look. rci_* is the repeated CI at 1-alpha (the adjusted interval);
    eq_low/eq_high the equivalence RCI at 1-2*equivalence_alpha (NaN without a margin)."""

    comparison: str
    look: int
    n: int
    n_dropped: int
    mean: float
    sd: float
    stat: float
    critical: float
    rci_low: float
    rci_high: float
    eq_low: float
    eq_high: float
    decision: DecisionKind
    extra: dict = field(default_factory=dict)

    @property
    def stopped(self) -> bool:
        return self.decision != "continue"


def interim_decision(
    diffs_by_comparison: Mapping[str, Sequence[float] | np.ndarray], look: int, design: SequentialDesign
) -> dict[str, Decision]:
    """Test every comparison at look `look` (0-based) from its paired differences so far.

    diffs_by_comparison: name -> (n,) paired differences (method - reference), one per seed;
    NaN pairs are dropped and counted. The current look's boundary uses the observed
    information fraction n/max (Lan-DeMets flexibility); earlier looks use the planned ones.
    """
    if not 0 <= look < len(design.looks):
        raise SequentialError(f"look: {look} is outside 0..{len(design.looks) - 1} for looks {list(design.looks)}")
    out: dict[str, Decision] = {}
    final = look == len(design.looks) - 1
    for name, raw in diffs_by_comparison.items():
        d_all = np.asarray(raw, dtype=float).ravel()
        d = d_all[np.isfinite(d_all)]
        n = d.size
        if n < 2:
            raise SequentialError(f"comparison {name!r} at look {look}: {n} finite paired differences; need >= 2")
        if n > design.max_seeds:
            raise SequentialError(f"comparison {name!r}: {n} differences exceed the design maximum {design.max_seeds}")
        prev = list(design.looks[:look])
        if prev and n <= prev[-1]:
            raise SequentialError(
                f"comparison {name!r} at look {look}: {n} seeds is not more than the previous look's "
                f"{design.looks[look - 1]}; add seeds before looking again"
            )
        crit = float(design.stat_bounds(prev + [n])[-1])
        mean, sd = float(d.mean()), float(d.std(ddof=1))
        se = sd / math.sqrt(n)
        stat = mean / se if se > 0 else (0.0 if mean == 0 else math.copysign(math.inf, mean))
        half = crit * se if np.isfinite(crit) else math.inf
        lo, hi = mean - half, mean + half
        eq_lo = eq_hi = math.nan
        if design.equivalence_margin is not None:
            e_half = float(design.stat_bounds(prev + [n], "equivalence")[-1]) * se
            eq_lo, eq_hi = mean - e_half, mean + e_half
        if abs(stat) >= crit:
            kind: DecisionKind = "superior" if stat > 0 else "inferior"
        elif (design.equivalence_margin is not None
              and -design.equivalence_margin < eq_lo and eq_hi < design.equivalence_margin):
            kind = "equivalent"
        elif final:
            kind = "inconclusive"
        elif (design.futility_cp is not None and n >= design.futility_min_seeds
              and float(design.conditional_power(stat, n)) < design.futility_cp):
            kind = "futile"
        else:
            kind = "continue"
        out[name] = Decision(name, look, n, int(d_all.size - n), mean, sd, stat, crit, lo, hi, eq_lo, eq_hi, kind)
    return out


def repeated_ci(diffs: Sequence[float], look: int, design: SequentialDesign) -> tuple[float, float]:
    """Repeated confidence interval at `look`: simultaneous 1-alpha coverage over all looks."""
    dec = interim_decision({"_": diffs}, look, design)["_"]
    return dec.rci_low, dec.rci_high
