"""Vectorised per-sequence and per-group signals.

Everything here is a tensor expression over the whole batch: no Python loop over groups (the reference
implementation looped over `np.unique(uid)`, STUDY.md §8). Groups are laid out once as a padded (G, n)
index matrix; with equal-size groups (the GRPO case) that is a pure reshape of a sort.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor

from policies.batch import StepBatch


@dataclass(frozen=True)
class GroupLayout:
    """Groups as a padded matrix: `index[g, j]` is the j-th member (in batch order) of group g, or B
    (a sentinel) where the group has fewer than `width` members. Padding rows belong to no group."""

    index: Tensor  # (G, width) long
    filled: Tensor  # (G, width) bool
    counts: Tensor  # (G,) long, real members per group
    size: int  # B

    def gather(self, values: Tensor, fill: float) -> Tensor:
        """(B,) values -> (G, width), `fill` in empty slots."""
        ext = torch.cat([values, values.new_full((1,), fill)])
        return ext[self.index]

    def scatter(self, values: Tensor, fill: float | bool = 0) -> Tensor:
        """(G, width) values -> (B,); rows in no group get `fill`."""
        out = values.new_full((self.size + 1,), fill)
        out[self.index.reshape(-1)] = values.reshape(-1)
        return out[: self.size]


def group_layout(batch: StepBatch) -> GroupLayout:
    """Build (and cache on the batch) the padded group layout; padding rows are left out."""
    cached = batch._cache.get("layout")
    if cached is not None:
        return cached
    b = batch.size
    g = batch.group
    valid = batch.valid
    n_groups = batch.n_groups
    counts = torch.bincount(g[valid], minlength=n_groups)
    width = int(counts.max()) if n_groups else 0
    # Stable sort by group (padding rows pushed to the end), then position within group = rank - start.
    key = torch.where(valid, g, torch.full_like(g, n_groups))
    order = torch.sort(key, stable=True).indices
    if bool(valid.all()) and width and int(counts.min()) == width:
        index = order.reshape(n_groups, width)  # equal-size groups: a reshape
        filled = torch.ones(n_groups, width, dtype=torch.bool, device=g.device)
    else:
        n_real = int(valid.sum())
        order = order[:n_real]
        gs = g[order]
        starts = torch.cumsum(counts, 0) - counts
        pos = torch.arange(n_real, device=g.device) - starts[gs]
        index = torch.full((n_groups, max(width, 1)), b, dtype=torch.long, device=g.device)
        index[gs, pos] = order
        filled = index < b
    layout = GroupLayout(index=index, filled=filled, counts=counts, size=b)
    batch._cache["layout"] = layout
    return layout


_SCRATCH: dict[tuple, Tensor] = {}


def scratch(name: str, like: Tensor) -> Tensor:
    """A reusable temporary shaped like `like`, for (B, L) intermediates that never leave the function that
    asks for them. Reusing the pages each step saves a fresh 84 MB allocation (and its page faults) per
    temporary at B = 2560, L = 8192. One buffer per (name, shape, dtype, device): not thread-safe."""
    key = (name, tuple(like.shape), like.dtype, like.device)
    buf = _SCRATCH.get(key)
    if buf is None:
        if len(_SCRATCH) > 8:
            _SCRATCH.clear()
        buf = _SCRATCH[key] = torch.empty_like(like)
    return buf


def response_length(batch: StepBatch) -> Tensor:
    """(B,) number of valid response tokens (0 for padding rows)."""
    if "length" not in batch._cache:
        batch._cache["length"] = batch.mask.sum(-1)
    return batch._cache["length"]


def mean_abs_advantage(batch: StepBatch) -> Tensor:
    """(B,) s_i = mean |advantage| over sequence i's valid tokens (0 for empty sequences)."""
    key = "mean_abs_adv"
    if key not in batch._cache:
        buf = scratch("abs_adv", batch.advantages)
        torch.abs(batch.advantages, out=buf)
        buf.mul_(batch.mask)
        batch._cache[key] = buf.sum(-1) / response_length(batch).clamp_min(1.0)
    return batch._cache[key]


def sequence_reward(batch: StepBatch) -> Tensor:
    """(B,) r_i = summed sequence reward as the host framework reports it."""
    return batch.rewards


def group_mean(batch: StepBatch, values: Tensor) -> Tensor:
    """(B,) mean of `values` over each row's group (padding rows excluded; they get NaN)."""
    valid = batch.valid
    g = batch.group
    sums = torch.zeros(batch.n_groups, dtype=torch.float64, device=g.device).index_add_(0, g[valid],
                                                                                        values[valid].double())
    counts = torch.bincount(g[valid], minlength=batch.n_groups).double()
    mean = (sums / counts.clamp_min(1)).to(torch.float32)[g]
    return torch.where(valid, mean, torch.full_like(mean, float("nan")))


def group_solve_rate(batch: StepBatch, success_threshold: float = 0.5) -> Tensor:
    """(B,) share of each row's group whose reward exceeds `success_threshold`.

    Computed in float32 like the reference, so a 1-of-5 group has rate float32(0.2): the strict band
    (0.2, 0.8) then excludes it (STUDY.md P1)."""
    solved = (batch.rewards > success_threshold).to(torch.float32)
    valid = batch.valid
    g = batch.group
    hits = torch.zeros(batch.n_groups, dtype=torch.float32, device=g.device).index_add_(0, g[valid], solved[valid])
    counts = torch.bincount(g[valid], minlength=batch.n_groups).to(torch.float32)
    rate = (hits / counts.clamp_min(1))[g]
    return torch.where(valid, rate, torch.full_like(rate, float("nan")))


def group_reward_std(batch: StepBatch) -> Tensor:
    """(B,) population std of rewards within each row's group: 0 marks a group with no GRPO signal."""
    mean = group_mean(batch, batch.rewards)
    dev2 = (batch.rewards - torch.nan_to_num(mean)) ** 2
    return group_mean(batch, dev2).sqrt()


def informative(batch: StepBatch) -> Tensor:
    """(B,) bool: real rows whose advantages are not all zero (the rows that carry policy gradient)."""
    return batch.valid & (mean_abs_advantage(batch) > 0)


def rank_within_group(batch: StepBatch, keys: Tensor, descending: bool = True) -> Tensor:
    """(B,) 0-based rank of each row's key inside its group (one batched sort; ties by batch order)."""
    layout = group_layout(batch)
    fill = float("-inf") if descending else float("inf")
    mat = layout.gather(keys.float(), fill)
    order = torch.sort(mat, dim=1, descending=descending, stable=True).indices
    ranks = torch.empty_like(order)
    ranks.scatter_(1, order, torch.arange(mat.shape[1], device=mat.device).expand_as(order).contiguous())
    return layout.scatter(ranks, fill=-1)
