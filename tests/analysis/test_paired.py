"""Paired statistics: one CI by hand from the released CSV, exact permutation, power, and properties."""

from __future__ import annotations

import csv
import itertools
import math
import statistics
import warnings

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats
from tests.holm_reference import multipletests
from statsmodels.stats.power import TTestPower
from statsmodels.stats.weightstats import ttost_paired

from analysis.comparisons import UnpairedWarning, paired_comparisons
from analysis.paired_stats import (
    adjust,
    bootstrap_interval,
    mde,
    percentile_is_range,
    range_coverage,
    sd_interval,
    seeds_needed,
    sign_flip_floor,
    sign_flip_pvalue,
    tost_pvalue,
)
from analysis.records import normalise_records, read_records
from evaluation.suite import load_suite
from tests.released import DOMAINS, RELEASED, needs_released

SUITE = load_suite("db12")


def db12(row: dict[str, str]) -> float:
    return sum(sum(float(row[b]) for b in bs) / len(bs) for bs in DOMAINS.values()) / 3


@needs_released
def test_paired_ci_by_hand_main_7b_difffilter_vs_baseline() -> None:
    with open(RELEASED, newline="") as f:
        rows = [r for r in csv.DictReader(f) if r["campaign"] == "main" and r["model"] == "Qwen2.5-7B-Instruct"]
    base = {int(r["seed"]): db12(r) for r in rows if r["method"] == "baseline"}
    meth = {int(r["seed"]): db12(r) for r in rows if r["method"] == "difffilter"}
    d = [meth[s] - base[s] for s in sorted(base)]
    n = len(d)
    mean = sum(d) / n
    sd = math.sqrt(sum((x - mean) ** 2 for x in d) / (n - 1))
    q = 0.975  # df = 2 has a closed-form t quantile: (2q-1)/sqrt(2q(1-q)); STUDY.md §6.2 quotes 4.303
    t975 = (2 * q - 1) / math.sqrt(2 * q * (1 - q))
    assert round(t975, 3) == 4.303
    lo, hi = mean - t975 * sd / math.sqrt(n), mean + t975 * sd / math.sqrt(n)

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        res = paired_comparisons(read_records(RELEASED), SUITE, n_resamples=2000)
    row = res.table[(res.table["campaign"] == "main") & (res.table["model"] == "Qwen2.5-7B-Instruct")
                    & (res.table["policy"] == "difffilter") & (res.table["metric"] == "DB-12")].iloc[0]
    assert row["reference"] == "baseline" and row["n"] == 3 and row["seeds"] == "1,2,3"
    assert row["mean_diff"] == pytest.approx(mean, abs=1e-10)
    assert row["sd"] == pytest.approx(sd, abs=1e-10)
    assert (row["t_lo"], row["t_hi"]) == (pytest.approx(lo, abs=1e-9), pytest.approx(hi, abs=1e-9))
    # exact sign-flip p over the 8 sign patterns, by hand
    null = [abs(sum(s * x for s, x in zip(signs, d, strict=True))) / n
            for signs in itertools.product((1, -1), repeat=n)]
    assert row["p_perm"] == pytest.approx(sum(v >= abs(mean) - 1e-12 for v in null) / 8)
    assert row["p_improve_seeds"] == pytest.approx(sum(x > 0 for x in d) / n)


@needs_released
def test_static_vs_baseline_is_an_aa_row_outside_the_family() -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        t = paired_comparisons(read_records(RELEASED), SUITE, n_resamples=200).table
    aa = t[t["kind"] == "aa_noise_floor"]
    assert set(aa["policy"]) == {"static"} and set(aa["reference"]) == {"baseline"}
    assert set(aa["campaign"]) == {"mixer"} and set(aa["reference_campaign"]) == {"main"}
    assert aa["p_holm"].isna().all() and aa["p_bh"].isna().all()
    eff = t[t["kind"] == "effect"]
    mix = eff[eff["mechanism"] == "mix"]
    assert set(mix["reference"]) == {"static"}  # mixers are never compared with baseline
    assert set(eff.loc[eff["mechanism"].isin(["select", "reweight"]), "reference"]) == {"baseline"}
    assert (eff["p_holm"] >= eff["p_t"] - 1e-15).all() and (eff["p_bh"] >= eff["p_t"] - 1e-15).all()


