"""`campaign demo`: the records-only path on the released CSV, bad input, and (slow) the full CPU
pipeline on a reduced demo grid through local Ray, ledger, training, evaluation and records."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

REPO = Path(__file__).resolve().parents[2]
CAMPAIGN = str(Path(sys.executable).with_name("campaign"))
RELEASED = REPO.parent / "shared" / "data" / "released_runs_171.csv"


def test_demo_records_prints_tables_of_the_released_runs(campaign_cli) -> None:
    p = campaign_cli(["demo", "--records", str(RELEASED)], cwd=REPO)
    assert p.returncode == 0, p.stderr
    assert "171 runs, 2052 records" in p.stdout
    assert "| gfpo" in p.stdout and "vs" in p.stdout


def test_demo_records_truncated_file_exits_2(tmp_path: Path, campaign_cli) -> None:
    lines = RELEASED.read_text().splitlines()
    bad = tmp_path / "bad.csv"
    bad.write_text("\n".join(lines[:10] + [",".join(lines[10].split(",")[:5])]) + "\n")
    p = campaign_cli(["demo", "--records", str(bad)], cwd=REPO)
    assert p.returncode == 2 and "bad.csv" in p.stderr and "Traceback" not in p.stderr


def test_status_without_ledger_exits_2(tmp_path: Path) -> None:
    """The smoke test of the installed `campaign` console script (other fast tests run the CLI in-process)."""
    p = subprocess.run([CAMPAIGN, "status", "--workdir", str(tmp_path / "none")], capture_output=True, text=True)
    assert p.returncode == 2 and "ledger.db" in p.stderr


@pytest.mark.slow
def test_demo_end_to_end_on_a_reduced_grid(tmp_path: Path) -> None:
    wd = tmp_path / "wd"
    # 4 evaluation items per benchmark, as the intervention demo test: the demo's 16 quadruple each run's
    # evaluation, and nothing asserted here depends on the item count
    p = subprocess.run([CAMPAIGN, "demo", "--workdir", str(wd), "policies=[baseline,gfpo]", "seeds=[1,2]", "steps=2",
                        "save_freq=2", "evaluation.fixture_items=4"], capture_output=True, text=True, cwd=REPO,
                       timeout=900)
    assert p.returncode == 0, p.stderr[-3000:]
    recs = pd.read_parquet(wd / "results" / "demo" / "records.parquet")
    assert sorted(recs["run_id"].unique()) == [f"demo/tiny_qwen2/{pol}/s{s}" for pol in ("baseline", "gfpo")
                                               for s in (1, 2)]
    assert len(recs) == 4 * 12 and (recs["step"] == 2).all()
    assert recs["accuracy"].between(0, 100).all() and recs["parse_rate"].notna().all()
    assert "gfpo" in p.stdout and "vs" in p.stdout  # the paired table was printed
    assert (wd / "mlflow.db").exists() and not (wd / "ray_head.json").exists()  # head stopped after the demo
    # `logs` after the campaign: no --ray-address, and it reads the stopped head's files instead of starting one
    p = subprocess.run([CAMPAIGN, "logs", "demo", "demo/tiny_qwen2/gfpo/s1", "--workdir", str(wd)],
                       capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr[-2000:]
    assert "evaluate" in p.stdout and '"ok": true' in p.stdout  # the ledger's attempts, then the job's driver log
    assert "training metrics at step 2: " in p.stdout and "policy/kept_frac" in p.stdout  # read from the run dir
    assert not (wd / "ray_head.json").exists()


def test_demo_records_of_references_only_prints_the_tables_without_a_pair(tmp_path: Path, campaign_cli) -> None:
    """A campaign of reference policies only (e.g. `campaign demo policies=[baseline]`) has no paired comparison:
    the analysis prints the per-configuration tables and empty paired tables, not a traceback."""
    df = pd.read_csv(RELEASED)
    only = tmp_path / "baseline_only.csv"
    df[df["method"] == "baseline"].to_csv(only, index=False)
    p = campaign_cli(["demo", "--records", str(only)], cwd=REPO)
    assert p.returncode == 0, p.stderr[-2000:]
    assert "Paired comparisons" in p.stdout and "| gfpo" not in p.stdout and "Traceback" not in p.stderr
