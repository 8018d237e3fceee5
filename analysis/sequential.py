"""Group-sequential tests on the paired seed statistic: spend seeds where the answer is open.

A comparison (policy vs its reference, paired by seed) is looked at after each batch of seeds.
At look k the paired differences d_1..d_{n_k} give the statistic T_k = mean/(sd/sqrt(n_k)).
Two-sided efficacy boundaries come from a Lan-DeMets alpha-spending function, so the
probability of ever crossing under H0 equals the total alpha however many looks are taken.

Boundaries are computed on the z scale by the Armitage-McPherson-Rowe recursion: the
score S_k = Z_k*sqrt(t_k) is Brownian motion at the information fractions t_k; its
sub-density on the continuation region is carried from look to look by a Gaussian
convolution on a grid (numpy, trapezoid rule), and each boundary is solved with brentq so
that the exit probability at look k equals alpha(t_k) - alpha(t_{k-1}).

Small n (3 seeds at the first look) makes the z statistic wrong: sd is estimated from the
data. Two t adaptations (`small_sample`):
* "mc" (default): the paired t statistics T_1..T_K are pivotal under H0 (their joint law does
  not depend on sigma), so the spending function is applied to their exact joint null law,
  sampled once with a fixed seed (300,000 paths): boundary k is the order statistic that makes
  the exit probability among still-running paths equal alpha(t_k) - alpha(t_{k-1}). Exact up to
  Monte Carlo error (~5e-4 on the total alpha), checked by an independent simulation in tests.
* "nominal": keep each look's nominal p-value from the z boundary and convert it to t_{n-1}
  (c_t = t.ppf(Phi(c_z), n-1); Jennison & Turnbull 2000, section 3.8). Simple but measured
  slightly liberal at 3+3+3+3 seeds (type-I 0.053 instead of 0.050), hence not the default.
* "z": use the z boundaries as they are (large n or known variance only).

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

import json
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from itertools import pairwise
from typing import TYPE_CHECKING, Literal

import numpy as np
from scipy import optimize, special, stats

if TYPE_CHECKING:  # annotations only: pandas is imported where it is used, not at module import
    from pathlib import Path

    import pandas as pd

Spending = Literal["obf", "pocock"]
DecisionKind = Literal["superior", "inferior", "equivalent", "futile", "continue", "inconclusive"]

_GRID_POINTS = 2001  # per look; boundaries agree with published tables to 1e-4 at this size
_SPAN_SD = 8.0  # the unbounded first look is truncated at +-8 standard deviations


class SequentialError(ValueError):
    """A sequential design or an interim input is invalid; the message names the field and the fix."""


# ---------------------------------------------------------------- spending functions


def spend_obf(t: np.ndarray | float, alpha: float) -> np.ndarray:
    """Lan-DeMets O'Brien-Fleming-type spending, two-sided total `alpha`.

    Symmetric two-sided designs spend alpha/2 per side with the one-sided function
    f(t; a) = 2 - 2*Phi(z_{1-a/2}/sqrt(t)), a = alpha/2 (the gsDesign `sfLDOF` / ldbounds
    convention); the two-sided total is 2*f(t; alpha/2).
    """
    t = np.asarray(t, dtype=float)
    z = stats.norm.ppf(1.0 - alpha / 4.0)
    with np.errstate(divide="ignore", invalid="ignore"):
        out = 2.0 * (2.0 - 2.0 * stats.norm.cdf(z / np.sqrt(np.where(t > 0, t, np.nan))))
    return np.where(t > 0, out, 0.0)


def spend_pocock(t: np.ndarray | float, alpha: float) -> np.ndarray:
    """Lan-DeMets Pocock-type spending: alpha*ln(1 + (e-1)*t)."""
    t = np.asarray(t, dtype=float)
    return alpha * np.log1p((math.e - 1.0) * t)


_SPENDERS = {"obf": spend_obf, "pocock": spend_pocock}


def spend(kind: str, t: np.ndarray | float, alpha: float) -> np.ndarray:
    """Cumulative two-sided alpha spent by information fraction t under spending function `kind`."""
    if kind not in _SPENDERS:
        raise SequentialError(f"spending: unknown spending function {kind!r}; use one of {sorted(_SPENDERS)}")
    return _SPENDERS[kind](t, alpha)


# ---------------------------------------------------------------- the AMR recursion


def _check_fractions(fractions: Sequence[float] | np.ndarray) -> np.ndarray:
    t = np.asarray(fractions, dtype=float)
    if t.ndim != 1 or t.size == 0:
        raise SequentialError("information fractions: need a non-empty 1-D sequence")
    if np.any(~np.isfinite(t)) or np.any(t <= 0) or np.any(t > 1 + 1e-12) or np.any(np.diff(t) <= 0):
        raise SequentialError(
            f"information fractions {list(t)}: must be strictly increasing in (0, 1]; "
            "use cumulative seeds / max seeds at each look"
        )
    return t


def _kernel(x_from: np.ndarray, x_to: np.ndarray, var: float) -> np.ndarray:
    """Gaussian transition density of Brownian increments with variance `var`, shape (to, from)."""
    sd = math.sqrt(var)
    u = (x_to[:, None] - x_from[None, :]) / sd
    return np.exp(-0.5 * u * u) / (sd * math.sqrt(2 * math.pi))


def _trap_weights(x: np.ndarray) -> np.ndarray:
    h = x[1] - x[0]
    w = np.full(x.size, h)
    w[0] = w[-1] = h / 2.0
    return w


class _Recursion:
    """Carries the sub-density of S_k on the continuation region, look by look."""

    def __init__(self, grid_points: int = _GRID_POINTS) -> None:
        self.grid_points = grid_points
        self.t_prev = 0.0
        self.x: np.ndarray | None = None  # grid on the S scale
        self.f: np.ndarray | None = None  # sub-density values on the grid

    def exit_prob(self, t: float, b: float, drift: float = 0.0) -> float:
        """P(continue to look k and |Z_k| >= b); S_k has mean drift*t."""
        dt = t - self.t_prev
        lo, hi = -b * math.sqrt(t), b * math.sqrt(t)
        if self.x is None:
            m, s = drift * t, math.sqrt(t)
            return float(special.ndtr((lo - m) / s) + special.ndtr((m - hi) / s))
        sd = math.sqrt(dt)
        mu = self.x + drift * dt
        p = special.ndtr((lo - mu) / sd) + special.ndtr((mu - hi) / sd)
        return float(np.sum(_trap_weights(self.x) * self.f * p))

    def advance(self, t: float, b: float, drift: float = 0.0) -> None:
        """Move to look k with continuation region |Z_k| < b (b = inf: no stopping possible)."""
        half = b * math.sqrt(t) if np.isfinite(b) else _SPAN_SD * math.sqrt(t) + abs(drift) * t
        x_new = np.linspace(-half, half, self.grid_points)
        if self.x is None:
            f_new = stats.norm.pdf(x_new, loc=drift * t, scale=math.sqrt(t))
        else:
            dt = t - self.t_prev
            k = _kernel(self.x + drift * dt, x_new, dt)
            f_new = k @ (_trap_weights(self.x) * self.f)
        self.x, self.f, self.t_prev = x_new, f_new, t


@lru_cache(maxsize=256)
def _spending_bounds(fractions: tuple[float, ...], alpha: float, kind: str) -> tuple[float, ...]:
    cum = spend(kind, np.asarray(fractions), alpha)
    inc = np.diff(np.concatenate([[0.0], cum]))
    rec = _Recursion()
    bounds: list[float] = []

    def excess(b_: float, t: float, a_k: float) -> float:
        return rec.exit_prob(t, b_) - a_k

    for t, a_k in zip(fractions, inc, strict=True):
        if a_k <= 1e-15:
            b = math.inf
        else:
            # exit probability decreases in b; bracket between a tiny and a huge boundary
            hi = 40.0
            b = optimize.brentq(excess, 1e-6, hi, args=(t, a_k), xtol=1e-10) if excess(1e-6, t, a_k) > 0 else 1e-6
        bounds.append(b)
        rec.advance(t, b)
    return tuple(bounds)


def efficacy_bounds(fractions: Sequence[float] | np.ndarray, alpha: float = 0.05,
                    spending: Spending = "obf") -> np.ndarray:
    """Two-sided z boundaries c_k (reject when |Z_k| >= c_k) at the given information fractions.

    fractions: (K,) strictly increasing in (0, 1]; the cumulative alpha spent at t_k equals
    spend(spending, t_k, alpha). Returns (K,) float array.
    """
    t = _check_fractions(fractions)
    if not 0 < alpha < 1:
        raise SequentialError(f"alpha: must be in (0, 1), got {alpha}")
    return np.array(_spending_bounds(tuple(float(x) for x in t), float(alpha), spending))


def crossing_probs(
    bounds: Sequence[float] | np.ndarray, fractions: Sequence[float] | np.ndarray, drift: float = 0.0,
    grid_points: int = _GRID_POINTS,
) -> np.ndarray:
    """P(first crossing of |Z| >= c at look k) for each k, with E[Z_k] = drift*sqrt(t_k).

    `drift` is the standardised effect at full information (delta/se at t=1). Returns (K,).
    """
    t = _check_fractions(fractions)
    rec = _Recursion(grid_points)
    out = []
    for tk, b in zip(t, bounds, strict=True):
        out.append(rec.exit_prob(float(tk), float(b), drift) if np.isfinite(b) else 0.0)
        rec.advance(float(tk), float(b), drift)
    return np.array(out)


def constant_bounds(fractions: Sequence[float], alpha: float = 0.05,
                    shape: Literal["pocock", "obf"] = "pocock") -> np.ndarray:
    """Classical (non-spending) boundaries: Pocock c_k = C, O'Brien-Fleming c_k = C/sqrt(t_k).

    C solves total crossing probability = alpha. Kept for checking the recursion against the
    tabulated constants (Jennison & Turnbull 2000, Tables 2.1 and 2.3).
    """
    t = _check_fractions(fractions)
    scale = np.ones_like(t) if shape == "pocock" else 1.0 / np.sqrt(t / t[-1])
    c = optimize.brentq(lambda c_: crossing_probs(c_ * scale, t, grid_points=601).sum() - alpha, 1.5, 5.0, xtol=1e-7)
    return c * scale


@lru_cache(maxsize=64)
def t_bounds_mc(
    looks: tuple[int, ...], max_seeds: int, alpha: float, spending: str, n_paths: int = 300_000, seed: int = 20_261_129
) -> tuple[float, ...]:
    """Two-sided boundaries for the paired t statistic at seed counts `looks` (exact null law by MC).

    The information fraction of look k is looks[k]/max_seeds. Deterministic (fixed seed) and
    cached. Returns one boundary per look (inf where no alpha is spent).
    """
    if any(n < 2 for n in looks) or any(b <= a for a, b in pairwise(looks)) or looks[-1] > max_seeds:
        raise SequentialError(f"looks {list(looks)}: need increasing seed counts >= 2 and <= max {max_seeds}")
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((n_paths, looks[-1]))
    csum, csq = np.cumsum(x, axis=1), np.cumsum(x * x, axis=1)
    cum = spend(spending, np.asarray(looks, dtype=float) / max_seeds, alpha)
    inc = np.diff(np.concatenate([[0.0], cum]))
    alive = np.ones(n_paths, dtype=bool)
    out: list[float] = []
    for n, a_k in zip(looks, inc, strict=True):
        mean = csum[:, n - 1] / n
        sd = np.sqrt(np.maximum(csq[:, n - 1] - n * mean * mean, 0.0) / (n - 1))
        t_abs = np.abs(mean) / (sd / math.sqrt(n))
        m = int(round(a_k * n_paths))
        live = np.sort(t_abs[alive])[::-1]
        if m <= 0 or live.size == 0:
            c = math.inf
        elif m >= live.size:
            c = float(live[-1])
        else:
            c = float(0.5 * (live[m - 1] + live[m]))
        out.append(c)
        alive &= t_abs < c
    return tuple(out)


# ---------------------------------------------------------------- the design


@dataclass(frozen=True)
class SequentialDesign:
    """Seeds in batches with interim looks after each batch.

    looks: cumulative seed counts at each look, e.g. (3, 6, 9, 12); the last is the maximum.
    equivalence_margin: in the units of the paired statistic (aggregate points); None = no
    equivalence stop. small_sample: "mc" | "nominal" | "z" (module docstring).
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
    # Family-wise by default: a campaign tests many comparisons at once (45 in the paper program), and
    # per-comparison alpha gives P(any false decision) ~ 0.64 there while the fixed tables are Holm-adjusted.
    familywise: Literal["none", "bonferroni"] = "bonferroni"
    family_size: int | None = None

    def __post_init__(self) -> None:
        if self.familywise not in ("none", "bonferroni"):
            raise SequentialError(f"familywise: {self.familywise!r}; use 'none' or 'bonferroni'")
        if self.family_size is not None and (not isinstance(self.family_size, int) or self.family_size < 1):
            raise SequentialError(f"family_size: must be a positive integer or null, got {self.family_size!r}")
        looks = tuple(int(n) for n in self.looks)
        if not looks or any(n < 2 for n in looks) or any(b <= a for a, b in pairwise(looks)):
            raise SequentialError(f"looks {list(self.looks)}: need strictly increasing seed counts, each >= 2")
        if self.spending not in _SPENDERS:
            raise SequentialError(f"spending: unknown {self.spending!r}; use one of {sorted(_SPENDERS)}")
        if not 0 < self.alpha < 1:
            raise SequentialError(f"alpha: must be in (0, 1), got {self.alpha}")
        if self.equivalence_spending not in _SPENDERS:
            raise SequentialError(
                f"equivalence_spending: unknown {self.equivalence_spending!r}; use one of {sorted(_SPENDERS)}"
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
                   familywise=raw.get("familywise", "bonferroni"), family_size=raw.get("family_size"))

    def per_comparison(self, m: int) -> SequentialDesign:
        """The design each of m comparisons runs under: with familywise="bonferroni" every comparison
        spends alpha/m (family_size overrides m), so P(any false efficacy decision in the family) <= alpha
        by the union bound, whatever the correlation between comparisons (they share references)."""
        from dataclasses import replace

        if self.familywise == "none":
            return self
        k = self.family_size or m
        return replace(self, alpha=self.alpha / k, familywise="none", family_size=None)


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
    diffs_by_comparison: Mapping[str, Sequence[float]], look: int, design: SequentialDesign
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


