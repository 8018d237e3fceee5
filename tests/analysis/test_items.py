"""Item-level layer: item log validation, two-way clustered SE by hand, outcome breakdown."""

from __future__ import annotations

import gzip
import io
import json
import math
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats

from analysis.items import outcome_breakdown, paired_item_matrix, read_item_log, two_way_clustered
from analysis.schema import RecordsError


def test_two_way_clustered_se_on_a_hand_built_table() -> None:
    # 2 seeds x 3 items of paired differences (method - reference, 0/1 scores)
    d = np.array([[1.0, 0.0, 1.0],
                  [0.0, 0.0, 1.0]])
    # by hand: theta = 3/6 = 0.5; residuals e = d - 0.5; u = e / (I*S) = e / 6
    e = d - 0.5
    u = e / 6
    row = u.sum(axis=1)  # per seed: [0.5/6, -0.5/6]
    col = u.sum(axis=0)  # per item: [0, -1/6, 1/6]
    v_seed = 2 / 1 * ((0.5 / 6) ** 2 + (0.5 / 6) ** 2)
    v_item = 3 / 2 * (0 + (1 / 6) ** 2 + (1 / 6) ** 2)
    v_both = 6 / 5 * (6 * (0.5 / 6) ** 2)
    assert np.allclose(row, [0.5 / 6, -0.5 / 6]) and np.allclose(col, [0, -1 / 6, 1 / 6])
    r = two_way_clustered(d)
    assert r["estimate"] == pytest.approx(0.5)
    assert r["v_seed"] == pytest.approx(v_seed) and r["v_item"] == pytest.approx(v_item)
    assert r["v_both"] == pytest.approx(v_both)
    se = math.sqrt(v_seed + v_item - v_both)
    assert r["se_two_way"] == pytest.approx(se)
    t = stats.t.ppf(0.975, 1)
    assert (r["two_way_lo"], r["two_way_hi"]) == (pytest.approx(0.5 - t * se), pytest.approx(0.5 + t * se))
    # the seed-only SE is the usual SD of per-seed means / sqrt(S)
    assert r["se_seed"] == pytest.approx(np.std(d.mean(axis=1), ddof=1) / math.sqrt(2))


@settings(max_examples=25, deadline=None, derandomize=True)
@given(st.integers(2, 6), st.integers(3, 40), st.integers(0, 2**31 - 1))
def test_seed_only_variance_matches_per_seed_means_and_weights_reduce_to_mean(s: int, i: int, seed: int) -> None:
    d = np.random.default_rng(seed).integers(-1, 2, (s, i)).astype(float)
    r = two_way_clustered(d)
    assert r["estimate"] == pytest.approx(d.mean())
    assert r["v_seed"] == pytest.approx(np.var(d.mean(axis=1), ddof=1) / s, abs=1e-15)
    assert r["se_two_way"] >= r["se_seed"] - 1e-15 and r["two_way_lo"] <= r["estimate"] <= r["two_way_hi"]


def test_item_noise_is_counted_by_simulation() -> None:
    """Seeds share the same items: the seed-only CI misses item sampling, the two-way CI covers it."""
    rng = np.random.default_rng(3)
    reps, s_n, i_n = 600, 3, 200
    cover_seed = cover_two = 0
    for _ in range(reps):
        item_effect = rng.normal(0, 1.0, i_n)  # which items are in the benchmark: fixed across seeds
        d = item_effect[None, :] + rng.normal(0, 0.02, (s_n, 1)) + rng.normal(0, 0.5, (s_n, i_n))
        r = two_way_clustered(d)
        cover_seed += r["seed_lo"] <= 0 <= r["seed_hi"]
        cover_two += r["two_way_lo"] <= 0 <= r["two_way_hi"]
    assert cover_two / reps > 0.9 > cover_seed / reps


def _log(path: Path, rows: list[dict]) -> Path:
    with gzip.open(path, "wt") as f:
        for r in rows:
            f.write(json.dumps(r) + "\n")
    return path


