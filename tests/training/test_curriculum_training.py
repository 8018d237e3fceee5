"""The local trainer with a curriculum: the prompts it proposes are logged, a run killed after a checkpoint and
resumed proposes exactly the prompts (and ends with exactly the weights) of the uninterrupted run, and a
rollout-token budget stops the run within one step of it.

One slow test, about 90 CPU-s: 3 + 2 + 1 GRPO steps on the tiny model (no held-out evaluation) for the resume,
then 2 steps for the budget. The pure parts (zero-variance share, domain composition) are tested without a model.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path

import numpy as np
import pytest

from policies.curricula.registry import build_curriculum
from training.backend import TrainingError, TrainRequest
from training.local import load_recipe, run_training
from training.prompt_choice import check_domain_pools, curriculum_batch, zero_variance_share
from wtcommon.prompt_ids import IDS_FILE, read_prompt_ids

UNIFORM = {"name": "curriculum_uniform", "mechanism": "curriculum", "curriculum": {"name": "uniform", "params": {}}}


def test_zero_variance_share_counts_groups_whose_rollouts_all_agree():
    c = np.array([[1, 1, 1], [0, 0, 0], [1, 0, 1], [0, 1, 0]], dtype=float)
    assert zero_variance_share(c) == 0.5
    assert np.isnan(zero_variance_share(np.zeros((0, 3))))


def test_under_a_mixer_the_curriculum_fills_each_domain_count_from_that_domain():
    dom = np.repeat(np.arange(3), 20)
    cur = build_curriculum("uniform", {}, dom.size, 12, seed=3, domains=dom)
    ids = curriculum_batch(cur, 1, np.array([7, 0, 5]), dom)
    assert np.bincount(dom[ids], minlength=3).tolist() == [7, 0, 5]
    assert len(set(ids.tolist())) == 12


def test_a_domain_smaller_than_the_batch_is_refused_with_a_mixer():
    with pytest.raises(TrainingError, match=r"logic \(3\).*prompts_per_step = 4"):
        check_domain_pools(np.array([0, 0, 0, 0, 1, 1, 1]), ["math", "logic"], 4)


def _request(tiny_base, cache_dir, out: Path, steps: int, budget: int | None = None) -> TrainRequest:
    recipe = copy.deepcopy(load_recipe("cpu_tiny"))
    recipe["trainer"].update(val_before_train=False, eval_freq=100)
    return TrainRequest(run_id="cur", run_key="cur", policy=dict(UNIFORM), seed=5, out_dir=out, recipe=recipe,
                        model_path="builtin:tiny_qwen2", total_steps=steps, save_freq=2, cache_dir=str(cache_dir),
                        rollout_token_budget=budget)


class _Killed(Exception):
    pass


@pytest.mark.slow
def test_a_killed_curriculum_run_resumes_with_the_uninterrupted_runs_proposals(tiny_base, cache_dir, tmp_path):
    whole = run_training(_request(tiny_base, cache_dir, tmp_path / "whole", 3))

    def kill_after_step_2(step: int, total: int, row: dict) -> None:
        if step == 2:  # the step-2 checkpoint (save_freq 2) is on disk: the process dies before step 3
            raise _Killed

    cut = _request(tiny_base, cache_dir, tmp_path / "cut", 3)
    with pytest.raises(_Killed):
        run_training(cut, progress=kill_after_step_2)
    assert sorted(read_prompt_ids(tmp_path / "cut" / IDS_FILE)) == [1, 2]
    resumed = run_training(cut)

    a, b = read_prompt_ids(tmp_path / "whole" / IDS_FILE), read_prompt_ids(tmp_path / "cut" / IDS_FILE)
    assert sorted(a) == sorted(b) == [1, 2, 3]
    assert all(np.array_equal(a[s], b[s]) for s in a)
    assert not np.array_equal(a[1], a[2])  # the curriculum moved on between steps (no fixed batch)
    sha = [json.loads((c.path / "completed.json").read_text())["sha256"] for c in (whole.checkpoints[-1],
                                                                                   resumed.checkpoints[-1])]
    assert sha[0] == sha[1]  # same weights: the optimizer's moments were restored too
    assert resumed.compute["rollout_tokens"] == whole.compute["rollout_tokens"]
    assert resumed.compute["prompts_rolled_out"] == 3 * 12
    rows = [json.loads(x) for x in (tmp_path / "cut" / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in rows] == [1, 2, 3]
    assert rows[-1]["tokens/rollout_cum"] == whole.compute["rollout_tokens"]

    # a budget of one token more than step 1 spent: step 2 crosses it and the run stops there, not at step 3
    first = rows[0]["tokens/rollout"]
    budgeted = run_training(_request(tiny_base, cache_dir, tmp_path / "budget", 3, budget=first + 1))
    assert budgeted.compute["steps"] == 2 and budgeted.checkpoints[-1].step == 2
    # the same seed trains the same first two steps: the budgeted run spent exactly steps 1 and 2 of the others
    assert budgeted.compute["rollout_tokens"] == first + rows[1]["tokens/rollout"]


def test_per_domain_diagnostics_sum_counts_weigh_means_and_keep_the_state():
    from training.prompt_choice import merge_diagnostics

    got = merge_diagnostics([(4, {"proposed": 4.0, "mean_p_proposed": 0.2, "p_easy": 0.5}),
                             (12, {"proposed": 12.0, "mean_p_proposed": 0.6, "p_easy": 0.4})])
    assert got == {"proposed": 16.0, "mean_p_proposed": pytest.approx(0.5), "p_easy": 0.4}
