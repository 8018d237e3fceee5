"""A campaign's rollout-token budget: it reaches every run's spec and training request, and enters the run key
only when set (keys of specs without one are pinned by test_run_keys_stable)."""

from __future__ import annotations

from pathlib import Path

from orchestrator.engine.grid import RunSpec, expand
from orchestrator.engine.spec import load_campaign

REPO = Path(__file__).resolve().parents[2]


def test_a_budget_reaches_every_run_and_changes_its_key_only_when_set():
    plain = expand(load_campaign(REPO / "campaigns/demo.yaml"))
    budgeted = expand(load_campaign(REPO / "campaigns/demo.yaml", ["+budget.rollout_tokens=5000"]))
    assert [r.run_id for r in plain] == [r.run_id for r in budgeted]
    assert all(r.rollout_token_budget is None and "rollout_token_budget" not in r.to_dict() for r in plain)
    assert all(r.rollout_token_budget == 5000 and r.to_dict()["rollout_token_budget"] == 5000 for r in budgeted)
    assert not {r.run_key for r in plain} & {r.run_key for r in budgeted}
    assert RunSpec.from_json(budgeted[0].to_json()) == budgeted[0]  # the ledger's round trip keeps it


def test_the_cpu_frontier_plans_with_its_budget_and_the_curriculum_control():
    runs = expand(load_campaign(REPO / "campaigns/frontier_cpu.yaml"))
    assert len(runs) == 20 and {r.rollout_token_budget for r in runs} == {6000}
    mech = {r.policy.name: (r.policy.mechanism, r.reference) for r in runs}
    assert mech["matched_random_curriculum"] == ("curriculum", "baseline") == mech["greso"]
