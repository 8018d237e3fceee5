"""Paired, seed-matched comparison of each policy with its campaign-local reference.

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
* Holm / BH: over the family = all method-vs-reference comparisons of one (campaign, model,
  regime, step) and one metric (A/A rows excluded), applied to the paired-t p-values.
* TOST: two one-sided paired t-tests against +/- margin; p = max of the two.
* MDE: smallest true mean difference detectable with 80% power at alpha .05 (two-sided paired
  t, statsmodels TTestPower) at the current n and observed sd.
* seeds needed: smallest n with 80% power for `effect` at the observed sd.
* probability of improvement: `p_improve_seeds` = share of seeds with d > 0 (ties count 1/2);
  `p_improve_posterior` = P(mean d > 0) under the flat-prior t posterior, t_{n-1} cdf of mean/se.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass, field
from functools import lru_cache

import numpy as np
import pandas as pd
from scipy import stats
from statsmodels.stats.power import TTestPower, ttest_power

from analysis.aggregates import run_table
from analysis.items import NO_ITEMS_REASON
from analysis.schema import DEFAULT_AA_PAIR, DEFAULT_REFERENCE, GROUP_KEYS
from evaluation.suite import Suite

MAX_EXACT = 100_000
RANGE_MAX_N = 5  # at n <= 5 the second CI is the seed range with its exact coverage
SMALL_N_NOTE = ("small n: at n <= 5 the second CI is the seed range [min d, max d] with its exact coverage "
                "1 - 2^(1-n) (0.75 at n = 3; percentile bootstrap = this range at n = 3), not 95%; the sign-flip "
                "p cannot go below 2/2^n (0.25 at n = 3); an SD below half the score resolution is floored there "
                "and p_t falls back to the exact sign-flip p; MDE and seeds needed carry the 95% interval "
                "from the chi-square CI of the SD (normal noise).")


class UnpairedWarning(UserWarning):
    """Runs without a partner at the same seed were dropped from a paired comparison."""


# ----------------------------------------------------------------------------- array statistics

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


def metric_resolution(suite: Suite, metrics: list[tuple[str, str]]) -> np.ndarray:
    """Score step (points) of each metric: 100/n_items for a benchmark; the smallest weighted step of its
    benchmarks for a domain mean or an aggregate (one item more on the finest benchmark)."""
    from analysis.aggregates import aggregate_weights

    ids = suite.benchmark_ids
    step = np.array([100.0 / suite.item_counts()[b] for b in ids])
    dom = suite.domain_of()
    out = []
    for kind, name in metrics:
        if kind == "benchmark":
            out.append(step[ids.index(name)])
            continue
        if kind == "domain":
            members = np.array([dom[b] == name for b in ids])
            w = members / members.sum()
        else:
            w = aggregate_weights(suite.aggregate(name), suite)
        nz = w > 0
        out.append(float(np.min(w[nz] * step[nz])) if nz.any() else np.nan)
    return np.asarray(out, dtype=float)


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


# ----------------------------------------------------------------------------- the comparison table

@dataclass
class PairedResult:
    """table: one row per comparison x metric; dropped: one message per dropped run/seed/comparison."""

    table: pd.DataFrame
    dropped: list[str] = field(default_factory=list)


def metric_columns(suite: Suite, aggregates: list[str] | None = None) -> list[tuple[str, str]]:
    """(metric_type, name) for aggregates, domains and benchmarks, in report order."""
    aggs = aggregates or suite.aggregate_names
    return ([("aggregate", a) for a in aggs] + [("domain", d) for d in suite.domains]
            + [("benchmark", b) for b in suite.benchmark_ids])


def _stats_block(d: np.ndarray, rng: np.random.Generator, *, n_resamples: int, level: float,
                 margin: float | None, effect: float, resolution: np.ndarray | None = None) -> dict[str, np.ndarray]:
    """All per-(comparison, metric) statistics of one seed count n; `resolution` (m,) score steps."""
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


def _pair(mrows: np.ndarray, rrows: np.ndarray, seeds: np.ndarray, run_ids: np.ndarray, label: str,
          dropped: list[str]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Align two configurations' run rows on seed -> (method rows, reference rows, seeds), sorted by seed.

    Runs without a partner at the same seed (and extra runs at a repeated seed) are reported.
    """
    out = []
    for name, rows in (("method", mrows), ("reference", rrows)):
        _, first = np.unique(seeds[rows], return_index=True)
        if len(first) < len(rows):
            extra = np.setdiff1d(np.arange(len(rows)), first)
            dropped.append(f"{label}: {name} has several runs at seed(s) {sorted(set(seeds[rows[extra]].tolist()))}; "
                           f"kept the first, dropped {sorted(run_ids[rows[extra]].tolist())}")
        out.append(rows[np.sort(first)])
    m, r = out
    common, im, ir = np.intersect1d(seeds[m], seeds[r], return_indices=True)
    lonely = sorted(run_ids[np.setdiff1d(m, m[im])].tolist() + run_ids[np.setdiff1d(r, r[ir])].tolist())
    if lonely:
        dropped.append(f"{label}: no partner at the same seed, dropped {lonely}")
    return m[im], r[ir], common


