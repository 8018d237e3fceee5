"""`campaign eval / calibrate / audit contamination` through the real Typer app."""

from __future__ import annotations

import pandas as pd
import pytest
from typer.testing import CliRunner

from evaluation.benchmark_data import FIXTURE_DIR
from cli import app

runner = CliRunner()


def test_eval_bad_inputs_exit_2_with_one_line(tmp_path):
    r = runner.invoke(app, ["eval", str(tmp_path / "nope")])
    assert r.exit_code == 2 and "checkpoint not found" in r.stderr and "Traceback" not in r.output
    ck = tmp_path / "ck"
    ck.mkdir()
    r = runner.invoke(app, ["eval", str(ck), "--data-dir", str(tmp_path / "missing")])
    assert r.exit_code == 2 and "campaign data benchmarks" in r.stderr
    r = runner.invoke(app, ["eval", str(ck), "--suite", "nosuch", "--data-dir", str(FIXTURE_DIR)])
    assert r.exit_code == 2 and "suite file not found" in r.stderr
    r = runner.invoke(app, ["eval", str(ck), "--backend", "tpu", "--data-dir", str(FIXTURE_DIR)])
    assert r.exit_code == 2 and "--backend 'tpu'" in r.stderr


@pytest.mark.slow
def test_eval_writes_records_and_item_log(boxed_model, tmp_path):
    out = tmp_path / "rec.csv"
    r = runner.invoke(app, ["eval", str(boxed_model), "--data-dir", str(FIXTURE_DIR), "--benchmark", "gsm8k",
                            "--max-gen-toks", "32", "--out", str(out), "--policy", "baseline", "--seed", "2"])
    assert r.exit_code == 0, r.output + r.stderr
    df = pd.read_csv(out)
    assert df[["benchmark", "accuracy", "seed", "policy"]].values.tolist() == [["gsm8k", 100.0, 2, "baseline"]]
    assert (tmp_path / "rec.items.jsonl.gz").is_file()


@pytest.mark.slow
def test_calibrate_passes_aligned_model_and_fails_random_one(boxed_model, random_model):
    args = ["--data-dir", str(FIXTURE_DIR), "--benchmark", "gsm8k", "--max-gen-toks", "32", "--n", "4"]
    ok = runner.invoke(app, ["calibrate", str(boxed_model), *args])
    assert ok.exit_code == 0, ok.output + ok.stderr
    assert "calibration passed" in ok.output
    bad = runner.invoke(app, ["calibrate", str(random_model), *args])
    assert bad.exit_code == 1 and "FAIL gsm8k:" in bad.stderr and "parse rate 0.00 < 0.5" in bad.stderr


def test_audit_contamination_reports_and_fails_on_match(tmp_path):
    gsm = pd.read_parquet(FIXTURE_DIR / "gsm8k.parquet")
    train = pd.DataFrame({"prompt": [[{"role": "user", "content": gsm.prompt[0]}],
                                     [{"role": "user", "content": "An unrelated training question about 12 cats."}]]})
    path = tmp_path / "train.parquet"
    train.to_parquet(path)
    r = runner.invoke(app, ["audit", "contamination", "--train", str(path), "--data-dir", str(FIXTURE_DIR),
                            "--out", str(tmp_path / "m.csv"), "--fail-on-match"])
    assert r.exit_code == 1, r.output + r.stderr
    m = pd.read_csv(tmp_path / "m.csv")
    assert m[["train_index", "benchmark", "item_id", "kind"]].values.tolist() == [[0, "gsm8k", "gsm8k-0", "exact"]]
    r = runner.invoke(app, ["audit", "contamination", "--train", str(path), "--data-dir", str(FIXTURE_DIR)])
    assert r.exit_code == 0
    before = (tmp_path / "m.csv").read_bytes()  # issue 59: an existing --out is replaced only with --force
    r = runner.invoke(app, ["audit", "contamination", "--train", str(path), "--data-dir", str(FIXTURE_DIR),
                            "--out", str(tmp_path / "m.csv")])
    assert r.exit_code == 2 and "--force" in r.stderr and (tmp_path / "m.csv").read_bytes() == before
    r = runner.invoke(app, ["audit", "contamination", "--train", str(path), "--data-dir", str(FIXTURE_DIR),
                            "--out", str(tmp_path / "m.csv"), "--force"])
    assert r.exit_code == 0
    pd.DataFrame({"text": ["x"]}).to_parquet(tmp_path / "bad.parquet")
    r = runner.invoke(app,
                      ["audit", "contamination", "--train", str(tmp_path / "bad.parquet"), "--data-dir",
                       str(FIXTURE_DIR)])
    assert r.exit_code == 2 and "no 'prompt' column" in r.stderr


def test_data_benchmarks_rejects_unknown_ids(tmp_path):
    r = runner.invoke(app, ["data", "benchmarks", "--out", str(tmp_path), "--only", "mmlu_history"])
    assert r.exit_code == 2 and "no builder" in r.stderr
    r = runner.invoke(app, ["data", "benchmarks", "--out", str(tmp_path), "--only", "gsm8k", "--revision", "gsm8k"])
    assert r.exit_code == 2 and "expected ID=SHA" in r.stderr

