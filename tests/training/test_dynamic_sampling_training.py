"""Dynamic sampling in the local trainer: each step draws rounds, keeps the groups whose accuracy varies and
counts every round's rollout tokens toward the run's compute (and so toward a budget), logging the rounds and
the rollouts generated per informative group. One slow test, about 40 CPU-s: 2 GRPO steps on the tiny model,
no held-out evaluation."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import numpy as np
import pytest

from training.backend import TrainRequest
from training.local import load_recipe, run_training
from wtcommon.prompt_ids import IDS_FILE, read_prompt_ids

DS = {"name": "ds", "mechanism": "curriculum", "curriculum": {"name": "uniform", "params": {}},
      "dynamic_sampling": {"oversample": 1.0, "max_rounds": 3}}


@pytest.mark.slow
def test_a_dynamic_sampling_step_counts_every_round_and_logs_its_rounds(tiny_base, cache_dir, tmp_path: Path):
    recipe = copy.deepcopy(load_recipe("cpu_tiny"))
    recipe["trainer"].update(val_before_train=False, eval_freq=100)
    req = TrainRequest(run_id="ds", run_key="ds", policy=dict(DS), seed=3, out_dir=tmp_path / "run", recipe=recipe,
                       model_path="builtin:tiny_qwen2", total_steps=2, save_freq=2, cache_dir=str(cache_dir))
    res = run_training(req)
    rows = [json.loads(line) for line in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()]
    steps = [r for r in rows if r.get("step", 0) >= 1]
    batch, n = recipe["actor"]["prompts_per_step"], recipe["rollout"]["n"]
    ids = read_prompt_ids(tmp_path / "run" / IDS_FILE)
    for r in steps:
        rounds = int(r["ds/rounds"])
        assert 1 <= rounds <= 3 and r["ds/generated_prompts"] == rounds * batch == len(ids[r["step"]])
        assert r["ds/generated_rollouts"] == r["ds/generated_prompts"] * n
        assert r["ds/kept_groups"] + r["ds/filled_zero_variance"] <= batch
        assert r["data/prompts"] == r["ds/kept_groups"] + r["ds/filled_zero_variance"]
        if r["ds/kept_groups"]:
            assert r["ds/rollouts_per_informative_group"] == r["ds/generated_rollouts"] / r["ds/kept_groups"]
        if r["ds/kept_groups"] == batch:  # full: every group trained on varies, none filled
            assert r["data/zero_variance_frac"] == 0.0
        assert len(np.unique(ids[r["step"]])) == len(ids[r["step"]])  # no prompt twice within a step
        if rounds > 1:  # the update reads the kept groups only; the rollout count holds every round's
            assert r["tokens/update"] < r["tokens/rollout"]
    # every generated rollout's tokens count, kept or not: at least the kept batch's, summed over the steps
    assert res.compute["rollout_tokens"] == steps[-1]["tokens/rollout_cum"] == sum(r["tokens/rollout"] for r in steps)
    assert res.compute["prompts_rolled_out"] == sum(r["ds/generated_prompts"] for r in steps)
    # the compute split: the base model's build (cached here: about 0) apart from training
    c = res.compute
    assert c["train_wall_s"] == pytest.approx(c["wall_s"] - c["build_s"]) and 0 <= c["build_s"] < c["wall_s"]
    assert c["train_cpu_s"] == pytest.approx(c["cpu_s"] - c["build_cpu_s"]) and c["train_cpu_s"] > 0
