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
from orchestrator.engine.grid import PolicyRef, RunSpec
from training.backend import TrainingConfigError, TrainRequest
from training.config import ActorSection, ModelConfig, RecipeConfig, RolloutSection, TrainerSection
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
    assert (r.backend, r.data, r.overrides, r.trainer.raw, r.sleep_s, r.rollout_n()) == (None, None, None, {}, 1.0, 4)
    assert r.to_dict() == {"name": "r", "rollout": {"n": 4}, "sleep_s": 1}  # no default written in, 1 stays 1
    assert RecipeConfig.from_mapping({"overrides": {"actor_rollout_ref.rollout.n": 8}}).rollout_n() == 8
    e = EvaluationOptions.from_mapping({"limit": 5})
    assert (e.backend, e.limit, e.max_gen_toks, e.all_checkpoints, e.fixture_items) == ("hf", 5, None, False, 16)
    assert e.to_dict() == {"limit": 5} and not e.memorization
    assert EvaluationOptions.from_mapping({"memorization": True}).memorization


@pytest.mark.parametrize("typ, raw, needle", [
    (ModelConfig, {"nnodes": 0}, "key 'nnodes': got 0; give an integer >= 1"),
    (ModelConfig, {"gpus_per_node": "8"}, "key 'gpus_per_node': got '8'; give an integer >= 0"),
    (ModelConfig, {"path": 7}, "key 'path': got 7; give a string"),
    (RecipeConfig, {"trainer": [1]}, "key 'trainer': expected a mapping, got list"),
    (RecipeConfig, {"sleep_s": "slow"}, "key 'sleep_s': got 'slow'; give a number"),
    (RecipeConfig, {"fail": 3}, "key 'fail': got 3; give true, false or 'config'"),
    (EvaluationOptions, {"limit": 0}, "limit: got 0; must be a positive integer or null"),
    (EvaluationOptions, {"limt": 5}, "unknown key(s) ['limt']"),
    (EvaluationOptions, {"memorization": "yes"}, "memorization: got 'yes'; true or false"),
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
    assert req.recipe.trainer.total_steps == 2 and req.model is not None and req.model.nnodes == 1
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


# --- the local backend's recipe sections (rollout, actor, trainer) ---------------------------------------------

# The local trainer's defaults before the sections were typed (training/local.py's `.get(key, default)` reads):
# a changed default silently changes every run of a recipe that omits the key.
_DEFAULTS = {
    "rollout": {"n": 8, "max_new_tokens": 20, "temperature": 1.0, "top_p": 1.0, "top_k": 0},
    "actor": {"prompts_per_step": 12, "clip_ratio": 0.2, "loss_agg_mode": "token-mean", "policy_loss": "vanilla",
              "use_kl_loss": True, "kl_loss_coef": 0.001, "kl_loss_type": "low_var_kl",
              "norm_adv_by_std_in_grpo": True, "lr": 1e-4, "weight_decay": 0.01, "grad_clip": 1.0},
    "trainer": {"total_steps": 0, "save_freq": 0, "eval_freq": None, "num_threads": 1, "val_samples": 4,
                "val_before_train": True},
}


def _fields(section) -> dict:
    return {k: getattr(section, k) for k in _DEFAULTS[type(section).__name__.removesuffix("Section").lower()]}


def test_an_omitted_section_key_reads_as_the_local_trainers_default():
    r = RecipeConfig.from_mapping({"name": "r"})
    for section in (r.rollout, r.actor, r.trainer):
        assert _fields(section) == _DEFAULTS[type(section).__name__.removesuffix("Section").lower()]
        assert section.raw == {}
    assert (type(r.actor.lr), type(r.rollout.temperature), type(r.actor.use_kl_loss)) == (float, float, bool)
    assert not r.rollout.n_given and r.rollout_n() is None  # the default 8 is the trainer's, not a declared n


def test_a_recipes_section_values_are_read_and_its_mapping_kept_as_given():
    raw = yaml.safe_load((REPO / "campaigns" / "recipe" / "cpu_tiny.yaml").read_text())
    r = RecipeConfig.from_mapping(raw)
    assert (r.actor.lr, r.actor.weight_decay, r.trainer.total_steps, r.trainer.eval_freq) == (1e-3, 0.0, 30, 10)
    assert r.rollout.raw == raw["rollout"] and r.actor.raw == raw["actor"] and r.trainer.raw == raw["trainer"]
    assert r.to_dict() == raw
    # a given 0 or false is the value, not "absent"
    off = RecipeConfig.from_mapping({"actor": {"use_kl_loss": False, "weight_decay": 0}, "rollout": {"top_k": 0},
                                     "trainer": {"val_before_train": False, "eval_freq": 3}})
    assert (off.actor.use_kl_loss, off.actor.weight_decay, off.rollout.top_k) == (False, 0.0, 0)
    assert (off.trainer.val_before_train, off.trainer.eval_freq) == (False, 3)
    assert RolloutSection.from_mapping({"n": 4}).n == 4 and ActorSection().lr == 1e-4
    assert TrainerSection.from_mapping({"eval_freq": None}).eval_freq is None
    # YAML 1.1 reads `lr: 1e-4` (an exponent without a dot) as the string "1e-4": read as the number, as before
    assert yaml.safe_load("lr: 1e-4") == {"lr": "1e-4"}
    assert ActorSection.from_mapping({"lr": "1e-4"}).lr == 1e-4
    assert ActorSection.from_mapping({"lr": "-2E+3"}).lr == -2000.0


@pytest.mark.parametrize("raw, needle", [
    ({"actor": {"lr": "fast"}}, "key 'actor.lr': got 'fast'; give a number"),
    ({"actor": {"lr": "1e-4x"}}, "key 'actor.lr': got '1e-4x'; give a number"),
    ({"actor": {"use_kl_loss": "false"}}, "key 'actor.use_kl_loss': got 'false'; give true or false"),
    ({"actor": {"policy_loss": 3}}, "key 'actor.policy_loss': got 3; give a string"),
    ({"rollout": {"n": "8"}}, "key 'rollout.n': got '8'; give an integer"),
    ({"rollout": {"max_new_tokens": 2.5}}, "key 'rollout.max_new_tokens': got 2.5; give an integer"),
    ({"trainer": {"total_steps": True}}, "key 'trainer.total_steps': got True; give an integer"),
    ({"trainer": {"val_before_train": 1}}, "key 'trainer.val_before_train': got 1; give true or false"),
])
def test_a_bad_section_value_names_the_dotted_key_and_exits_2(raw, needle):
    with pytest.raises(ConfigFieldError) as exc:
        RecipeConfig.from_mapping(raw, "campaigns/recipe/x.yaml")
    assert str(exc.value).startswith("campaigns/recipe/x.yaml: ") and needle in str(exc.value)
    assert exc.value.exit_code == 2


def _plan_with_recipe(tmp_path, recipe: dict):
    proj = tmp_path / "proj"
    (proj / "recipe").mkdir(parents=True)
    (proj / "recipe" / "bad.yaml").write_text(yaml.safe_dump(recipe))
    spec = yaml.safe_load((REPO / "campaigns" / "demo.yaml").read_text())
    spec.update(backend="noop", recipe="bad")
    (proj / "c.yaml").write_text(yaml.safe_dump(spec, sort_keys=False))
    res = CliRunner().invoke(app, ["plan", str(proj / "c.yaml")])
    return res.exit_code, " ".join(res.output.split())


def test_plan_refuses_a_mistyped_nested_recipe_value_naming_its_file_and_dotted_key(tmp_path):
    code, out = _plan_with_recipe(tmp_path, {"name": "bad", "backend": "noop", "actor": {"lr": "fast"}})
    assert code == 2
    assert "bad.yaml: key 'actor.lr': got 'fast'; give a number" in out


def test_plan_still_refuses_fewer_than_two_samples_per_prompt(tmp_path):
    code, out = _plan_with_recipe(tmp_path, {"name": "bad", "backend": "noop", "rollout": {"n": 1}})
    assert code == 2
    assert "bad.yaml: key 'rollout.n': got 1; GRPO needs at least 2 samples per prompt" in out