def _synthetic(seeds: list[int], diffs: np.ndarray, base_level: np.ndarray) -> pd.DataFrame:
    """Records for baseline + topk at the given seed labels; topk = baseline + diffs[seed index]."""
    rows = []
    for i, s in enumerate(seeds):
        for pol, shift in (("baseline", 0.0), ("topk", diffs[i])):
            for j, b in enumerate(SUITE.benchmark_ids):
                rows.append({"run_id": f"{pol}_s{s}", "campaign": "c", "model": "m", "policy": pol, "seed": s,
                             "step": 5, "benchmark": b, "accuracy": float(base_level[i, j] + shift)})
    return normalise_records(pd.DataFrame(rows), SUITE)


@settings(max_examples=10, deadline=None, derandomize=True)
@given(st.integers(2, 8), st.floats(-5, 5, allow_nan=False), st.integers(0, 2**31 - 1))
def test_constant_paired_difference_never_gives_p_zero(n: int, c: float, seed: int) -> None:
    """A zero SD falls back to the exact sign-flip p and the SD floor resolution/2 (issue 12, item 3)."""
    rng = np.random.default_rng(seed)
    base = rng.uniform(20, 70, (n, 12))
    recs = _synthetic(list(range(1, n + 1)), np.full(n, c), base)
    t = paired_comparisons(recs, SUITE, n_resamples=500).table
    t = t[t["metric_type"] == "benchmark"]  # exact per-benchmark shift
    assert np.allclose(t["mean_diff"], c, atol=1e-9)
    assert t["sd_floored"].all() and (t["p_t"] > 0).all()
    want_p = 2 / 2 ** n if abs(c) > 1e-9 else 1.0
    assert np.allclose(t["p_t"], want_p) and np.allclose(t["p_perm"], want_p)
    res = np.array([100 / SUITE.item_counts()[b] for b in t["metric"]])
    assert np.allclose(t["resolution"], res)
    half = stats.t.ppf(0.975, n - 1) * (res / 2) / math.sqrt(n)
    assert np.allclose(t["t_hi"] - t["t_lo"], 2 * half)
    assert np.allclose(t["boot_hi"] - t["boot_lo"], 0, atol=1e-9)  # range (n <= 5) / bootstrap of a constant
    d = np.full((n, 3), c)
    blo, bhi = bootstrap_interval(d, np.random.default_rng(0), 1000)
    assert np.array_equal(blo, bhi)


def test_n3_percentile_bootstrap_is_the_seed_range_with_exact_coverage_075() -> None:
    """Issue 12 item 1: recompute the coverage of the n = 3 'bootstrap 95% CI' independently."""
    rng = np.random.default_rng(11)
    d = rng.normal(0, 1, (3, 400))
    lo, hi = bootstrap_interval(d, np.random.default_rng(1), 20_000)
    assert np.allclose(lo, d.min(axis=0)) and np.allclose(hi, d.max(axis=0))
    assert percentile_is_range(3) and not percentile_is_range(4)
    # exact: P(min <= 0 <= max) = 1 - P(all > 0) - P(all < 0) = 1 - 2 / 8, by enumeration of sign patterns
    patterns = list(itertools.product((0, 1), repeat=3))
    exact = sum(0 < sum(p) < 3 for p in patterns) / len(patterns)
    assert exact == 0.75 == pytest.approx(range_coverage(3))
    # and by fixed-seed simulation under normal and t3 noise
    for draw in (rng.normal(0, 1, (200_000, 3)), rng.standard_t(3, (200_000, 3))):
        cov = np.mean((draw.min(axis=1) <= 0) & (draw.max(axis=1) >= 0))
        assert cov == pytest.approx(0.75, abs=0.005)


@settings(max_examples=40, deadline=None, derandomize=True)
@given(st.integers(2, 10), st.integers(0, 2**31 - 1))
def test_sign_flip_p_never_below_its_floor(n: int, seed: int) -> None:
    d = np.random.default_rng(seed).normal(0.5, 1, (n, 5))
    p = sign_flip_pvalue(d, np.random.default_rng(0))
    assert (p >= sign_flip_floor(n) - 1e-15).all()
    one_sided = np.abs(d) + 0.1  # all positive, distinct: only the pattern and its mirror reach |mean|
    assert np.allclose(sign_flip_pvalue(one_sided, np.random.default_rng(0)), 2 / 2 ** n)