def test_item_log_is_validated_and_broken_down(tmp_path: Path) -> None:
    good = [{"benchmark": "gsm8k", "item_id": "a", "score": 1.0, "status": "ok", "finish_reason": "stop",
             "response_tokens": 12},
            {"benchmark": "gsm8k", "item_id": "b", "score": 0.0, "status": "ok", "finish_reason": "stop"},
            {"benchmark": "gsm8k", "item_id": "c", "score": 0.0, "status": "no_answer", "finish_reason": "length"},
            {"benchmark": "gsm8k", "item_id": "d", "score": 0.0, "status": "no_answer", "finish_reason": "stop"}]
    items = read_item_log(_log(tmp_path / "r.items.jsonl.gz", good), "run1")
    assert list(items["run_id"].unique()) == ["run1"] and len(items) == 4
    b = outcome_breakdown(items).iloc[0]
    assert (b["correct"], b["wrong"], b["parse_failure"], b["truncated"]) == (25.0, 25.0, 50.0, 25.0)
    bad = good + [{"benchmark": "gsm8k", "item_id": "a", "score": 1.0, "status": "ok"},
                  {"benchmark": "gsm8k", "item_id": "e", "score": 2.0, "status": "ok"},
                  {"benchmark": "gsm8k", "item_id": "f", "score": 1.0, "status": "maybe"}]
    with pytest.raises(RecordsError) as exc:
        read_item_log(_log(tmp_path / "bad.items.jsonl.gz", bad), "run1")
    msg = str(exc.value)
    assert "row 5, column 'item_id'" in msg and "row 6, column 'score'" in msg and "row 7, column 'status'" in msg
    items2 = read_item_log(_log(tmp_path / "r2.items.jsonl.gz", [dict(r, score=1.0) for r in good]), "run2")
    d, bench = paired_item_matrix(pd_concat([items, items2]), ["run2"], ["run1"], ["gsm8k"])
    assert d.shape == (1, 4) and d.sum() == 3 and set(bench) == {"gsm8k"}


def pd_concat(frames):
    import pandas as pd

    return pd.concat(frames, ignore_index=True)


def test_compare_with_item_logs_prints_the_seed_plus_item_ci(tmp_path: Path) -> None:
    """End to end through `campaign compare --items`: item logs beside per-run records (as the evaluator
    writes them); the two-way CI equals two_way_clustered on the hand-paired item matrix."""
    import pandas as pd
    from typer.testing import CliRunner

    from analysis.items import NO_ITEMS_REASON
    from evaluation.suite import load_suite
    from cli import app

    s = load_suite("db12")
    rng = np.random.default_rng(0)
    rows = []
    per_item = {}
    for seed in (1, 2, 3):
        for pol, p in (("baseline", 0.5), ("topk", 0.56)):
            rid = f"{pol}_s{seed}"
            log = []
            for b in s.benchmark_ids:
                sc = (rng.random(s.item_counts()[b]) < p).astype(float)
                per_item[(rid, b)] = sc
                rows.append({"run_id": rid, "campaign": "c", "model": "m", "policy": pol, "seed": seed, "step": 5,
                             "benchmark": b, "accuracy": 100 * sc.mean()})
                log += [{"benchmark": b, "item_id": f"{b}-{i}", "score": v, "status": "ok", "finish_reason": "stop"}
                        for i, v in enumerate(sc)]
            (tmp_path / "runs").mkdir(exist_ok=True)
            pd.DataFrame([r for r in rows if r["run_id"] == rid]).to_csv(tmp_path / "runs" / f"{rid}.csv", index=False)
            _log(tmp_path / "runs" / f"{rid}.items.jsonl.gz", log)
    all_rec = tmp_path / "records.csv"
    pd.DataFrame(rows).to_csv(all_rec, index=False)
    res = CliRunner().invoke(app, ["compare", str(all_rec), "--items", str(tmp_path / "runs"), "--detail", "--json",
                                   "--resamples", "100"])
    assert res.exit_code == 0, res.output
    got = {r["metric"]: r for r in json.loads(res.output)["comparisons"]}
    d = np.stack([per_item[(f"topk_s{k}", "aime24")] - per_item[(f"baseline_s{k}", "aime24")] for k in (1, 2, 3)])
    want = two_way_clustered(100 * d)
    assert got["aime24"]["item_lo"] == pytest.approx(want["two_way_lo"])
    assert got["aime24"]["item_hi"] == pytest.approx(want["two_way_hi"])
    assert got["DB-12"]["item_lo"] < got["DB-12"]["mean_diff"] < got["DB-12"]["item_hi"]
    table = CliRunner().invoke(app, ["compare", str(all_rec), "--items", str(tmp_path / "runs"), "--resamples", "100"])
    assert "seed + item 95% CI" in table.output and "t 95% CI" in table.output and "Outcome breakdown" in table.output
    # `tables --items`: the paired table carries the same seed + item CI (CSV holds the numbers)
    tab = CliRunner().invoke(app, ["tables", str(all_rec), "--items", str(tmp_path / "runs"), "--table", "paired",
                                   "--aggregate", "aime24", "--format", "csv", "--resamples", "100"])
    assert tab.exit_code == 0, tab.output
    row = pd.read_csv(io.StringIO(tab.output)).query("policy == 'topk'").iloc[0]
    assert row["item_lo"] == pytest.approx(want["two_way_lo"]) and row["item_hi"] == pytest.approx(want["two_way_hi"])
    assert max(map(len, table.output.splitlines())) <= 120  # the seed + item CI kept in the 120-column fit
    # without --items, item logs beside the records: the note says how to use them, never that there are none
    plain = CliRunner().invoke(app, ["compare", str(all_rec), "--json", "--resamples", "100"])
    want = f"item logs not read: pass --items {tmp_path / 'runs'} for the seed + item CI"
    assert all(r["item_lo"] is None and r["item_note"] == want for r in json.loads(plain.output)["comparisons"])
    alone = tmp_path / "alone"
    alone.mkdir()
    (alone / "records.csv").write_bytes(all_rec.read_bytes())
    plain = CliRunner().invoke(app, ["compare", str(alone / "records.csv"), "--json", "--resamples", "100"])
    assert all(r["item_note"] == NO_ITEMS_REASON for r in json.loads(plain.output)["comparisons"])


