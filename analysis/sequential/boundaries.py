"""Boundaries of group-sequential tests on the paired seed statistic: spend seeds where the answer is open.

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

The design that uses these boundaries is analysis.sequential.design.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from functools import lru_cache
from itertools import pairwise
from typing import Literal

import numpy as np
from scipy import optimize, special, stats

from analysis.sequential import SequentialError

Spending = Literal["obf", "pocock"]

_GRID_POINTS = 2001  # per look; boundaries agree with published tables to 1e-4 at this size
_SPAN_SD = 8.0  # the unbounded first look is truncated at +-8 standard deviations


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


SPENDERS = {"obf": spend_obf, "pocock": spend_pocock}


def spend(kind: str, t: np.ndarray | float, alpha: float) -> np.ndarray:
    """Cumulative two-sided alpha spent by information fraction t under spending function `kind`."""
    if kind not in SPENDERS:
        raise SequentialError(f"spending: unknown spending function {kind!r}; use one of {sorted(SPENDERS)}")
    return SPENDERS[kind](t, alpha)


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
