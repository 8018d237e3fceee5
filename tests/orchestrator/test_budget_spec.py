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


def test_a_budgeted_runs_records_carry_its_budget_and_tokens_per_checkpoint(tmp_path):
    """The evaluate stage's `with_budget_columns`: the budget and each checkpoint's cumulative rollout tokens from
    the training log (the last line of a repeated step wins; a step the log lacks is NaN, never 0); an equal-step
    run's frame is returned as it was."""
    import json
    import math

    import pandas as pd

    from orchestrator.engine.stages import with_budget_columns

    plain = expand(load_campaign(REPO / "campaigns/demo.yaml"))[0]
    budgeted = expand(load_campaign(REPO / "campaigns/demo.yaml", ["+budget.rollout_tokens=5000"]))[0]
    log = tmp_path / "metrics.jsonl"
    log.write_text("".join(json.dumps(r) + "\n" for r in (
        {"step": 0, "reward": 0.1}, {"step": 1, "tokens/rollout_cum": 2400}, {"step": 2, "tokens/rollout_cum": 4000},
        {"step": 2, "tokens/rollout_cum": 4800}, {"step": 3, "tokens/rollout_cum": 7100})))
    frame = pd.DataFrame({"step": [1, 2, 3, 4], "accuracy": [1.0, 2.0, 3.0, 4.0]})
    assert with_budget_columns(frame, plain, {"metrics_path": str(log)}) is frame
    out = with_budget_columns(frame, budgeted, {"metrics_path": str(log)})
    assert out["rollout_token_budget"].tolist() == [5000.0] * 4
    assert out["rollout_tokens"].tolist()[:3] == [2400.0, 4800.0, 7100.0] and math.isnan(out["rollout_tokens"][3])


def test_the_plan_bounds_where_the_budget_stops_the_runs():
    """Each step generates at most prompts_per_step x n x max_new_tokens tokens (x oversample x max_rounds under
    dynamic sampling), so a run stops after at least ceil(budget / that) steps; an equal-step plan has no key."""
    from orchestrator.accounting import accounting

    spec = load_campaign(REPO / "campaigns/frontier_cpu.yaml", ["policies=[baseline,mopps]"])
    runs = expand(spec)
    r = runs[0]
    per_step = r.recipe_cfg.actor.prompts_per_step * r.recipe_cfg.rollout.n * r.recipe_cfg.rollout.max_new_tokens
    b = accounting(spec, runs).to_dict()["budget"]
    assert b["rollout_tokens"] == 6000 and b["steps_cap"] == 12 and b["runs"] == 4
    assert b["steps_at_least"] == -(-6000 // per_step) and b["lower_share"] == round(b["steps_at_least"] / 12, 4)
    ds = load_campaign(REPO / "campaigns/frontier_cpu.yaml", ["policies=[baseline,dynamic_sampling]"])
    assert accounting(ds, expand(ds)).budget["steps_at_least"] == max(1, -(-6000 // (per_step * 30)))
    plain = load_campaign(REPO / "campaigns/demo.yaml")
    assert "budget" not in accounting(plain, expand(plain)).to_dict()


def test_the_plan_warns_when_the_checkpoint_grid_cannot_resolve_tokens_to_target(campaign_cli):
    """Issue 58: a target reached at a first checkpoint is left-censored. The plan says, before anything runs, when
    only the final checkpoint is scored, when the budget may hold fewer than 4 scored checkpoints, and when dynamic
    sampling's first checkpoint comes after 3x the rollouts of baseline's (its oversample); a fine common grid
    draws no warning, and an equal-step plan has no budget key at all (test above)."""
    from orchestrator.accounting import accounting

    coarse = ["policies=[baseline,dynamic_sampling]", "save_freq=2", "+evaluation.all_checkpoints=true"]
    cases = {
        "final only": (["policies=[baseline,mopps]"], ["only the final checkpoint is evaluated for baseline, mopps"]),
        "coarse, unequal": (coarse, ["fewer than 4 evaluated checkpoints under the budget for baseline, "
                                     "dynamic_sampling", "dynamic_sampling's first evaluated checkpoint comes after "
                                     "at least 3.0x the rollouts of baseline's", "left-censored"]),
        "fine": (["policies=[baseline,mopps]", "save_freq=1", "+evaluation.all_checkpoints=true"], []),
    }
    for name, (overrides, wanted) in cases.items():
        spec = load_campaign(REPO / "campaigns/frontier_cpu.yaml", overrides)
        b = accounting(spec, expand(spec)).to_dict()["budget"]
        said = " ".join(b["grid_warnings"])
        assert all(w in said for w in wanted) and bool(b["grid_warnings"]) == bool(wanted), (name, said)
        assert set(b["grid"]) == {r.policy.name for r in expand(spec)}, name
    assert b["grid"]["baseline"] == {"first_rollouts_at_least": 96, "evaluated": 4, "all_checkpoints": True}
    # the plan prints them on stderr, each named as a tokens-to-target warning
    res = campaign_cli(["plan", str(REPO / "campaigns/frontier_cpu.yaml"), *coarse])
    assert res.returncode == 0, res.stderr
    said = " ".join(res.stderr.split())
    assert said.count("warning: tokens-to-target:") == 2 and "left-censored" in said, said
