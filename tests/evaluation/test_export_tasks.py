"""`campaign export-tasks`: plain lm-eval on the exported tasks reproduces the evaluator's scores."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from cli import app
from evaluation.run_meta import RunMeta

REPO = Path(__file__).resolve().parents[2]
BENCH = ["math500", "kk_hard", "gpqa_diamond"]


def test_export_refuses_missing_data_and_existing_tasks(tmp_path):
    r = CliRunner().invoke(app, ["export-tasks", str(tmp_path / "t"), "--data-dir", str(tmp_path / "none")])
    assert r.exit_code == 2 and "not found" in r.output
    (tmp_path / "t").mkdir()
    (tmp_path / "t" / "x.yaml").write_text("task: x\n")
    from training.synthetic import write_eval_fixtures

    write_eval_fixtures(tmp_path / "d", n_items=2)
    r = CliRunner().invoke(app, ["export-tasks", str(tmp_path / "t"), "--data-dir", str(tmp_path / "d")])
    assert r.exit_code == 2 and "--force" in r.output


@pytest.mark.slow
def test_lm_eval_cli_on_exported_tasks_matches_campaign_eval(tmp_path):
    from evaluation.benchmark_data import write_manifest
    from evaluation.evaluator import evaluate_checkpoint
    from training.synthetic import write_eval_fixtures
    from training.warmup import base_model

    ckpt = base_model(yaml.safe_load((REPO / "campaigns/model/tiny_qwen2.yaml").read_text()),
                      yaml.safe_load((REPO / "campaigns/recipe/cpu_tiny.yaml").read_text()))
    data = tmp_path / "data"
    write_manifest(data, sorted(write_eval_fixtures(data, n_items=8)), kind="fixture")
    rec = evaluate_checkpoint(ckpt, data_dir=data, benchmarks=BENCH, max_gen_toks=32, progress=False,
                              run_meta=RunMeta(run_id="x", campaign="c", model="tiny", policy="baseline", seed=0,
                                               step=0)).records
    ours = dict(zip(rec["benchmark"], rec["accuracy"], strict=True))

    tasks = tmp_path / "tasks"
    r = CliRunner().invoke(app, ["export-tasks", str(tasks), "--data-dir", str(data), "--max-gen-toks", "32",
                                 *[a for b in BENCH for a in ("--benchmark", b)]])
    assert r.exit_code == 0, r.output
    cmd = r.output.strip().splitlines()[-1].split()
    assert cmd[0] == "lm_eval"
    cmd = [str(Path(sys.executable).with_name("lm_eval"))] + [
        a.replace("CHECKPOINT", str(ckpt)).replace("OUT", str(tmp_path / "out")) for a in cmd[1:]]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=900)
    assert p.returncode == 0, p.stderr[-3000:]
    res = json.loads(next((tmp_path / "out").rglob("results_*.json")).read_text())["results"]
    theirs = {t.removeprefix("wt_db12_"): 100.0 * v["acc,none"] for t, v in res.items()}
    assert theirs == pytest.approx(ours, abs=1e-9)


def test_export_of_a_sampled_benchmark_uses_repeats_and_the_take_first_k_filter(tmp_path):
    from training.synthetic import write_eval_fixtures

    raw = yaml.safe_load((REPO / "campaigns/suite/db12.yaml").read_text())
    raw["benchmarks"][1].update(samples=4, temperature=0.8, seed=2)  # aime24
    suite = tmp_path / "sampled.yaml"
    suite.write_text(yaml.safe_dump(raw))
    write_eval_fixtures(tmp_path / "d", n_items=2)
    r = CliRunner().invoke(app, ["export-tasks", str(tmp_path / "t"), "--data-dir", str(tmp_path / "d"),
                                 "--suite", str(suite), "--benchmark", "aime24", "--benchmark", "gsm8k"])
    assert r.exit_code == 0, r.output
    aime = yaml.safe_load((tmp_path / "t" / "wt_db12_aime24.yaml").read_text().split("custom_dataset:")[0])
    assert aime["repeats"] == 4
    assert aime["filter_list"] == [{"name": "none", "filter": [{"function": "take_first_k", "k": 4}]}]
    assert aime["generation_kwargs"]["do_sample"] is True and aime["generation_kwargs"]["temperature"] == 0.8
    gsm = yaml.safe_load((tmp_path / "t" / "wt_db12_gsm8k.yaml").read_text().split("custom_dataset:")[0])
    assert "repeats" not in gsm and "filter_list" not in gsm and gsm["generation_kwargs"]["do_sample"] is False
    assert "aime24 (4 samples, temperature 0.8)" in (tmp_path / "t" / "README.md").read_text()
