"""`campaign report` and `campaign verdicts` read the base model's memorization probe (issue 35), on hand-made
records (db12_clean: the 12 benchmarks + clean_arith) and a hand-made probe file.

What it proves: the report shows each benchmark's recall rate beside each policy's Δ and flags the policy whose
gain sits on the recalled benchmarks (and not the one whose gain is everywhere, clean_arith included);
`verdicts --max-memorization` judges the aggregate on the benchmarks under the rate only, and says which it kept
and dropped, in text and JSON; a missing probe is an exit 2 naming where it looked. Cost: ~3 s."""

from __future__ import annotations

import io
import json

import numpy as np
import pandas as pd
import pytest

from analysis.records import normalise_records, write_records
from tests.analysis.cli_app import invoke
from evaluation.suite import load_suite

SUITE = load_suite("db12_clean")
RECALLED = {"math500": 0.8, "aime24": 0.7}  # every other benchmark: 0.0




def _records(path) -> None:
    """baseline; `recall` gains 8 points on math500/aime24 only; `broad` gains 3 points on every benchmark."""
    rng = np.random.default_rng(0)
    base = rng.uniform(30, 60, (4, len(SUITE.benchmark_ids)))
    rows = []
    for pol in ("baseline", "recall", "broad"):
        for i in range(4):
            for j, b in enumerate(SUITE.benchmark_ids):
                shift = {"baseline": 0.0, "recall": 8.0 if b in RECALLED else 0.0, "broad": 3.0}[pol]
                rows.append({"run_id": f"{pol}_s{i + 1}", "campaign": "c", "model": "tiny", "policy": pol,
                             "mechanism": "select", "seed": i + 1, "step": 8, "benchmark": b,
                             "accuracy": float(base[i, j] + shift + rng.normal(0, 0.3))})
    write_records(normalise_records(pd.DataFrame(rows), SUITE), path)


def _probe(path) -> None:
    """A probe report as evaluation/memorization_report.py writes it (the fields the analysis reads)."""
    benches = []
    for b in SUITE.benchmark_ids:
        r = RECALLED.get(b, 0.0)
        benches.append({"benchmark": b, "n_items": 50, "n_probed": 50, "near_rate": r, "near_ci_low": max(r - 0.15, 0),
                        "near_ci_high": min(r + 0.15, 1)})
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"meta": {"prefix": 0.6, "near": 0.8},
                                "definitions": {"interval": "Clopper-Pearson exact 95%"}, "benchmarks": benches}))


@pytest.fixture()
def campaign_results(tmp_path):
    rec = tmp_path / "results" / "c" / "records.parquet"
    rec.parent.mkdir(parents=True)
    _records(rec)
    _probe(rec.parent / "memorization" / "tiny" / "memorization.json")
    return rec


def test_the_report_shows_rates_beside_each_delta_and_flags_the_recall_gain(campaign_results, tmp_path):
    out = tmp_path / "report.html"
    res = invoke("report", str(campaign_results), "--suite", "db12_clean", "--out", str(out), "--resamples", "200")
    assert res.exit_code == 0, res.output
    doc = out.read_text()
    sec = doc[doc.index("id='memorization'"):]
    sec = sec[:sec.index("</details>")]
    rates, flags = pd.read_html(io.StringIO(sec))
    rates, flags = rates.set_index("benchmark"), flags.set_index("policy")
    assert rates.loc["math500", "recall (near)"] == "80% [65%, 95%]"
    assert rates.loc["gsm8k", "recall (near)"] == "0% [0%, 15%]"
    # each policy's Δ (points) beside the rate: the recall policy's +8 on math500 only, broad's +3 everywhere
    assert abs(float(rates.loc["math500", "Δ recall − baseline"]) - 8) < 0.5
    assert abs(float(rates.loc["gsm8k", "Δ recall − baseline"])) < 0.5
    assert abs(float(rates.loc["clean_arith", "Δ broad − baseline"]) - 3) < 0.5
    assert flags.loc["recall", "memory-sensitive"] == "yes"
    assert flags.loc["broad", "memory-sensitive"] == "no"  # its clean_arith gain clears it


def test_a_report_without_a_probe_has_no_memorization_section(tmp_path):
    rec = tmp_path / "records.parquet"
    _records(rec)
    out = tmp_path / "report.html"
    assert invoke("report", str(rec), "--suite", "db12_clean", "--out", str(out), "--resamples", "200").exit_code == 0
    assert "id='memorization'" not in out.read_text()


def test_verdicts_restricted_to_benchmarks_under_the_rate_say_so(campaign_results):
    res = invoke("verdicts", str(campaign_results), "--suite", "db12_clean", "--max-memorization", "0.5",
                  "--resamples", "200", "--json")
    assert res.exit_code == 0, res.output
    body = json.loads(res.output)
    mem = body["memorization"]
    assert body["aggregate"] == "DB-12[mem<0.5]" and mem["source"] == "DB-12"
    assert set(mem["dropped"]) == {"math500", "aime24"} and len(mem["kept"]) == 10
    v = {r["policy"]: r["verdict"] for r in body["verdicts"]}
    assert v["broad"] == "better" and v["recall"] != "better"  # the recall gain is gone once they are out
    text = invoke("verdicts", str(campaign_results), "--suite", "db12_clean", "--max-memorization", "0.5",
                   "--resamples", "200").output
    assert text.startswith("DB-12[mem<0.5]: DB-12 restricted") and "math500 (recall 0.80)" in text
    whole = json.loads(invoke("verdicts", str(campaign_results), "--suite", "db12_clean", "--resamples", "200",
                               "--json").output)
    assert {r["policy"]: r["verdict"] for r in whole["verdicts"]}["recall"] == "better"
    assert whole["memorization"] is None


def test_max_memorization_without_a_probe_exits_2_naming_where_it_looked(tmp_path):
    rec = tmp_path / "records.parquet"
    _records(rec)
    res = invoke("verdicts", str(rec), "--suite", "db12_clean", "--max-memorization", "0.5")
    assert res.exit_code == 2 and "no memorization probe beside" in res.output
    res = invoke("verdicts", str(rec), "--suite", "db12_clean", "--max-memorization", "0.5",
                  "--memorization", str(tmp_path / "nope.json"))
    assert res.exit_code == 2 and "no such file or folder" in res.output
