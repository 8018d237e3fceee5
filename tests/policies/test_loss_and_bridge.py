"""Our weights through verl's own policy loss, and the verl-side conversions."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from policy_batches import random_batch
from policies import PolicyConfigError, load_policy
from policies.verl.bridge import build_step_batch
from policies.verl.launcher import launcher_env, launcher_overrides

POLICY_DIR = Path(__file__).resolve().parents[2] / "campaigns" / "policy"


def _vanilla_loss(weights, batch, log_prob):
    from verl.trainer.ppo.core_algos import get_policy_loss_fn
    from verl.workers.config import FSDPActorConfig

    cfg = FSDPActorConfig(strategy="fsdp", rollout_n=5, ppo_micro_batch_size_per_gpu=1, use_dynamic_bsz=False,
                          ppo_mini_batch_size=1)
    fn = get_policy_loss_fn("vanilla")
    out = fn(old_log_prob=batch.old_log_probs, log_prob=log_prob, advantages=batch.advantages,
             response_mask=batch.response_mask, loss_agg_mode="token-mean", config=cfg, rollout_is_weights=weights)
    return out[0]


@pytest.mark.parametrize("name", ["gfpo", "topk", "difffilter", "maxvar"])
def test_dropped_samples_get_exactly_zero_gradient_in_verls_loss(name):
    batch = random_batch(21, groups=8, binary=False)
    res = load_policy(POLICY_DIR / f"{name}.yaml", rollout_n=5).apply(batch, step=0)
    dropped = res.weights.sum(-1) == 0
    assert dropped.any() and (~dropped).any()
    log_prob = (batch.old_log_probs + 0.05 * torch.randn_like(batch.old_log_probs)).requires_grad_(True)
    loss = _vanilla_loss(res.weights, batch, log_prob)
    loss.backward()
    assert (log_prob.grad[dropped] == 0).all()  # exactly zero, not small
    kept_tokens = batch.response_mask.bool() & ~dropped[:, None] & (batch.advantages != 0)
    assert (log_prob.grad[kept_tokens] != 0).any()


def test_kept_token_normalisation_restores_the_kept_subset_loss():
    """With loss_norm kept_tokens, verl's token-mean over all tokens equals the token-mean over kept tokens."""
    batch = random_batch(22, groups=8, binary=False)
    cfg = {**load_policy(POLICY_DIR / "gfpo.yaml").config, "loss_norm": "kept_tokens"}
    res = load_policy(cfg).apply(batch, step=0)
    log_prob = batch.old_log_probs + 0.05
    full = _vanilla_loss(res.weights, batch, log_prob)
    keep = res.weights.sum(-1) > 0
    from policies import StepBatch

    sub = StepBatch(advantages=batch.advantages[keep], rewards=batch.rewards[keep],
                    response_mask=batch.response_mask[keep],
                    group=torch.unique(batch.group[keep], return_inverse=True)[1],
                    old_log_probs=batch.old_log_probs[keep])
    expect = _vanilla_loss(None, sub, log_prob[keep])
    assert float(full) == pytest.approx(float(expect), rel=1e-5)


def test_build_step_batch_skips_padding_and_maps_domains():
    L = 4
    mask = torch.tensor([[1, 1, 0, 0], [1, 1, 1, 0], [1, 0, 0, 0], [0, 0, 0, 0]])
    rm = torch.zeros(4, L)
    rm[0, 1], rm[1, 2], rm[3, 0] = 1.0, 0.5, 7.0
    padded = {"response_mask": mask, "rm_scores": rm, "advantages": torch.randn(4, L)}
    tags = [{}, {}, {}, {"is_padding": True}]
    b = build_step_batch(padded, ["u1", "u1", "u2", "pad9"], tags, domains=["logic", "logic", "math", "logic"],
                         domain_names=["math", "logic"])
    assert b.rewards.tolist() == [1.0, 0.5, 0.0, 0.0]  # rm on a masked position does not count
    assert b.group.tolist() == [0, 0, 1, 2] and b.domain.tolist() == [1, 1, 0, 1]
    assert b.is_padding.tolist() == [False, False, False, True]
    assert float(b.mask[3].sum()) == 0
    with pytest.raises(PolicyConfigError, match=r"\['code'\]"):
        build_step_batch(padded, ["u1", "u1", "u2", "pad9"], tags, domains=["code", "logic", "math", "x"],
                         domain_names=["math", "logic"])


