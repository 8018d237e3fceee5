"""`campaign status` names what an active run does now (issue 27): the phase its stage process recorded
(building the base model, waiting on its lock, evaluating), the training step from its metrics, and an ETA from
the plan until a run has finished; records collected mid-campaign say how many runs they still miss."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from orchestrator.engine.ledger.base import RunRow
from orchestrator.engine.paths import run_dir
from orchestrator.progress import planned_eta_seconds, run_activity
from orchestrator.session import Session, plan
from wtcommon.phase import PHASE_ENV, PHASE_FILE, read_phase, set_phase

REPO = Path(__file__).resolve().parents[2]


def _row(spec, state: str) -> RunRow:
    return RunRow(campaign=spec.campaign, run_key=spec.run_key, run_id=spec.run_id, state=state, order=0, gpus=0,
                  spec_json=spec.to_json())


def test_status_names_base_model_build_lock_wait_training_step_and_evaluation(tmp_path: Path,
                                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    _, runs = plan(REPO / "campaigns" / "demo.yaml", ["steps=8"])
    spec = runs[0]
    sess = Session(workdir=tmp_path)
    rd = run_dir(tmp_path, spec)
    rd.mkdir(parents=True)
    assert run_activity(sess, _row(spec, "training")) == "training: job submitted, not started yet"
    assert run_activity(sess, _row(spec, "queued")) is None
    monkeypatch.setenv(PHASE_ENV, str(rd / PHASE_FILE))  # what `python -m orchestrator.engine.stages` sets
    set_phase("building the base model (once per model and recipe; later runs reuse it)")
    assert run_activity(sess, _row(spec, "training")).startswith("building the base model")
    set_phase("waiting on the base model's lock (another run may be building it)")
    assert "waiting on the base model's lock" in run_activity(sess, _row(spec, "training"))
    (rd / "train").mkdir()
    (rd / "train" / "metrics.jsonl").write_text("".join(json.dumps({"step": k, "reward/mean": 0.1}) + "\n"
                                                        for k in (1, 2, 3)))
    assert run_activity(sess, _row(spec, "training")) == "training step 3 of 8"
    set_phase("evaluating: 40 of 192 generations (12 benchmarks)", done=40, total=192)
    assert run_activity(sess, _row(spec, "evaluating")).startswith("evaluating: 40 of 192 generations")
    assert read_phase(rd)["done"] == 40


def test_set_phase_without_the_stage_variable_writes_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(PHASE_ENV, raising=False)
    monkeypatch.chdir(tmp_path)
    set_phase("building the base model")
    assert os.listdir(tmp_path) == []


def test_eta_comes_from_the_plan_until_a_run_has_finished() -> None:
    _, runs = plan(REPO / "campaigns" / "demo.yaml", [])
    rows = [_row(r, "queued") for r in runs[:4]] + [_row(r, "recorded") for r in runs[4:]]
    assert planned_eta_seconds(rows, parallel=2) == pytest.approx(sum(r.est_hours for r in runs[:4]) * 3600 / 2)
    assert planned_eta_seconds([_row(r, "recorded") for r in runs], parallel=2) is None


def test_compare_on_partial_records_says_how_many_runs_are_missing(tmp_path: Path) -> None:
    """Records a campaign collected while it ran carry (recorded, expected) in their Parquet metadata."""
    import pandas as pd
    import pyarrow.parquet as pq
    from typer.testing import CliRunner

    from analysis.records import RUNS_EXPECTED_KEY, RUNS_RECORDED_KEY, records_completeness
    from cli import app

    released = REPO.parent / "shared" / "data" / "released_runs_171.csv"
    if not released.is_file():
        pytest.skip("released records not present")
    df = pd.read_csv(released)
    df = df[df["campaign"] == "main"]
    src = tmp_path / "main.csv"
    df.to_csv(src, index=False)
    from analysis.records import read_records, write_records

    out = tmp_path / "records.parquet"
    write_records(read_records(src), out)
    n = read_records(src)["run_id"].nunique()
    table = pq.read_table(out)
    pq.write_table(table.replace_schema_metadata({**(table.schema.metadata or {}), RUNS_EXPECTED_KEY: b"60",
                                                  RUNS_RECORDED_KEY: str(n).encode()}), out)
    assert records_completeness(out) == (n, 60) and records_completeness(src) is None
    res = CliRunner().invoke(app, ["compare", str(out), "--resamples", "200"])
    assert res.exit_code == 0, res.output
    assert f"partial records: {n} of 60 runs recorded so far, {60 - n} still missing" in res.stderr