def _jobs(runs: pd.DataFrame, overrides: dict[str, str], dropped: list[str],
          aa_pair: tuple[str, str] = DEFAULT_AA_PAIR) -> list[tuple[dict, np.ndarray, np.ndarray]]:
    """(identity, method run rows, reference run rows) for every comparison, plus the A/A rows."""
    cfg = runs.groupby(list(GROUP_KEYS) + ["policy"], sort=True).indices
    groups: dict[tuple, dict[str, np.ndarray]] = {}
    for key, rows in cfg.items():
        groups.setdefault(key[:-1], {})[key[-1]] = rows
    mech_col = runs["mechanism"].to_numpy()
    jobs = []
    for gkey, pols in groups.items():
        ident = dict(zip(GROUP_KEYS, gkey, strict=True))
        label0 = "/".join(str(v) for v in gkey if v != "")
        for pol, rows in pols.items():
            mech = mech_col[rows[0]]
            ref = overrides.get(pol, DEFAULT_REFERENCE.get(mech))
            if ref is None or ref == pol:
                if mech == "unknown" and pol not in overrides:
                    dropped.append(f"{label0}/{pol}: mechanism unknown and no --reference-map entry; not compared")
                continue
            if ref not in pols:
                elsewhere = sorted({int(k[3]) for k, p in groups.items() if k[:3] == gkey[:3] and ref in p})
                where = (f"; it has runs at step(s) {elsewhere} (compare checkpoints at the same step)" if elsewhere
                         else " at any step")
                dropped.append(f"{label0}/{pol}: reference {ref!r} has no runs at step {gkey[3]} in this campaign "
                               f"group{where}; not compared")
                continue
            jobs.append(({**ident, "policy": pol, "reference": ref, "reference_campaign": ident["campaign"],
                          "mechanism": mech, "kind": "effect"}, rows, pols[ref]))
    # A/A noise floor: `aa_pair` (by default static, the mixer trainer, vs baseline) at the same
    # model/regime/step, any campaign.
    a, b = aa_pair
    for gkey, pols in groups.items():
        if a not in pols:
            continue
        ident = dict(zip(GROUP_KEYS, gkey, strict=True))
        for hkey, hpols in groups.items():
            if hkey[1:] == gkey[1:] and b in hpols:
                jobs.append(({**ident, "policy": a, "reference": b, "reference_campaign": hkey[0],
                              "mechanism": mech_col[pols[a][0]], "kind": "aa_noise_floor"}, pols[a], hpols[b]))
    return jobs


def _item_block(block: dict, items: pd.DataFrame, suite: Suite, metrics: list[tuple[str, str]],
                method_runs: np.ndarray, reference_runs: np.ndarray, level: float) -> None:
    """Seed + item (two-way clustered) CI of every metric of one comparison, in points."""
    from analysis.aggregates import aggregate_weights
    from analysis.items import paired_item_matrix, two_way_clustered

    ids = suite.benchmark_ids
    dom = suite.domain_of()
    n_m = len(metrics)
    for key in ("item_lo", "item_hi", "item_se"):
        block[key] = np.full(n_m, np.nan)
    try:
        d_all, bench = paired_item_matrix(items, list(method_runs), list(reference_runs), ids)
    except KeyError as exc:
        block["item_note"][:] = str(exc).strip("'\"")
        return
    for j, (kind, name) in enumerate(metrics):
        if kind == "benchmark":
            w_b = {name: 1.0}
        elif kind == "domain":
            members = [b for b in ids if dom[b] == name]
            w_b = {b: 1.0 / len(members) for b in members}
        else:
            w = aggregate_weights(suite.aggregate(name), suite)
            w_b = {b: float(w[k]) for k, b in enumerate(ids) if w[k] > 0}
        cols = np.isin(bench, list(w_b))
        present = set(bench[cols])
        if present != set(w_b):
            block["item_note"][j] = f"no paired item logs for {sorted(set(w_b) - present)}"
            continue
        counts = pd.Series(bench[cols]).value_counts()
        a = np.array([w_b[b] / counts[b] for b in bench[cols]])
        r = two_way_clustered(100.0 * d_all[:, cols], a, bench[cols], level)
        block["item_lo"][j], block["item_hi"][j] = r["two_way_lo"], r["two_way_hi"]
        block["item_se"][j] = r["se_two_way"]


