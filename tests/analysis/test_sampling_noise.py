"""Seed / item / sample variance split of sampled decoding, and the item log's per-sample outcomes."""

from __future__ import annotations

import gzip
import json
import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from analysis.items import read_item_log
from analysis.sampling_noise import (components, k_to_halve, score_variance_shares, variance_split,
                                     variance_split_html)
from analysis.schema import RecordsError
from evaluation.suite import load_suite


def _share(comp: dict[str, float], s: int, i: int, k: int) -> float:
    return score_variance_shares(comp, s, i, k)["sample"]


@settings(max_examples=150, deadline=None)
@given(st.floats(0.01, 10), st.floats(0.01, 10), st.floats(0.0, 10), st.floats(0.01, 50), st.integers(2, 12),
       st.integers(5, 500), st.sampled_from([2, 4, 8, 16, 32]))
def test_k_to_halve_is_the_smallest_k_that_halves_the_sample_share(seed, item, sxi, sample, s, i, k):
    comp = {"seed": seed, "item": item, "seed_x_item": sxi, "sample": sample}
    h = _share(comp, s, i, k)
    k2 = k_to_halve(h, k)
    assert _share(comp, s, i, int(k2)) <= h / 2 + 1e-9
    assert _share(comp, s, i, int(k2) - 1) > h / 2 - 1e-9


def test_components_recover_the_simulated_ones():
    rng = np.random.default_rng(5)
    s_n, i_n, k = 30, 400, 8
    sd = {"seed": 0.7, "item": 1.2, "seed_x_item": 0.5, "sample": 2.0}
    y = (sd["seed"] * rng.standard_normal((s_n, 1)) + sd["item"] * rng.standard_normal((1, i_n))
         + sd["seed_x_item"] * rng.standard_normal((s_n, i_n)))[:, :, None] \
        + sd["sample"] * rng.standard_normal((s_n, i_n, k))
    got = components(y.mean(axis=2), y.var(axis=2, ddof=1), k)
    for key, v in sd.items():
        assert got[key] == pytest.approx(v ** 2, rel=0.35), key


def _log(path: Path, rows: list[dict]) -> Path:
    with gzip.open(path, "wt") as f:
        for r in rows:
            f.write(json.dumps(r) + "\n")
    return path


def test_item_log_samples_are_read_and_validated(tmp_path):
    row = {"benchmark": "aime24", "item_id": "a", "score": 0.5, "status": "ok", "finish_reason": "stop",
           "n_samples": 4, "samples": [{"score": s} for s in (1.0, 0.0, 1.0, 0.0)]}
    df = read_item_log(_log(tmp_path / "a.items.jsonl.gz", [row]), "r1")
    assert df.loc[0, "n_samples"] == 4 and df.loc[0, "sample_mean"] == 0.5
    assert df.loc[0, "sample_var"] == pytest.approx(np.var([1, 0, 1, 0], ddof=1))
    greedy = read_item_log(_log(tmp_path / "g.items.jsonl.gz", [{**row, "samples": None, "score": 1.0}]), "r1")
    assert greedy.loc[0, "n_samples"] == 1 and math.isnan(greedy.loc[0, "sample_var"])
    with pytest.raises(RecordsError, match=r"row 1, column 'samples': must be a non-empty list"):
        read_item_log(_log(tmp_path / "b.items.jsonl.gz", [{**row, "samples": [{"score": 2}]}]), "r1")


def test_variance_split_per_benchmark_and_its_report_section():
    """Two configurations x 4 seeds x 30 items x 8 samples of aime24: the split names the metric and k, and
    the shares sum to 100."""
    rng = np.random.default_rng(2)
    suite = load_suite("db12")
    runs, rows = [], []
    for policy in ("baseline", "gfpo"):
        p_item = rng.uniform(0.1, 0.9, 30)
        for seed in range(4):
            rid = f"{policy}-{seed}"
            runs.append({"run_id": rid, "campaign": "c", "model": "m", "regime": "", "step": 1, "policy": policy,
                         "seed": seed})
            p = np.clip(p_item + rng.normal(0, 0.05), 0, 1)
            outs = rng.random((30, 8)) < p[:, None]
            for i in range(30):
                rows.append({"run_id": rid, "benchmark": "aime24", "item_id": f"i{i}", "n_samples": 8,
                             "sample_mean": outs[i].mean(), "sample_var": outs[i].var(ddof=1)})
    t = variance_split(pd.DataFrame(rows), pd.DataFrame(runs), suite)
    assert len(t) == 1 and t.loc[0, "samples"] == 8 and t.loc[0, "configurations"] == 2
    assert t.loc[0, "metric"] == "accuracy"  # db12 declares aime24 greedy; the logs' k is what was sampled
    shares = t.loc[0, ["seed_pct", "item_pct", "seed_x_item_pct", "sample_pct"]].to_numpy(float)
    assert shares.sum() == pytest.approx(100.0) and (shares >= 0).all() and shares[3] > 0
    assert t.loc[0, "k_to_halve_sample_share"] > 8
    assert 'id="variance_split"' in variance_split_html(pd.DataFrame(rows), pd.DataFrame(runs), suite)
    assert variance_split_html(pd.DataFrame(rows).assign(n_samples=1), pd.DataFrame(runs), suite) == ""


@pytest.mark.slow
def test_report_of_a_small_sampled_campaign_shows_the_variance_split(tmp_path):
    """~15 CPU s (two reports with figures). A small campaign (baseline vs gfpo, 3 seeds) whose aime24 was decoded
    with 8 samples: the report has the variance-split section naming aime24, and none without the item logs."""
    from analysis.records import normalise_records
    from analysis.report import build_report

    rng = np.random.default_rng(4)
    suite = load_suite("db12")
    recs, items = [], []
    for policy in ("baseline", "gfpo"):
        for seed in (1, 2, 3):
            rid = f"{policy}-{seed}"
            for b in suite.benchmarks:
                recs.append({"run_id": rid, "campaign": "c", "model": "m", "policy": policy, "seed": seed,
                             "step": 10, "benchmark": b.id, "accuracy": float(rng.uniform(20, 60))})
            outs = rng.random((30, 8)) < rng.uniform(0.1, 0.9, 30)[:, None]
            items += [{"run_id": rid, "benchmark": "aime24", "item_id": f"i{i}", "score": outs[i].mean(),
                       "status": "ok", "finish_reason": "stop", "tokens": 10.0, "n_samples": 8,
                       "sample_mean": outs[i].mean(), "sample_var": outs[i].var(ddof=1)} for i in range(30)]
    df = normalise_records(pd.DataFrame(recs), suite)
    doc = build_report(df, tmp_path / "r.html", suite=suite, n_resamples=100, items=pd.DataFrame(items)).read_text()
    sec = doc[doc.index('id="variance_split"'):]
    assert "aime24" in sec[:sec.index("</table>")] and "k_to_halve_sample_share" in sec
    assert 'id="variance_split"' not in build_report(df, tmp_path / "r2.html", suite=suite,
                                                     n_resamples=100).read_text()
