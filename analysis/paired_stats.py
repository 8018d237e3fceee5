"""Statistics of paired, seed-matched differences: pure functions over arrays, no tables.

Small pure functions over arrays in the style of rliable: `d` is always a (n_seeds, n_metrics)
matrix of paired differences d_s = A(method, s) - A(reference, s) without NaN. SD is the
sample SD (n-1). Everything a user quotes comes with its definition:

* t CI: mean +/- t(1-(1-level)/2, n-1) * sd / sqrt(n).
* second CI (`boot_lo`, `boot_hi`, labelled by `boot_method` with its `boot_coverage`):
  - n <= 5 ("seed range"): [min d, max d]. At n = 3 the 95% percentile bootstrap *is* this range
    (P(all 3 resamples = min) = 1/27 > 0.025), and its coverage is not 95%: for the median of d
    (= the mean under symmetric seed noise) it is exactly 1 - 2^(1-n), distribution-free
    (0.75, 0.875, 0.9375 at n = 3, 4, 5). So it is printed with that exact coverage.
  - n >= 6 ("expanded percentile bootstrap", Hesterberg 2015): percentile interval of the
    resampled means at the widened level whose normal quantile is sqrt(n/(n-1)) * t(n-1); the
    plain percentile interval undercovers at small n. Coverage measured in
    benchmarks/interval_coverage.py. Each column is sorted first, so the result depends only on
    the set of differences, not on how seeds are labelled.
* permutation p: two-sided sign-flip test of mean = 0; exact enumeration when 2^n <= 100,000,
  else Monte Carlo with the observed sign pattern counted. It can never be below its floor
  `p_perm_floor` = 2/2^n (exact) or 1/(n_mc+1) (Monte Carlo): 0.25 at n = 3.
* score resolution: a metric moves in steps of `resolution` points (100/n_items for a benchmark,
  the smallest weighted step for a domain or aggregate). An SD below resolution/2 ("near zero",
  e.g. three identical differences) cannot support a t statistic: then p_t is the exact sign-flip
  p, and the SD used for t CI, TOST, MDE, seeds needed and the posterior is floored at
  resolution/2 (`sd_floored`). No p-value is ever 0 from a zero SD.
* MDE and seeds needed carry a 95% interval (`mde_lo/hi`, `seeds_needed_lo/hi`) from the
  chi-square CI of sigma, s*sqrt((n-1)/chi2_{0.975,n-1}) .. s*sqrt((n-1)/chi2_{0.025,n-1})
  (0.52 .. 6.28 x s at n = 3); exact under normal seed noise.
* Holm / BH (`adjust`): each family separately; analysis.comparisons defines the family (all
  method-vs-reference comparisons of one (campaign, model, regime, step) and one metric, A/A rows
  excluded) and applies it to the paired-t p-values.
* TOST: two one-sided paired t-tests against +/- margin; p = max of the two.
* MDE: smallest true mean difference detectable with 80% power at alpha .05 (two-sided paired
  t, statsmodels TTestPower) at the current n and observed sd.
* seeds needed: smallest n with 80% power for `effect` at the observed sd.
* probability of improvement: `p_improve_seeds` = share of seeds with d > 0 (ties count 1/2);
  `p_improve_posterior` = P(mean d > 0) under the flat-prior t posterior, t_{n-1} cdf of mean/se.
"""


from __future__ import annotations

from functools import lru_cache

import numpy as np
import pandas as pd
from scipy import stats
from statsmodels.stats.power import TTestPower, ttest_power

MAX_EXACT = 100_000
RANGE_MAX_N = 5  # at n <= 5 the second CI is the seed range with its exact coverage


