"""Batch builders shared by the policy tests: advantages come from verl's own GRPO function, so the
expected values in tests never reuse the code under test."""

from __future__ import annotations

import numpy as np
import torch
from verl.trainer.ppo.core_algos import compute_grpo_outcome_advantage

from policies import StepBatch

DOMAINS = ["math", "logic", "science"]


def make_batch(rewards, lengths, n, *, L=None, domains=None, padding=None, seed=0, old_log_probs=True) -> StepBatch:
    """A StepBatch of len(rewards) sequences in consecutive groups of n with verl GRPO advantages."""
    rewards = torch.as_tensor(rewards, dtype=torch.float32)
    lengths = torch.as_tensor(lengths, dtype=torch.long)
    b = rewards.numel()
    L = int(L or lengths.max())
    mask = (torch.arange(L)[None] < lengths[:, None]).float()
    tlr = torch.zeros(b, L)
    tlr[torch.arange(b), (lengths - 1).clamp_min(0)] = rewards
    tlr = tlr * mask
    group = torch.arange(b) // n
    adv, _ = compute_grpo_outcome_advantage(tlr, mask, np.array([str(g) for g in group.tolist()], dtype=object))
    gen = torch.Generator().manual_seed(seed)
    olp = -torch.rand(b, L, generator=gen) * 3 if old_log_probs else None
    return StepBatch(advantages=adv, rewards=rewards, response_mask=mask, group=group, old_log_probs=olp,
                     domain=None if domains is None else torch.as_tensor(domains), is_padding=padding)


def random_batch(seed: int, groups: int = 16, n: int = 5, L: int = 24, binary: bool = True,
                 pad_rows: int = 0) -> StepBatch:
    gen = torch.Generator().manual_seed(seed)
    b = groups * n
    rewards = (torch.rand(b, generator=gen) < 0.5).float() if binary else torch.rand(b, generator=gen)
    lengths = torch.randint(1, L + 1, (b,), generator=gen)
    domains = torch.arange(b) // n % 3
    batch = make_batch(rewards, lengths, n, L=L, domains=domains, seed=seed)
    if pad_rows:
        # append verl-style padding rows: copies of row 0, all-zero mask, own uid
        k = pad_rows
        batch = StepBatch(
            advantages=torch.cat([batch.advantages, batch.advantages[:1].repeat(k, 1)]),
            rewards=torch.cat([batch.rewards, batch.rewards[:1].repeat(k)]),
            response_mask=torch.cat([batch.response_mask, torch.zeros(k, L)]),
            group=torch.cat([batch.group, groups + torch.arange(k)]),
            old_log_probs=torch.cat([batch.old_log_probs, batch.old_log_probs[:1].repeat(k, 1)]),
            domain=torch.cat([batch.domain, batch.domain[:1].repeat(k)]),
            is_padding=torch.cat([torch.zeros(b, dtype=torch.bool), torch.ones(k, dtype=torch.bool)]),
        )
    return batch
