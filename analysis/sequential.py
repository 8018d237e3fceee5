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

Siblings: `sequential_sim` applies a design to simulated differences (error rates, seeds used);
`sequential_estimates` gives the bias-adjusted estimate after an early stop; `sequential_looks`
takes a look over a campaign's run records and builds the rows a look stores; `sequential_report`
renders the recorded looks as the report's lead section.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from itertools import pairwise
from typing import Literal

import numpy as np
from scipy import optimize, special, stats
from wtcommon.errors import UserError

Spending = Literal["obf", "pocock"]
DecisionKind = Literal["superior", "inferior", "equivalent", "futile", "continue", "inconclusive"]

_GRID_POINTS = 2001  # per look; boundaries agree with published tables to 1e-4 at this size
_SPAN_SD = 8.0  # the unbounded first look is truncated at +-8 standard deviations


class SequentialError(UserError):
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

