"""How much a conclusion depends on the aggregate, on single benchmarks, and on the seeds drawn.

Rankings are of configurations (rows of `config_means`, one per campaign/model/regime/step/policy),
best first. Correlations are scipy's Spearman rho and Kendall tau-b over configurations with a
value under both rankings (NaN with fewer than 3).
"""

from __future__ import annotations

import numpy as np
import pandas as pd
from scipy import stats

from analysis.aggregates import aggregate_weights, weighted_scores
from analysis.schema import CONFIG_KEYS, GROUP_KEYS
from evaluation.suite import Suite


def corr_many(ref: np.ndarray, others: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """ref: (C,), others: (C, k) -> Spearman (k,), Kendall tau-b (k,), n (k,) in one vectorised pass.

    Configurations missing under either ranking are dropped per column (Spearman = Pearson on
    average ranks, as scipy; tau-b from pairwise signs). NaN with fewer than 3 configurations.
    """
    others = np.asarray(others, dtype=float).reshape(len(ref), -1)
    k = others.shape[1]
    rho, tau, n = np.full(k, np.nan), np.full(k, np.nan), np.zeros(k, dtype=int)
    ok = ~np.isnan(others) & ~np.isnan(ref)[:, None]
    patterns, inverse = np.unique(ok.T, axis=0, return_inverse=True)
    for p_i, rows in enumerate(patterns):
        cols = np.flatnonzero(inverse.reshape(-1) == p_i)
        n[cols] = rows.sum()
        if rows.sum() < 3:
            continue
        a = ref[rows]
        b = others[np.ix_(rows, cols)]
        ra = stats.rankdata(a)
        rb = stats.rankdata(b, axis=0)
        ra_c = ra - ra.mean()
        rb_c = rb - rb.mean(axis=0)
        with np.errstate(invalid="ignore", divide="ignore"):
            rho[cols] = (ra_c @ rb_c) / np.sqrt((ra_c @ ra_c) * (rb_c * rb_c).sum(axis=0))
            tau[cols] = kendall_tau_rows(b.T, a)
    return rho, tau, n


def rank_correlations(config_means: pd.DataFrame) -> pd.DataFrame:
    """config_means: (configs, aggregates) -> one row per aggregate pair: a, b, spearman, kendall, n_configs."""
    rows = []
    names = list(config_means.columns)
    x = config_means.to_numpy(float)
    for i, a in enumerate(names[:-1]):
        rho, tau, n = corr_many(x[:, i], x[:, i + 1:])
        rows += [{"aggregate_a": a, "aggregate_b": b, "spearman": rho[k], "kendall": tau[k], "n_configs": int(n[k])}
                 for k, b in enumerate(names[i + 1:])]
    return pd.DataFrame(rows, columns=["aggregate_a", "aggregate_b", "spearman", "kendall", "n_configs"])


def _config_means(values: np.ndarray, runs: pd.DataFrame) -> np.ndarray:
    """values: (runs, k) -> (configs, k) seed means; NaN if any seed is NaN (never averaged around)."""
    codes, _ = pd.factorize(pd.MultiIndex.from_frame(runs[list(CONFIG_KEYS)]))
    df = pd.DataFrame(values)
    g = df.groupby(codes, sort=True)
    return g.mean().mask(df.isna().groupby(codes, sort=True).any()).to_numpy(float)


def leave_one_benchmark_out(runs: pd.DataFrame, suite: Suite, aggregates: list[str] | None = None) -> pd.DataFrame:
    """Rank correlation of each aggregate's configuration ranking without benchmark b vs with all.

    runs: `run_table` output. One matrix product computes every (aggregate, left-out benchmark).
    Returns rows: aggregate, benchmark, spearman, kendall, n_configs.
    """
    x = runs[suite.benchmark_ids].to_numpy(float)
    pairs: list[tuple[str, str | None]] = []  # (aggregate, benchmark left out or None)
    cols: list[np.ndarray] = []
    for name in aggregates or suite.aggregate_names:
        agg = suite.aggregate(name)
        cols.append(aggregate_weights(agg, suite))
        pairs.append((name, None))
        for b in agg.benchmarks:
            if len(agg.benchmarks) > 1:
                cols.append(aggregate_weights(agg, suite, drop=b))
                pairs.append((name, b))
    means = _config_means(weighted_scores(x, np.column_stack(cols)), runs)
    rows = []
    for name in aggregates or suite.aggregate_names:
        full = means[:, pairs.index((name, None))]
        idx = [i for i, (a, b) in enumerate(pairs) if a == name and b is not None]
        rho, tau, n = corr_many(full, means[:, idx])
        rows += [{"aggregate": name, "benchmark": pairs[i][1], "spearman": rho[k], "kendall": tau[k],
                  "n_configs": int(n[k])} for k, i in enumerate(idx)]
    return pd.DataFrame(rows, columns=["aggregate", "benchmark", "spearman", "kendall", "n_configs"])


def _ranks(v: np.ndarray) -> np.ndarray:
    """v: (B, C) -> ranks (B, C), 1 = highest value (ties broken by position)."""
    order = np.argsort(-v, axis=1, kind="stable")
    ranks = np.empty_like(order)
    np.put_along_axis(ranks, order, np.arange(1, v.shape[1] + 1)[None, :].repeat(v.shape[0], 0), axis=1)
    return ranks


def kendall_tau_rows(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """a: (B, C), b: (C,) -> Kendall tau-b of each row of a with b, vectorised over all C*(C-1)/2 pairs."""
    i, j = np.triu_indices(a.shape[1], 1)
    sa = np.sign(a[:, i] - a[:, j])
    sb = np.sign(b[i] - b[j])[None, :]
    num = (sa * sb).sum(axis=1)
    den = np.sqrt((sa != 0).sum(axis=1) * float((sb != 0).sum()))
    with np.errstate(invalid="ignore", divide="ignore"):
        return num / den


def seed_rank_stability(runs: pd.DataFrame, aggregate: str, *, n_resamples: int = 2000, seed: int = 0
                        ) -> tuple[pd.DataFrame, float]:
    """Bootstrap the seeds of every configuration and re-rank.

    runs: `run_table` rows of the configurations to rank (configs with a NaN run are left out).
    Returns (per-config frame: CONFIG_KEYS, n_seeds, mean, rank, mean_rank, rank_lo, rank_hi (90%),
    p_top1; mean Kendall tau-b between resampled and full rankings).
    """
    rng = np.random.default_rng(seed)
    groups = runs.groupby(list(CONFIG_KEYS), sort=True)[aggregate]
    keys, boot, full, nseeds = [], [], [], []
    for key, v in groups:
        vals = v.to_numpy(float)
        if np.isnan(vals).any() or len(vals) == 0:
            continue
        counts = rng.multinomial(len(vals), np.full(len(vals), 1 / len(vals)), size=n_resamples)
        boot.append(counts @ vals / len(vals))
        full.append(vals.mean())
        keys.append(key)
        nseeds.append(len(vals))
    out_cols = list(CONFIG_KEYS) + ["n_seeds", "mean", "rank", "mean_rank", "rank_lo", "rank_hi", "p_top1"]
    if not keys:
        return pd.DataFrame(columns=out_cols), float("nan")
    b = np.column_stack(boot)  # (B, C)
    f = np.asarray(full)
    ranks = _ranks(b)
    out = pd.DataFrame(keys, columns=list(CONFIG_KEYS))
    out["n_seeds"] = nseeds
    out["mean"] = f
    out["rank"] = _ranks(f[None, :])[0]
    out["mean_rank"] = ranks.mean(axis=0)
    out["rank_lo"], out["rank_hi"] = np.quantile(ranks, [0.05, 0.95], axis=0)
    out["p_top1"] = (ranks == 1).mean(axis=0)
    tau = float(np.nanmean(kendall_tau_rows(b, f))) if len(keys) > 1 else float("nan")
    return out.sort_values("rank").reset_index(drop=True)[out_cols], tau


def sensitivity_report(runs: pd.DataFrame, suite: Suite, *, stability_aggregate: str | None = None,
                       n_resamples: int = 2000, seed: int = 0) -> dict:
    """Everything `campaign sensitivity` prints, as plain JSON-ready data.

    One entry per (campaign, model, regime, step) group with >= 2 configurations, plus a pooled
    entry over all configurations in `runs` (scope "all").
    """
    aggs = suite.aggregate_names
    stab = stability_aggregate or aggs[0]

    def one(part: pd.DataFrame, scope: dict) -> dict:
        means = pd.DataFrame(_config_means(part[aggs].to_numpy(float), part), columns=aggs)
        table, tau = seed_rank_stability(part, stab, n_resamples=n_resamples, seed=seed)
        return {
            **scope,
            "n_configs": int(len(means)),
            "aggregate_correlations": _records(rank_correlations(means)),
            "leave_one_out": _records(leave_one_benchmark_out(part, suite)),
            "seed_stability": {"aggregate": stab, "n_resamples": n_resamples, "mean_kendall_tau": _num(tau),
                               "configs": _records(table)},
        }

    groups = []
    for key, part in runs.groupby(list(GROUP_KEYS), sort=True):
        if part["policy"].nunique() >= 2:
            groups.append(one(part, {"scope": "group", **{k: _num(v) for k, v in zip(GROUP_KEYS, key, strict=True)}}))
    return {"suite": suite.name, "aggregates": aggs, "groups": groups,
            "pooled": one(runs, {"scope": "all"})}


def _num(v):
    if isinstance(v, (np.integer,)):
        return int(v)
    if isinstance(v, (float, np.floating)):
        return None if np.isnan(v) else float(v)
    return v


def _records(df: pd.DataFrame) -> list[dict]:
    return [{k: _num(v) for k, v in row.items()} for row in df.to_dict(orient="records")]
