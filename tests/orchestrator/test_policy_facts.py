"""Policy facts have one home (issue 14): a policy's mechanism comes from its YAML and the default
reference from the one mechanism → reference mapping; the study's policy table only fills in records
imported without a mechanism column."""

from __future__ import annotations

from pathlib import Path

import pytest

from analysis.schema import DEFAULT_REFERENCE, POLICY_MECHANISM
from orchestrator.engine.grid import expand, policy_mechanism
from orchestrator.engine.spec import load_campaign

BREVITY = """name: brevity
mechanism: select
scorer: {name: response_length}
actuator: {name: topk_fraction, params: {fraction: 0.4, largest: false, scope: per_group}}
loss_norm: kept_tokens
"""

CAMPAIGN = """name: brevity_vs_baseline
backend: noop
models: [tiny_qwen2]
recipe: cpu_tiny
policies: [baseline, brevity]
seeds: [1, 2]
steps: 2
data: {corpus: synthetic, seed: 42}
compute: {nodes: 1, gpus_per_node: 0, gpus_per_run: 0, hours_per_run: 0.01, cpus_per_run: 1}
"""


@pytest.fixture
def project(tmp_path: Path) -> Path:
    """The README's worked example: a user policy outside the shipped tree."""
    (tmp_path / "policy").mkdir()
    (tmp_path / "policy" / "brevity.yaml").write_text(BREVITY)
    (tmp_path / "my_campaign.yaml").write_text(CAMPAIGN)
    return tmp_path


@pytest.mark.parametrize("policy", sorted(POLICY_MECHANISM))
def test_the_study_table_agrees_with_each_shipped_policy_yaml(policy: str) -> None:
    assert policy_mechanism(policy) == POLICY_MECHANISM[policy]


def test_a_user_policy_gets_the_mechanism_its_yaml_declares(project: Path) -> None:
    assert policy_mechanism("brevity", project) == "select"
    assert policy_mechanism(str(project / "policy" / "brevity.yaml")) == "select"
    assert "brevity" not in POLICY_MECHANISM  # so the study table would have said "unknown"
    assert policy_mechanism("brevity") == "unknown"  # no YAML anywhere: unknown, never a guess
    assert policy_mechanism("../policy/brevity") == "unknown"  # not a policy name: no path tricks


def test_the_readme_example_runs_carry_their_yaml_mechanism_and_the_default_reference(project: Path) -> None:
    runs = expand(load_campaign(project / "my_campaign.yaml"))
    brevity = [r for r in runs if r.policy.name == "brevity"]
    assert len(brevity) == 2 and {r.policy.mechanism for r in brevity} == {"select"}
    assert {r.reference for r in brevity} == {DEFAULT_REFERENCE["select"]} == {"baseline"}


def test_a_campaign_without_baselines_uses_the_one_default_mapping(project: Path) -> None:
    spec = load_campaign(project / "my_campaign.yaml")
    assert spec.baselines == DEFAULT_REFERENCE
    assert load_campaign(project / "my_campaign.yaml", ["+baselines.mix=baseline"]).baselines == {
        **DEFAULT_REFERENCE, "mix": "baseline"}
