"""Ranking sensitivity: correlations against scipy, leave-one-benchmark-out by hand, seed-bootstrap ranks."""

from __future__ import annotations

import warnings

import numpy as np
import pandas as pd
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats

from analysis.aggregates import run_table
from analysis.records import normalise_records
from analysis.sensitivity import (
    corr_many,
    kendall_tau_rows,
    leave_one_benchmark_out,
    rank_correlations,
    seed_rank_stability,
    sensitivity_report,
)
from evaluation.suite import load_suite

SUITE = load_suite("db12")
BENCH = SUITE.benchmark_ids


def _runs(levels: np.ndarray, noise: float = 0.0, n_seeds: int = 3, seed: int = 0) -> pd.DataFrame:
    """levels: (configs, 12) benchmark means; one policy per config in one campaign group."""
    rng = np.random.default_rng(seed)
    rows = []
    for c, lev in enumerate(levels):
        for s in range(1, n_seeds + 1):
            vals = np.clip(lev + rng.normal(0, noise, 12), 0, 100)
            rows += [{"run_id": f"p{c}_s{s}", "campaign": "c", "model": "m", "policy": f"p{c}", "mechanism": "select",
                      "seed": s, "step": 1,
                      "benchmark": b, "accuracy": float(v)} for b, v in zip(BENCH, vals, strict=True)]
    return run_table(normalise_records(pd.DataFrame(rows), SUITE), SUITE)


@settings(max_examples=40, deadline=None)
@given(st.lists(st.tuples(st.floats(0, 100), st.floats(0, 100)), min_size=3, max_size=15))
def test_corr_many_matches_scipy(pairs: list[tuple[float, float]]) -> None:
    a = np.array([p[0] for p in pairs])
    b = np.array([p[1] for p in pairs])
    rho, tau, n = corr_many(a, b[:, None])
    assert n[0] == len(pairs)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # scipy warns on constant input and returns NaN, as corr_many does
        want_rho = stats.spearmanr(a, b)[0]
        want_tau = stats.kendalltau(a, b)[0]
    for got, want in ((rho[0], want_rho), (tau[0], want_tau)):
        assert (np.isnan(got) and np.isnan(want)) or abs(got - want) < 1e-9


def test_kendall_rows_vectorised_equals_scipy() -> None:
    rng = np.random.default_rng(1)
    a = rng.normal(size=(20, 7))
    b = rng.normal(size=7)
    got = kendall_tau_rows(a, b)
    assert np.allclose(got, [stats.kendalltau(r, b)[0] for r in a])


def test_rank_correlations_of_config_means() -> None:
    rng = np.random.default_rng(2)
    runs = _runs(rng.uniform(10, 90, (6, 12)), noise=2.0)
    means = runs.groupby("policy")[SUITE.aggregate_names].mean()
    rc = rank_correlations(means).set_index(["aggregate_a", "aggregate_b"])
    rho = stats.spearmanr(means["DB-12"], means["Math-Heavy-6"])[0]
    assert rc.loc[("DB-12", "Math-Heavy-6"), "spearman"] == np.float64(rho) or \
        abs(rc.loc[("DB-12", "Math-Heavy-6"), "spearman"] - rho) < 1e-12
    assert len(rc) == 6 and (rc["n_configs"] == 6).all()


def test_leave_one_benchmark_out_by_hand() -> None:
    rng = np.random.default_rng(3)
    runs = _runs(rng.uniform(10, 90, (7, 12)), noise=1.0)
    lobo = leave_one_benchmark_out(runs, SUITE).set_index(["aggregate", "benchmark"])
    by_cfg = runs.groupby("policy")[BENCH].mean()
    full = by_cfg.mean(axis=1)  # Macro-12
    without = by_cfg.drop(columns="gsm8k").mean(axis=1)
    want = stats.spearmanr(full, without)[0]
    assert abs(lobo.loc[("Macro-12", "gsm8k"), "spearman"] - want) < 1e-12
    # DB-12 without kk_hard: logic mean over the other three, domains still weigh 1/3 each
    dom = {d: [b for b in BENCH if SUITE.domain_of()[b] == d and b != "kk_hard"] for d in SUITE.domains}
    db_without = sum(by_cfg[bs].mean(axis=1) for bs in dom.values()) / 3
    db_full = runs.groupby("policy")["DB-12"].mean()
    want = stats.kendalltau(db_full, db_without)[0]
    assert abs(lobo.loc[("DB-12", "kk_hard"), "kendall"] - want) < 1e-12
    assert len(lobo) == 12 + 12 + 12 + 6


def test_seed_stability_separated_and_tied_configs() -> None:
    levels = np.array([np.full(12, 20.0), np.full(12, 50.0), np.full(12, 80.0)])
    runs = _runs(levels, noise=0.5, n_seeds=4)
    table, tau = seed_rank_stability(runs, "DB-12", n_resamples=500)
    assert table["policy"].tolist() == ["p2", "p1", "p0"]
    assert table["p_top1"].tolist() == [1.0, 0.0, 0.0] and tau == 1.0
    close = _runs(np.array([np.full(12, 50.0), np.full(12, 50.2)]), noise=3.0, n_seeds=5, seed=4)
    t2, tau2 = seed_rank_stability(close, "DB-12", n_resamples=2000)
    assert abs(t2["p_top1"].sum() - 1.0) < 1e-12
    assert 0.0 < t2["p_top1"].min() and tau2 < 1.0


def test_report_is_json_ready_and_has_stable_keys() -> None:
    import json

    runs = _runs(np.random.default_rng(5).uniform(10, 90, (4, 12)), noise=1.0)
    rep = sensitivity_report(runs, SUITE, n_resamples=200)
    json.dumps(rep, allow_nan=False)
    assert set(rep) == {"suite", "aggregates", "groups", "pooled"}
    assert set(rep["pooled"]) == {"scope", "n_configs", "aggregate_correlations", "leave_one_out", "seed_stability"}
    assert rep["groups"][0]["campaign"] == "c" and rep["groups"][0]["n_configs"] == 4
