"""Strict configuration: every YAML loads; bad input raises PolicyConfigError naming the field; a new
policy is one class + one YAML."""

from __future__ import annotations

import glob
from pathlib import Path

import pytest
import torch
import yaml

from policy_batches import random_batch
from policies import (ACTUATORS, Param, PolicyConfigError, StepBatch, dense_ids, load_policy, register_actuator,
                      register_scorer)
from policies.actuators.base import Selector
from policies.controls import strength_variant
from policies.scorers import Scorer

POLICY_DIR = Path(__file__).resolve().parents[2] / "campaigns" / "policy"
STUDY_13 = ["baseline", "difffilter", "maxvar", "gfpo", "topk", "ar", "per", "softmax", "diffband", "static",
            "reward_gap", "dump_ucb", "tscl"]


def test_the_13_study_configurations_exist_with_their_mechanisms():
    mech = {n: load_policy(POLICY_DIR / f"{n}.yaml").mechanism for n in STUDY_13}
    assert mech == {"baseline": "none", "difffilter": "select", "maxvar": "select", "gfpo": "select", "topk": "select",
                    "ar": "reweight", "per": "reweight", "softmax": "reweight", "diffband": "reweight", "static": "mix",
                    "reward_gap": "mix", "dump_ucb": "mix", "tscl": "mix"}


@pytest.mark.parametrize("path", sorted(glob.glob(str(POLICY_DIR / "*.yaml"))), ids=lambda p: Path(p).stem)
def test_every_yaml_is_valid_named_after_its_file_and_a_plain_mapping(path):
    raw = yaml.safe_load(Path(path).read_text())
    assert isinstance(raw, dict) and raw["name"] == Path(path).stem
    p = load_policy(path, rollout_n=5)
    assert p.name == Path(path).stem


def test_yaml_composes_as_a_hydra_config_group_member(tmp_path):
    from hydra import compose, initialize_config_dir
    from omegaconf import OmegaConf

    (tmp_path / "policy").mkdir()
    for n in ("gfpo", "dump_ucb"):
        (tmp_path / "policy" / f"{n}.yaml").write_text((POLICY_DIR / f"{n}.yaml").read_text())
    (tmp_path / "run.yaml").write_text("defaults:\n  - policy: gfpo\n  - _self_\n")
    with initialize_config_dir(config_dir=str(tmp_path), version_base=None):
        cfg = compose("run", overrides=["policy=dump_ucb", "policy.actuator.params.floor=0.1"])
    p = load_policy(OmegaConf.to_container(cfg.policy))
    assert p.name == "dump_ucb" and p.actuator.params["floor"] == 0.1


def _base(**over):
    cfg = yaml.safe_load((POLICY_DIR / "gfpo.yaml").read_text())
    cfg.update(over)
    return cfg


@pytest.mark.parametrize("cfg, fragment", [
    (_base(actuator={"name": "gfpo", "params": {"kk": 3}}), "unknown parameter(s) ['kk']"),
    (_base(actuator={"name": "gfpo", "params": {"k": 0}}), "actuator.params.k"),
    (_base(actuator={"name": "gfpo", "params": {"k": 2.5}}), "actuator.params.k"),
    (_base(actuator={"name": "gfpo", "params": {"metric": "speed"}}), "one of ['efficiency', 'reward', 'shortest']"),
    (_base(actuator={"name": "gfpoo"}), "unknown actuator 'gfpoo'"),
    (_base(scorer={"name": "token_prob"}), "gives token-level scores"),
    (_base(mechanism="reweight"), "is a select actuator"),
    (_base(loss_norm="kept"), "loss_norm"),
    (_base(extra=1), "unknown key(s) ['extra']"),
    (_base(search_space={"actuator.k": {"low": 0, "high": 4}}), "search_space.actuator.k"),
    (_base(search_space={"actuator.kk": {"low": 1, "high": 2}}), "no such parameter"),
    (_base(search_space={"actuator.k": {"low": 1.5, "high": 2}}), "integer parameter"),
    (_base(search_space={"actuator.metric": {"choices": ["reward", "speed"]}}), "choices"),
    (_base(control={"name": "matched_random", "structure": "diagonal"}), "control.structure"),
])
def test_bad_config_names_the_field(cfg, fragment):
    with pytest.raises(PolicyConfigError) as exc:
        load_policy(cfg, rollout_n=5)
    assert fragment in str(exc.value)
    assert "'gfpo'" in str(exc.value)  # names the policy


def test_recipe_cross_checks():
    with pytest.raises(PolicyConfigError, match=r"k = 5 >= rollout.n = 5"):
        load_policy(_base(actuator={"name": "gfpo", "params": {"k": 5}}), rollout_n=5)
    load_policy(_base(actuator={"name": "gfpo", "params": {"k": 5}}), rollout_n=8)  # fine with n = 8
    mix = yaml.safe_load((POLICY_DIR / "reward_gap.yaml").read_text())
    mix["actuator"]["params"]["floor"] = 0.4
    with pytest.raises(PolicyConfigError, match=r"K \* floor = 3 \* 0.4 > 1"):
        load_policy(mix)
    mix["actuator"]["params"]["floor"] = 0.05
    with pytest.raises(PolicyConfigError, match="domains"):
        load_policy({**mix, "domains": []})
    stub = yaml.safe_load((POLICY_DIR / "static.yaml").read_text())
    with pytest.raises(PolicyConfigError, match="mixers declare their own statistics"):
        load_policy({**stub, "scorer": {"name": "reward_difficulty"}})  # P14: no stub scorer


