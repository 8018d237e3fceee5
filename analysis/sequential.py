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
data. The t adaptation keeps each look's *nominal* two-sided p-value fixed and converts the
z boundary into a t_{n-1} boundary (c_t = t.ppf(Phi(c_z), n-1)); Jennison & Turnbull (2000,
section 3.8) show this keeps the overall type-I error close to nominal. The simulation test
and `benchmarks/adaptive_seeds_sim.py` check it for 3+3+3+3 seeds.

Optional equivalence stop (futility to equivalence): a group-sequential two one-sided
tests (TOST) procedure. Its own repeated confidence interval d_bar +- e_k*se, with e_k the
boundaries of a spending function at total 2*equivalence_alpha, has simultaneous coverage
1 - 2*equivalence_alpha over all looks (Jennison & Turnbull 2000, ch. 9), so stopping when it
lies inside (-margin, +margin) wrongly declares equivalence with probability at most
equivalence_alpha when |delta| >= margin. It is non-binding: it never changes the efficacy
boundaries and can only remove efficacy rejections, so the efficacy type-I error stays <= alpha.

The repeated CI at the stopping look is the adjusted interval the report shows.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Literal

import numpy as np
from scipy import optimize, special, stats

Spending = Literal["obf", "pocock"]
DecisionKind = Literal["superior", "inferior", "equivalent", "continue", "inconclusive"]

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


def _check_fractions(fractions: Sequence[float]) -> np.ndarray:
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

    def __init__(self) -> None:
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
        x_new = np.linspace(-half, half, _GRID_POINTS)
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
    for t, a_k in zip(fractions, inc):
        if a_k <= 1e-15:
            b = math.inf
        else:
            # exit probability decreases in b; bracket between a tiny and a huge boundary
            g = lambda b_: rec.exit_prob(t, b_) - a_k  # noqa: E731
            hi = 40.0
            b = optimize.brentq(g, 1e-6, hi, xtol=1e-10) if g(1e-6) > 0 else 1e-6
        bounds.append(b)
        rec.advance(t, b)
    return tuple(bounds)


def efficacy_bounds(fractions: Sequence[float], alpha: float = 0.05, spending: Spending = "obf") -> np.ndarray:
    """Two-sided z boundaries c_k (reject when |Z_k| >= c_k) at the given information fractions.

    fractions: (K,) strictly increasing in (0, 1]; the cumulative alpha spent at t_k equals
    spend(spending, t_k, alpha). Returns (K,) float array.
    """
    t = _check_fractions(fractions)
    if not 0 < alpha < 1:
        raise SequentialError(f"alpha: must be in (0, 1), got {alpha}")
    return np.array(_spending_bounds(tuple(float(x) for x in t), float(alpha), spending))


def crossing_probs(bounds: Sequence[float], fractions: Sequence[float], drift: float = 0.0) -> np.ndarray:
    """P(first crossing of |Z| >= c at look k) for each k, with E[Z_k] = drift*sqrt(t_k).

    `drift` is the standardised effect at full information (delta/se at t=1). Returns (K,).
    """
    t = _check_fractions(fractions)
    rec = _Recursion()
    out = []
    for tk, b in zip(t, bounds):
        out.append(rec.exit_prob(float(tk), float(b), drift) if np.isfinite(b) else 0.0)
        rec.advance(float(tk), float(b), drift)
    return np.array(out)


def constant_bounds(fractions: Sequence[float], alpha: float = 0.05, shape: Literal["pocock", "obf"] = "pocock") -> np.ndarray:
    """Classical (non-spending) boundaries: Pocock c_k = C, O'Brien-Fleming c_k = C/sqrt(t_k).

    C solves total crossing probability = alpha. Kept for checking the recursion against the
    tabulated constants (Jennison & Turnbull 2000, Tables 2.1 and 2.3).
    """
    t = _check_fractions(fractions)
    scale = np.ones_like(t) if shape == "pocock" else 1.0 / np.sqrt(t / t[-1])
    c = optimize.brentq(lambda c_: crossing_probs(c_ * scale, t).sum() - alpha, 1.0, 8.0, xtol=1e-10)
    return c * scale


