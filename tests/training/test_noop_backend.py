"""The `noop` training backend behind `get_backend` (the campaign path without a model), and the checkpoint
evaluation every other backend inherits."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from evaluation.suite import load_suite
from training.errors import StageConfigError
from training.backend import Checkpoint, EvalRequest, TrainingConfigError, TrainRequest
from training.registry import get_backend


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


def _eval_req(tmp_path: Path, policy: str, seed: int, **recipe) -> EvalRequest:
    meta = {"run_key": f"k-{policy}-{seed}", "run_id": f"c/m/{policy}/s{seed}", "campaign": "c", "model": "m",
            "policy": policy, "mechanism": "m", "seed": seed, "step": 3, "regime": "r", "config_hash": "h"}
    return EvalRequest(checkpoint=Checkpoint(3, tmp_path / "ckpt"), suite="db12", run_meta=meta, recipe_name="sim",
                       recipe=recipe, options={}, data_dir=tmp_path / "no-data", cache_dir=tmp_path / "cache",
                       out_dir=tmp_path / "run" / "eval" / "step_3", run_dir=tmp_path / "run")


def test_noop_evaluation_is_missing_never_zero_unless_the_recipe_simulates(tmp_path: Path) -> None:
    backend = get_backend("noop")
    assert backend.needs_eval_data is False and get_backend("verl").needs_eval_data is True
    rec = backend.evaluate(_eval_req(tmp_path, "baseline", 1))  # no data dir, no model: nothing is read
    assert list(rec["benchmark"]) == [b.id for b in load_suite("db12").benchmarks]
    assert rec["accuracy"].isna().all() and set(rec["harness_version"]) == {"noop"}
    assert (rec["seed"] == 1).all() and (rec["step"] == 3).all()
    assert (tmp_path / "run" / "executions.log").read_text().split()[0] == "evaluate"

    sim = {"base": 40.0, "effects": {"maxvar": 5.0}, "seed_sd": 3.0, "noise_sd": 0.0}
    a = backend.evaluate(_eval_req(tmp_path, "baseline", 1, simulate=sim))
    b = backend.evaluate(_eval_req(tmp_path, "maxvar", 1, simulate=sim))
    assert set(a["harness_version"]) == {"noop-simulated"}
    # the seed term is shared by every policy of that seed, so without noise the pair differs by the effect
    np.testing.assert_allclose(b["accuracy"] - a["accuracy"], 5.0)
    assert not np.allclose(backend.evaluate(_eval_req(tmp_path, "baseline", 2, simulate=sim))["accuracy"],
                           a["accuracy"])
    with pytest.raises(StageConfigError, match=r"recipe 'sim': key 'simulate': unknown \['efects'\]"):
        backend.evaluate(_eval_req(tmp_path, "baseline", 1, simulate={"efects": {}}))


def test_a_real_backend_evaluation_error_is_a_stage_configuration_error(tmp_path: Path) -> None:
    """The default `evaluate` (the real evaluator): missing data or checkpoint is deterministic, never retried."""
    with pytest.raises(StageConfigError, match=r"^evaluation of c/m/baseline/s1 step 3: .*ckpt: checkpoint not found"):
        get_backend("local").evaluate(_eval_req(tmp_path, "baseline", 1))
    assert not (tmp_path / "run").exists()  # nothing half-written
