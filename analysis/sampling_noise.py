"""How much of a benchmark score's variance is seeds, items and samples, and what k would halve the sample share.

Nested variance decomposition (method of moments, balanced seeds x items x k samples) of one configuration's
item outcomes y[s, i, j] = mu + a_s + b_i + c_si + e_sij, from the item logs' per-item sample means Y[s, i] and
within-item sample variances (analysis/items.py):

    sigma2_sample = mean over cells of the unbiased within-cell variance of the k outcomes   (needs k >= 2)
    MS_res  = sum (Y - row mean - column mean + grand mean)^2 / ((S-1)(I-1))   E = sigma2_sxi + sigma2_sample / k
    MS_seed = I * var(row means)                                               E = I sigma2_seed + E[MS_res]
    MS_item = S * var(column means)                                            E = S sigma2_item + E[MS_res]

each component truncated at 0. The variance of the configuration's score (mean over S seeds, I items, k samples)
is sigma2_seed/S + sigma2_item/I + sigma2_sxi/(S I) + sigma2_sample/(S I k); the table gives each term's share.
With sample share h at k samples, k' = k (2 - h) / (1 - h) samples halve it (the other terms unchanged).
Items are shared by every configuration, so the item term mostly cancels in a paired difference; the split
describes one configuration's score. Components are averaged over the configurations with >= 2 seeds.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from analysis.schema import CONFIG_KEYS
from evaluation.suite import Suite

SPLIT_COLUMNS = ("benchmark", "metric", "samples", "configurations", "seeds", "items", "seed_pct", "item_pct",
                 "seed_x_item_pct", "sample_pct", "k_to_halve_sample_share")


def components(y: np.ndarray, sample_var: np.ndarray, k: int) -> dict[str, float]:
    """Variance components (points^2 if y is in points) of an (S seeds, I items) matrix of k-sample item means;
    `sample_var` (S, I) holds the within-item variances of the k outcomes (NaN when k = 1)."""
    y = np.asarray(y, dtype=float)
    s_n, i_n = y.shape
    if s_n < 2 or i_n < 2:
        raise ValueError(f"need >= 2 seeds and >= 2 items, got {s_n} x {i_n}")
    row, col, grand = y.mean(axis=1), y.mean(axis=0), y.mean()
    ms_seed = i_n * row.var(ddof=1)
    ms_item = s_n * col.var(ddof=1)
    resid = y - row[:, None] - col[None, :] + grand
    ms_res = float((resid ** 2).sum() / ((s_n - 1) * (i_n - 1)))
    s2_sample = float(np.nanmean(sample_var)) if k > 1 and np.isfinite(sample_var).any() else math.nan
    sxi = ms_res - (s2_sample / k if k > 1 else 0.0)  # k = 1: the sample noise stays inside seed x item
    return {"seed": max((ms_seed - ms_res) / i_n, 0.0), "item": max((ms_item - ms_res) / s_n, 0.0),
            "seed_x_item": max(sxi, 0.0), "sample": s2_sample}


def score_variance_shares(comp: dict[str, float], n_seeds: int, n_items: int, k: int) -> dict[str, float]:
    """Shares (percent) of the variance of a score averaged over n_seeds x n_items x k samples."""
    terms = {"seed": comp["seed"] / n_seeds, "item": comp["item"] / n_items,
             "seed_x_item": comp["seed_x_item"] / (n_seeds * n_items),
             "sample": comp["sample"] / (n_seeds * n_items * k) if np.isfinite(comp["sample"]) else 0.0}
    total = sum(terms.values())
    out = {key: (100.0 * v / total if total > 0 else math.nan) for key, v in terms.items()}
    if not np.isfinite(comp["sample"]):
        out["sample"] = math.nan
    return out


def k_to_halve(share_pct: float, k: int) -> float:
    """Samples per item that halve a sample share of `share_pct` percent at k samples: k (2 - h) / (1 - h)."""
    h = share_pct / 100.0
    if not np.isfinite(h) or h <= 0:
        return math.nan
    if h >= 1:
        return math.inf
    return float(math.ceil(k * (2 - h) / (1 - h) - 1e-9))


def variance_split(items: pd.DataFrame, runs: pd.DataFrame, suite: Suite) -> pd.DataFrame:
    """SPLIT_COLUMNS per benchmark with sampled decoding (k > 1 in the item logs); items: analysis.items layer,
    runs: `run_table` (run_id -> configuration and seed). Empty when no item log holds samples."""
    sampled = items[items["n_samples"] > 1]
    if sampled.empty:
        return pd.DataFrame(columns=list(SPLIT_COLUMNS))
    cfg = runs.drop_duplicates("run_id").set_index("run_id")[list(CONFIG_KEYS) + ["seed"]]
    x = sampled.join(cfg, on="run_id", how="inner")
    rows = []
    for bid, xb in x.groupby("benchmark", sort=False):
        k = int(xb["n_samples"].max())
        comps, seeds, n_items = [], [], []
        for _, g in xb.groupby(list(CONFIG_KEYS), sort=True):
            y = g.pivot_table(index="seed", columns="item_id", values="sample_mean", aggfunc="first").dropna(axis=1)
            v = g.pivot_table(index="seed", columns="item_id", values="sample_var", aggfunc="first")
            if y.shape[0] < 2 or y.shape[1] < 2:
                continue
            comps.append(components(100.0 * y.to_numpy(), 1e4 * v[y.columns].to_numpy(), k))
            seeds.append(y.shape[0])
            n_items.append(y.shape[1])
        if not comps:
            continue
        mean = {key: float(np.mean([c[key] for c in comps])) for key in comps[0]}
        s_n, i_n = int(round(np.mean(seeds))), int(round(np.mean(n_items)))
        sh = score_variance_shares(mean, s_n, i_n, k)
        metric = suite.benchmark(str(bid)).metric_name if str(bid) in suite.benchmark_ids else ""
        rows.append({"benchmark": bid, "metric": metric, "samples": k, "configurations": len(comps),
                     "seeds": s_n, "items": i_n, "seed_pct": sh["seed"], "item_pct": sh["item"],
                     "seed_x_item_pct": sh["seed_x_item"], "sample_pct": sh["sample"],
                     "k_to_halve_sample_share": k_to_halve(sh["sample"], k)})
    return pd.DataFrame(rows, columns=list(SPLIT_COLUMNS))


def variance_split_html(items: pd.DataFrame | None, runs: pd.DataFrame, suite: Suite) -> str:
    """The report section (empty string when no benchmark was decoded by sampling)."""
    if items is None or "n_samples" not in items:
        return ""
    t = variance_split(items, runs, suite)
    if t.empty:
        return ""
    show = t.copy()
    for c in ("seed_pct", "item_pct", "seed_x_item_pct", "sample_pct"):
        show[c] = show[c].map(lambda v: f"{v:.1f}")
    show["k_to_halve_sample_share"] = show["k_to_halve_sample_share"].map(
        lambda v: "n/a" if not np.isfinite(v) else f"{int(v)}")
    return ('<h2 id="variance_split">Sampling noise: variance split per benchmark</h2><p class="note">Share of the '
            "variance of one configuration's benchmark score from seeds, items, seed x item and samples (nested "
            "method-of-moments decomposition, averaged over configurations; analysis/sampling_noise.py); the last "
            "column is the samples per item that would halve the sample share. Items are shared by all "
            "configurations, so the item share mostly cancels in paired differences.</p>"
            + show.to_html(index=False, escape=True)
            + '<p class="note">The seed + item CI of the paired tables includes the sample noise: item scores are '
            "k-sample means.</p>")
