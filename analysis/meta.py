"""Random-effects summary of one policy's paired effect across a campaign's groups (models/regimes).

Each group g (campaign/model/regime/step) gives an estimate y_g = mean paired difference and its
variance v_g = sd_used^2 / n (sd_used: the SD floored at half the score resolution, analysis.paired_stats).
DerSimonian-Laird (1986):

    w = 1/v, mu_FE = sum(w y)/sum(w), Q = sum(w (y - mu_FE)^2), C = sum(w) - sum(w^2)/sum(w),
    tau^2 = max(0, (Q - (k-1)) / C), w* = 1/(v + tau^2), mu = sum(w* y)/sum(w*), se = 1/sqrt(sum(w*)),
    I^2 = max(0, (Q - (k-1)) / Q).

Two intervals: the DL z interval mu +- z se (what statsmodels `combine_effects` reports), and the
Hartung-Knapp-Sidik-Jonkman interval mu +- t_{k-1} sqrt(q / sum(w*)), q = sum(w* (y-mu)^2)/(k-1),
which does better with few groups. With 3-12 seeds per group the within-group variances are
themselves estimated on 2-11 df and both still undercover (benchmarks/interval_coverage.py, k = 4:
DL z 0.82-0.87, HKSJ 0.88-0.92). The interval the table labels 95% is therefore the t interval of
the unweighted group estimates, mean(y) +- t_{k-1} sd(y)/sqrt(k): each y_g ~ N(mu, tau^2 + s_g^2/n)
and it measured 0.95-0.97 there. The DL estimate, tau^2, I^2 and Q describe heterogeneity; the DL
z interval is shown beside it labelled "nominal 95%, undercovers".
"""

from __future__ import annotations

import numpy as np
import pandas as pd
from scipy import stats

from analysis.schema import GROUP_KEYS


def dersimonian_laird(y: np.ndarray, v: np.ndarray, level: float = 0.95) -> dict[str, np.ndarray]:
    """y, v: (..., k) estimates and their variances (last axis = groups) -> dict of (...,) arrays:
    mu, se, lo, hi (DL z), lo_hksj, hi_hksj, tau2, i2, q, p_q, k. Vectorised over leading axes."""
    y = np.asarray(y, dtype=float)
    v = np.asarray(v, dtype=float)
    k = y.shape[-1]
    w = 1.0 / v
    sw = w.sum(axis=-1)
    mu_fe = (w * y).sum(axis=-1) / sw
    q = (w * (y - mu_fe[..., None]) ** 2).sum(axis=-1)
    c = sw - (w * w).sum(axis=-1) / sw
    tau2 = np.maximum(0.0, (q - (k - 1)) / c)
    ws = 1.0 / (v + tau2[..., None])
    sws = ws.sum(axis=-1)
    mu = (ws * y).sum(axis=-1) / sws
    se = 1.0 / np.sqrt(sws)
    z = stats.norm.ppf(0.5 + level / 2)
    with np.errstate(divide="ignore", invalid="ignore"):
        i2 = np.where(q > 0, np.maximum(0.0, (q - (k - 1)) / q), 0.0)
        qh = (ws * (y - mu[..., None]) ** 2).sum(axis=-1) / (k - 1)
        se_h = np.sqrt(qh / sws)
    t = stats.t.ppf(0.5 + level / 2, k - 1) if k > 1 else np.nan
    ybar = y.mean(axis=-1)
    se_u = y.std(axis=-1, ddof=1) / np.sqrt(k) if k > 1 else np.full_like(ybar, np.nan)
    return {"mu": mu, "se": se, "lo": mu - z * se, "hi": mu + z * se, "lo_hksj": mu - t * se_h,
            "hi_hksj": mu + t * se_h, "mean_u": ybar, "lo_u": ybar - t * se_u, "hi_u": ybar + t * se_u, "tau2": tau2,
            "i2": i2, "q": q,
            "p_q": stats.chi2.sf(q, k - 1) if k > 1 else np.full_like(q, np.nan)}


RE_COLUMNS = ["policy", "reference", "metric", "k_groups", "groups", "mu", "lo_dl", "hi_dl", "se_dl",
              "mean_groups", "lo_t", "hi_t", "tau2", "i2", "q", "p_q"]


def random_effects_table(paired: pd.DataFrame, metric: str) -> pd.DataFrame:
    """One row per (policy, reference) with effect rows of `metric` in >= 2 groups: the DL summary.

    paired: `paired_comparisons(...).table`. Rows with a NaN estimate or variance are left out.
    """
    d = paired[(paired["metric"] == metric) & (paired["kind"] == "effect")].copy()
    d["v"] = d["sd_used"].astype(float) ** 2 / d["n"].astype(float)
    d = d[np.isfinite(d["mean_diff"].astype(float)) & np.isfinite(d["v"]) & (d["v"] > 0)]
    rows = []
    for (pol, ref), g in d.groupby(["policy", "reference"], sort=True):
        if len(g) < 2:
            continue
        r = dersimonian_laird(g["mean_diff"].to_numpy(float), g["v"].to_numpy(float))
        groups = "; ".join("/".join(str(x[k]) for k in GROUP_KEYS if str(x[k]) not in ("", "nan"))
                           for _, x in g.iterrows())
        rows.append({"policy": pol, "reference": ref, "metric": metric, "k_groups": len(g), "groups": groups,
                     "mu": float(r["mu"]), "lo_dl": float(r["lo"]), "hi_dl": float(r["hi"]), "se_dl": float(r["se"]),
                     "mean_groups": float(r["mean_u"]), "lo_t": float(r["lo_u"]), "hi_t": float(r["hi_u"]),
                     "tau2": float(r["tau2"]), "i2": float(r["i2"]), "q": float(r["q"]), "p_q": float(r["p_q"])})
    return pd.DataFrame(rows, columns=RE_COLUMNS)
