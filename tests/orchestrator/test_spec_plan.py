"""Specs via Hydra, grid expansion, run_key, and the `campaign plan` command."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from orchestrator.engine.grid import expand
from orchestrator.engine.spec import SpecError, load_campaign

REPO = Path(__file__).resolve().parents[2]


def write_yaml(path: Path, obj) -> Path:
    path.write_text(yaml.safe_dump(obj, sort_keys=False))
    return path


@pytest.fixture
def plan_json(campaign_cli):
    def run(target: Path, *overrides: str) -> dict:
        p = campaign_cli(["plan", str(target), *overrides, "--json"], cwd=REPO)
        assert p.returncode == 0, p.stderr
        return json.loads(p.stdout)
    return run


def _group_runs(paper: Path, default_seeds: int) -> dict[str, int]:
    """Independent count from the YAML files: models × policies × seeds per group."""
    out = {}
    for f in ("breadth", "seed_extension", "controls", "completion", "scale_family"):
        data = yaml.safe_load((paper / f"{f}.yaml").read_text())["sub_campaigns"][f]
        out[f] = sum(len(g["models"]) * len(g["policies"]) * len(g.get("seeds") or range(default_seeds))
                     for g in data["groups"])
    return out


def test_paper_plan_reports_591_with_five_part_breakdown(tree: Path, plan_json) -> None:
    acc = plan_json(tree / "paper")
    assert acc["total_runs"] == 591
    assert acc["by_sub_campaign"] == {"breadth": 171, "seed_extension": 108, "controls": 33,
                                      "completion": 108, "scale_family": 171}
    assert acc["by_sub_campaign"] == _group_runs(tree / "paper", 3)
    # 7B-base matrix: 13 configurations × 12 seeds = 156 (+ 33 controls on the same model)
    assert acc["by_model"]["qwen25_7b_base"] == 156 + 33
    # released layout inside breadth: seeds 1–3 only, long_training at 1000 steps
    assert acc["missing_references"] == []
    assert acc["gpu_hours"] > 0


def test_real_paper_tree_plans_591(plan_json) -> None:
    """The repository's own campaigns/ (models and recipes from the training area)."""
    acc = plan_json(REPO / "campaigns" / "paper")
    assert acc["total_runs"] == 591


def test_hydra_overrides_on_the_command_line(tree: Path, plan_json) -> None:
    acc = plan_json(tree / "paper", "seeds=[1]")
    expect = _group_runs(tree / "paper", 1)
    assert acc["by_sub_campaign"] == expect
    assert acc["total_runs"] == sum(expect.values())
    assert acc["expected_runs_mismatch"]["breadth"] == {"expected": 171, "planned": expect["breadth"]}
    acc = plan_json(tree / "paper", "sub_campaigns.controls.groups.0.seeds=[1]")
    assert acc["by_sub_campaign"]["controls"] == 11 and acc["total_runs"] == 591 - 22
    assert plan_json(tree / "paper", "seeds=[1,2,3]")["total_runs"] == 591


def test_expected_runs_mismatch_is_an_error_naming_key(tree: Path) -> None:
    data = yaml.safe_load((tree / "paper" / "breadth.yaml").read_text())
    data["sub_campaigns"]["breadth"]["groups"][0]["seeds"] = [1, 2]
    (tree / "paper" / "breadth.yaml").write_text("# @package _global_\n" + yaml.safe_dump(data))
    with pytest.raises(SpecError, match=r"breadth.yaml.*sub_campaigns.breadth.expected_runs.*171.*153"):
        expand(load_campaign(tree / "paper"))


@pytest.mark.parametrize("mutation, needle", [
    ({"seedz": [1]}, "key 'seedz'"),
    ({"steps": -3}, "key 'steps'"),
    ({"policies": ["no_such_policy"]}, "policy 'no_such_policy' not found"),
    ({"seeds": [1, 1]}, "key 'seeds'"),
    ({"baselines": {"sample": "x"}}, "key 'baselines'"),
])
def test_malformed_spec_exits_2_names_file_and_key_and_writes_nothing(tree: Path, tmp_path: Path, mutation, needle,
                                                                      campaign_cli) -> None:
    spec = yaml.safe_load((tree / "small.yaml").read_text())
    bad = write_yaml(tree / "bad.yaml", {**spec, **mutation})
    wd = tmp_path / "wd"
    for cmd in (["plan", str(bad)], ["submit", str(bad), "--workdir", str(wd)]):
        p = campaign_cli(cmd, cwd=REPO)
        assert p.returncode == 2, p.stdout + p.stderr
        assert needle in p.stderr and "bad.yaml" in p.stderr
        assert "Traceback" not in p.stderr
    assert not wd.exists()


def test_bad_override_exits_2(tree: Path, campaign_cli) -> None:
    p = campaign_cli(["plan", str(tree / "small.yaml"), "seeds=[1,"], cwd=REPO)
    assert p.returncode == 2 and "small" in p.stderr


def test_run_key_changes_only_with_what_is_trained(tree: Path) -> None:
    base = {r.run_id: r.run_key for r in expand(load_campaign(tree / "small.yaml"))}
    assert len(set(base.values())) == len(base) == 8
    same = {r.run_id: r.run_key for r in expand(load_campaign(tree / "small.yaml", ["retries.max_attempts=5"]))}
    assert same == base
    longer = {r.run_id: r.run_key for r in expand(load_campaign(tree / "small.yaml", ["steps=3"]))}
    assert set(longer) == set(base) and not set(longer.values()) & set(base.values())
    gfpo = yaml.safe_load((tree / "policy" / "gfpo.yaml").read_text())
    gfpo["actuator"]["params"]["k"] = 2
    write_yaml(tree / "policy" / "gfpo.yaml", gfpo)
    changed = {r.run_id: r.run_key for r in expand(load_campaign(tree / "small.yaml"))}
    assert {k for k in base if base[k] != changed[k]} == {"small/m0/gfpo/s1", "small/m0/gfpo/s2"}


def test_seed_major_order_and_baselines_by_mechanism(tree: Path) -> None:
    runs = expand(load_campaign(tree / "small.yaml", ["seeds=[2,1,3]"]))
    seeds = [r.seed for r in runs]
    assert seeds == sorted(seeds)  # seed-major: every policy of seed 1 before any of seed 2
    ref = {r.policy.name: r.reference for r in runs}
    assert ref == {"baseline": "baseline", "gfpo": "baseline", "static": "static", "reward_gap": "static"}
    runs = expand(load_campaign(tree / "small.yaml", ["+baselines.mix=baseline"]))
    assert {r.policy.name: r.reference for r in runs}["reward_gap"] == "baseline"


def test_duplicate_cell_is_rejected(tree: Path) -> None:
    spec = yaml.safe_load((tree / "small.yaml").read_text())
    g = {"campaign": "x", "models": ["m0"], "policies": ["baseline"], "seeds": [1]}
    write_yaml(tree / "dup.yaml", {**spec, "sub_campaigns": {"a": {"groups": [g]}, "b": {"groups": [g]}}})
    with pytest.raises(SpecError, match="listed twice"):
        expand(load_campaign(tree / "dup.yaml"))
