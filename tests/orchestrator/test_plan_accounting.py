"""`campaign plan`: duration on the cluster, GPU-hours per model, evaluation GPU-hours, matrix, assumptions."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from cli import app
from orchestrator.accounting import makespan_hours
from orchestrator.engine.grid import PolicyRef, RunSpec

REPO = Path(__file__).resolve().parents[2]
runner = CliRunner()


def _run(i: int, gpus: int, hours: float) -> RunSpec:
    return RunSpec(run_key=f"k{i}", run_id=f"r{i}", campaign="c", sub_campaign="s", group="g", model="m",
                   policy=PolicyRef("p", "none"), reference="p", seed=i, steps=1, save_freq=1, regime="",
                   recipe_name="x", backend="noop", suite="db12", gpus=gpus, est_hours=hours)


def test_makespan_by_hand():
    # 4 runs of 8 GPUs × 10 h on 16 GPUs: two waves → 20 h; one 16-GPU run of 5 h then adds a wave of 5 h
    runs = [_run(i, 8, 10.0) for i in range(4)]
    assert makespan_hours(runs, 16) == 20.0
    assert makespan_hours(runs + [_run(9, 16, 5.0)], 16) == 25.0
    assert makespan_hours(runs, 8) == 40.0
    assert makespan_hours([_run(0, 16, 1.0)], 8) is None  # cannot be scheduled: never a number


def test_paper_plan_duration_and_per_model_hours_in_table_and_json():
    r = runner.invoke(app, ["plan", str(REPO / "campaigns" / "paper"), "--gpus", "64", "--format", "json"])
    assert r.exit_code == 0, r.output
    acc = json.loads(r.output)
    assert acc["total_runs"] == 591
    assert acc["duration"]["gpus"] == 64
    # the schedule cannot beat the GPU-hour bound, and with 591 runs it should be close to it
    bound = acc["gpu_hours"] / 64
    assert bound <= acc["duration"]["hours"] <= bound * 1.1
    assert sum(acc["gpu_hours_by_model"].values()) == pytest.approx(acc["gpu_hours"], abs=1.0)
    assert acc["eval_checkpoints"] == 591 and acc["eval_gpu_hours"] == pytest.approx(591 * 0.5)
    assert {a["basis"] for a in acc["assumptions"]} == {"published", "inferred"}
    assert set(acc["matrix"]["baseline"]) >= {"qwen25_7b_base", "qwen25_05b_instruct"}
    t = runner.invoke(app, ["plan", str(REPO / "campaigns" / "paper"), "--gpus", "64"], terminal_width=200)
    assert t.exit_code == 0
    assert f"{acc['duration']['hours']:,.1f} h" in t.output and "qwen25_14b_base" in t.output
    assert f"{acc['gpu_hours_by_model']['qwen25_14b_base']:,}" in t.output


def test_plan_runs_in_every_format():
    demo = str(REPO / "campaigns" / "demo.yaml")
    js = json.loads(runner.invoke(app, ["plan", demo, "--runs", "--format", "json"]).output)
    assert len(js["runs"]) == 8
    csv = runner.invoke(app, ["plan", demo, "--format", "csv"]).output.strip().splitlines()
    assert csv[0].startswith("run_id,") and len(csv) == 9
    table = runner.invoke(app, ["plan", demo, "--runs", "--matrix"], terminal_width=200).output
    assert "demo/tiny_qwen2/gfpo/s2" in table and "seeds by policy × model" in table
    assert runner.invoke(app, ["plan", demo, "--format", "yaml"]).exit_code == 2


def test_plan_counts_evaluation_hours_with_k_samples(tmp_path, monkeypatch):
    """A suite decoding aime24 with 16 samples costs 16x its tokens: the paper plan's evaluation GPU-hours grow by
    the token share of the 15 extra passes (30 of 6,194 items at the same generation limit)."""
    import yaml

    import evaluation.suite as suite_mod

    raw = yaml.safe_load((REPO / "campaigns" / "suite" / "db12.yaml").read_text())
    raw["benchmarks"][1].update(samples=16, temperature=0.6)
    (tmp_path / "db12.yaml").write_text(yaml.safe_dump(raw))
    monkeypatch.setattr(suite_mod, "SUITE_DIR", tmp_path)
    r = runner.invoke(app, ["plan", str(REPO / "campaigns" / "paper"), "--format", "json"])
    assert r.exit_code == 0, r.output
    acc = json.loads(r.output)
    factor = (6194 + 15 * 30) / 6194
    assert acc["eval_sample_factor"] == pytest.approx(factor, abs=1e-4)
    assert acc["eval_gpu_hours"] == pytest.approx(591 * 0.5 * factor, abs=0.1)
    t = runner.invoke(app, ["plan", str(REPO / "campaigns" / "paper")], terminal_width=250)
    assert f"×{factor:.2f} the tokens of one greedy pass" in t.output


def test_plan_workdir_without_finished_runs_times_nothing_and_creates_nothing(tmp_path):
    """`plan --workdir W` reads the campaign's finished stages from W's ledger (tests/orchestrator/test_cli_demo.py
    checks the timing against a real demo); with no ledger there it says nothing of them and creates no ledger."""
    from evaluation.benchmark_data import write_manifest
    from training.synthetic import write_eval_fixtures

    wd = tmp_path / "never_submitted"
    paths = write_eval_fixtures(wd / "data" / "eval", seed=42, n_items=4, suite="db12")  # what the plan checks
    write_manifest(wd / "data" / "eval", sorted(paths), kind="fixture")
    res = CliRunner().invoke(app, ["plan", str(REPO / "campaigns" / "demo.yaml"), "--workdir", str(wd), "--json"])
    assert res.exit_code == 0, res.output
    assert "measured" not in json.loads(res.stdout) and not (wd / "ledger.db").exists()