def mean_sd(d: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """d: (n, m) -> mean (m,), sample sd (m,) with ddof=1 (exactly 0 for a constant column; NaN if n < 2)."""
    d = np.asarray(d, dtype=float)
    mean = d.mean(axis=0)
    sd = d.std(axis=0, ddof=1) if d.shape[0] > 1 else np.full(d.shape[1], np.nan)
    return mean, np.where(np.ptp(d, axis=0) == 0, 0.0, sd) if d.shape[0] > 1 else sd


def t_interval(d: np.ndarray, level: float = 0.95) -> tuple[np.ndarray, np.ndarray]:
    """d: (n, m) -> (lo (m,), hi (m,)) paired t interval with df = n-1."""
    n = d.shape[0]
    mean, sd = mean_sd(d)
    half = stats.t.ppf(0.5 + level / 2, n - 1) * sd / np.sqrt(n) if n > 1 else np.full_like(mean, np.nan)
    return mean - half, mean + half


def t_pvalue(d: np.ndarray) -> np.ndarray:
    """d: (n, m) -> two-sided paired t p-value (m,); a zero-variance column gives 0 if mean != 0 else 1."""
    n = d.shape[0]
    mean, sd = mean_sd(d)
    if n < 2:
        return np.full_like(mean, np.nan)
    with np.errstate(divide="ignore", invalid="ignore"):
        tstat = mean / (sd / np.sqrt(n))
    p = 2 * stats.t.sf(np.abs(tstat), n - 1)
    return np.where(sd == 0, np.where(mean == 0, 1.0, 0.0), p)


def expanded_level(n: int, level: float = 0.95) -> float:
    """Percentile level of the expanded bootstrap: 2*Phi(sqrt(n/(n-1)) * t_{(1+level)/2, n-1}) - 1."""
    if n < 2:
        return level
    z = np.sqrt(n / (n - 1)) * stats.t.ppf(0.5 + level / 2, n - 1)
    return float(2 * stats.norm.cdf(z) - 1)


def range_coverage(n: int | np.ndarray) -> np.ndarray:
    """Exact coverage of [min d, max d] for the median of d (continuous d): 1 - 2^(1-n)."""
    return 1.0 - 2.0 ** (1.0 - np.asarray(n, dtype=float))


def percentile_is_range(n: int, level: float = 0.95) -> bool:
    """True when the percentile bootstrap interval is exactly the seed range: P(all n draws = min) = n^-n
    exceeds the tail (1-level)/2 (n = 3 at 95%), so the lower percentile is the minimum."""
    return float(n) ** (-n) > (1 - level) / 2


def bootstrap_interval(d: np.ndarray, rng: np.random.Generator, n_resamples: int = 10_000,
                       level: float = 0.95, expanded: bool = False) -> tuple[np.ndarray, np.ndarray]:
    """d: (n, m) -> percentile bootstrap interval of the mean (lo (m,), hi (m,)).

    Resamples seeds with replacement: counts (B, n) ~ Multinomial(n, 1/n); means = d.T @ counts.T / n.
    Percentiles use the inverted-CDF definition (an actual resampled mean, no interpolation), which
    lets small n be computed exactly on the distinct count vectors with their frequencies.
    expanded: use `expanded_level(n, level)` (the small-sample correction of the module doc).
    """
    n, m = d.shape
    ds = np.sort(d, axis=0)  # labelling-invariant (see module doc)
    counts = rng.multinomial(n, np.full(n, 1.0 / n), size=n_resamples)
    lvl = expanded_level(n, level) if expanded else level
    q = np.array([0.5 - lvl / 2, 0.5 + lvl / 2])
    k = np.maximum(np.ceil(q * n_resamples - 1e-9).astype(int) - 1, 0)  # inverted-CDF order statistics
    if n <= 6:  # at most C(11, 6) = 462 distinct count vectors: sort those, weighted by frequency
        uniq, freq = np.unique(counts, axis=0, return_counts=True)
        means = ds.T @ uniq.T.astype(float) / n  # (m, U)
        order = np.argsort(means, axis=1, kind="stable")
        cum = np.cumsum(freq[order], axis=1)  # (m, U)
        pos = np.stack([(cum <= kk).sum(axis=1) for kk in k], axis=1)  # first index with cum > k
        lo, hi = np.take_along_axis(means, np.take_along_axis(order, pos, axis=1), axis=1).T
    else:
        means = ds.T @ counts.T.astype(float) / n  # (m, B), rows contiguous
        means.partition(k, axis=1)  # in place: no copy of the (m, B) matrix
        lo, hi = means[:, k[0]], means[:, k[1]]
    const = np.ptp(d, axis=0) == 0
    return np.where(const, ds[0], lo), np.where(const, ds[0], hi)


@lru_cache(maxsize=32)
def _sign_matrix(n: int) -> np.ndarray:
    """All 2^n sign patterns, (2^n, n) of +/-1."""
    bits = (np.arange(2 ** n)[:, None] >> np.arange(n)[None, :]) & 1
    return 1.0 - 2.0 * bits


def sign_flip_pvalue(d: np.ndarray, rng: np.random.Generator, n_mc: int = 10_000) -> np.ndarray:
    """d: (n, m) -> two-sided sign-flip permutation p-value of mean = 0 (m,)."""
    n = d.shape[0]
    ds = np.sort(d, axis=0)
    obs = np.abs(ds.mean(axis=0))
    if 2 ** n <= MAX_EXACT:
        null = np.abs(_sign_matrix(n) @ ds / n)
        return (null >= obs - 1e-12 * (1 + obs)).mean(axis=0)
    signs = rng.choice(np.array([-1.0, 1.0]), size=(n_mc, n))
    null = np.abs(signs @ ds / n)
    return (1 + (null >= obs - 1e-12 * (1 + obs)).sum(axis=0)) / (n_mc + 1)


def sign_flip_floor(n: int, n_mc: int = 10_000) -> float:
    """Smallest p `sign_flip_pvalue` can return at n: 2/2^n exact (the observed pattern and its mirror
    always count), 1/(n_mc+1) Monte Carlo."""
    return 2.0 / 2 ** n if 2 ** n <= MAX_EXACT else 1.0 / (n_mc + 1)


def sd_interval(sd: np.ndarray, n: int, level: float = 0.95) -> tuple[np.ndarray, np.ndarray]:
    """Chi-square CI of sigma from a sample SD with n-1 df (exact under normal noise)."""
    sd = np.asarray(sd, dtype=float)
    if n < 2:
        return np.full_like(sd, np.nan), np.full_like(sd, np.nan)
    df = n - 1
    lo = sd * np.sqrt(df / stats.chi2.ppf(0.5 + level / 2, df))
    hi = sd * np.sqrt(df / stats.chi2.ppf(0.5 - level / 2, df))
    return lo, hi


def adjust(p: np.ndarray, method: str, family: np.ndarray | None = None) -> np.ndarray:
    """Holm ("holm") or Benjamini-Hochberg ("fdr_bh") adjusted p, each family separately; NaN stays NaN.

    p: (k,); family: (k,) labels (None = one family). Same values as statsmodels `multipletests`
    (checked in the tests) but vectorised over all families at once.
    """
    p = np.asarray(p, dtype=float)
    fam = np.zeros(len(p), dtype=np.int64) if family is None else pd.factorize(pd.Series(family))[0]
    out = np.full_like(p, np.nan)
    ok = ~np.isnan(p)
    if not ok.any():
        return out
    df = pd.DataFrame({"fam": fam[ok], "p": p[ok], "pos": np.flatnonzero(ok)}).sort_values(["fam", "p"], kind="stable")
    g = df.groupby("fam", sort=False)
    m = g["p"].transform("size").to_numpy(float)
    i = g.cumcount().to_numpy(float) + 1.0  # rank within family
    if method == "holm":
        raw = np.minimum(1.0, (m - i + 1.0) * df["p"].to_numpy())
        adj = pd.Series(raw, index=df.index).groupby(df["fam"].to_numpy(), sort=False).cummax().to_numpy()
    elif method == "fdr_bh":
        raw = np.minimum(1.0, m / i * df["p"].to_numpy())
        rev = pd.Series(raw[::-1], index=df.index[::-1])
        adj = rev.groupby(df["fam"].to_numpy()[::-1], sort=False).cummin().to_numpy()[::-1]
    else:
        raise ValueError(f"unknown adjustment {method!r}; use 'holm' or 'fdr_bh'")
    out[df["pos"].to_numpy()] = adj
    return out


def tost_pvalue(d: np.ndarray, margin: float) -> np.ndarray:
    """d: (n, m) -> TOST p (m,) for equivalence within +/- margin (small p = equivalent)."""
    n = d.shape[0]
    mean, sd = mean_sd(d)
    if n < 2:
        return np.full_like(mean, np.nan)
    se = sd / np.sqrt(n)
    with np.errstate(divide="ignore", invalid="ignore"):
        p_lo = stats.t.sf((mean + margin) / se, n - 1)  # H0: mean <= -margin
        p_hi = stats.t.cdf((mean - margin) / se, n - 1)  # H0: mean >= +margin
    p = np.maximum(p_lo, p_hi)
    return np.where(sd == 0, np.where(np.abs(mean) < margin, 0.0, 1.0), p)


@lru_cache(maxsize=256)
def _mde_dz(n: int, alpha: float, power: float) -> float:
    if n < 2:
        return float("nan")
    return float(TTestPower().solve_power(effect_size=None, nobs=n, alpha=alpha, power=power))


def mde(n: int, sd: np.ndarray, alpha: float = 0.05, power: float = 0.8) -> np.ndarray:
    """Minimum detectable mean difference (score points) at n seeds: d_z(n) * sd, shape of sd."""
    return _mde_dz(int(n), alpha, power) * np.asarray(sd, dtype=float)


def _power(dz: np.ndarray, n: np.ndarray, alpha: float) -> np.ndarray:
    """Two-sided paired-t power (statsmodels `ttest_power`); where its noncentral-t tail returns NaN
    (large noncentrality) the normal approximation with the t critical value is used instead."""
    pw = np.asarray(ttest_power(dz, n, alpha), dtype=float)
    bad = np.isnan(pw)
    if bad.any():
        crit = stats.t.isf(alpha / 2, n[bad] - 1)
        nc = dz[bad] * np.sqrt(n[bad])
        pw[bad] = stats.norm.sf(crit - nc) + stats.norm.cdf(-crit - nc)
    return pw


def seeds_needed(effect: float, sd: np.ndarray, alpha: float = 0.05, power: float = 0.8,
                 max_n: int = 100_000) -> np.ndarray:
    """Smallest n (>= 2) whose paired t-test has `power` for a true difference `effect` (m,).

    Vectorised bisection on statsmodels' `ttest_power`; NaN when sd is NaN or n would exceed max_n.
    """
    sd = np.asarray(sd, dtype=float)
    with np.errstate(divide="ignore", invalid="ignore"):
        dz = np.where(sd == 0, np.inf, abs(effect) / sd)
    ok = ~np.isnan(dz) & (effect != 0)
    finite = np.where(np.isfinite(dz), dz, 1e6)
    # Bracket with the normal approximation: a t-test never has more power than the z-test at the
    # same n, so n_z - 1 is a valid lower end; widen to max_n only where n_z + 8 is not enough.
    z = stats.norm.isf(alpha / 2) + stats.norm.ppf(power)
    n_z = np.ceil((z / np.maximum(finite, 1e-12)) ** 2)
    lo = np.clip(n_z - 1, 1, max_n - 1)
    hi = np.clip(n_z + 8, 2, max_n)
    enough = np.zeros(sd.shape, bool)
    enough[ok] = _power(finite[ok], hi[ok], alpha) >= power
    wide = ok & ~enough
    hi = np.where(wide, float(max_n), hi)
    enough[wide] = _power(finite[wide], hi[wide], alpha) >= power
    while True:
        active = ok & enough & (hi - lo > 1)
        if not active.any():
            break
        mid = np.floor((lo + hi) / 2)
        pw = np.zeros(sd.shape)
        pw[active] = _power(finite[active], mid[active], alpha)
        up = active & (pw >= power)
        hi = np.where(up, mid, hi)
        lo = np.where(active & ~up, mid, lo)
    return np.where(ok & enough, np.maximum(hi, 2), np.nan)


def prob_improvement(d: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """d: (n, m) -> (share of seeds with d > 0, ties 1/2; P(mean > 0) under the flat-prior t posterior)."""
    n = d.shape[0]
    share = ((d > 0).sum(axis=0) + 0.5 * (d == 0).sum(axis=0)) / n
    mean, sd = mean_sd(d)
    if n < 2:
        return share, np.full_like(mean, np.nan)
    with np.errstate(divide="ignore", invalid="ignore"):
        post = stats.t.cdf(mean / (sd / np.sqrt(n)), n - 1)
    post = np.where(sd == 0, np.where(mean > 0, 1.0, np.where(mean < 0, 0.0, 0.5)), post)
    return share, post


def stats_block(d: np.ndarray, rng: np.random.Generator, *, n_resamples: int, level: float,
                 margin: float | None, effect: float, resolution: np.ndarray | None = None) -> dict[str, np.ndarray]:
    """d: (n, m) -> every per-(comparison, metric) statistic at one seed count n, each (m,); `resolution` (m,)
    score steps (an SD below half of one is floored there, module doc)."""
    n = d.shape[0]
    mean, sd = mean_sd(d)
    tol = np.zeros_like(mean) if resolution is None else np.nan_to_num(np.asarray(resolution, float) / 2)
    floored = (sd < tol) | (sd == 0) if n > 1 else np.zeros(mean.shape, bool)
    sd_used = np.where(floored, np.maximum(sd, tol), sd)
    se = sd_used / np.sqrt(n)
    if n > 1:
        half = stats.t.ppf(0.5 + level / 2, n - 1) * se
    else:
        half = np.full_like(mean, np.nan)
    if n <= RANGE_MAX_N:
        b_lo, b_hi = d.min(axis=0), d.max(axis=0)
    else:
        b_lo, b_hi = bootstrap_interval(d, rng, n_resamples, level, expanded=True)
    p_perm = sign_flip_pvalue(d, rng)
    p_t = np.where(floored, p_perm, t_pvalue(d))
    share, _ = prob_improvement(d)
    with np.errstate(divide="ignore", invalid="ignore"):
        post = stats.t.cdf(mean / se, n - 1) if n > 1 else np.full_like(mean, np.nan)
        post = np.where(se == 0, np.where(mean > 0, 1.0, np.where(mean < 0, 0.0, 0.5)), post)
        if margin is not None and n > 1:
            p_tost = np.maximum(stats.t.sf((mean + margin) / se, n - 1), stats.t.cdf((mean - margin) / se, n - 1))
            p_tost = np.where(se == 0, np.where(np.abs(mean) < margin, 0.0, 1.0), p_tost)
        else:
            p_tost = np.full(mean.shape, np.nan)
    s_lo, s_hi = sd_interval(sd_used, n)
    return {
        "n": np.full(mean.shape, float(n)), "mean_diff": mean, "sd": sd, "sd_used": sd_used,
        "sd_floored": floored.astype(float), "t_lo": mean - half, "t_hi": mean + half,
        "boot_lo": b_lo, "boot_hi": b_hi, "p_t": p_t, "p_perm": p_perm, "p_tost": p_tost,
        "mde": mde(n, sd_used), "mde_lo": mde(n, s_lo), "mde_hi": mde(n, s_hi), "p_improve_seeds": share,
        "p_improve_posterior": post,
    }

