"""The one metrics reader (wtcommon/metrics.py): both shapes our backends write come out as the same flat rows."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from wtcommon.metrics import MetricsFileError, flat_row, read_metrics_jsonl, training_metrics_files, training_rows

VERL_FIXTURE = Path(__file__).parent / "training" / "fixtures" / "verl_gfpo_s1.jsonl"  # a real verl file


def test_verl_rows_and_local_rows_read_alike(tmp_path: Path) -> None:
    local = tmp_path / "local.jsonl"
    local.write_text(json.dumps({"step": 1, "policy/kept_frac": 0.5}) + "\n")
    verl = tmp_path / "verl.jsonl"
    verl.write_text(json.dumps({"step": 1, "data": {"windtunnel/kept_frac": 0.5, "actor/grad_norm": 0.1}}) + "\n")
    assert read_metrics_jsonl(local, torn_tail="raise")[0] == [{"step": 1, "policy/kept_frac": 0.5}]
    assert read_metrics_jsonl(verl, torn_tail="raise")[0] == [{"step": 1, "windtunnel/kept_frac": 0.5,
                                                               "actor/grad_norm": 0.1}]
    assert read_metrics_jsonl(verl, torn_tail="raise", raw=True)[0] == [json.loads(verl.read_text())]
    assert flat_row({"step": 2, "data": {"step": 9, "x": 1}}) == {"step": 2, "x": 1}  # the line's step wins


def test_a_real_verl_file_keeps_every_metric_under_verls_name() -> None:
    raw = [json.loads(line) for line in VERL_FIXTURE.read_text().splitlines()]
    rows, _ = read_metrics_jsonl(VERL_FIXTURE, torn_tail="raise")
    assert [r["step"] for r in rows] == [r["step"] for r in raw]
    for row, line in zip(rows, raw, strict=True):
        assert row == {"step": line["step"], **line["data"]}
        assert 0 < row["windtunnel/kept_frac"] < 1 and "actor/grad_norm" in row


def test_training_files_are_verls_launch_files_while_they_exist(tmp_path: Path) -> None:
    assert training_metrics_files(tmp_path) == [tmp_path / "metrics.jsonl"] and training_rows(tmp_path) == []
    (tmp_path / "metrics.jsonl").write_text('{"step": 1, "reward/mean": 0.2}\n{"step": 2, "rew')  # torn: left out
    assert training_rows(tmp_path) == [{"step": 1, "reward/mean": 0.2}]
    (tmp_path / "verl_metrics").mkdir()
    shutil.copy(VERL_FIXTURE, tmp_path / "verl_metrics" / "launch_000.jsonl")
    (tmp_path / "verl_metrics" / "launch_001.jsonl").write_text('{"step": 2, "data": {"actor/grad_norm": 0.3}}\n')
    assert [f.name for f in training_metrics_files(tmp_path)] == ["launch_000.jsonl", "launch_001.jsonl"]
    rows = training_rows(tmp_path)
    assert [r["step"] for r in rows] == [1, 2, 2] and rows[-1] == {"step": 2, "actor/grad_norm": 0.3}


def test_a_corrupt_middle_line_is_an_error_naming_the_file(tmp_path: Path) -> None:
    p = tmp_path / "m.jsonl"
    p.write_text('{"step": 1, "data": {"x": 1}}\n[1, 2]\n{"step": 3, "data": {"x": 3}}\n')
    with pytest.raises(MetricsFileError, match=r"m\.jsonl: line 2"):
        read_metrics_jsonl(p, torn_tail="skip")
