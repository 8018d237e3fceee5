"""Inline policy variants and policies named by path in a campaign's `policies:` list (issue 27 items 3 and 5).

A variant (`{name, base, params}`) runs under its own name everywhere (run ids, the run's config, the plan);
its overrides are checked against the registry's schemas, so a bad one exits 2 naming the campaign file, the
variant and the field before anything runs.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from orchestrator.engine.grid import expand
from orchestrator.engine.spec import SpecError, load_campaign


def _campaign(tree: Path, helpers, policies: list, name: str = "variants") -> Path:
    return helpers.write_yaml(tree / f"{name}.yaml", {
        "name": name, "backend": "noop", "models": ["m0"], "recipe": "noop", "steps": 2, "seeds": [1, 2],
        "policies": policies,
        "compute": {"nodes": 1, "gpus_per_node": 0, "gpus_per_run": 0, "hours_per_run": 0.01},
    })


VARIANTS = ["baseline",
            {"name": "topk_f03", "base": "topk", "params": {"fraction": 0.3}},
            {"name": "topk_f07", "base": "topk", "params": {"actuator.fraction": 0.7, "actuator.scope": "per_group"}}]


def test_two_variants_of_one_base_plan_with_their_own_names_and_configs(tree: Path, helpers) -> None:
    runs = expand(load_campaign(_campaign(tree, helpers, VARIANTS)))
    by = {r.run_id: r for r in runs}
    assert sorted(by) == sorted(f"variants/m0/{p}/s{s}" for p in ("baseline", "topk_f03", "topk_f07") for s in (1, 2))
    f03, f07 = by["variants/m0/topk_f03/s1"], by["variants/m0/topk_f07/s1"]
    assert f03.policy.name == "topk_f03" and f03.policy.cfg["name"] == "topk_f03"
    assert f03.policy.cfg["actuator"]["params"]["fraction"] == 0.3
    assert f07.policy.cfg["actuator"]["params"] == {**f03.policy.cfg["actuator"]["params"], "fraction": 0.7,
                                                   "scope": "per_group"}
    assert f03.policy.mechanism == f07.policy.mechanism == "select" and f03.reference == "baseline"
    assert len({r.run_key for r in runs}) == len(runs)
    # the base policy itself is untouched: planning it alone gives the shipped fraction
    plain = expand(load_campaign(_campaign(tree, helpers, ["baseline", "topk"], name="plain")))
    assert next(r for r in plain if r.policy.name == "topk").policy.cfg["actuator"]["params"]["fraction"] == 0.5


def test_plan_lists_each_variant_and_the_preflight_loads_it(tree: Path, helpers, campaign_cli) -> None:
    path = _campaign(tree, helpers, VARIANTS)
    res = campaign_cli(["plan", str(path), "--json", "--runs"])
    assert res.returncode == 0, res.stderr
    acc = json.loads(res.stdout)
    assert acc["by_policy"] == {"baseline": 2, "topk_f03": 2, "topk_f07": 2}
    assert len({r["run_key"] for r in acc["runs"]}) == 6


@pytest.mark.parametrize("variant, needle", [
    ({"name": "topk_bad", "base": "topk", "params": {"fraction": 1.7}}, "params.fraction: got 1.7"),
    ({"name": "topk_bad", "base": "topk", "params": {"fracton": 0.3}}, "params.fracton: base 'topk' has no such"),
    ({"name": "topk_bad", "base": "topk", "params": {"actuator.scope": "everywhere"}}, "params.actuator.scope: got"),
    ({"name": "topk_bad", "base": "topkk", "params": {}}, "did you mean topk"),
])
def test_a_bad_override_exits_2_naming_the_file_the_variant_and_the_field(tree: Path, helpers, campaign_cli, variant,
                                                                          needle: str) -> None:
    path = _campaign(tree, helpers, ["baseline", variant])
    with pytest.raises(SpecError) as exc:
        expand(load_campaign(path))
    assert str(path) in str(exc.value) and needle in str(exc.value)
    res = campaign_cli(["plan", str(path)])
    assert res.returncode == 2 and "Traceback" not in res.stderr
    assert str(path) in res.stderr and "topk_bad" in res.stderr and needle in " ".join(res.stderr.split())


def test_a_variant_sets_a_curriculum_parameter(tree: Path, helpers) -> None:
    runs = expand(load_campaign(_campaign(tree, helpers, [
        "baseline", {"name": "mopps_d09", "base": "mopps", "params": {"curriculum.decay": 0.9}},
        {"name": "mopps_c4", "base": "mopps", "params": {"candidate_ratio": 4.0}}])))
    by = {r.run_id: r for r in runs}
    d09, c4 = by["variants/m0/mopps_d09/s1"].policy, by["variants/m0/mopps_c4/s1"].policy
    assert d09.mechanism == "curriculum" and d09.cfg["curriculum"]["params"]["decay"] == 0.9
    assert c4.cfg["curriculum"]["params"] == {**d09.cfg["curriculum"]["params"], "decay": 1.0, "candidate_ratio": 4.0}
    assert by["variants/m0/mopps_d09/s1"].run_key != by["variants/m0/mopps_c4/s1"].run_key


@pytest.mark.parametrize("variant, needle", [
    ({"name": "v", "base": "mopps", "params": {"decay": 1.5}}, "params.decay: got 1.5; allowed: float in [0.0, 1.0]"),
    ({"name": "v", "base": "mopps", "params": {"decy": 0.3}}, "known: curriculum.target, curriculum.decay"),
    ({"name": "v", "base": "prompt_replay", "params": {"band_low": 0.95}}, "band_low"),
    ({"name": "v", "base": "baseline", "params": {"decay": 0.3}}, "known: none (no scorer, actuator or curriculum)"),
])
def test_a_bad_curriculum_override_names_the_field(tree: Path, helpers, variant, needle: str) -> None:
    with pytest.raises(SpecError) as exc:
        expand(load_campaign(_campaign(tree, helpers, ["baseline", variant])))
    assert needle in str(exc.value) and "policy variant 'v'" in str(exc.value)


@pytest.mark.parametrize("entry, needle", [
    ({"name": "v1", "params": {"fraction": 0.3}}, "policy variant 'v1': base: Field required"),
    ({"name": "v1", "base": "topk", "overrides": {}}, "unknown key"),
    ({"name": "a/b", "base": "topk"}, "is not a safe name"),
    ({"name": "topk", "base": "topk"}, "listed more than once"),
])
def test_a_malformed_variant_names_its_field(tree: Path, helpers, entry, needle: str) -> None:
    path = _campaign(tree, helpers, ["topk", entry])
    with pytest.raises(SpecError) as exc:
        load_campaign(path)
    assert str(path) in str(exc.value) and "policies" in str(exc.value) and needle in str(exc.value)


def test_a_policy_named_by_path_relative_to_the_campaign_file(tree: Path, helpers, tmp_path: Path) -> None:
    other = tmp_path / "other_project" / "policy"
    helpers.write_yaml(other / "narrow.yaml", {
        "name": "narrow", "mechanism": "select", "scorer": {"name": "advantage_magnitude"},
        "actuator": {"name": "topk_fraction", "params": {"fraction": 0.25}}})
    path = _campaign(tree, helpers, ["baseline", "../other_project/policy/narrow.yaml",
                                     {"name": "narrow_f04", "base": "../other_project/policy/narrow.yaml",
                                      "params": {"fraction": 0.4}}])
    runs = {r.run_id: r for r in expand(load_campaign(path))}
    assert runs["variants/m0/narrow/s1"].policy.cfg["actuator"]["params"]["fraction"] == 0.25
    assert runs["variants/m0/narrow_f04/s1"].policy.cfg["actuator"]["params"]["fraction"] == 0.4
    missing = _campaign(tree, helpers, ["baseline", "../nowhere/policy/narrow.yaml"], name="missing")
    with pytest.raises(SpecError, match="narrow.yaml not found at .*relative to the campaign file"):
        expand(load_campaign(missing))


def test_an_unknown_name_suggests_from_project_and_shipped_policies(tmp_path: Path, helpers) -> None:
    """A project with its own policy folder: a typo of a shipped name and of a project name both get a
    suggestion (before, only the project's own policies were listed)."""
    proj = tmp_path / "proj"
    helpers.write_yaml(proj / "policy" / "brevity.yaml", {
        "name": "brevity", "mechanism": "select", "scorer": {"name": "advantage_magnitude"},
        "actuator": {"name": "topk_fraction", "params": {"fraction": 0.4}}})
    for typo, close in (("gfp0", "gfpo"), ("brevty", "brevity")):
        path = helpers.write_yaml(proj / "c.yaml", {
            "name": "c", "backend": "noop", "models": ["tiny_qwen2"], "recipe": "cpu_tiny", "steps": 2,
            "policies": ["baseline", typo],
            "compute": {"nodes": 1, "gpus_per_node": 0, "gpus_per_run": 0, "hours_per_run": 0.01}})
        with pytest.raises(SpecError, match=f"policy '{typo}' not found .*did you mean {close}"):
            expand(load_campaign(path))
