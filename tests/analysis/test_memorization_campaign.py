"""A campaign that asks for the memorization probe, evaluated on the shipped suite with the clean benchmark (issue
35): `db12_clean` (the 12 benchmarks + clean_arith), baseline and gfpo x 2 seeds on the local CPU backend,
`evaluation: {memorization: true}`, submitted through the CLI to the suite's shared head; then `campaign report`
and `campaign verdicts --max-memorization` on its records.

What it proves: the 13th benchmark is scored in the records like the others and in none of the 12-benchmark
aggregates; once the campaign is recorded its base model is probed on the campaign's own data and the probe's
files land beside the records; the report shows every benchmark's recall rate beside each policy's Δ with the
memory-sensitive verdict; verdicts restricted by the rate state what they kept. The fixture data are the tiny
model's synthetic items (clean_arith's file among them), so the rates are whatever this model recalls of them:
the memorized-vs-clean contrast itself is tests/evaluation/test_memorization.py's. Cost: 4 local runs (4 steps)
+ 4 evaluations + one probe of 13 x 8 items: 85 s on the 2-core machine."""

from __future__ import annotations

import io
import json
import subprocess

import pandas as pd
import pytest

from tests.analysis.fixture_campaign import CAMPAIGN, fixture_campaign, submit

pytestmark = [pytest.mark.slow, pytest.mark.timeout(1800)]


def test_a_campaign_with_memorization_true_reports_rates_beside_its_deltas(tmp_path, head):
    wd, camp = fixture_campaign(tmp_path, "memo", "db12_clean", evaluation={"memorization": True})
    res = submit(camp, wd, head)
    assert res.returncode == 0, (res.stdout + res.stderr)[-4000:]
    assert "memorization probe of tiny_qwen2" in res.stdout + res.stderr

    results = wd / "results" / "memo"
    df = pd.read_parquet(results / "records.parquet")
    assert df["run_id"].nunique() == 4 and "clean_arith" in set(df["benchmark"])
    probe = json.loads((results / "memorization" / "tiny_qwen2" / "memorization.json").read_text())
    rates = {b["benchmark"]: b for b in probe["benchmarks"]}
    assert len(rates) == 13 and all(0 <= b["near_rate"] <= 1 and b["n_probed"] > 0 for b in rates.values())
    assert (results / "memorization" / "tiny_qwen2" / "memorization_items.csv").is_file()

    out = tmp_path / "report.html"
    res = subprocess.run([CAMPAIGN, "report", str(results / "records.parquet"), "--suite", "db12_clean", "--out",
                          str(out), "--resamples", "200"], capture_output=True, text=True, timeout=600)
    assert res.returncode == 0, (res.stdout + res.stderr)[-3000:]
    doc = out.read_text()
    sec = doc[doc.index("id='memorization'"):]
    sec = sec[:sec.index("</details>")]

    table, flags = pd.read_html(io.StringIO(sec))
    table = table.set_index("benchmark")
    assert "clean_arith" in table.index and "Δ gfpo − baseline" in table.columns
    near = rates["math500"]
    assert table.loc["math500", "recall (near)"].startswith(f"{100 * near['near_rate']:.0f}%")
    assert list(flags["policy"]) == ["gfpo"] and flags["memory-sensitive"].iloc[0] in ("yes", "no")

    res = subprocess.run([CAMPAIGN, "verdicts", str(results / "records.parquet"), "--suite", "db12_clean",
                          "--max-memorization", "1.0", "--resamples", "200", "--json"],
                         capture_output=True, text=True, timeout=600)
    assert res.returncode == 0, (res.stdout + res.stderr)[-3000:]
    mem = json.loads(res.stdout)["memorization"]
    assert mem["source"] == "DB-12" and len(mem["kept"]) + len(mem["dropped"]) == 12