def test_mde_and_seeds_intervals_from_the_chi_square_ci_of_sigma() -> None:
    lo, hi = sd_interval(np.array([1.0]), 3)
    # by hand: chi2(2) quantiles have the closed form -2 ln(1 - q)
    assert lo[0] == pytest.approx(math.sqrt(2 / (-2 * math.log(0.025))), rel=1e-9)
    assert hi[0] == pytest.approx(math.sqrt(2 / (-2 * math.log(0.975))), rel=1e-9)
    assert (round(lo[0], 2), round(hi[0], 2)) == (0.52, 6.28)
    rng = np.random.default_rng(4)
    recs = _synthetic([1, 2, 3], rng.normal(0, 1, 3), rng.uniform(30, 60, (3, 12)))
    t = paired_comparisons(recs, SUITE, n_resamples=200).table
    for r in t.itertuples():
        s_lo, s_hi = sd_interval(np.array([r.sd_used]), 3)
        assert r.mde_lo == pytest.approx(mde(3, s_lo)[0]) and r.mde_hi == pytest.approx(mde(3, s_hi)[0])
        assert r.seeds_needed_lo == seeds_needed(1.0, s_lo)[0] and r.seeds_needed_hi == seeds_needed(1.0, s_hi)[0]
        assert r.seeds_needed_lo <= r.seeds_needed <= r.seeds_needed_hi


@settings(max_examples=8, deadline=None)
@given(st.integers(3, 7), st.integers(0, 2**31 - 1), st.randoms(use_true_random=False))
def test_relabelling_seeds_consistently_leaves_results_unchanged(n: int, seed: int, rnd) -> None:
    rng = np.random.default_rng(seed)
    base = rng.uniform(20, 70, (n, 12))
    diffs = rng.normal(0, 2, n)
    labels = list(range(1, n + 1))
    new = rnd.sample(range(100, 1000), n)  # same runs, different seed labels (and order)
    a = paired_comparisons(_synthetic(labels, diffs, base), SUITE, n_resamples=300, margin=1.0).table
    b = paired_comparisons(_synthetic(new, diffs, base), SUITE, n_resamples=300, margin=1.0).table
    cols = [c for c in a.columns if c != "seeds"]
    pd.testing.assert_frame_equal(a[cols], b[cols], check_exact=False, rtol=1e-12, atol=1e-12)


def _holm_by_hand(p: list[float]) -> list[float]:
    m = len(p)
    order = sorted(range(m), key=lambda i: p[i])
    out, running = [0.0] * m, 0.0
    for rank, i in enumerate(order):
        running = max(running, min(1.0, (m - rank) * p[i]))
        out[i] = running
    return out


@settings(max_examples=80, deadline=None)
@given(st.lists(st.floats(0, 1, allow_nan=False), min_size=1, max_size=12), st.integers(1, 3))
def test_holm_and_bh_are_at_least_raw_p(ps: list[float], families: int) -> None:
    p = np.array(ps)
    fam = np.arange(len(p)) % families
    holm, bh = adjust(p, "holm", fam), adjust(p, "fdr_bh", fam)
    assert (holm >= p - 1e-15).all() and (bh >= p - 1e-15).all() and (holm >= bh - 1e-12).all()
    for f in range(families):
        m = fam == f
        if m.any():
            assert np.allclose(holm[m], _holm_by_hand(p[m].tolist()))


def test_adjustments_match_statsmodels() -> None:
    p = np.array([0.01, 0.04, 0.03, 0.5, np.nan, 0.2, 0.001])
    fam = np.array([0, 0, 0, 1, 1, 1, 0])
    for method in ("holm", "fdr_bh"):
        got = adjust(p, method, fam)
        assert np.allclose(got[fam == 0], multipletests(p[fam == 0], method=method)[1])
        assert np.allclose(got[[3, 5]], multipletests(p[[3, 5]], method=method)[1])
        assert np.isnan(got[4])


