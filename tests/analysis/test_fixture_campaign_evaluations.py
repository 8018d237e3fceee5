"""One small campaign, trained once and evaluated two ways, end to end through the CLI on the suite's shared head:
baseline and gfpo x 2 seeds on the local CPU backend (tests/analysis/fixture_campaign.py).

1. The memorization probe on the shipped suite with the clean benchmark (issue 35): `db12_clean` (the 12
   benchmarks + clean_arith) with `evaluation: {memorization: true}`; then `campaign report` and `campaign
   verdicts --max-memorization` on its records. The 13th benchmark is scored in the records like the others and in
   none of the 12-benchmark aggregates; once the campaign is recorded its base model is probed on the campaign's own
   data and the probe's files land beside the records; the report shows every benchmark's recall rate beside each
   policy's delta with the memory-sensitive verdict; verdicts restricted by the rate state what they kept. The
   fixture data are the tiny model's synthetic items (clean_arith's file among them), so the rates are whatever
   this model recalls of them: the memorized-vs-clean contrast itself is tests/evaluation/test_memorization.py's.
2. Sampled decoding (issue 26): the same campaign file re-submitted on `db12_sampled` (aime24 as avg@4 at
   temperature 0.8, the rest greedy). Only the evaluation changed, so the four runs are re-evaluated, not
   retrained; records name the sampled benchmark's metric (`aime24@avg4`) with the k outcomes in the item logs,
   greedy benchmarks stay `accuracy`, and `campaign report --items` shows the seed / item / sample variance split.

Cost: 4 local runs (4 steps) + 8 evaluations + one probe of 13 x 8 items. These were two modules that trained the
same four runs each (198 s and 191 s of the suite's wall on CI, 12-07); the second evaluation is a re-submission,
as a user changes a campaign's evaluation (issue 56)."""

from __future__ import annotations

import gzip
import io
import json
import shutil
import subprocess
from types import SimpleNamespace

import pandas as pd
import pytest
import yaml

from tests.analysis.fixture_campaign import CAMPAIGN, fixture_campaign, submit

pytestmark = [pytest.mark.slow, pytest.mark.timeout(2400)]


@pytest.fixture(scope="module")
def campaign(tmp_path_factory, head) -> SimpleNamespace:
    """The campaign submitted on db12_clean with the probe (its results copied aside as `memo`), then re-submitted on
    db12_sampled."""
    tmp = tmp_path_factory.mktemp("fixture_campaign")
    wd, camp = fixture_campaign(tmp, "fx", "db12_clean", evaluation={"memorization": True})
    first = submit(camp, wd, head)
    assert first.returncode == 0, (first.stdout + first.stderr)[-4000:]
    memo = tmp / "memo_results"
    shutil.copytree(wd / "results" / "fx", memo)
    spec = yaml.safe_load(camp.read_text())
    spec["suite"] = "db12_sampled"
    spec["evaluation"].pop("memorization")
    camp.write_text(yaml.safe_dump(spec, sort_keys=False))
    second = submit(camp, wd, head)
    assert second.returncode == 0, (second.stdout + second.stderr)[-4000:]
    return SimpleNamespace(wd=wd, camp=camp, first=first, memo=memo, second=second, tmp=tmp)


def test_a_campaign_with_memorization_true_reports_rates_beside_its_deltas(campaign, tmp_path):
    res, results = campaign.first, campaign.memo
    assert "memorization probe of tiny_qwen2" in res.stdout + res.stderr
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


def test_a_sampled_campaign_reports_its_variance_split(campaign, tmp_path):
    wd = campaign.wd
    assert "4 to re-evaluate" in campaign.second.stdout, campaign.second.stdout  # the evaluation only changed
    records = wd / "results" / "fx" / "records.parquet"
    df = pd.read_parquet(records)
    assert df["run_id"].nunique() == 4
    assert set(df.loc[df["benchmark"] == "aime24", "metric"]) == {"aime24@avg4"}
    assert set(df.loc[df["benchmark"] == "gsm8k", "metric"]) == {"accuracy"}
    assert "clean_arith" not in set(df["benchmark"])  # db12_sampled's benchmarks only
    logs = sorted((wd / "runs" / "fx").rglob("*.items.jsonl.gz"))
    assert len(logs) == 4  # one per run: the re-evaluation's, in place of the first evaluation's
    for log in logs:
        rows = [json.loads(line) for line in gzip.open(log, "rt")]
        aime = [r for r in rows if r.get("benchmark", r.get("task", "")).startswith("aime24")]
        assert aime and all(len(r["samples"]) == 4 for r in aime), log

    out = tmp_path / "report.html"
    res = subprocess.run([CAMPAIGN, "report", str(records), "--suite", "db12_sampled", "--items",
                          str(wd / "runs" / "fx"), "--out", str(out), "--resamples", "200"],
                         capture_output=True, text=True, timeout=600)
    assert res.returncode == 0, (res.stdout + res.stderr)[-3000:]
    doc = out.read_text()
    assert 'id="variance_split"' in doc and "aime24" in doc[doc.index('id="variance_split"'):]
