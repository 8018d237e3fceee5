"""Typed model, recipe and evaluation configs (issue 23): code reads typed fields, the stored form stays the YAML.

Why these matter to a user: a mistyped field in a model file or recipe is refused when the campaign is planned
(exit 2, naming the file and the key), not hours later inside a training job; and typing the configs must never
change a stored spec or a run key (tests/orchestrator/test_run_keys_stable.py pins the shipped campaigns)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from cli import app
from evaluation.settings import EvaluationOptions, evaluation_key
from orchestrator.grid import PolicyRef, RunSpec
from training.backend import TrainingConfigError, TrainRequest
from training.config import ModelConfig, RecipeConfig
from wtcommon.config_fields import ConfigFieldError
from wtcommon.errors import UserError

REPO = Path(__file__).resolve().parents[2]


def _run(**cfg) -> RunSpec:
    return RunSpec(run_key="k", run_id="c/m/p/s1", campaign="c", sub_campaign="main", group="c", model="m",
                   policy=PolicyRef("p", "none"), reference="p", seed=1, steps=2, save_freq=1, regime="",
                   recipe_name="r", backend="noop", suite="db12", gpus=0, est_hours=1.0, **cfg)


def test_typed_fields_with_defaults_and_the_mapping_kept_as_given():
    raw = {"name": "m", "path": "builtin:tiny_qwen2", "nnodes": 2, "gpus_per_node": 4, "vendor_note": [1, 2]}
    m = ModelConfig.from_mapping(raw)
    assert (m.path, m.nnodes, m.gpus_per_node, m.architecture) == ("builtin:tiny_qwen2", 2, 4, {})
    assert m.to_dict() == raw and m.to_dict() is not raw  # unknown key kept; a copy, never the live mapping
    r = RecipeConfig.from_mapping({"name": "r", "rollout": {"n": 4}, "sleep_s": 1})
    assert (r.backend, r.data, r.overrides, r.trainer, r.sleep_s, r.rollout_n()) == (None, None, None, {}, 1.0, 4)
    assert r.to_dict() == {"name": "r", "rollout": {"n": 4}, "sleep_s": 1}  # no default written in, 1 stays 1
    assert RecipeConfig.from_mapping({"overrides": {"actor_rollout_ref.rollout.n": 8}}).rollout_n() == 8
    e = EvaluationOptions.from_mapping({"limit": 5})
    assert (e.backend, e.limit, e.max_gen_toks, e.all_checkpoints, e.fixture_items) == ("hf", 5, None, False, 16)
    assert e.to_dict() == {"limit": 5}


@pytest.mark.parametrize("typ, raw, needle", [
    (ModelConfig, {"nnodes": 0}, "key 'nnodes': got 0; give an integer >= 1"),
    (ModelConfig, {"gpus_per_node": "8"}, "key 'gpus_per_node': got '8'; give an integer >= 0"),
    (ModelConfig, {"path": 7}, "key 'path': got 7; give a string"),
    (RecipeConfig, {"trainer": [1]}, "key 'trainer': expected a mapping, got list"),
    (RecipeConfig, {"sleep_s": "slow"}, "key 'sleep_s': got 'slow'; give a number"),
    (RecipeConfig, {"fail": 3}, "key 'fail': got 3; give true, false or 'config'"),
    (EvaluationOptions, {"limit": 0}, "limit: got 0; must be a positive integer or null"),
    (EvaluationOptions, {"limt": 5}, "unknown key(s) ['limt']"),
])
def test_a_bad_field_names_the_source_and_key_and_exits_2(typ, raw, needle):
    with pytest.raises(ConfigFieldError) as exc:
        typ.from_mapping(raw, "campaigns/x.yaml")
    assert needle in str(exc.value)
    assert isinstance(exc.value, UserError) and exc.value.exit_code == 2


def test_the_stored_form_round_trips_byte_for_byte():
    """`to_json` holds the mappings as given and `from_json` types them again: same JSON, same config hash."""
    run = _run(model_cfg={"path": "x", "nnodes": 1, "extra": {"a": 1}}, recipe_cfg={"name": "r", "sleep_s": 0},
               evaluation={"limit": 3})
    assert isinstance(run.model_cfg, ModelConfig) and isinstance(run.evaluation, EvaluationOptions)
    stored = json.loads(run.to_json())
    assert stored["model_cfg"] == {"path": "x", "nnodes": 1, "extra": {"a": 1}}
    assert stored["recipe_cfg"] == {"name": "r", "sleep_s": 0} and stored["evaluation"] == {"limit": 3}
    back = RunSpec.from_json(run.to_json())
    assert back == run and back.to_json() == run.to_json() and back.config_hash == run.config_hash
    assert run.eval_key == evaluation_key("db12", {"limit": 3})


def test_requests_type_a_mapping_and_refuse_a_bad_one_as_a_config_error(tmp_path):
    req = TrainRequest(run_id="r", run_key="k", policy={"name": "p"}, seed=1, out_dir=tmp_path,
                       recipe={"name": "r", "trainer": {"total_steps": 2}}, model_path="builtin:tiny_qwen2",
                       model={"nnodes": 1})
    assert req.recipe.trainer == {"total_steps": 2} and req.model is not None and req.model.nnodes == 1
    with pytest.raises(TrainingConfigError, match="run r: recipe: key 'rollout': expected a mapping"):
        TrainRequest(run_id="r", run_key="k", policy={"name": "p"}, seed=1, out_dir=tmp_path,
                     recipe={"rollout": 4}, model_path="builtin:tiny_qwen2")


def test_plan_refuses_a_mistyped_recipe_naming_its_file(tmp_path):
    proj = tmp_path / "proj"
    (proj / "recipe").mkdir(parents=True)
    (proj / "recipe" / "bad.yaml").write_text(yaml.safe_dump({"name": "bad", "backend": "noop", "sleep_s": "1s"}))
    spec = yaml.safe_load((REPO / "campaigns" / "demo.yaml").read_text())
    spec.update(backend="noop", recipe="bad")
    (proj / "c.yaml").write_text(yaml.safe_dump(spec, sort_keys=False))
    res = CliRunner().invoke(app, ["plan", str(proj / "c.yaml")])
    assert res.exit_code == 2
    out = " ".join(res.output.split())
    assert "bad.yaml: key 'sleep_s': got '1s'; give a number" in out
