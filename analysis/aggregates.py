"""Per-run aggregates (from the Suite's declared aggregates), then per-configuration seed statistics.

Aggregates are computed per run first, then averaged over seeds (STUDY.md §6.1). An aggregate
that needs a missing benchmark is NaN and is reported, never averaged around (STUDY.md L11).
All arithmetic is one matrix product over the (runs x benchmarks) score matrix.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from analysis.schema import CONFIG_KEYS, RUN_KEYS
from evaluation.suite import Aggregate, Suite

SD_LABEL = "sample SD (n-1)"


def score_matrix(records: pd.DataFrame, suite: Suite) -> pd.DataFrame:
    """Runs x benchmarks accuracy matrix. Index: RUN_KEYS; columns: suite benchmark ids; missing = NaN."""
    m = records.set_index(list(RUN_KEYS) + ["benchmark"])["accuracy"].unstack("benchmark")
    m = m.reindex(columns=suite.benchmark_ids)
    m.columns.name = None
    return m.sort_index()


def aggregate_weights(aggregate: Aggregate, suite: Suite, drop: str | None = None) -> np.ndarray:
    """Weights (n_benchmarks,) over suite.benchmark_ids that sum to 1; zero outside the aggregate.

    `drop` removes one benchmark first (leave-one-benchmark-out); a domain left empty drops out
    of a domain_mean.
    """
    ids = suite.benchmark_ids
    members = [b for b in aggregate.benchmarks if b != drop]
    w = np.zeros(len(ids))
    if not members:
        return w * np.nan
    idx = np.array([ids.index(b) for b in members])
    if aggregate.kind == "mean":
        w[idx] = 1.0 / len(members)
    elif aggregate.kind == "item_weighted":
        n = np.array([suite.item_counts()[b] for b in members], dtype=float)
        w[idx] = n / n.sum()
    else:  # domain_mean
        dom = suite.domain_of()
        domains = sorted({dom[b] for b in members})
        for b, i in zip(members, idx, strict=True):
            size = sum(1 for m in members if dom[m] == dom[b])
            w[i] = 1.0 / (len(domains) * size)
    return w


def weighted_scores(x: np.ndarray, w: np.ndarray) -> np.ndarray:
    """x: (runs, benchmarks) with NaN = missing; w: (benchmarks, k) -> (runs, k).

    NaN wherever a benchmark with non-zero weight is missing; benchmarks outside an aggregate
    never poison it.
    """
    missing = np.isnan(x)
    out = np.nan_to_num(x) @ w
    out[(missing.astype(float) @ (w != 0).astype(float)) > 0] = np.nan
    return out


def run_aggregates(scores: pd.DataFrame, suite: Suite, names: list[str] | None = None) -> pd.DataFrame:
    """Per-run aggregates. scores: output of score_matrix -> same index, one column per aggregate."""
    aggs = [suite.aggregate(n) for n in (names or suite.aggregate_names)]
    w = np.column_stack([aggregate_weights(a, suite) for a in aggs])
    return pd.DataFrame(weighted_scores(scores.to_numpy(dtype=float), w), index=scores.index,
                        columns=[a.name for a in aggs])


def domain_scores(scores: pd.DataFrame, suite: Suite) -> pd.DataFrame:
    """Per-run domain means (NaN if any benchmark of the domain is missing); columns = suite.domains."""
    ids = suite.benchmark_ids
    dom = suite.domain_of()
    w = np.zeros((len(ids), len(suite.domains)))
    for j, d in enumerate(suite.domains):
        members = [i for i, b in enumerate(ids) if dom[b] == d]
        w[members, j] = 1.0 / len(members)
    return pd.DataFrame(weighted_scores(scores.to_numpy(dtype=float), w), index=scores.index,
                        columns=list(suite.domains))


def missing_report(scores: pd.DataFrame, suite: Suite) -> pd.DataFrame:
    """One row per missing (run, benchmark): run_id, step, benchmark, and the aggregates it makes NaN."""
    long = scores.isna().stack()
    long = long[long]
    if long.empty:
        return pd.DataFrame(columns=["run_id", "campaign", "model", "policy", "seed", "step", "benchmark",
                                     "aggregates_nan"])
    idx = long.index.to_frame(index=False)
    idx.columns = list(RUN_KEYS) + ["benchmark"]
    member_of = {b: [a.name for a in suite.aggregates if b in a.benchmarks] for b in suite.benchmark_ids}
    idx["aggregates_nan"] = idx["benchmark"].map(lambda b: ", ".join(member_of[b]))
    return idx[["run_id", "campaign", "model", "policy", "seed", "step", "benchmark", "aggregates_nan"]]


def run_table(records: pd.DataFrame, suite: Suite) -> pd.DataFrame:
    """Flat per-run frame: RUN_KEYS columns + benchmarks + domains + aggregates (one row per run x step)."""
    s = score_matrix(records, suite)
    return pd.concat([s, domain_scores(s, suite), run_aggregates(s, suite)], axis=1).reset_index()


def config_summary(runs: pd.DataFrame, metrics: list[str]) -> pd.DataFrame:
    """Per-configuration mean, sample SD (n-1) and seed count of each metric.

    runs: run_table output. Returns index CONFIG_KEYS, columns MultiIndex (metric, mean|sd|n).
    n counts seeds with a non-missing value; a configuration's mean is NaN if any seed is NaN
    (so a missing run is visible, not averaged around).
    """
    keys = runs[list(CONFIG_KEYS)]
    codes = keys.groupby(list(CONFIG_KEYS), sort=False, dropna=False).ngroup().to_numpy()
    first = np.unique(codes, return_index=True)[1]
    x = pd.DataFrame(runs[metrics].to_numpy(float), columns=metrics)
    g = x.groupby(codes, sort=True)
    anynan = x.isna().groupby(codes, sort=True).any()
    mean = g.mean().mask(anynan)
    sd = g.std(ddof=1).mask(anynan)
    n = g.count()
    out = pd.concat({"mean": mean, "sd": sd, "n": n}, axis=1).swaplevel(0, 1, axis=1)
    out = out[[(m, s) for m in metrics for s in ("mean", "sd", "n")]]
    out.index = pd.MultiIndex.from_frame(keys.iloc[first].reset_index(drop=True))
    return out


def domain_means_table(records: pd.DataFrame, suite: Suite) -> pd.DataFrame:
    """The domain trade-off table: per configuration, the seed mean of each domain mean."""
    runs = run_table(records, suite)
    summ = config_summary(runs, list(suite.domains))
    return summ.xs("mean", axis=1, level=1)