# ---------------------------------------------------------------- the design


@dataclass(frozen=True)
class SequentialDesign:
    """Seeds in batches with interim looks after each batch.

    looks: cumulative seed counts at each look, e.g. (3, 6, 9, 12); the last is the maximum.
    equivalence_margin: in the units of the paired statistic (aggregate points); None = no
    equivalence stop. t_adjust: convert z boundaries to t_{n-1} boundaries (recommended).
    """

    looks: tuple[int, ...] = (3, 6, 9, 12)
    alpha: float = 0.05
    spending: Spending = "obf"
    equivalence_margin: float | None = None
    equivalence_alpha: float = 0.05
    equivalence_spending: Spending = "pocock"
    t_adjust: bool = True

    def __post_init__(self) -> None:
        looks = tuple(int(n) for n in self.looks)
        if not looks or any(n < 2 for n in looks) or any(b <= a for a, b in zip(looks, looks[1:])):
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

    def critical(self, z_bound: float | np.ndarray, n: int | np.ndarray) -> np.ndarray:
        """Boundary on the scale of the statistic actually used at n seeds (t_{n-1} or z)."""
        z_bound = np.asarray(z_bound, dtype=float)
        if not self.t_adjust:
            return z_bound
        return stats.t.ppf(stats.norm.cdf(z_bound), np.asarray(n) - 1)

    @classmethod
    def from_mapping(cls, raw: Mapping, where: str = "seeds") -> "SequentialDesign":
        """Build from a campaign's `seeds:` block, e.g. {max: 12, design: sequential, batch: 3}."""
        known = {"max", "design", "batch", "looks", "alpha", "spending", "equivalence_margin",
                 "equivalence_alpha", "equivalence_spending", "t_adjust"}
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
                   t_adjust=bool(raw.get("t_adjust", True)))


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
        prev = [f for f in design.fractions[:look]]
        t_now = n / design.max_seeds
        if prev and t_now <= prev[-1]:
            raise SequentialError(
                f"comparison {name!r} at look {look}: {n} seeds is not more than the previous look's "
                f"{design.looks[look - 1]}; add seeds before looking again"
            )
        frac = prev + [t_now]
        z_b = design.z_bounds(frac)[-1]
        crit = float(design.critical(z_b, n)) if np.isfinite(z_b) else math.inf
        mean, sd = float(d.mean()), float(d.std(ddof=1))
        se = sd / math.sqrt(n)
        stat = mean / se if se > 0 else (0.0 if mean == 0 else math.copysign(math.inf, mean))
        half = crit * se if np.isfinite(crit) else math.inf
        lo, hi = mean - half, mean + half
        eq_lo = eq_hi = math.nan
        if design.equivalence_margin is not None:
            e_half = float(design.critical(design.eq_bounds(frac)[-1], n)) * se
            eq_lo, eq_hi = mean - e_half, mean + e_half
        if abs(stat) >= crit:
            kind: DecisionKind = "superior" if stat > 0 else "inferior"
        elif design.equivalence_margin is not None and -design.equivalence_margin < eq_lo and eq_hi < design.equivalence_margin:
            kind = "equivalent"
        elif final:
            kind = "inconclusive"
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

    decision: np.ndarray  # 1 superior, -1 inferior, 2 equivalent, 0 inconclusive
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
    zb = design.z_bounds()
    eb = design.eq_bounds() if design.equivalence_margin is not None else None
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
        crit = float(design.critical(zb[k], n)) if np.isfinite(zb[k]) else np.inf
        with np.errstate(divide="ignore", invalid="ignore"):
            stat = np.where(se > 0, mean / se, 0.0)
        eff = open_ & (np.abs(stat) >= crit)
        decision[eff] = np.where(stat[eff] > 0, 1, -1)
        newly = eff
        if eb is not None and np.isfinite(eb[k]):
            e_crit = float(design.critical(eb[k], n))
            eq = open_ & ~eff & (mean - e_crit * se > -margin) & (mean + e_crit * se < margin)
            decision[eq] = 2
            newly = newly | eq
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
