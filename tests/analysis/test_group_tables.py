"""Leave-one-benchmark-out and aggregate correlations per group, pooled rows labelled pooled (issue 12 build 4)."""

from __future__ import annotations

import csv
import warnings

import numpy as np
import pytest
from scipy import stats

from analysis.records import read_records
from analysis.tables import build_tables
from evaluation.suite import load_suite
from tests.released import DOMAINS, RELEASED, needs_released

pytestmark = needs_released


def _db12(row: dict[str, str], drop: str | None = None) -> float:
    doms = [[b for b in bs if b != drop] for bs in DOMAINS.values()]
    return float(np.mean([np.mean([float(row[b]) for b in bs]) for bs in doms if bs]))


def test_leave_one_out_per_group_by_hand_and_pooled_label() -> None:
    s = load_suite("db12")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        lobo, sens = build_tables(read_records(RELEASED, s), s, ["leave_one_out", "aggregation_sensitivity"],
                                  n_resamples=100)
    rows = [r for r in csv.DictReader(open(RELEASED, newline=""))
            if r["campaign"] == "scale_curve" and r["model"] == "Qwen2.5-3B-Instruct"]
    methods = sorted({r["method"] for r in rows})
    full = [np.mean([_db12(r) for r in rows if r["method"] == m]) for m in methods]
    rhos = {b: stats.spearmanr(full, [np.mean([_db12(r, b) for r in rows if r["method"] == m]) for m in methods])[0]
            for bs in DOMAINS.values() for b in bs}
    got = lobo.data[(lobo.data["scope"] == "scale_curve/Qwen2.5-3B-Instruct/300") & (lobo.data["aggregate"] == "DB-12")]
    assert got["spearman_min"].item() == pytest.approx(min(rhos.values()))
    assert got["most_influential_benchmark"].item() == min(rhos, key=rhos.get)
    pooled = lobo.data[lobo.data["scope"].str.startswith("pooled")]
    assert len(pooled) == len(s.aggregate_names) and pooled["scope"].str.contains("57 configurations").all()
    assert lobo.data["scope"].nunique() == 13  # 12 groups + pooled
    assert sens.data["scope"].str.startswith("pooled").sum() == 6 and sens.data["scope"].nunique() == 13