def test_sign_flip_exact_and_monte_carlo() -> None:
    d = np.array([[1.0], [2.0], [-0.5], [3.0]])
    exact = sign_flip_pvalue(d, np.random.default_rng(0))[0]
    obs = abs(d.mean())
    want = np.mean([abs(np.dot(s, d[:, 0])) / 4 >= obs - 1e-12 for s in itertools.product((1, -1), repeat=4)])
    assert exact == want
    big = np.random.default_rng(1).normal(0.3, 1, (20, 1))  # 2^20 > 100k: Monte Carlo
    p = sign_flip_pvalue(big, np.random.default_rng(2), n_mc=20000)[0]
    assert 0 < p <= 1 and abs(p - stats.ttest_1samp(big[:, 0], 0).pvalue) < 0.1


def test_tost_matches_statsmodels() -> None:
    rng = np.random.default_rng(3)
    x, y = rng.normal(50, 1, 8), rng.normal(50.2, 1, 8)
    p = tost_pvalue((x - y)[:, None], 1.5)[0]
    assert p == pytest.approx(ttost_paired(x, y, -1.5, 1.5)[0], rel=1e-9)


def test_power_functions_match_statsmodels() -> None:
    sds = np.array([0.2, 0.7, 1.0, 2.5, 6.0])
    got = seeds_needed(1.0, sds)
    want = [max(2, math.ceil(TTestPower().solve_power(effect_size=1 / s, alpha=0.05, power=0.8) - 1e-9))
            for s in sds]
    assert got.tolist() == want
    m = mde(3, np.array([1.0, 2.0]))
    assert TTestPower().power(effect_size=m[0] / 1.0, nobs=3, alpha=0.05) == pytest.approx(0.8, abs=1e-6)
    assert m[1] == pytest.approx(2 * m[0])


def test_unpaired_runs_are_dropped_with_a_named_warning() -> None:
    rng = np.random.default_rng(0)
    recs = _synthetic([1, 2, 3], rng.normal(0, 1, 3), rng.uniform(30, 60, (3, 12)))
    recs = recs[~((recs["policy"] == "topk") & (recs["seed"] == 2))]
    with pytest.warns(UnpairedWarning, match="baseline_s2"):
        res = paired_comparisons(recs, SUITE, n_resamples=200)
    assert set(res.table["n"]) == {2} and set(res.table["seeds"]) == {"1,3"}
    assert any("baseline_s2" in m for m in res.dropped)


def test_reference_map_overrides_the_default_reference() -> None:
    rng = np.random.default_rng(5)
    recs = _synthetic([1, 2, 3], rng.normal(0, 1, 3), rng.uniform(30, 60, (3, 12)))
    extra = recs[recs["policy"] == "topk"].assign(policy="gfpo", mechanism="select",
                                                  run_id=lambda d: d["run_id"].str.replace("topk", "gfpo"),
                                                  run_key=lambda d: d["run_key"].str.replace("topk", "gfpo"))
    extra["accuracy"] += 1.0
    recs = pd.concat([recs, extra], ignore_index=True)
    t = paired_comparisons(recs, SUITE, reference_map={"gfpo": "topk"}, n_resamples=200).table
    g = t[(t["policy"] == "gfpo") & (t["metric_type"] == "benchmark")]
    assert set(g["reference"]) == {"topk"} and np.allclose(g["mean_diff"], 1.0)


def test_missing_metric_drops_seed_for_that_metric_only() -> None:
    rng = np.random.default_rng(7)
    recs = _synthetic([1, 2, 3, 4], rng.normal(0, 1, 4), rng.uniform(30, 60, (4, 12)))
    hole = (recs["policy"] == "topk") & (recs["seed"] == 3) & (recs["benchmark"] == "aime24")
    recs.loc[hole, "accuracy"] = np.nan
    with pytest.warns(UnpairedWarning, match="aime24"):
        t = paired_comparisons(recs, SUITE, n_resamples=200).table.set_index("metric")
    assert t.loc["aime24", "n"] == 3 and t.loc["aime24", "seeds"] == "1,2,4"
    assert t.loc["Math-Heavy-6", "n"] == 3 and t.loc["logic", "n"] == 4 and t.loc["kk_hard", "n"] == 4
    assert statistics.fmean([1, 2]) == 1.5  # keep statistics import meaningful for the by-hand test above