def test_comparison_breakdown_separates_format_failures_from_wrong_answers() -> None:
    import pandas as pd

    def run_items(rid: str, wrong: int, no_answer: int, trunc: int) -> list[dict]:
        out = []
        for i in range(10):
            status = "no_answer" if i < no_answer else "ok"
            score = 0.0 if i < no_answer + wrong else 1.0
            out.append({"run_id": rid, "benchmark": "gsm8k", "item_id": str(i), "score": score, "status": status,
                        "finish_reason": "length" if i < trunc else "stop", "tokens": 1.0})
        return out

    items = pd.DataFrame(run_items("b1", 2, 3, 3) + run_items("t1", 2, 0, 0))
    runs = pd.DataFrame({"run_id": ["b1", "t1"], "campaign": "c", "model": "m", "regime": "", "step": 5,
                         "policy": ["baseline", "topk"]})
    paired = pd.DataFrame([{"campaign": "c", "model": "m", "regime": "", "step": 5, "policy": "topk",
                            "reference": "baseline", "kind": "effect"}])
    from analysis.items import comparison_breakdown

    bd = comparison_breakdown(items, runs, paired).iloc[0]
    # topk: same wrong answers (20%), no parse failures (baseline 30%), no truncation (baseline 30%)
    assert (bd["wrong_delta"], bd["parse_failure_delta"], bd["truncated_delta"]) == (0.0, -30.0, -30.0)


def test_report_with_item_logs_shows_the_seed_plus_item_ci(tmp_path: Path) -> None:
    import pandas as pd
    from typer.testing import CliRunner

    from cli import app

    rng = np.random.default_rng(2)
    from evaluation.suite import load_suite

    s = load_suite("db12")
    rows = []
    (tmp_path / "runs").mkdir()
    for seed in (1, 2):
        for pol in ("baseline", "topk"):
            rid = f"{pol}_s{seed}"
            log = []
            for b in s.benchmark_ids:
                sc = (rng.random(s.item_counts()[b]) < 0.5).astype(float)
                rows.append({"run_id": rid, "campaign": "c", "model": "m", "policy": pol, "seed": seed, "step": 5,
                             "benchmark": b, "accuracy": 100 * sc.mean()})
                log += [{"benchmark": b, "item_id": str(i), "score": v, "status": "ok", "finish_reason": "stop"}
                        for i, v in enumerate(sc)]
            pd.DataFrame([r for r in rows if r["run_id"] == rid]).to_csv(tmp_path / "runs" / f"{rid}.csv", index=False)
            _log(tmp_path / "runs" / f"{rid}.items.jsonl.gz", log)
    pd.DataFrame(rows).to_csv(tmp_path / "records.csv", index=False)
    out = tmp_path / "r.html"
    res = CliRunner().invoke(app, ["report", str(tmp_path / "records.csv"), "--out", str(out), "--items",
                                   str(tmp_path / "runs"), "--resamples", "100"])
    assert res.exit_code == 0, res.output
    doc = out.read_text()
    assert "seed + item 95% CI" in doc and "no item logs" not in doc
