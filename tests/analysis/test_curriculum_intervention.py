"""The intervention check flags a curriculum that never changed which prompts were rolled out (its logged ids
equal its baseline's under the same seed) and passes one that did; pure files, no training."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from analysis.intervention import flag_policies, run_summary, same_prompts
from wtcommon.prompt_ids import IDS_FILE


def _run(tmp: Path, policy: str, mech: str, seed: int, ids: list[list[int]]) -> dict:
    d = tmp / f"{policy}_s{seed}"
    d.mkdir()
    (d / "metrics.jsonl").write_text("".join(json.dumps({"step": s + 1, "policy/active": 0.0}) + "\n"
                                             for s in range(len(ids))))
    (d / IDS_FILE).write_text("".join(json.dumps({"step": s + 1, "ids": x}) + "\n" for s, x in enumerate(ids)))
    return {"run_key": d.name, "run_id": d.name, "campaign": "c", "model": "m", "regime": "", "policy": policy,
            "mechanism": mech, "seed": seed, "metrics_path": d / "metrics.jsonl", "compute": {}}


def test_same_prompts_ignores_order_within_a_step_and_needs_a_common_step():
    a = {1: np.array([3, 1, 2]), 2: np.array([4, 5])}
    assert same_prompts(a, {1: np.array([1, 2, 3]), 2: np.array([5, 4])}) is True
    assert same_prompts(a, {1: np.array([1, 2, 3]), 2: np.array([5, 6])}) is False
    assert same_prompts(a, {7: np.array([1])}) is None


def test_a_curriculum_with_the_baselines_prompts_is_flagged_and_one_that_moved_is_not(tmp_path):
    base = [[0, 1], [2, 3]]
    runs = [_run(tmp_path, "baseline", "none", s, base) for s in (1, 2)]
    runs += [_run(tmp_path, "copycat", "curriculum", s, [[1, 0], [3, 2]]) for s in (1, 2)]
    runs += [_run(tmp_path, "mover", "curriculum", 1, [[0, 1], [4, 5]]), _run(tmp_path, "mover", "curriculum", 2, base)]
    runs += [_run(tmp_path, "orphan", "curriculum", 9, base)]  # no baseline run of seed 9
    flags = flag_policies(run_summary(runs)).set_index("policy")
    assert flags.loc["copycat", "flag"] == "same_prompts" and "2 seed(s)" in flags.loc["copycat", "reason"]
    assert flags.loc["mover", "flag"] == "" and flags.loc["mover", "prompts_changed_runs"] == 1
    assert flags.loc["orphan", "flag"] == "unverified"
    assert flags.loc["baseline", "flag"] == ""


def test_the_rollout_table_pairs_by_seed_and_states_the_budget():
    import pandas as pd

    from analysis.rollout_compute import rollout_figure, rollout_table, run_budget

    rows, score_of = [], {}
    for seed, (b, c) in enumerate([(50.0, 52.0), (40.0, 41.0), (60.0, 64.0)], 1):
        for pol, mech, score, tokens in (("baseline", "none", b, 1000.0), ("greso", "curriculum", c, 800.0)):
            rows.append({"campaign": "c", "model": "m", "regime": "", "policy": pol, "mechanism": mech,
                         "seed": seed, "run_id": f"{pol}{seed}", "compute_rollout_tokens": tokens,
                         "compute_prompts_rolled_out": 96.0, "zero_variance_frac_mean": 0.25,
                         "compute_rollout_token_budget": 1000.0})
            score_of[f"{pol}{seed}"] = score
    summary = pd.DataFrame(rows)
    scores = pd.DataFrame({"run_id": list(score_of), "DB-12": list(score_of.values())})
    t = rollout_table(summary, scores, "DB-12").set_index("policy")
    assert list(t.index) == ["greso"]  # the reference is not compared with itself
    d = np.array([2.0, 1.0, 4.0])
    half = 4.302652729911275 * d.std(ddof=1) / np.sqrt(3)  # t(0.975, df=2)
    assert t.loc["greso", "delta"] == d.mean() and t.loc["greso", "n_pairs"] == 3
    assert np.isclose(t.loc["greso", "t_lo"], d.mean() - half) and np.isclose(t.loc["greso", "t_hi"], d.mean() + half)
    assert t.loc["greso", "rollout_tokens_ratio"] == 0.8
    assert run_budget(summary) == 1000
    assert run_budget(summary.assign(compute_rollout_token_budget=np.nan)) is None
    assert rollout_figure(t.reset_index(), "DB-12") is not None
