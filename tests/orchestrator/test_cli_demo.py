"""`campaign demo`: the records-only path on the released CSV, bad input, and (slow) the full CPU
pipeline on a reduced demo grid through local Ray, ledger, training, evaluation and records."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
from tests.released import RELEASED

REPO = Path(__file__).resolve().parents[2]
CAMPAIGN = str(Path(sys.executable).with_name("campaign"))


def _screen(text: str) -> tuple[int, int]:
    """(lines, widest line in characters) of a command's output."""
    lines = text.splitlines()
    return len(lines), max(map(len, lines), default=0)


def test_demo_records_prints_the_answer_of_the_released_runs_in_one_screen(campaign_cli) -> None:
    """The verdicts (counts, then the comparisons, largest |Δ| first) fit one terminal screen: ≤ 40 lines of
    ≤ 120 characters, stdout and stderr together; every table is one flag away."""
    p = campaign_cli(["demo", "--records", str(RELEASED)], cwd=REPO)
    assert p.returncode == 0, p.stderr
    assert "171 runs, 2052 records" in p.stdout
    assert "undecided 45 of 45 comparisons" in p.stdout and "| gfpo" in p.stdout and "verdict" in p.stdout
    n, width = _screen(p.stdout + p.stderr)
    assert n <= 40 and width <= 120, (n, width)
    assert p.stdout.count("small n:") == 1 and "--all" in p.stdout
    full = campaign_cli(["demo", "--records", str(RELEASED), "--all"], cwd=REPO)
    assert full.returncode == 0 and "## Main round, 7B" in full.stdout and "## Paired comparisons" in full.stdout
    assert _screen(full.stdout)[0] > 40 and _screen(full.stdout)[1] <= 120


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
def test_demo_end_to_end_on_a_reduced_grid(tmp_path: Path, campaign_cli) -> None:
    """Costs ~4 CPU-minutes (4 runs of 2 steps, then `campaign logs`). Proves the whole CPU pipeline writes the
    records, stops its head, says where its time went (--timings), prints its answer in one screen (≤ 40 lines
    of ≤ 120 characters, stdout and stderr together, no library INFO chatter), that `logs` reads the stopped
    head's files, and that `plan --workdir` times the campaign from its finished runs within 2x of what it took."""
    wd = tmp_path / "wd"
    # 4 evaluation items per benchmark, as the intervention demo test: the demo's 16 quadruple each run's
    # evaluation, and nothing asserted here depends on the item count
    grid = ["policies=[baseline,gfpo]", "seeds=[1,2]", "steps=2", "save_freq=2", "evaluation.fixture_items=4"]
    p = subprocess.run([CAMPAIGN, "demo", "--workdir", str(wd), "--timings", *grid], capture_output=True, text=True,
                       cwd=REPO, timeout=900)
    assert p.returncode == 0, p.stderr[-3000:]
    # --timings: where the time went, each part once, the stages read from the ledger (4 runs: 4 jobs each)
    head, _, rest = p.stdout.partition("where the demo's time went")
    breakdown, _, tail = rest.partition("\ntotal ")
    for part in ("plan, preflight", "Ray head start", "train stages", "evaluate stages", "analysis: ", "report: HTML"):
        assert breakdown.count(part) == 1, (part, breakdown)
    built = breakdown.count("base model tiny_qwen2: build") + breakdown.count("base model tiny_qwen2: warm-up")
    assert built == 2 or breakdown.count("base model tiny_qwen2: cached") == 1, breakdown  # built here, or before
    assert breakdown.count("4 jobs, mean") == 2 and "demo finished in" in tail
    p.stdout = head + tail.split("\n", 1)[1]  # the answer's screen, as printed without --timings
    recs = pd.read_parquet(wd / "results" / "demo" / "records.parquet")
    assert sorted(recs["run_id"].unique()) == [f"demo/tiny_qwen2/{pol}/s{s}" for pol in ("baseline", "gfpo")
                                               for s in (1, 2)]
    assert len(recs) == 4 * 12 and (recs["step"] == 2).all()
    assert recs["accuracy"].between(0, 100).all() and recs["parse_rate"].notna().all()
    assert "gfpo" in p.stdout and "verdicts: DB-12" in p.stdout and "report: " in p.stdout  # the answer
    lines = (p.stdout + p.stderr).replace(str(wd), "W").splitlines()  # a path is printed whole, to be copied
    assert len(lines) <= 40 and max(map(len, lines)) <= 120, "\n".join(lines)
    assert "INFO" not in p.stderr and "Creating initial MLflow database tables" not in p.stderr
    assert "gfpo/s1: train done" in (wd / "logs" / "demo.events.log").read_text()  # each run's stages, in a file
    assert (wd / "mlflow.db").exists() and not (wd / "ray_head.json").exists()  # head stopped after the demo
    # `logs` after the campaign: no --ray-address, and it reads the stopped head's files instead of starting one
    p = subprocess.run([CAMPAIGN, "logs", "demo", "demo/tiny_qwen2/gfpo/s1", "--workdir", str(wd)],
                       capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr[-2000:]
    assert "evaluate" in p.stdout and '"ok": true' in p.stdout  # the ledger's attempts, then the job's driver log
    assert "training metrics at step 2: " in p.stdout and "policy/kept_frac" in p.stdout  # read from the run dir
    assert not (wd / "ray_head.json").exists()
    _check_measured_plan(campaign_cli, wd, grid)


def _check_measured_plan(campaign_cli, wd: Path, grid: list[str]) -> None:
    """Issue 58: the declared estimate (compute.hours_per_run) knows nothing of evaluation or a stage's start;
    once the campaign's runs have finished, `plan --workdir` times it from them (the ledger's stage attempts), and
    that estimate is within 2x of the wall time its stages took."""
    import json

    from tests.campaign_ledger import runs_and_attempts

    res = campaign_cli(["plan", str(REPO / "campaigns" / "demo.yaml"), *grid, "--workdir", str(wd), "--json"])
    assert res.returncode == 0, res.stderr
    m = json.loads(res.stdout)["measured"]
    assert m["runs"] == 4 and m["train_s_per_step"] > 0 and m["eval_s_per_checkpoint"] > 0 and m["slots"] == 2
    _, attempts = runs_and_attempts(wd, "demo")
    took_h = (max(a.ended_at for a in attempts) - min(a.started_at for a in attempts)) / 3600
    assert took_h / 2 <= m["hours"] <= 2 * took_h, (m, took_h)
    said = " ".join(campaign_cli(["plan", str(REPO / "campaigns" / "demo.yaml"), *grid, "--workdir",
                                  str(wd)]).stdout.split())
    assert "measured on 4 finished run(s)" in said and "evaluated checkpoint" in said, said


def test_demo_records_of_references_only_prints_the_tables_without_a_pair(tmp_path: Path, campaign_cli) -> None:
    """A campaign of reference policies only (e.g. `campaign demo policies=[baseline]`) has no paired comparison:
    the analysis prints the per-configuration tables and empty paired tables, not a traceback."""
    df = pd.read_csv(RELEASED)
    only = tmp_path / "baseline_only.csv"
    df[df["method"] == "baseline"].to_csv(only, index=False)
    p = campaign_cli(["demo", "--records", str(only)], cwd=REPO)
    assert p.returncode == 0, p.stderr[-2000:]
    assert "no method-vs-reference comparison" in p.stdout and "Traceback" not in p.stderr
    p = campaign_cli(["demo", "--records", str(only), "--all"], cwd=REPO)
    assert p.returncode == 0, p.stderr[-2000:]
    assert "Paired comparisons" in p.stdout and "| gfpo" not in p.stdout and "Traceback" not in p.stderr