# ---------------------------------------------------------------- vectorised simulation


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


# ---------------------------------------------------------------- estimation after an early stop

_THETA = np.linspace(-8.0, 8.0, 321)  # standardised effect delta/sigma per seed


@lru_cache(maxsize=16)
def _stagewise_tables(looks: tuple[int, ...], bounds: tuple[float, ...], n_paths: int, seed: int
                      ) -> tuple[np.ndarray, list[list[np.ndarray]]]:
    """For every theta on _THETA: P(upper efficacy stop before look j) (theta, K+1) and, per look j,
    the sorted paired t statistics of the paths that reach look j (as fractions of n_paths).

    One fixed-seed noise matrix (common random numbers across theta), efficacy stops only
    (equivalence and futility stops are non-binding and ignored, the usual convention)."""
    rng = np.random.default_rng(seed)
    z = rng.standard_normal((n_paths, looks[-1]))
    K = len(looks)
    up_before = np.zeros((_THETA.size, K + 1))
    reached: list[list[np.ndarray]] = []
    idx = np.asarray(looks) - 1
    zc = np.cumsum(z, axis=1)[:, idx]
    zq = np.cumsum(z * z, axis=1)[:, idx]
    nn = np.asarray(looks, dtype=float)
    for i, th in enumerate(_THETA):
        s1 = zc + th * nn  # sums of x = z + theta
        s2 = zq + 2 * th * zc + th * th * nn
        mean = s1 / nn
        sd = np.sqrt(np.maximum(s2 - nn * mean * mean, 0.0) / (nn - 1))
        with np.errstate(divide="ignore", invalid="ignore"):
            tt = mean / (sd / np.sqrt(nn))
        alive = np.ones(n_paths, dtype=bool)
        per_look = []
        for j in range(K):
            per_look.append(np.sort(tt[alive, j]))
            up = alive & (tt[:, j] >= bounds[j])
            up_before[i, j + 1] = up_before[i, j] + up.mean()
            alive &= np.abs(tt[:, j]) < bounds[j]
        reached.append(per_look)
    return up_before, reached


