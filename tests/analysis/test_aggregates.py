"""Per-run aggregates: by-hand values from the released CSV, NaN propagation, identical-benchmark property."""

from __future__ import annotations

import csv
import math
import statistics

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from analysis.aggregates import config_summary, missing_report, run_aggregates, run_table, score_matrix
from analysis.records import normalise_records, read_records
from evaluation.suite import load_suite
from tests.released import RELEASED, needs_released

SUITE = load_suite("db12")
BENCH = SUITE.benchmark_ids
MATH = ["math500", "aime24", "olympiadbench", "minerva_math", "gsm8k"]
LOGIC = ["kk_hard", "bbh_logical_deduction", "bbh_tracking", "zebra_logic_mc"]
SCIENCE = ["gpqa_diamond", "mmlu_pro_chemistry", "mmlu_pro_physics"]
ITEMS = {"math500": 500, "aime24": 30, "olympiadbench": 675, "minerva_math": 272, "gsm8k": 1319, "kk_hard": 200,
         "bbh_logical_deduction": 750, "bbh_tracking": 750, "zebra_logic_mc": 500, "gpqa_diamond": 198,
         "mmlu_pro_chemistry": 500, "mmlu_pro_physics": 500}


def by_hand(row: dict[str, str]) -> dict[str, float]:
    """STUDY.md §6.1 definitions in plain Python."""
    v = {b: float(row[b]) for b in ITEMS}
    dom = [sum(v[b] for b in d) / len(d) for d in (MATH, LOGIC, SCIENCE)]
    return {
        "DB-12": sum(dom) / 3,
        "Macro-12": sum(v.values()) / 12,
        "Item-12": sum(v[b] * ITEMS[b] for b in ITEMS) / 6194,
        "Math-Heavy-6": sum(v[b] for b in MATH + ["gpqa_diamond"]) / 6,
    }


@needs_released
def test_aggregates_match_hand_arithmetic_for_released_runs() -> None:
    with open(RELEASED, newline="") as f:
        rows = list(csv.DictReader(f))
    runs = run_table(read_records(RELEASED), SUITE).set_index("run_id")
    for row in (rows[0], rows[57], rows[-1]):
        want = by_hand(row)
        for name, value in want.items():
            assert runs.loc[row["run_id"], name] == pytest.approx(value, rel=1e-12, abs=1e-12)


@needs_released
def test_config_summary_uses_sample_sd() -> None:
    with open(RELEASED, newline="") as f:
        rows = [r for r in csv.DictReader(f) if r["campaign"] == "main" and r["model"] == "Qwen2.5-7B-Instruct"
                and r["method"] == "baseline"]
    vals = [by_hand(r)["DB-12"] for r in rows]
    summ = config_summary(run_table(read_records(RELEASED), SUITE), ["DB-12"])
    got = summ.loc[("main", "Qwen2.5-7B-Instruct", "", 300, "baseline")]
    assert got[("DB-12", "mean")] == pytest.approx(statistics.mean(vals))
    assert got[("DB-12", "sd")] == pytest.approx(statistics.stdev(vals))  # n-1, not pstdev
    assert got[("DB-12", "n")] == len(vals) == 3


def _records(scores: dict[str, float], run: str = "r1", seed: int = 1) -> pd.DataFrame:
    return pd.DataFrame([{"run_id": run, "campaign": "c", "model": "m", "policy": "baseline", "seed": seed,
                          "step": 1, "benchmark": b, "accuracy": a} for b, a in scores.items()])


@settings(max_examples=30, deadline=None)
@given(st.floats(min_value=0, max_value=100, allow_nan=False))
def test_aggregates_of_identical_benchmarks_equal_each_one(x: float) -> None:
    recs = normalise_records(_records({b: x for b in BENCH}), SUITE)
    aggs = run_aggregates(score_matrix(recs, SUITE), SUITE)
    assert np.allclose(aggs.to_numpy(), x, rtol=1e-12, atol=1e-12)


def test_missing_benchmark_makes_only_its_aggregates_nan_and_zero_stays_zero() -> None:
    scores = {b: 0.0 for b in BENCH}
    scores["kk_hard"] = float("nan")
    recs = normalise_records(_records(scores), SUITE)
    aggs = run_aggregates(score_matrix(recs, SUITE), SUITE).iloc[0]
    assert math.isnan(aggs["DB-12"]) and math.isnan(aggs["Macro-12"]) and math.isnan(aggs["Item-12"])
    assert aggs["Math-Heavy-6"] == 0.0  # kk_hard is not a member; zeros are scores, not missing
    rep = missing_report(score_matrix(recs, SUITE), SUITE)
    assert rep[["run_id", "benchmark"]].values.tolist() == [["r1", "kk_hard"]]
    assert rep["aggregates_nan"].iloc[0] == "DB-12, Macro-12, Item-12"


def test_absent_benchmark_row_is_missing_too() -> None:
    scores = {b: 50.0 for b in BENCH if b != "gpqa_diamond"}
    recs = normalise_records(_records(scores), SUITE)
    aggs = run_aggregates(score_matrix(recs, SUITE), SUITE).iloc[0]
    assert aggs.isna().all()  # gpqa_diamond is in all four aggregates


def test_config_mean_is_nan_when_a_seed_is_missing() -> None:
    full = {b: 40.0 for b in BENCH}
    part = dict(full, aime24=float("nan"))
    recs = normalise_records(pd.concat([_records(full, "r1", 1), _records(part, "r2", 2)]), SUITE)
    summ = config_summary(run_table(recs, SUITE), ["DB-12", "logic"])
    assert math.isnan(summ[("DB-12", "mean")].iloc[0])
    assert summ[("DB-12", "n")].iloc[0] == 1  # n counts seeds with a value
    assert summ[("logic", "mean")].iloc[0] == 40.0
