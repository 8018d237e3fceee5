"""GRPO outcome advantages recomputed over the rollouts a selector kept (`recompute_advantages: true`, P5)."""

from __future__ import annotations

import torch
from torch import Tensor

from policies.batch import StepBatch


def grpo_advantages(batch: StepBatch, keep: Tensor, by_std: bool = True, eps: float = 1e-6) -> Tensor:
    """(B, L) GRPO outcome advantages recomputed over the kept members of each group only, with verl's
    conventions (`compute_grpo_outcome_advantage`): unbiased std, a group of one gets mean 0 / std 1,
    (r - mean) / (std + eps); dropped and padding rows get 0."""
    g = batch.group
    n_g = batch.n_groups
    k = keep & batch.valid
    r = batch.rewards.double()
    cnt = torch.bincount(g[k], minlength=n_g).double()
    s1 = torch.zeros(n_g, dtype=torch.float64, device=g.device).index_add_(0, g[k], r[k])
    s2 = torch.zeros(n_g, dtype=torch.float64, device=g.device).index_add_(0, g[k], r[k] ** 2)
    mean = s1 / cnt.clamp_min(1)
    var = (s2 - cnt * mean**2) / (cnt - 1).clamp_min(1)
    std = var.clamp_min(0).sqrt()
    single = cnt <= 1
    mean = torch.where(single, torch.zeros_like(mean), mean)
    std = torch.where(single, torch.ones_like(std), std)
    a = r - mean[g]
    if by_std:
        a = a / (std[g] + eps)
    a = torch.where(k, a, torch.zeros_like(a)).float()
    return a[:, None] * batch.mask
