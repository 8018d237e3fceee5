"""Study-faithful behaviour (STUDY.md §3.2) and what each pitfall-fixing option changes (§3.4)."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from verl.trainer.ppo.core_algos import compute_grpo_outcome_advantage

from policy_batches import DOMAINS, make_batch, random_batch
from policies import load_policy


def solve_count_batch(counts, n=5, L=8):
    """One group per entry of `counts` with that many correct rollouts (first positions)."""
    rewards = torch.tensor([[1.0] * c + [0.0] * (n - c) for c in counts]).reshape(-1)
    lengths = torch.full((rewards.numel(),), L)
    return make_batch(rewards, lengths, n)


def test_gfpo_keeps_exactly_three_of_five_including_uniform_groups(policy_dir):
    batch = random_batch(1, groups=64)
    res = load_policy(policy_dir / "gfpo.yaml", rollout_n=5).apply(batch, step=0)
    kept = (res.weights.sum(-1) > 0).reshape(64, 5).sum(1)
    assert kept.tolist() == [3] * 64
    assert res.diagnostics["kept_frac"] == 0.6


def test_maxvar_bankers_rounding_keeps_two_and_one_of_each_in_mixed_groups(policy_dir):
    batch = solve_count_batch([0, 1, 2, 3, 4, 5] * 4)
    res = load_policy(policy_dir / "maxvar.yaml").apply(batch, step=0)
    keep = (res.weights.sum(-1) > 0).reshape(-1, 5)
    assert res.diagnostics["kept_frac"] == pytest.approx(0.4)
    r = batch.rewards.reshape(-1, 5)
    for g in range(keep.shape[0]):
        kept_r = sorted(r[g][keep[g]].tolist())
        if 0 < r[g].sum() < 5:
            assert kept_r == [0.0, 1.0]
    # position rule: [1, 0, 1, 0, 1] keeps the first wrong (pos 1) and the last correct (pos 4)
    b2 = make_batch([1, 0, 1, 0, 1], [4] * 5, 5)
    k2 = load_policy(policy_dir / "maxvar.yaml").apply(b2, step=0).weights.sum(-1) > 0
    assert k2.tolist() == [False, True, False, False, True]
    # rounding: half_up keeps 3 of 5
    half_up = load_policy(policy_dir / "maxvar_half_up.yaml").apply(batch, step=0)
    assert half_up.diagnostics["kept_frac"] == pytest.approx(0.6)


def test_difffilter_strict_band_drops_one_and_four_of_five(policy_dir):
    batch = solve_count_batch([0, 1, 2, 3, 4, 5])
    strict = load_policy(policy_dir / "difffilter.yaml").apply(batch, step=0)
    kept_groups = (strict.weights.sum(-1) > 0).reshape(6, 5).all(1).tolist()
    assert kept_groups == [False, False, True, True, False, False]
    inclusive = load_policy(policy_dir / "difffilter_inclusive.yaml").apply(batch, step=0)
    assert (inclusive.weights.sum(-1) > 0).reshape(6, 5).all(1).tolist() == [False, True, True, True, True, False]
    # a single extra inclusive group of 1/5: inclusive keeps it, strict does not
    one = solve_count_batch([1])
    assert load_policy(policy_dir / "difffilter.yaml").apply(one, step=0).diagnostics["kept_frac"] == 0.0
    assert load_policy(policy_dir / "difffilter_inclusive.yaml").apply(one, step=0).diagnostics["kept_frac"] == 1.0


def test_topk_global_keeps_half_of_batch_and_per_group_keeps_per_group(policy_dir):
    batch = random_batch(3, groups=64, binary=False)
    s = (batch.advantages.abs() * batch.mask).sum(-1) / batch.mask.sum(-1)
    g = load_policy(policy_dir / "topk.yaml").apply(batch, step=0)
    keep = g.weights.sum(-1) > 0
    assert int(keep.sum()) == 160
    assert set(torch.argsort(s, descending=True)[:160].tolist()) == set(torch.nonzero(keep).reshape(-1).tolist())
    pg = load_policy(policy_dir / "topk_per_group.yaml").apply(batch, step=0)
    assert ((pg.weights.sum(-1) > 0).reshape(64, 5).sum(1) == 2).all()  # round(2.5) == 2


def test_loss_norm_kept_tokens_rescales_to_the_full_token_mass(policy_dir):
    batch = random_batch(4)
    plain = load_policy(policy_dir / "gfpo.yaml").apply(batch, step=0)
    renorm = load_policy({**load_policy(policy_dir / "gfpo.yaml").config, "loss_norm": "kept_tokens"}).apply(batch,
                                                                                                             step=0)
    n_valid = batch.mask.sum()
    kept_tokens = (plain.weights * batch.mask).sum()
    assert torch.allclose(renorm.weights, plain.weights * n_valid / kept_tokens)
    assert float((renorm.weights * batch.mask).sum() / n_valid) == pytest.approx(1.0, abs=1e-5)
    assert plain.diagnostics["weight_mean"] == pytest.approx(float(kept_tokens / n_valid), abs=1e-6)


def test_recompute_advantages_matches_grpo_on_the_kept_subset(policy_dir):
    batch = random_batch(5, binary=False)
    res = load_policy(policy_dir / "gfpo_recompute.yaml", rollout_n=5).apply(batch, step=0)
    keep = res.weights.sum(-1) > 0
    idx = torch.nonzero(keep).reshape(-1)
    # verl's GRPO on only the kept rows
    L = batch.mask.shape[1]
    lengths = batch.mask.sum(-1).long()[idx]
    tlr = torch.zeros(idx.numel(), L)
    tlr[torch.arange(idx.numel()), lengths - 1] = batch.rewards[idx]
    expect, _ = compute_grpo_outcome_advantage(tlr, batch.mask[idx],
                                               np.array([str(g) for g in batch.group[idx].tolist()], dtype=object))
    assert torch.allclose(res.advantages[idx], expect, atol=1e-5)
    assert (res.advantages[~keep] == 0).all()
    assert not torch.allclose(res.advantages[idx], batch.advantages[idx])  # it really changed them


def test_per_and_softmax_formulas(policy_dir):
    batch = random_batch(6, binary=False)
    s = (batch.advantages.abs() * batch.mask).sum(-1) / batch.mask.sum(-1)
    per = load_policy(policy_dir / "per.yaml").apply(batch, step=0)
    w = (s + 1e-8) ** 0.5
    assert torch.allclose(per.weights, (w / w.mean())[:, None] * batch.mask, atol=1e-5)
    sm = load_policy(policy_dir / "softmax.yaml").apply(batch, step=0)
    w = torch.softmax(s, 0) * s.numel()
    assert torch.allclose(sm.weights, (w / w.mean())[:, None] * batch.mask, atol=1e-5)


def test_ar_token_weights_mean_one_over_valid_tokens(policy_dir):
    batch = random_batch(7)
    res = load_policy(policy_dir / "ar.yaml").apply(batch, step=0)
    raw = (0.5 * torch.exp(batch.old_log_probs) + 0.5) * batch.mask
    expect = raw / (raw.sum() / batch.mask.sum())
    assert torch.allclose(res.weights, expect, atol=1e-5)


def test_diffband_is_a_noop_on_balanced_binary_rewards_p3(policy_dir):
    # 160 of 320 correct: q25 = 0, q75 = 1, every sequence is inside the band -> all weights 1 (P3)
    rewards = torch.tensor([1.0, 0.0] * 160)
    batch = make_batch(rewards, [6] * 320, 5)
    res = load_policy(policy_dir / "diffband.yaml").apply(batch, step=0)
    assert res.diagnostics["weight_std"] == pytest.approx(0.0)
    # at 80 correct (25 %) q75 = 0: every failure is doubled
    rewards = torch.zeros(320)
    rewards[:80] = 1
    res = load_policy(policy_dir / "diffband.yaml").apply(make_batch(rewards, [6] * 320, 5), step=0)
    w = res.weights[:, 0]
    assert torch.allclose(w[80:] / w[0], torch.full((240,), 2.0))


def _one_step_mixer(policy, rewards_by_domain, n_per=30):
    doms = torch.arange(3).repeat_interleave(n_per)
    rewards = torch.tensor(rewards_by_domain).repeat_interleave(n_per)
    batch = make_batch(rewards, [4] * (3 * n_per), 5, domains=doms)
    policy.observe(batch, step=1)
    return policy.proportions(step=2)


def test_floor_p13_numbers_max_renormalise_vs_projection(policy_dir):
    import math

    t = 1.0 / math.log(48.0)  # softmax([1, 0, 0] / t) == [0.96, 0.02, 0.02]
    base = load_policy(policy_dir / "dump_ucb.yaml").config
    as_run = load_policy({**base,
                          "actuator": {"name": "dump_ucb", "params": {**base["actuator"]["params"], "temperature": t}}})
    p = _one_step_mixer(as_run, [1.0, 0.0, 0.0])
    assert p.tolist() == pytest.approx([0.906, 0.047, 0.047], abs=5e-4)
    proj = load_policy({**base,
                        "actuator": {"name": "dump_ucb",
                                     "params": {**base["actuator"]["params"], "temperature": t,
                                                "floor_mode": "projection"}}})
    assert _one_step_mixer(proj, [1.0, 0.0, 0.0]).tolist() == pytest.approx([0.866, 0.067, 0.067], abs=5e-4)


def test_dump_ucb_equals_tscl_as_run_and_paper_variants_differ(policy_dir):
    rewards = [0.8, 0.3, 0.5]
    pd = _one_step_mixer(load_policy(policy_dir / "dump_ucb.yaml"), rewards)
    pt = _one_step_mixer(load_policy(policy_dir / "tscl.yaml"), rewards)
    assert torch.allclose(pd, pt)  # P11: identical as run
    expect = torch.softmax(torch.tensor(rewards), 0)
    assert torch.allclose(pd, expect, atol=1e-6)  # floor 0.05 never binds here
    gap = _one_step_mixer(load_policy(policy_dir / "reward_gap.yaml"), rewards)
    assert torch.allclose(gap, torch.softmax(0.8 - torch.tensor(rewards), 0), atol=1e-6)
    paper = load_policy(policy_dir / "dump_ucb_paper.yaml")
    # paper variant: value = mean |advantage|, with visit-count bonus; all counts equal -> softmax of v_d
    pp = _one_step_mixer(paper, rewards)
    assert not torch.allclose(pp, pd)


def test_tscl_paper_follows_the_reward_slope():
    cfg = {"name": "t", "mechanism": "mix", "domains": DOMAINS,
           "actuator": {"name": "tscl", "params": {"signal": "reward_slope", "window_unit": "steps", "window": 5,
                                                    "floor": 0.0, "signed": True}}}
    pol = load_policy(cfg)
    doms = torch.arange(3).repeat_interleave(10)
    for step, level in enumerate([0.0, 0.2, 0.4]):  # domain 0 improves by 0.2 per step, others flat
        r = torch.tensor([level, 0.5, 0.5]).repeat_interleave(10)
        pol.observe(make_batch(r, [3] * 30, 5, domains=doms), step=step + 1)
    p = pol.proportions()
    assert torch.allclose(p, torch.softmax(torch.tensor([0.2, 0.0, 0.0]), 0), atol=1e-5)


def test_ucb_visit_counts_favour_unseen_domain():
    cfg = {"name": "u", "mechanism": "mix", "domains": DOMAINS,
           "actuator": {"name": "dump_ucb",
                        "params": {"signal": "mean_abs_advantage", "visit_counts": True, "floor": 0.0}}}
    pol = load_policy(cfg)
    doms = torch.tensor([0] * 10 + [1] * 10)  # science never seen
    r = torch.tensor([1.0, 0.0] * 10)
    batch = make_batch(r, [3] * 20, 5, domains=doms)
    pol.observe(batch, step=1)
    v = torch.tensor([float(batch.advantages[:10, 0].abs().mean()), float(batch.advantages[10:, 0].abs().mean()), 0.0])
    import math
    bonus = torch.sqrt(2 * math.log(21.0) / (torch.tensor([10.0, 10.0, 0.0]) + 1))
    assert torch.allclose(pol.proportions(), torch.softmax(v + bonus, 0), atol=1e-5)


def test_window_units_sequences_vs_steps():
    base = {"name": "g", "mechanism": "mix", "domains": DOMAINS}
    seq = load_policy({**base, "actuator": {"name": "reward_gap", "params": {"window": 5, "window_unit": "sequences"}}})
    stp = load_policy({**base, "actuator": {"name": "reward_gap", "params": {"window": 2, "window_unit": "steps"}}})
    doms = torch.arange(3).repeat_interleave(10)
    for step, level in enumerate([1.0, 0.0]):
        b = make_batch(torch.full((30,), level), [3] * 30, 5, domains=doms)
        seq.observe(b, step=step + 1)
        stp.observe(b, step=step + 1)
    assert seq.stats.mean("reward").tolist() == [0.0, 0.0, 0.0]  # last 5 sequences are all from step 2
    assert stp.stats.mean("reward").tolist() == [0.5, 0.5, 0.5]  # mean of the two steps


def test_warmup_keeps_the_policy_inactive(policy_dir):
    cfg = {**load_policy(policy_dir / "gfpo.yaml").config, "warmup_step": 3}
    pol = load_policy(cfg)
    batch = random_batch(8)
    assert pol.apply(batch, step=2).weights is None
    assert pol.apply(batch, step=3).weights is not None
