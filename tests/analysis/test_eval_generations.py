"""Evaluation generations (issue 24): which settings decide a score, and analysis refusing to pair records scored
under two settings. Pure functions and the CLI on records derived from the released file."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest
import typer
from typer.testing import CliRunner

from analysis.record_checks import check_one_evaluation
from analysis.records import read_records, write_records
from analysis.schema import RecordsError
from evaluation.settings import evaluation_hash, evaluation_key
from cli import analysis_commands

REPO = Path(__file__).resolve().parents[2]
RELEASED = REPO.parent / "shared" / "data" / "released_runs_171.csv"


def test_evaluation_key_changes_with_what_decides_a_score_only() -> None:
    base = {"backend": "hf", "max_gen_toks": 32, "data_dir": "data/eval"}
    k = evaluation_key("db12", base)
    assert k == evaluation_key("db12", dict(base))  # deterministic
    assert evaluation_key("db12", {**base, "data_dir": "/elsewhere", "fixture_items": 8}) == k  # paths: no
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


@pytest.mark.skipif(not RELEASED.is_file(), reason="../shared/data/released_runs_171.csv not present")
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