def stagewise_estimate(design: SequentialDesign, look: int, stat: np.ndarray, sd: np.ndarray,
                       level: float = 0.95, n_paths: int = 20_000, seed: int = 20_261_130
                       ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Median-unbiased estimate and CI of the mean difference after stopping at `look` (0-based)
    with paired t statistic `stat` and SD `sd` (arrays, one per comparison).

    Stage-wise ordering (Jennison & Turnbull 2000, 8.4): an outcome (j, t_j) is at least as large
    as the observed (k, t) when it crossed the upper boundary at an earlier look j < k, or reached
    look k with t_k >= t. F(theta) = P_theta(that) is increasing in the standardised effect
    theta = delta/sigma and the paired t statistics' law depends on theta only, so
    theta_hat solves F = 1/2 and the CI solves F = (1 -+ level)/2 (fixed-seed simulation on a grid of
    theta, linear interpolation). Returned on the score scale as theta * sd. Checked by simulation
    in tests (median unbiasedness and coverage)."""
    stat = np.atleast_1d(np.asarray(stat, dtype=float))
    sd = np.atleast_1d(np.asarray(sd, dtype=float))
    bounds = tuple(float(b) for b in design.stat_bounds())
    up_before, reached = _stagewise_tables(design.looks, bounds, n_paths, seed)
    F = np.empty((_THETA.size, stat.size))
    for i in range(_THETA.size):
        srt = reached[i][look]
        F[i] = up_before[i, look] + (srt.size - np.searchsorted(srt, stat, side="left")) / n_paths
    F = np.maximum.accumulate(F, axis=0)  # monotone in theta up to simulation noise

    def solve(target: float) -> np.ndarray:
        out = np.empty(stat.size)
        for q in range(stat.size):
            out[q] = np.interp(target, F[:, q] + np.arange(_THETA.size) * 1e-12, _THETA)
        return out

    theta = solve(0.5)
    lo = solve((1 - level) / 2)
    hi = solve((1 + level) / 2)
    return theta * sd, lo * sd, hi * sd


# ---------------------------------------------------------------- campaign integration (ledger-agnostic)

_GROUP = ("campaign", "model", "regime", "step")


def look_at_runs(runs: pd.DataFrame, design: SequentialDesign, look: int, aggregate: str,
                 references: Mapping[str, str] | None = None) -> pd.DataFrame:
    """One interim look over a campaign: every (configuration vs reference) comparison tested.

    runs: `analysis.aggregates.run_table` rows (one per run x step; the last step of each run is
    used). references: mechanism -> reference policy (default: select/reweight -> baseline,
    mix -> static). Returns one row per comparison: identity, n, mean, sd, stat, critical,
    repeated CI, equivalence RCI, decision, and `needs_seeds` (True while undecided) so a
    scheduler knows which configurations get the next batch.
    """
    import pandas as pd

    refs = dict(references or {"select": "baseline", "reweight": "baseline", "mix": "static"})
    if not 0 <= look < len(design.looks):
        raise SequentialError(f"look: {look} is outside 0..{len(design.looks) - 1} for looks {list(design.looks)}")
    if aggregate not in runs.columns:
        raise SequentialError(f"aggregate {aggregate!r} is not a column of the runs table; known: "
                              f"{[c for c in runs.columns if c[:1].isupper()]}")
    last = runs.sort_values("step").groupby(["campaign", "model", "regime", "policy", "seed"], sort=False).tail(1)
    if design.familywise != "none":  # family = every comparison of the campaign present in `runs`
        m = 0
        for _, g in last.groupby(["campaign", "model", "regime"], sort=True):
            mech_of = g.groupby("policy")["mechanism"].first().to_dict()
            m += sum(1 for pol, mech in mech_of.items()
                     if refs.get(mech) not in (None, pol) and refs.get(mech) in mech_of)
        design = design.per_comparison(max(m, 1))
    rows = []
    for gkey, g in last.groupby(["campaign", "model", "regime"], sort=True):
        by_pol = {p: d.set_index("seed")[aggregate].astype(float) for p, d in g.groupby("policy")}
        mech_of = g.groupby("policy")["mechanism"].first().to_dict()
        for pol, mech in sorted(mech_of.items()):
            ref = refs.get(mech)
            if ref is None or ref == pol or ref not in by_pol:
                continue
            a, b = by_pol[pol], by_pol[ref]
            seeds = sorted(a.index.intersection(b.index))
            name = "/".join(map(str, gkey)) + f":{pol}-{ref}"
            diffs = (a.loc[seeds] - b.loc[seeds]).to_numpy()
            try:
                d = interim_decision({name: diffs}, look, design)[name]
            except SequentialError as exc:
                rows.append({**dict(zip(("campaign", "model", "regime"), gkey, strict=True)), "policy": pol,
                             "reference": ref,
                             "look": look, "n": int(np.isfinite(diffs).sum()), "decision": "error", "error": str(exc),
                             "needs_seeds": True})
                continue
            mue = mue_lo = mue_hi = math.nan
            if d.decision in ("superior", "inferior") and np.isfinite(d.stat) and d.n == design.looks[look]:
                e, e_lo, e_hi = stagewise_estimate(design, look, np.array([d.stat]), np.array([d.sd]))
                mue, mue_lo, mue_hi = float(e[0]), float(e_lo[0]), float(e_hi[0])
            rows.append({**dict(zip(("campaign", "model", "regime"), gkey, strict=True)), "policy": pol,
                         "reference": ref,
                         "mue": mue, "mue_low": mue_lo, "mue_high": mue_hi,
                         "look": look, "n": d.n, "n_dropped": d.n_dropped, "mean": d.mean, "sd": d.sd, "stat": d.stat,
                         "critical": d.critical, "rci_low": d.rci_low, "rci_high": d.rci_high, "eq_low": d.eq_low,
                         "eq_high": d.eq_high, "decision": d.decision, "error": "", "needs_seeds": not d.stopped,
                         "alpha_comparison": design.alpha})
    return pd.DataFrame(rows)


def next_batch_seeds(decisions: pd.DataFrame, design: SequentialDesign, look: int,
                     seeds: Sequence[int] | None = None) -> dict[tuple[str, str, str], list[int]]:
    """Seeds to add at the next look: (campaign, model, regime) -> seeds, for every policy that is
    still open *and* its reference (shared by every comparison of the group). `seeds`: the
    campaign's full seed list in order (default 1..max)."""
    if look + 1 >= len(design.looks):
        return {}
    order = list(seeds) if seeds is not None else list(range(1, design.max_seeds + 1))
    batch = order[design.looks[look]:design.looks[look + 1]]
    out: dict[tuple[str, str, str], list[int]] = {}
    open_ = decisions[decisions["needs_seeds"]] if len(decisions) else decisions
    for r in open_.itertuples():
        out.setdefault((r.campaign, r.model, r.regime), [])
    return {k: batch for k in out}


def _design_doc(design: SequentialDesign, aggregate: str | None, name: str) -> dict:
    return {**dataclasses_asdict(design), "aggregate": aggregate, "name": name}


def _design_diff(stored: dict, new: dict) -> list[str]:
    """Fields on which two designs differ; a key the stored row lacks (written by an older version)
    takes its default, and an aggregate missing on either side is not compared."""
    defaults = {**dataclasses_asdict(SequentialDesign()), "aggregate": None, "name": "default",
                "familywise": "none"}  # versions that stored no familywise had none
    out = []
    for k in sorted(set(stored) | set(new)):
        a, b = stored.get(k, defaults.get(k)), new.get(k, defaults.get(k))
        if k == "aggregate" and (a is None or b is None):
            continue
        if (list(a) if isinstance(a, (list, tuple)) else a) != (list(b) if isinstance(b, (list, tuple)) else b):
            out.append(k)
    return out


def _same_design(stored: dict, new: dict) -> bool:
    return not _design_diff(stored, new)


def look_rows(decisions: pd.DataFrame, design: SequentialDesign, *, aggregate: str | None = None,
              design_name: str = "default") -> list[dict]:
    """The rows a look stores (ledger table `sequential_looks`): one per comparison, with the design
    (every field, the aggregate tested and the design's name) on every row. A design other than
    "default" keeps its rows apart (comparison key suffixed " [name]")."""

    dj = json.dumps(_design_doc(design, aggregate, design_name), sort_keys=True)
    suffix = "" if design_name == "default" else f" [{design_name}]"
    return [{"look": int(r["look"]), "n": int(r["n"]), "decision": str(r["decision"]),
             "comparison": f"{r['campaign']}/{r['model']}/{r['regime']}:{r['policy']}-{r['reference']}{suffix}",
             "mean": _finite_or_none(r.get("mean")), "rci_low": _finite_or_none(r.get("rci_low")),
             "rci_high": _finite_or_none(r.get("rci_high")), "design_json": dj,
             "row_json": json.dumps({k: (None if isinstance(v, float) and not math.isfinite(v) else v)
                                     for k, v in r.items()}, default=str)}
            for r in decisions.to_dict("records")]


def check_design(campaign: str, design: SequentialDesign, *, aggregate: str | None = None,
                 design_name: str = "default") -> Callable[[list[dict]], None]:
    """A check over a campaign's stored look rows: looks are immutable, so a look under a name whose
    earlier looks used a different design (another margin, spending, alpha, aggregate, ...) raises
    SequentialError; a new design needs a new `design_name`. The same design again is fine (idempotent)."""

    doc = _design_doc(design, aggregate, design_name)

    def check(stored_rows: list[dict]) -> None:
        for row in stored_rows:
            stored = json.loads(row.get("design_json") or "{}")
            if stored.get("name", "default") == design_name and not _same_design(stored, doc):
                diff = _design_diff(stored, doc)
                raise SequentialError(
                    f"campaign {campaign!r}: look {row['look']} was taken under design {design_name!r} with "
                    f"{ {k: stored.get(k) for k in diff} }; this look asks for { {k: doc.get(k) for k in diff} }. "
                    "Looks are immutable: keep the design, or declare a new named design "
                    "(seeds-look --design-name NEW) whose looks are recorded apart")

    return check


def looks_frame(rows: list[dict]) -> pd.DataFrame:
    """Stored look rows as a frame (empty when none)."""
    import pandas as pd

    return pd.DataFrame(rows)


def _finite_or_none(v: object) -> float | None:
    return float(v) if isinstance(v, (int, float)) and math.isfinite(float(v)) else None


def dataclasses_asdict(design: SequentialDesign) -> dict:
    from dataclasses import asdict

    return asdict(design)


# ---------------------------------------------------------------- the report's view of recorded looks

LOOK_COLUMNS = ("campaign", "look", "comparison", "n", "decision", "mean", "rci_low", "rci_high", "design_json")


def read_looks_file(path: str | Path) -> pd.DataFrame:
    """A `sequential_looks.csv` written next to a campaign's records; SequentialError names the file and column."""
    from pathlib import Path

    import pandas as pd

    p = Path(path)
    try:
        df = pd.read_csv(p)
    except (OSError, ValueError) as exc:
        raise SequentialError(f"{p}: cannot read the looks file ({exc}); rerun `campaign resume` to rewrite "
                              "it") from None
    missing = [c for c in LOOK_COLUMNS if c not in df.columns]
    if missing:
        raise SequentialError(f"{p}: missing column(s) {missing}; expected {list(LOOK_COLUMNS)}")
    return df


def _adjusted_after_stop(last: pd.DataFrame) -> dict:
    """Row index -> "estimate [lo, hi]" for the comparisons stopped for efficacy, from the recorded design
    (design_json), n, mean and the repeated CI (se = half width / critical value)."""
    out: dict = {}
    for i, r in last.iterrows():
        if str(r["decision"]) not in ("superior", "inferior") or any(
                not math.isfinite(float(r[c])) for c in ("mean", "rci_low", "rci_high")):
            continue
        try:
            doc = json.loads(r["design_json"])
            fields = {k: v for k, v in doc.items() if k in SequentialDesign.__dataclass_fields__}
            fields["looks"] = tuple(fields.get("looks", ()))
            design = SequentialDesign(**fields)
        except (TypeError, ValueError, SequentialError):
            continue
        k = int(r["look"])
        if int(r["n"]) != design.looks[k]:
            continue
        crit = float(design.stat_bounds(design.looks[:k + 1])[-1])
        se = (float(r["rci_high"]) - float(r["rci_low"])) / (2 * crit)
        if not se > 0:
            continue
        e, lo, hi = stagewise_estimate(design, k, np.array([float(r["mean"]) / se]), np.array([se * math.sqrt(r["n"])]))
        out[i] = f"{e[0]:+.3f} [{lo[0]:+.3f}, {hi[0]:+.3f}]"
    return out


def looks_section_html(looks: pd.DataFrame) -> str:
    """Lead section of a report for a sequential campaign: each comparison's last look, its
    repeated (adjusted) CI and decision, then the look-by-look history. It goes before the score
    tables because their fixed-n paired CIs are not adjusted for the interim looks."""
    import html

    import pandas as pd

    if looks.empty:
        return ""
    design = json.loads(looks["design_json"].iloc[-1]) if "design_json" in looks else {}
    margin = design.get("equivalence_margin")
    desc = (f"looks after {design.get('looks')} seeds, alpha {design.get('alpha')}, {design.get('spending')} spending"
            + (f", equivalence margin ±{margin}" if margin is not None else "")
            + (f", futility below conditional power {design.get('futility_cp')}" if design.get("futility_cp") else "")
            + (f", family-wise control: {design.get('familywise')} (alpha/m per comparison over the campaign's m "
               "comparisons)" if design.get("familywise") not in (None, "none") else
               ", per-comparison error control only (no family-wise adjustment across comparisons)")
            + (f", aggregate {design.get('aggregate')}" if design.get("aggregate") else "")
            + (f", design {design.get('name')!r}" if design.get("name") not in (None, "default") else ""))
    last = looks.sort_values("look").groupby("comparison", sort=True).tail(1)
    adj = _adjusted_after_stop(last)

    def ci(r: pd.Series) -> str:
        lo, hi = r["rci_low"], r["rci_high"]
        return "NaN" if pd.isna(lo) or pd.isna(hi) else f"[{lo:+.3f}, {hi:+.3f}]"

    def rows(df: pd.DataFrame, with_look: bool) -> str:
        out = []
        for i, r in df.iterrows():
            cells = ([str(int(r["look"]))] if with_look else []) + [
                html.escape(str(r["comparison"])), str(int(r["n"])),
                "NaN" if pd.isna(r["mean"]) else f"{r['mean']:+.3f}", ci(r), html.escape(str(r["decision"]))]
            if not with_look:
                cells.append(adj.get(i, "not stopped for efficacy"))
            out.append("<tr>" + "".join(f"<td>{c}</td>" for c in cells) + "</tr>")
        return "".join(out)

    head = "<th>comparison</th><th>seeds</th><th>mean Δ</th><th>repeated CI</th><th>decision</th>"
    return (
        "<h2 id='sequential'>Sequential seed design: adjusted intervals</h2>"
        f"<p>This campaign spent seeds in batches with interim looks ({html.escape(desc)}). "
        "<b>Use the repeated confidence intervals below: they keep their coverage over every look taken. "
        "The paired CIs in the tables further down are fixed-n intervals, not adjusted for the looks, "
        "and comparisons stopped early have fewer seeds there.</b></p>"
        f"<table><thead><tr>{head}<th>bias-adjusted Δ [95% CI] (median-unbiased, stage-wise ordering)</th></tr>"
        f"</thead><tbody>{rows(last, False)}</tbody></table>"
        "<p class='note'>A comparison stopped early for efficacy overstates its effect (the mean that crossed a "
        "boundary is selected to be large). The bias-adjusted estimate is the median-unbiased estimate under the "
        "stage-wise ordering, on the standardised scale delta/sigma (exact for paired t statistics, fixed-seed "
        "simulation), times the SD at the stop.</p>"
        "<details><summary>every interim look</summary>"
        f"<table><thead><tr><th>look</th>{head}</tr></thead>"
        f"<tbody>{rows(looks.sort_values(['look', 'comparison']), True)}"
        "</tbody></table></details>"
    )