def test_bad_yaml_file_errors_name_the_file(tmp_path):
    f = tmp_path / "x.yaml"
    f.write_text("- a\n- b\n")
    with pytest.raises(PolicyConfigError, match=str(f)):
        load_policy(f)
    with pytest.raises(PolicyConfigError, match="not found"):
        load_policy(tmp_path / "missing.yaml")


def test_strength_variant_moves_only_strength_knobs():
    base = yaml.safe_load((POLICY_DIR / "gfpo.yaml").read_text())
    v = strength_variant(base, "gfpo_k1", k=1)
    assert load_policy(v).actuator.params["k"] == 1 and v["name"] == "gfpo_k1"
    with pytest.raises(PolicyConfigError, match="not a strength knob"):
        strength_variant(base, "bad", metric="reward")


def test_step_batch_validation_and_dense_ids():
    with pytest.raises(PolicyConfigError, match="response_mask"):
        StepBatch(advantages=torch.zeros(4, 3), rewards=torch.zeros(4), response_mask=torch.ones(4, 2),
                  group=torch.zeros(4))
    with pytest.raises(PolicyConfigError, match="dense"):
        StepBatch(advantages=torch.zeros(4, 3), rewards=torch.zeros(4), response_mask=torch.ones(4, 3),
                  group=torch.tensor([0, 0, 2, 2]))
    assert dense_ids(["b", "b", "a", "c", "a"]).tolist() == [0, 0, 1, 2, 1]


# ---- the tutorial: a new data policy is one class + one YAML ---------------------------------------------
@register_scorer("test_length")
class LengthScorer(Scorer):
    """s_i = response length of sequence i."""

    reads = ("response_mask",)

    def score(self, batch):
        return batch.mask.sum(-1)


@register_actuator("test_shortest_half")
class ShortestHalf(Selector):
    """Keep the shorter half of every group (ties to the earlier sequence)."""

    PARAMS = {"fraction": Param(float, 0.5, low=0.0, high=1.0, low_open=True)}

    def select(self, scores, batch):
        from policies import signals

        rank = signals.rank_within_group(batch, -scores)  # shortest first
        k = int(self.params["fraction"] * 5)
        return (rank >= 0) & (rank < k) & batch.valid


def test_add_a_new_policy_with_one_class_and_one_yaml(tmp_path):
    f = tmp_path / "shortest.yaml"
    f.write_text("name: shortest\nmechanism: select\nscorer: {name: test_length}\n"
                 "actuator: {name: test_shortest_half, params: {fraction: 0.4}}\nloss_norm: kept_tokens\n")
    batch = random_batch(11, groups=6)
    res = load_policy(f).apply(batch, step=0)
    keep = (res.weights.sum(-1) > 0).reshape(6, 5)
    lengths = batch.mask.sum(-1).reshape(6, 5)
    for g in range(6):
        expect = sorted(range(5), key=lambda i: (float(lengths[g, i]), i))[:2]
        assert torch.nonzero(keep[g]).reshape(-1).tolist() == sorted(expect)
    assert res.diagnostics["kept_frac"] == pytest.approx(0.4)
    assert float((res.weights * batch.mask).sum() / batch.mask.sum()) == pytest.approx(1.0, abs=1e-5)  # kept_tokens
    assert "test_shortest_half" in ACTUATORS
    with pytest.raises(PolicyConfigError, match="fraction"):
        load_policy({"name": "s", "mechanism": "select", "scorer": {"name": "test_length"},
                     "actuator": {"name": "test_shortest_half", "params": {"fraction": 0}}})


def test_step_batch_from_padded_framework_tensors():
    mask = torch.tensor([[1, 1, 0], [1, 1, 1], [1, 0, 0]])
    tlr = torch.tensor([[0.0, 1.0, 5.0], [0.0, 0.0, 1.0], [0.0, 0.0, 0.0]])  # 5.0 sits on a masked token
    b = StepBatch.from_padded(advantages=torch.zeros(3, 3), response_mask=mask, uids=["x", "y", "x"],
                              token_level_rewards=tlr, domains=["logic", "math", "logic"],
                              domain_names=["math", "logic"])
    assert b.rewards.tolist() == [1.0, 1.0, 0.0] and b.group.tolist() == [0, 1, 0] and b.domain.tolist() == [1, 0, 1]
    with pytest.raises(PolicyConfigError, match="unknown domain"):
        StepBatch.from_padded(advantages=torch.zeros(3, 3), response_mask=mask, uids=["x", "y", "x"],
                              rewards=torch.zeros(3),
                              domains=["code", "math", "logic"], domain_names=["math", "logic"])
