"""Evaluation generations (issue 24): which settings decide a score, and analysis refusing to pair records scored
under two settings. Pure functions and the CLI on records derived from the released file."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import typer
from typer.testing import CliRunner

from analysis.record_checks import check_one_evaluation, check_one_grader
from analysis.records import read_records, write_records
from analysis.schema import RecordsError
from evaluation.settings import evaluation_hash, evaluation_key
from cli import analysis_commands
from tests.released import RELEASED, needs_released


def test_evaluation_key_changes_with_what_decides_a_score_only() -> None:
    base = {"backend": "hf", "max_gen_toks": 32, "data_dir": "data/eval"}
    k = evaluation_key("db12", base)
    assert k == evaluation_key("db12", dict(base))  # deterministic
    assert evaluation_key("db12", {**base, "data_dir": "/elsewhere", "fixture_items": 8}) == k  # paths: no
    assert evaluation_key("db12", {**base, "memorization": True}) == k  # the base-model probe scores nothing
    assert evaluation_key("db12", {**base, "gates": {"min_parse_rate": 0.5}}) == k  # the suite's default gate
    for changed in ({"gates": {"min_parse_rate": 0.3}}, {"max_gen_toks": 64}, {"limit": 10}, {"backend": "vllm"},
                    {"all_checkpoints": True}):
        assert evaluation_key("db12", {**base, **changed}) != k, changed
    assert evaluation_key("synth_dev", base) != k


def test_evaluation_hash_names_the_data_too(tmp_path: Path) -> None:
    k = evaluation_key("db12", {})
    assert evaluation_hash(k, tmp_path) == evaluation_hash(k, None)  # no manifest: the key alone
    (tmp_path / "manifest.json").write_text(json.dumps({"kind": "fixture", "benchmarks": {"gsm8k": {"sha256": "a"}}}))
    h = evaluation_hash(k, tmp_path)
    assert h != evaluation_hash(k, None)
    (tmp_path / "manifest.json").write_text(json.dumps({"kind": "fixture", "benchmarks": {"gsm8k": {"sha256": "b"}}}))
    assert evaluation_hash(k, tmp_path) != h


def _frame(hashes: list[str]) -> pd.DataFrame:
    rows = [{"run_key": f"k{i}", "run_id": f"c/m/p{i % 2}/s{i}", "campaign": "c", "model": "m", "regime": "",
             "step": 2, "eval_hash": h} for i, h in enumerate(hashes)]
    return pd.DataFrame(rows)


def test_one_group_of_two_evaluation_settings_is_refused_naming_both() -> None:
    check_one_evaluation(_frame(["", "", ""]))  # released / older records: one unknown generation
    check_one_evaluation(_frame(["aaa", "aaa"]))
    with pytest.raises(RecordsError) as exc:
        check_one_evaluation(_frame(["aaa", "bbb", "bbb"]), "recs.parquet")
    msg = str(exc.value)
    assert "recs.parquet" in msg and "aaa (1 run" in msg and "bbb (2 runs" in msg and "c/m/2" in msg
    assert "--allow-mixed-evaluations" in msg
    with pytest.raises(RecordsError, match="unknown"):
        check_one_evaluation(_frame(["aaa", ""]))
    # two groups, each consistent: fine (another step is another comparison)
    check_one_evaluation(pd.concat([_frame(["aaa"]), _frame(["bbb"]).assign(step=3, run_key="z")]))


@needs_released
def test_compare_refuses_mixed_evaluations_unless_told(tmp_path: Path) -> None:
    df = read_records(RELEASED)
    one = df[(df["campaign"] == df["campaign"].iloc[0]) & (df["model"] == df["model"].iloc[0])].copy()
    runs = sorted(one["run_key"].unique())
    one["eval_hash"] = one["run_key"].map({k: ("0f0f0f0f0f0f0f0f" if i % 2 else "1e1e1e1e1e1e1e1e")
                                           for i, k in enumerate(runs)})
    path = write_records(one, tmp_path / "mixed.parquet")
    app = typer.Typer()
    analysis_commands.register(app)
    res = CliRunner().invoke(app, ["compare", str(path), "--resamples", "200"])
    assert res.exit_code == 2, res.output
    assert "0f0f0f0f0f0f0f0f" in res.output and "1e1e1e1e1e1e1e1e" in res.output
    res = CliRunner().invoke(app, ["compare", str(path), "--resamples", "200", "--allow-mixed-evaluations"])
    assert res.exit_code == 0, res.output


def _graded(labels: list[str], hashes: list[str] | None = None) -> pd.DataFrame:
    rows = [{"run_key": f"k{i}", "run_id": f"c/m/p{i % 2}/s{i}", "campaign": "c", "model": "m", "regime": "",
             "step": 2, "benchmark": "gsm8k", "eval_hash": (hashes or [""] * len(labels))[i],
             "harness_version": f"lm-eval 0.4; windtunnel-eval 1; backend hf; grader {lab}; max_gen_toks 32"
             if lab else ""} for i, lab in enumerate(labels)]
    return pd.DataFrame(rows)


def test_one_benchmark_under_two_grader_versions_is_refused_naming_runs_and_versions() -> None:
    check_one_grader(_graded(["", ""]))  # released records name no version: one "unknown" version
    check_one_grader(_graded(["math-v3", "math-v3"]))
    with pytest.raises(RecordsError) as exc:
        check_one_grader(_graded(["math-v3", "math-v4", "math-v4"]), "recs.parquet")
    msg = str(exc.value)
    assert "recs.parquet" in msg and "gsm8k scored under 2 grader versions" in msg
    assert "math-v3 (1 run: c/m/p0/s0)" in msg and "math-v4 (2 runs: c/m/p0/s2, c/m/p1/s1)" in msg
    assert "--allow-mixed-graders" in msg and "campaign eval --regrade" in msg
    # allowed mixed graders: the settings hash must agree only among runs of the same graders
    mixed = _graded(["math-v3", "math-v4", "math-v4"], ["aaa", "bbb", "bbb"])
    check_one_evaluation(mixed, by_graders=True)
    with pytest.raises(RecordsError, match="eval_hash|evaluation settings"):
        check_one_evaluation(mixed)
    with pytest.raises(RecordsError):
        check_one_evaluation(_graded(["math-v4", "math-v4"], ["aaa", "bbb"]), by_graders=True)


@needs_released
def test_compare_and_paired_comparisons_refuse_mixed_graders_unless_told(tmp_path: Path) -> None:
    from analysis.comparisons import paired_comparisons
    from evaluation.suite import load_suite

    df = read_records(RELEASED)
    one = df[(df["campaign"] == df["campaign"].iloc[0]) & (df["model"] == df["model"].iloc[0])].copy()
    first = sorted(one["run_key"].unique())[0]
    one["harness_version"] = np.where(one["run_key"] == first, "grader math-v2", "grader math-v3")
    with pytest.raises(RecordsError, match="math-v2 .1 run"):
        paired_comparisons(one, load_suite("db12"), n_resamples=100)
    assert len(paired_comparisons(one, load_suite("db12"), n_resamples=100, allow_mixed_graders=True).table)
    path = write_records(one, tmp_path / "mixed.parquet")
    app = typer.Typer()
    analysis_commands.register(app)
    res = CliRunner().invoke(app, ["compare", str(path), "--resamples", "200"])
    assert res.exit_code == 2 and "math-v2" in res.output and "math-v3" in res.output, res.output
    res = CliRunner().invoke(app, ["compare", str(path), "--resamples", "200", "--allow-mixed-graders"])
    assert res.exit_code == 0, res.output
