"""Issue 7, intervention evidence end to end: real CPU runs through the demo (local Ray, ledger, local
GRPO backend, DomainSampler, evaluation, records) for an inert mixer, a working one and their reference;
the report lists the inert one as flagged before any score comparison and does not flag reward_gap."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from tests.released import RELEASED

REPO = Path(__file__).resolve().parents[2]
CAMPAIGN = str(Path(sys.executable).with_name("campaign"))


def _realised_move(metrics: Path) -> float:
    """Largest change of any realised domain proportion from the first step, read straight from the JSONL."""
    rows = [json.loads(x) for x in metrics.read_text().splitlines() if x.strip()]
    keys = sorted({k for r in rows for k in r if k.startswith("data/realised_prop_")})
    h = np.array([[r[k] for k in keys] for r in rows if all(k in r for k in keys)], dtype=float)  # training steps only
    assert len(keys) == 3 and len(h) >= 2
    return float(np.abs(h - h[0]).max())


def test_report_runs_dir_without_manifests_exits_2(tmp_path: Path, campaign_cli) -> None:
    runs = tmp_path / "runs"
    runs.mkdir()
    p = campaign_cli(["report", str(RELEASED), "--out", str(tmp_path / "r.html"), "--runs-dir", str(runs)], cwd=REPO)
    assert p.returncode == 2 and str(runs) in p.stderr and "train_done.json" in p.stderr
    assert "Traceback" not in p.stderr and not (tmp_path / "r.html").exists()


@pytest.mark.slow
def test_inert_mixer_is_flagged_and_reward_gap_is_not(tmp_path: Path) -> None:
    wd = tmp_path / "wd"
    p = subprocess.run([CAMPAIGN, "demo", "--workdir", str(wd), "policies=[static,inert_mixer,reward_gap]", "seeds=[1]",
                        "steps=3", "save_freq=3", "evaluation.fixture_items=4"],
                       capture_output=True, text=True, cwd=REPO, timeout=600)
    assert p.returncode == 0, p.stderr[-3000:]
    report = wd / "report.html"
    assert f"report: {report}" in p.stdout.replace("\n", "")
    assert "flagged inert_mixer: inert_mixer" in p.stdout and "flagged reward_gap" not in p.stdout

    # the evidence, computed here from each run's own metrics: inert_mixer's data never moved, reward_gap's did
    def metrics_path(d: Path) -> Path:
        return Path(json.loads((wd / "runs" / "demo" / d.name / "train_done.json").read_text())["metrics_path"])

    moves = {pol: _realised_move(metrics_path(d))
             for d in (wd / "runs" / "demo").iterdir()
             for pol in [json.loads((d / "run_spec.json").read_text())["policy"]]}
    assert moves["inert_mixer"] == 0.0 and moves["reward_gap"] > 0.02

    doc = report.read_text()
    banner = doc[:doc.index("</ul>", doc.index("Intervention check"))]
    assert "<b>inert_mixer</b>" in banner and "reward_gap" not in banner
    assert doc.index("Intervention check") < doc.index("Forest plot")  # flags come before any score comparison
    section = doc[doc.index("id='intervention'"):]
    flagged_rows = re.findall(r'<tr class="flagged">(.*?)</tr>', section)
    assert len(flagged_rows) == 1 and "<td>inert_mixer</td>" in flagged_rows[0]

    # the same evidence through `campaign report RECORDS --runs-dir`
    out = tmp_path / "again.html"
    q = subprocess.run([CAMPAIGN, "report", str(wd / "results" / "demo" / "records.parquet"), "--out", str(out),
                        "--runs-dir", str(wd / "runs"), "--resamples", "200"], capture_output=True, text=True, cwd=REPO)
    assert q.returncode == 0, q.stderr[-2000:]
    assert "flagged inert_mixer" in q.stderr and "flagged reward_gap" not in q.stderr
    assert out.read_text().index("Intervention check") < out.read_text().index("Forest plot")
    assert pd.read_parquet(wd / "results" / "demo" / "records.parquet")["run_id"].nunique() == 3
