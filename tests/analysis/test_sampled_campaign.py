"""A small campaign evaluated with sampled decoding, end to end through the CLI (issue 26): the shipped suite
`db12_sampled` (aime24 as avg@4 at temperature 0.8, the rest greedy), baseline and gfpo × 2 seeds on the local
CPU backend, submitted to the suite's shared head; then `campaign report --items` on its records.

What it proves: records name the sampled benchmark's metric (`aime24@avg4`) with the k outcomes in the item
logs, greedy benchmarks stay `accuracy`, and the report shows the seed / item / sample variance split with the
k that would halve the sample share. Cost: 4 local runs (4 steps) + 4 evaluations, ~3 min of both cores."""

from __future__ import annotations

import gzip
import json
import subprocess

import pandas as pd
import pytest

from tests.analysis.fixture_campaign import CAMPAIGN, fixture_campaign, submit

pytestmark = [pytest.mark.slow, pytest.mark.timeout(1800)]


def test_a_sampled_campaign_reports_its_variance_split(tmp_path, head):
    wd, camp = fixture_campaign(tmp_path, "sampled", "db12_sampled")
    res = submit(camp, wd, head)
    assert res.returncode == 0, (res.stdout + res.stderr)[-4000:]

    records = wd / "results" / "sampled" / "records.parquet"
    df = pd.read_parquet(records)
    assert df["run_id"].nunique() == 4
    assert set(df.loc[df["benchmark"] == "aime24", "metric"]) == {"aime24@avg4"}
    assert set(df.loc[df["benchmark"] == "gsm8k", "metric"]) == {"accuracy"}
    logs = sorted((wd / "runs" / "sampled").rglob("*.items.jsonl.gz"))
    assert logs
    rows = [json.loads(line) for line in gzip.open(logs[0], "rt")]
    aime = [r for r in rows if r.get("benchmark", r.get("task", "")).startswith("aime24")]
    assert aime and all(len(r["samples"]) == 4 for r in aime)

    out = tmp_path / "report.html"
    res = subprocess.run([CAMPAIGN, "report", str(records), "--suite", "db12_sampled", "--items",
                          str(wd / "runs" / "sampled"), "--out", str(out), "--resamples", "200"],
                         capture_output=True, text=True, timeout=600)
    assert res.returncode == 0, (res.stdout + res.stderr)[-3000:]
    doc = out.read_text()
    assert 'id="variance_split"' in doc and "aime24" in doc[doc.index('id="variance_split"'):]
