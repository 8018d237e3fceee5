"""The numbers the report's figures draw (issue 17): pure functions over the run and paired tables,
checked by the tests against the paired table, with no plotting.

`relative_scores` (each run's Δ vs its campaign-local reference), rliable's stratified-bootstrap
`aggregate_estimates` and `performance_profile`, `improvement_probabilities`, the A/A band
`aa_floor`, the per-step `training_frame` and the `within_group_correlations` of the heat map.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from scipy import stats

from analysis.schema import GROUP_KEYS


def aa_floor(paired: pd.DataFrame, metric: str) -> pd.Series:
    """Per campaign: the largest |Δ| of its A/A rows (static vs baseline, same model/regime/step).

    A method effect inside this band is no larger than what two arms with the same data produce.
    Campaigns without A/A rows are absent (missing is not zero)."""
    aa = paired[(paired["metric"] == metric) & (paired["kind"] == "aa_noise_floor")]
    return aa["mean_diff"].abs().groupby(aa["campaign"], sort=False).max().dropna()


def relative_scores(runs: pd.DataFrame, paired: pd.DataFrame, metric: str) -> pd.DataFrame:
    """Per run: its score minus the seed-mean of its campaign-local reference in the same group.

    Methods use the reference of their paired rows; a reference's own runs are centred on their own
    mean (its seed noise). Columns: GROUP_KEYS, policy, seed, group (label), delta. Vectorised joins."""
    keys = list(GROUP_KEYS)
    eff = paired[(paired["kind"] == "effect") & (paired["metric"] == metric)][keys + ["policy", "reference"]]
    eff = eff.drop_duplicates()
    means = runs.groupby(keys + ["policy"], sort=False)[metric].mean().rename("ref_mean").reset_index()
    m = runs[keys + ["policy", "seed", metric]].merge(eff, on=keys + ["policy"])
    m = m.merge(means.rename(columns={"policy": "reference"}), on=keys + ["reference"])
    refs = set(eff["reference"])
    r = runs[runs["policy"].isin(refs)][keys + ["policy", "seed", metric]]
    r = r.merge(means, on=keys + ["policy"])
    out = pd.concat([m.drop(columns="reference"), r], ignore_index=True)
    out["delta"] = out[metric] - out["ref_mean"]
    out = out[out["delta"].notna()]
    # str.cat, not agg("/".join, axis=1): an empty frame (no comparison) still gets a string column
    out["group"] = out[keys[0]].astype(str).str.cat(out[keys[1:]].astype(str), sep="/")
    return out[keys + ["policy", "seed", "group", "delta"]].reset_index(drop=True)


def _stratified_indices(strata: np.ndarray, n_resamples: int, rng: np.random.Generator) -> np.ndarray:
    """(B, N) indices that resample runs with replacement within each stratum (rliable's stratified
    bootstrap), without a loop over strata."""
    order = np.argsort(strata, kind="stable")
    s_sorted = strata[order]
    _, start, count = np.unique(s_sorted, return_index=True, return_counts=True)
    inv = np.searchsorted(s_sorted[start], s_sorted)
    u = rng.random((n_resamples, len(strata)))
    pos = start[inv] + np.floor(u * count[inv]).astype(int)
    out = np.empty_like(pos)
    out[:, order] = order[pos]  # column i resamples within the stratum of run i
    return out


def _iqm(x: np.ndarray, axis: int = -1) -> np.ndarray:
    return stats.trim_mean(x, 0.25, axis=axis)


def aggregate_estimates(rel: pd.DataFrame, *, n_resamples: int = 2000, seed: int = 0,
                        level: float = 0.95) -> pd.DataFrame:
    """Per policy: mean and IQM of `delta` over its runs with stratified-bootstrap CIs (strata = groups)."""
    rows = []
    a = (1 - level) / 2
    for pol, g in rel.groupby("policy", sort=True):
        v = g["delta"].to_numpy(float)
        idx = _stratified_indices(g["group"].to_numpy(str), n_resamples, np.random.default_rng([seed, len(v)]))
        boot = v[idx]
        for est, fn in (("mean", np.mean), ("IQM", _iqm)):
            b = fn(boot, axis=1)
            rows.append({"policy": pol, "estimator": est, "value": float(fn(v)), "lo": float(np.quantile(b, a)),
                         "hi": float(np.quantile(b, 1 - a)), "n_runs": len(v), "n_groups": g["group"].nunique()})
    return pd.DataFrame(rows)


def performance_profile(rel: pd.DataFrame, taus: np.ndarray, *, n_resamples: int = 2000, seed: int = 0,
                        level: float = 0.95) -> pd.DataFrame:
    """Per policy and tau: fraction of runs with delta > tau, with a stratified-bootstrap band."""
    rows = []
    a = (1 - level) / 2
    for pol, g in rel.groupby("policy", sort=True):
        v = g["delta"].to_numpy(float)
        idx = _stratified_indices(g["group"].to_numpy(str), n_resamples, np.random.default_rng([seed, len(v), 1]))
        frac = (v[:, None] > taus[None, :]).mean(axis=0)
        bfrac = (v[idx][:, :, None] > taus[None, None, :]).mean(axis=1)
        rows.append(pd.DataFrame({"policy": pol, "tau": taus, "fraction": frac,
                                  "lo": np.quantile(bfrac, a, axis=0), "hi": np.quantile(bfrac, 1 - a, axis=0)}))
    if not rows:
        return pd.DataFrame(columns=["policy", "tau", "fraction", "lo", "hi"])
    return pd.concat(rows, ignore_index=True)


def improvement_probabilities(runs: pd.DataFrame, paired: pd.DataFrame, metric: str, *, n_resamples: int = 2000,
                              seed: int = 0, level: float = 0.95) -> pd.DataFrame:
    """Per effect comparison: P(improve) = share of paired seeds with d > 0 (ties 1/2; equals the paired
    table's p_improve_seeds) and its percentile interval from resampling the seed pairs."""
    keys = list(GROUP_KEYS)
    eff = paired[(paired["kind"] == "effect") & (paired["metric"] == metric) & paired["mean_diff"].notna()]
    eff = eff[keys + ["policy", "reference", "p_improve_seeds", "p_improve_posterior",
                      "mean_diff"]].reset_index(drop=True)
    if eff.empty:
        return eff.assign(p_improve=[], lo=[], hi=[], n=[])
    eff["cmp"] = np.arange(len(eff))
    base = runs[keys + ["policy", "seed", metric]]
    m = base.merge(eff[keys + ["policy", "reference", "cmp"]], on=keys + ["policy"])
    r = base.rename(columns={"policy": "reference", metric: "ref_value"})
    pairs = m.merge(r, on=keys + ["reference", "seed"])
    d = (pairs[metric] - pairs["ref_value"]).to_numpy(float)
    ok = ~np.isnan(d)
    pairs, d = pairs[ok], d[ok]
    win = np.where(d > 0, 1.0, np.where(d == 0, 0.5, 0.0))
    strata = pairs["cmp"].to_numpy()
    idx = _stratified_indices(strata.astype(str), n_resamples, np.random.default_rng(seed))
    a = (1 - level) / 2
    # per resample and comparison: mean of the resampled wins (columns keep their stratum)
    boot_w = win[idx]
    out = eff.copy()
    out["p_improve"] = pd.Series(win).groupby(strata).mean().reindex(out["cmp"]).to_numpy()
    out["n"] = pd.Series(win).groupby(strata).size().reindex(out["cmp"]).to_numpy()
    codes = pd.Categorical(strata, categories=out["cmp"]).codes
    sums = np.zeros((boot_w.shape[0], len(out)))
    for_cols = np.arange(len(out))[codes]
    np.add.at(sums.T, for_cols, boot_w.T)  # columns of the same comparison summed
    means = sums / out["n"].to_numpy(float)[None, :]
    out["lo"] = np.quantile(means, a, axis=0)
    out["hi"] = np.quantile(means, 1 - a, axis=0)
    return out.drop(columns="cmp")


_REWARD_KEYS = ("reward/mean", "critic/score/mean", "reward_mean", "reward", "score/mean")


def training_frame(runs: Sequence[Mapping[str, Any]]) -> pd.DataFrame:
    """Per run and step: reward, kept_frac, weight_std and realised_prop_<domain> from each run's
    metrics.jsonl (runs as `analysis.intervention.runs_from_dir` lists them); runs without a file are skipped."""
    from analysis.intervention import read_metrics

    frames = []
    for r in runs:
        mp = r.get("metrics_path")
        if not mp or not Path(mp).is_file():
            continue
        m = read_metrics(mp)
        out = pd.DataFrame({"step": m["step"]})
        rk = next((k for k in _REWARD_KEYS if k in m.columns and m[k].notna().any()), None)
        out["reward"] = m[rk] if rk else np.nan
        for c in ("kept_frac", "weight_std"):
            out[c] = m[c] if c in m.columns else np.nan
        for c in m.columns:
            if c.startswith("realised_prop_"):
                out[c] = m[c]
        for k in ("campaign", "model", "regime", "policy", "seed"):
            out[k] = r.get(k, "")
        frames.append(out)
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()


def within_group_correlations(sens: pd.DataFrame) -> pd.DataFrame:
    """Median within-group Spearman per aggregate pair from the aggregation_sensitivity table data
    (rows whose scope is not pooled), with the number of groups."""
    g = sens[~sens["scope"].astype(str).str.startswith("pooled")].dropna(subset=["spearman"])
    if g.empty:
        return pd.DataFrame(columns=["aggregate_a", "aggregate_b", "median_spearman", "n_groups"])
    return (g.groupby(["aggregate_a", "aggregate_b"], sort=False)["spearman"]
            .agg(median_spearman="median", n_groups="size").reset_index())
