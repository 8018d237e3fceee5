"""A sequential seed design: looks, alpha and its spending, small-sample adaptation, and the optional
equivalence and futility stops (boundaries: analysis.sequential.boundaries).

Optional equivalence stop (futility to equivalence): a group-sequential two one-sided
tests (TOST) procedure. Its own repeated confidence interval d_bar +- e_k*se, with e_k the
boundaries of a spending function at total 2*equivalence_alpha, has simultaneous coverage
1 - 2*equivalence_alpha over all looks (Jennison & Turnbull 2000, ch. 9), so stopping when it
lies inside (-margin, +margin) wrongly declares equivalence with probability at most
equivalence_alpha when |delta| >= margin. It is non-binding: it never changes the efficacy
boundaries and can only remove efficacy rejections, so the efficacy type-I error stays <= alpha.

Optional futility stop (`futility_cp`): stop a comparison when its conditional power under
the current trend, CP = 1 - Phi((c_K - |Z_k|/sqrt(t_k)) / sqrt(1 - t_k)) with c_K the final
boundary on the z scale, falls below the threshold (only from `futility_min_seeds` seeds on:
a t statistic on 2 degrees of freedom is too noisy to abandon a comparison). Non-binding as well: the efficacy
boundaries are computed without it, so it can only lower the type-I error (and the power).

The repeated CI at the stopping look is the adjusted interval the report shows.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from itertools import pairwise
from typing import Literal

import numpy as np
from scipy import special, stats

from analysis.sequential import SequentialError
from analysis.sequential.boundaries import SPENDERS, Spending, efficacy_bounds, t_bounds_mc


@dataclass(frozen=True)
class SequentialDesign:
    """Seeds in batches with interim looks after each batch.

    looks: cumulative seed counts at each look, e.g. (3, 6, 9, 12); the last is the maximum.
    equivalence_margin: in the units of the paired statistic (aggregate points); None = no
    equivalence stop. small_sample: "mc" | "nominal" | "z" (analysis.sequential.boundaries).
    """

    looks: tuple[int, ...] = (3, 6, 9, 12)
    alpha: float = 0.05
    spending: Spending = "obf"
    equivalence_margin: float | None = None
    equivalence_alpha: float = 0.05
    equivalence_spending: Spending = "pocock"
    small_sample: Literal["mc", "nominal", "z"] = "mc"
    futility_cp: float | None = None
    futility_min_seeds: int = 6
    # Family-wise by default: a campaign tests many comparisons at once (113 in the paper program), and
    # per-comparison alpha gives P(any false decision) ~ 0.64 there while the fixed tables are Holm-adjusted.
    # "holm" (default): step-down over group-sequential boundaries (analysis/sequential/family.py); "bonferroni":
    # alpha/m each for the whole campaign; "none": alpha each.
    familywise: Literal["none", "bonferroni", "holm"] = "holm"
    family_size: int | None = None

    def __post_init__(self) -> None:
        if self.familywise not in ("none", "bonferroni", "holm"):
            raise SequentialError(f"familywise: {self.familywise!r}; use 'holm', 'bonferroni' or 'none'")
        if self.family_size is not None and (not isinstance(self.family_size, int) or self.family_size < 1):
            raise SequentialError(f"family_size: must be a positive integer or null, got {self.family_size!r}")
        looks = tuple(int(n) for n in self.looks)
        if not looks or any(n < 2 for n in looks) or any(b <= a for a, b in pairwise(looks)):
            raise SequentialError(f"looks {list(self.looks)}: need strictly increasing seed counts, each >= 2")
        if self.spending not in SPENDERS:
            raise SequentialError(f"spending: unknown {self.spending!r}; use one of {sorted(SPENDERS)}")
        if not 0 < self.alpha < 1:
            raise SequentialError(f"alpha: must be in (0, 1), got {self.alpha}")
        if self.equivalence_spending not in SPENDERS:
            raise SequentialError(
                f"equivalence_spending: unknown {self.equivalence_spending!r}; use one of {sorted(SPENDERS)}"
            )
        if not 0 < self.equivalence_alpha < 0.5:
            raise SequentialError(f"equivalence_alpha: must be in (0, 0.5), got {self.equivalence_alpha}")
        if self.futility_cp is not None and not 0 < self.futility_cp < 1:
            raise SequentialError(f"futility_cp: must be in (0, 1) or null, got {self.futility_cp}")
        if self.small_sample not in ("mc", "nominal", "z"):
            raise SequentialError(f"small_sample: {self.small_sample!r}; use 'mc', 'nominal' or 'z'")
        if self.equivalence_margin is not None and not (self.equivalence_margin > 0):
            raise SequentialError(f"equivalence_margin: must be > 0 or null, got {self.equivalence_margin}")
        object.__setattr__(self, "looks", looks)

    @property
    def max_seeds(self) -> int:
        return self.looks[-1]

    @property
    def fractions(self) -> np.ndarray:
        return np.asarray(self.looks, dtype=float) / self.max_seeds

    def z_bounds(self, fractions: Sequence[float] | None = None) -> np.ndarray:
        return efficacy_bounds(self.fractions if fractions is None else fractions, self.alpha, self.spending)

    def eq_bounds(self, fractions: Sequence[float] | None = None) -> np.ndarray:
        """z boundaries of the equivalence RCI (two-sided total 2*equivalence_alpha)."""
        f = self.fractions if fractions is None else fractions
        return efficacy_bounds(f, 2 * self.equivalence_alpha, self.equivalence_spending)

    def stat_bounds(self, looks_n: Sequence[int] | None = None,
                    which: Literal["efficacy", "equivalence"] = "efficacy") -> np.ndarray:
        """Boundaries on the scale of the statistic actually used (paired t or z), one per look.

        looks_n: the seed counts actually reached at each look so far (default: the plan).
        "equivalence" gives the half-width multipliers of the 1-2*equivalence_alpha RCI.
        """
        ns = tuple(int(n) for n in (self.looks if looks_n is None else looks_n))
        alpha, kind = ((self.alpha, self.spending) if which == "efficacy"
                       else (2 * self.equivalence_alpha, self.equivalence_spending))
        if self.small_sample == "mc":
            return np.array(t_bounds_mc(ns, self.max_seeds, alpha, kind))
        zb = efficacy_bounds(np.asarray(ns, dtype=float) / self.max_seeds, alpha, kind)
        if self.small_sample == "z":
            return zb
        return stats.t.ppf(stats.norm.cdf(zb), np.asarray(ns) - 1)

    def conditional_power(self, stat: np.ndarray | float, n: int) -> np.ndarray:
        """Conditional power under the current trend of reaching the final boundary (two-sided, own sign)."""
        t_k = n / self.max_seeds
        if t_k >= 1:
            return np.where(np.abs(stat) >= self.stat_bounds()[-1], 1.0, 0.0)
        c_last = float(self.stat_bounds()[-1])
        c_z = stats.norm.isf(stats.t.sf(c_last, self.max_seeds - 1)) if self.small_sample != "z" else c_last
        z = np.abs(np.asarray(stat, dtype=float))
        if self.small_sample != "z":
            z = stats.norm.isf(np.clip(stats.t.sf(z, n - 1), 1e-300, 1.0))
        return special.ndtr(-(c_z - z / math.sqrt(t_k)) / math.sqrt(1.0 - t_k))

    @classmethod
    def from_mapping(cls, raw: Mapping, where: str = "seeds") -> SequentialDesign:
        """Build from a campaign's `seeds:` block, e.g. {max: 12, design: sequential, batch: 3}.
        `aggregate` (which aggregate the looks test) is accepted and left to the orchestrator."""
        known = {"max", "design", "batch", "looks", "alpha", "spending", "equivalence_margin",
                 "equivalence_alpha", "equivalence_spending", "small_sample", "futility_cp",
                 "futility_min_seeds", "aggregate", "familywise", "family_size"}
        unknown = set(raw) - known
        if unknown:
            raise SequentialError(f"{where}: unknown key(s) {sorted(unknown)}; known: {sorted(known)}")
        if raw.get("design", "sequential") != "sequential":
            raise SequentialError(f"{where}.design: {raw.get('design')!r} is not 'sequential'")
        if "looks" in raw:
            looks = tuple(raw["looks"])
        else:
            mx, batch = raw.get("max"), raw.get("batch", 3)
            if not isinstance(mx, int) or not isinstance(batch, int) or batch < 2 or mx < batch or mx % batch:
                raise SequentialError(
                    f"{where}: max={mx!r}, batch={batch!r}: need integers with batch >= 2 and max a multiple of batch"
                )
            looks = tuple(range(batch, mx + 1, batch))
        return cls(looks=looks, alpha=float(raw.get("alpha", 0.05)), spending=raw.get("spending", "obf"),
                   equivalence_margin=raw.get("equivalence_margin"),
                   equivalence_alpha=float(raw.get("equivalence_alpha", 0.05)),
                   equivalence_spending=raw.get("equivalence_spending", "pocock"),
                   small_sample=raw.get("small_sample", "mc"), futility_cp=raw.get("futility_cp"),
                   futility_min_seeds=int(raw.get("futility_min_seeds", 6)),
                   familywise=raw.get("familywise", "holm"), family_size=raw.get("family_size"))

    def per_comparison(self, m: int) -> SequentialDesign:
        """The design each of m comparisons starts under: with familywise="bonferroni" every comparison
        spends alpha/m (family_size overrides m), so P(any false efficacy decision in the family) <= alpha
        by the union bound, whatever the correlation between comparisons (they share references). "holm" starts
        there too and raises the level as comparisons are rejected (analysis.sequential.family.familywise_look)."""
        from dataclasses import replace

        if self.familywise == "none":
            return self
        k = self.family_size or m
        return replace(self, alpha=self.alpha / k, familywise="none", family_size=None)
