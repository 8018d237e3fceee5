"""The `noop` training backend behind `get_backend`: the campaign path without a model."""

from __future__ import annotations

from pathlib import Path

import pytest

from orchestrator.training.backend import TrainingConfigError, TrainRequest
from orchestrator.training.registry import get_backend


def _req(tmp_path: Path, **recipe) -> TrainRequest:
    return TrainRequest(run_id="c/m/p/s1", run_key="k1", policy={}, seed=1, out_dir=tmp_path / "run" / "train",
                        recipe={"name": "noop", **recipe}, model_path="builtin:none", total_steps=3)


def test_noop_trains_one_checkpoint_and_logs_each_execution(tmp_path: Path) -> None:
    backend = get_backend("noop")
    assert backend.needs_train_files is False and get_backend("local").needs_train_files is True
    res = backend.train(_req(tmp_path))
    assert [c.step for c in res.checkpoints] == [3]
    assert (res.checkpoints[0].path / "model.safetensors").read_bytes() == b"k1"
    assert len(res.metrics_path.read_text().splitlines()) == 3
    backend.train(_req(tmp_path))
    log = (tmp_path / "run" / "executions.log").read_text().split()
    assert log[0::3] == ["train", "train"]


def test_noop_failures_are_typed_config_or_transient(tmp_path: Path) -> None:
    with pytest.raises(TrainingConfigError, match="deterministically"):
        get_backend("noop").train(_req(tmp_path, fail="config"))
    with pytest.raises(RuntimeError, match="configured to fail") as exc:
        get_backend("noop").train(_req(tmp_path, fail=True))
    assert not isinstance(exc.value, TrainingConfigError)  # transient: the scheduler retries it