def paired_comparisons(records: pd.DataFrame, suite: Suite, *, reference_map: dict[str, str] | None = None,
                       aggregates: list[str] | None = None, margin: float | None = None, effect: float = 1.0,
                       n_resamples: int = 10_000, level: float = 0.95, seed: int = 0,
                       runs: pd.DataFrame | None = None, items: pd.DataFrame | None = None,
                       aa_pair: tuple[str, str] = DEFAULT_AA_PAIR) -> PairedResult:
    """Every policy vs its campaign-local reference, per aggregate, domain and benchmark.

    reference_map: policy -> reference policy, overriding the default by mechanism
    (select/reweight -> baseline, mix -> static). `aa_pair` (method, reference; a campaign's `aa_pair`,
    by default `static` vs `baseline`) at the same (model, regime, step) is added as
    kind="aa_noise_floor", never as a method effect.
    Unpaired runs are dropped, listed in `.dropped` and warned about (UnpairedWarning).
    `runs` (a precomputed `run_table`) skips recomputing the per-run aggregates.
    `items` (analysis.items layer: run_id, benchmark, item_id, score, ...) adds the seed + item
    two-way clustered CI (`item_lo`, `item_hi`); without it those are NaN and `item_note` says why.
    """
    runs = run_table(records, suite) if runs is None else runs
    metrics = metric_columns(suite, aggregates)
    cols = [name for _, name in metrics]
    n_m = len(cols)
    dropped: list[str] = []
    jobs = _jobs(runs, reference_map or {}, dropped, aa_pair)
    values = runs[cols].to_numpy(float)
    resolution = metric_resolution(suite, metrics)
    seeds = runs["seed"].to_numpy()
    run_ids = runs["run_id"].to_numpy().astype(str)

    idents: list[dict] = []
    blocks: list[dict[str, np.ndarray]] = []
    pieces: dict[int, list[tuple[int, np.ndarray, np.ndarray]]] = {}  # n -> [(block, columns, d (n, k))]
    for ident, mrows, rrows in jobs:
        label = "/".join(str(ident[k]) for k in GROUP_KEYS if ident[k] != "") + \
            f"/{ident['policy']} vs {ident['reference']}"
        m, r, common = _pair(mrows, rrows, seeds, run_ids, label, dropped)
        if len(common) == 0:
            dropped.append(f"{label}: no seed pairs; not compared")
            continue
        x, y = values[m], values[r]
        d = x - y
        valid = ~np.isnan(d)
        block: dict[str, np.ndarray] = {"method_mean": np.full(n_m, np.nan), "reference_mean": np.full(n_m, np.nan),
                                        "seeds": np.full(n_m, "", dtype=object),
                                        "item_note": np.full(n_m, "" if items is not None else NO_ITEMS_REASON,
                                                             dtype=object)}
        # Columns sharing a pattern of valid seeds share n (usually one pattern for all metrics).
        patterns, inverse = np.unique(valid.T, axis=0, return_inverse=True)
        for k, rows_ok in enumerate(patterns):
            j = np.flatnonzero(inverse.reshape(-1) == k)
            if not rows_ok.all():
                dropped.append(f"{label}: seed(s) {common[~rows_ok].tolist()} missing for "
                               f"{[cols[c] for c in j][:6]}{' ...' if len(j) > 6 else ''}; dropped from those metrics")
            if not rows_ok.any():
                continue
            pieces.setdefault(int(rows_ok.sum()), []).append((len(blocks), j, d[np.ix_(rows_ok, j)]))
            block["method_mean"][j] = x[np.ix_(rows_ok, j)].mean(axis=0)
            block["reference_mean"][j] = y[np.ix_(rows_ok, j)].mean(axis=0)
            block["seeds"][j] = ",".join(str(v) for v in common[rows_ok])
        if items is not None:
            _item_block(block, items, suite, metrics, run_ids[m], run_ids[r], level)
        idents.append(ident)
        blocks.append(block)
    # One vectorised pass per seed count n over every comparison and metric with that n. The
    # resampling generator is seeded by (seed, n), so a comparison's intervals never depend on
    # which other comparisons are in the same call.
    for n, group in pieces.items():
        big = np.concatenate([g[2] for g in group], axis=1)
        res = _stats_block(big, np.random.default_rng([seed, n]), n_resamples=n_resamples, level=level,
                           margin=margin, effect=effect,
                           resolution=np.concatenate([resolution[g[1]] for g in group]))
        offsets = np.cumsum([0] + [g[2].shape[1] for g in group])
        for (b, j, _), lo, hi in zip(group, offsets[:-1], offsets[1:], strict=True):
            for key, v in res.items():
                blocks[b].setdefault(key, np.full(n_m, np.nan))[j] = v[lo:hi]
    keep = [i for i, b in enumerate(blocks) if "n" in b]
    idents = [idents[i] for i in keep]
    blocks = [blocks[i] for i in keep]

    if not blocks:
        table = pd.DataFrame({c: pd.Series(dtype=float) for c in TABLE_COLUMNS})
    else:
        data: dict[str, np.ndarray] = {k: np.repeat(np.array([i[k] for i in idents], dtype=object), n_m)
                                       for k in idents[0]}
        data["metric_type"] = np.tile(np.array([t for t, _ in metrics], dtype=object), len(blocks))
        data["metric"] = np.tile(np.array(cols, dtype=object), len(blocks))
        for key in blocks[0]:
            data[key] = np.concatenate([b.get(key, np.full(n_m, np.nan)) for b in blocks])
        data["n"] = np.concatenate([b["n"] for b in blocks])
        table = pd.DataFrame(data)
        table["step"] = table["step"].astype(np.int64)
    for c in ("item_lo", "item_hi", "item_se"):
        if c not in table:
            table[c] = np.nan
    if "item_note" not in table or not len(table):
        table["item_note"] = NO_ITEMS_REASON if items is None else ""
    table["margin"] = np.nan if margin is None else margin
    table["effect"] = effect
    sd_used = table["sd_used"].to_numpy(float) if len(table) else np.zeros(0)
    table["seeds_needed"] = seeds_needed(effect, sd_used) if len(table) else np.nan
    table["seeds_needed_lo"] = np.nan
    table["seeds_needed_hi"] = np.nan
    table["sd_floored"] = table["sd_floored"].fillna(0).astype(bool) if len(table) else False
    if len(table):
        # sigma's CI per n; seeds needed is increasing in sigma, so its bounds come from sigma's bounds
        nn = table["n"].to_numpy(float)
        for n in np.unique(nn[~np.isnan(nn)]):
            rows = nn == n
            s_lo, s_hi = sd_interval(sd_used[rows], int(n))
            table.loc[rows, "seeds_needed_lo"] = seeds_needed(effect, s_lo)
            table.loc[rows, "seeds_needed_hi"] = seeds_needed(effect, s_hi)
    nvals = table["n"].to_numpy(float) if len(table) else np.zeros(0)
    table["resolution"] = pd.Series(dict(zip(cols, resolution, strict=True))).reindex(table["metric"]).to_numpy() \
        if len(table) else np.nan
    table["boot_method"] = np.where(nvals <= RANGE_MAX_N, "seed range", "expanded percentile bootstrap")
    table["boot_coverage"] = np.where(nvals <= RANGE_MAX_N, range_coverage(nvals), level)
    table["p_perm_floor"] = [sign_flip_floor(int(v)) if v == v else np.nan for v in nvals]
    table["p_holm"] = np.nan
    table["p_bh"] = np.nan
    eff = (table["kind"] == "effect").to_numpy()
    if eff.any():
        sub = table[eff]
        fam = (sub["campaign"].astype(str) + "\x1f" + sub["model"].astype(str) + "\x1f" + sub["regime"].astype(str)
               + "\x1f" + sub["step"].astype(str) + "\x1f" + sub["metric"].astype(str)).to_numpy()
        table.loc[eff, "p_holm"] = adjust(sub["p_t"].to_numpy(float), "holm", fam)
        table.loc[eff, "p_bh"] = adjust(sub["p_t"].to_numpy(float), "fdr_bh", fam)
    for msg in dropped:
        warnings.warn(msg, UnpairedWarning, stacklevel=2)
    return PairedResult(table[TABLE_COLUMNS].reset_index(drop=True), dropped)


TABLE_COLUMNS = [
    "campaign", "model", "regime", "step", "policy", "reference", "reference_campaign", "mechanism", "kind",
    "metric_type", "metric", "n", "seeds", "method_mean", "reference_mean", "mean_diff", "sd", "t_lo", "t_hi",
    "boot_lo", "boot_hi", "p_t", "p_perm", "p_holm", "p_bh", "margin", "p_tost", "mde", "effect",
    "seeds_needed", "p_improve_seeds", "p_improve_posterior",
    # small-n honesty (module doc): what each interval and p can be at this n
    "resolution", "sd_used", "sd_floored", "boot_method", "boot_coverage", "p_perm_floor", "mde_lo", "mde_hi",
    "seeds_needed_lo", "seeds_needed_hi",
    # seed + item evidence (analysis.items): NaN with the reason in item_note when there are no item logs
    "item_lo", "item_hi", "item_se", "item_note",
]
