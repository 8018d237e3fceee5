"""`campaign train` and `campaign data synthetic`: user errors exit 2 with a message naming the input."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest
from typer.testing import CliRunner

from cli import app

REPO = Path(__file__).resolve().parents[2]
runner = CliRunner()


def test_missing_policy_file_exits_2_and_writes_nothing(tmp_path):
    out = tmp_path / "run"
    res = runner.invoke(app, ["train", "--policy", str(tmp_path / "nope.yaml"), "--seed", "1", "--out", str(out)])
    assert res.exit_code == 2
    assert "nope.yaml" in res.output and "not found" in res.output
    assert not out.exists()


def test_invalid_policy_exits_2_naming_the_field(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("name: bad\nmechanism: shuffle\n")
    res = runner.invoke(app, ["train", "--policy", str(bad), "--seed", "1", "--out", str(tmp_path / "run")])
    assert res.exit_code == 2
    assert "mechanism" in res.output and "Traceback" not in res.output
    assert not (tmp_path / "run").exists()


def test_unknown_backend_and_recipe_mismatch_exit_2(tmp_path):
    pol = str(REPO / "campaigns/policy/baseline.yaml")
    res = runner.invoke(app, ["train", "--policy", pol, "--seed", "1", "--out", str(tmp_path), "--backend", "tpu"])
    assert res.exit_code == 2 and "--backend" in res.output
    res = runner.invoke(app, ["train", "--policy", pol, "--seed", "1", "--out", str(tmp_path), "--recipe", "grpo_7b"])
    assert res.exit_code == 2 and "grpo_7b" in res.output and "verl" in res.output
    res = runner.invoke(app, ["train", "--policy", pol, "--seed", "1", "--out", str(tmp_path), "--recipe", "nosuch"])
    assert res.exit_code == 2 and "nosuch.yaml" in res.output


def test_data_synthetic_writes_corpus_and_fixtures(tmp_path):
    res = runner.invoke(app, ["data", "synthetic", "--out", str(tmp_path), "--seed", "3", "--per-domain", "10",
                              "--test-per-domain", "2", "--eval-items", "3"])
    assert res.exit_code == 0, res.output
    assert len(pd.read_parquet(tmp_path / "train.parquet")) == 30
    assert len(list((tmp_path / "eval").glob("*.parquet"))) == 12
    res = runner.invoke(app, ["data", "synthetic", "--out", str(tmp_path), "--per-domain", "0"])
    assert res.exit_code == 2 and "--per-domain" in res.output


@pytest.mark.slow
def test_train_command_runs_and_logs_to_mlflow(tmp_path, cache_dir, tiny_base):
    from orchestrator import tracking

    out = tmp_path / "run"
    res = runner.invoke(app, ["train", "--policy", str(REPO / "campaigns/policy/topk.yaml"), "--seed", "3",
                              "--out", str(out), "--steps", "2", "--cache-dir", str(cache_dir)])
    assert res.exit_code == 0, res.output
    assert "checkpoint step 2" in res.output
    # what the README says to check after a smoke test, printed (issue 27), and no verl import noise
    assert "policy (mean over 2 steps): " in res.output and "policy/kept_frac 0.5" in res.output
    assert "engine is not available" not in res.output and "No supported accelerator" not in res.output
    rows = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in rows] == [0, 1, 2]
    uri = tracking.default_uri(out)
    client = tracking.client(uri)
    exp = client.get_experiment_by_name("windtunnel-train")
    run = client.search_runs([exp.experiment_id])[0]
    assert run.info.status == "FINISHED"
    assert [m.step for m in client.get_metric_history(run.info.run_id, "policy/kept_frac")] == [1, 2]