def test_launcher_overrides_activate_the_plugin():
    ov = launcher_overrides(POLICY_DIR / "dump_ucb.yaml", seed=4)
    assert "trainer.v1.trainer_mode=windtunnel_sync" in ov
    assert f"+windtunnel.policy={(POLICY_DIR / 'dump_ucb.yaml').resolve()}" in ov
    assert "+windtunnel.seed=4" in ov and "+windtunnel.domains=[math,logic,science]" in ov
    assert launcher_env() == {"VERL_USE_EXTERNAL_MODULES": "policies.verl.plugin",
                              "WINDTUNNEL_ROLLOUT_SEEDS": "per-request"}
    # every process of the run's Ray runtime serves verl's `vllm` rollout through the per-request-seeded server
    assert "+ray_kwargs.ray_init.runtime_env.env_vars.WINDTUNNEL_ROLLOUT_SEEDS=per-request" in ov
    with pytest.raises(PolicyConfigError, match="not found"):
        launcher_overrides(POLICY_DIR / "nope.yaml")


def test_overrides_compose_with_verls_real_config_and_build_the_policy():
    import os

    import verl
    from hydra import compose, initialize_config_dir

    from policies.verl.trainer import policy_from_config

    cfg_dir = os.path.join(verl.__path__[0], "trainer/config")
    with initialize_config_dir(config_dir=cfg_dir, version_base=None):
        cfg = compose("ppo_trainer", overrides=["actor_rollout_ref.rollout.n=5", "data.seed=9"]
                      + launcher_overrides(POLICY_DIR / "gfpo_recompute.yaml"))
    p = policy_from_config(cfg)
    assert p.name == "gfpo_recompute" and p.seed == 9 and p.recompute_advantages
    with initialize_config_dir(config_dir=cfg_dir, version_base=None):
        bad = compose("ppo_trainer",
                      overrides=["actor_rollout_ref.rollout.n=3"] + launcher_overrides(POLICY_DIR / "gfpo.yaml"))
    with pytest.raises(PolicyConfigError, match="rollout.n = 3"):
        policy_from_config(bad)


def _rollouts(seed: int, groups: int = 4, n: int = 4, length: int = 6):
    """A verl-like batch whose samples tie on GFPO's score (mostly reward 0, equal lengths) but differ in
    content: the case where a position-based tie-break keeps different samples from run to run."""
    g = torch.Generator().manual_seed(seed)
    b = groups * n
    responses = torch.randint(0, 50, (b, length), generator=g)
    responses[:, 0] = torch.arange(b)  # distinct content in every row
    lengths = torch.full((b,), length)
    lengths[torch.randperm(b, generator=g)[: b // 4]] = length - 2
    mask = (torch.arange(length)[None, :] < lengths[:, None]).long()
    responses = responses.masked_fill(mask == 0, -1)
    rm = torch.zeros(b, length)
    rm[torch.randperm(b, generator=g)[: b // 4], 0] = 1.0
    prompts = torch.repeat_interleave(torch.randint(0, 50, (groups, 5), generator=g), n, dim=0)
    uids = [f"u{seed}-{i // n}" for i in range(b)]
    padded = {"response_mask": mask, "rm_scores": rm, "advantages": torch.randn(b, length, generator=g) * mask}
    return padded, uids, prompts, responses


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("name", ["gfpo", "matched_random_topk"])
def test_policy_weights_do_not_depend_on_the_order_samples_finished_in(seed, name):
    """Issue 24 item 5: verl's async rollouts come back in finishing order, which moves with load. The policy
    runs in an order fixed by content, so the same rollouts in any order get the same weights (GFPO with many
    ties at k = 1 kept different samples before: grad_norm 0.125 vs 0.136 between two same-seed launches)."""
    from policies.verl.bridge import apply_in_canonical_order

    cfg = load_policy(POLICY_DIR / "gfpo.yaml").config
    if name == "gfpo":
        cfg = {**cfg, "actuator": {"name": "gfpo", "params": {"k": 1, "metric": "efficiency"}}}
    else:
        cfg = {**load_policy(POLICY_DIR / "topk.yaml").config, "name": name,
               "control": {"name": "matched_random", "structure": "auto"}}
    cfg.pop("search_space", None)
    padded, uids, prompts, responses = _rollouts(seed)
    tags = [{} for _ in uids]
    ref = apply_in_canonical_order(load_policy(cfg, seed=1), build_step_batch(padded, uids, tags), prompts,
                                   responses, step=3).weights
    for p in range(3):
        perm = torch.randperm(len(uids), generator=torch.Generator().manual_seed(100 * seed + p))
        shuffled = {k: v[perm] for k, v in padded.items()}
        w = apply_in_canonical_order(load_policy(cfg, seed=1), build_step_batch(shuffled, [uids[i] for i in perm],
                                     tags), prompts[perm], responses[perm], step=3).weights
        assert torch.equal(w, ref[perm]), (name, seed, p)
    assert 0 < float((ref.sum(-1) > 0).float().mean()) < 1  # the policy did select
