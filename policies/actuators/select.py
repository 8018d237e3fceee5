"""Selection actuators: which rolled-out sequences count in the update (0/1 weight after advantages)."""

from __future__ import annotations

import torch
from torch import Tensor

from policies import signals
from policies.actuators.base import ROUNDING, Selector, round_count
from policies.batch import StepBatch
from policies.registry import Param, register_actuator


@register_actuator("threshold_band")
class ThresholdBand(Selector):
    """Keep every rollout of a group whose score (group solve rate) lies in the band.

    Study default is strict: low < rate < high, so with n = 5 the float32 rates 0.2 and 0.8 equal the
    bounds and 1/5 and 4/5 groups are dropped (P1). `inclusive: true` keeps low <= rate <= high."""

    matched_structure = "whole_groups"
    PARAMS = {
        "low": Param(float, 0.2, low=0.0, high=1.0),
        "high": Param(float, 0.8, low=0.0, high=1.0),
        "inclusive": Param(bool, False, doc="include the band edges (fixes P1)"),
    }

    def select(self, scores: Tensor, batch: StepBatch) -> Tensor:
        lo, hi = self.params["low"], self.params["high"]
        s = scores.float()
        keep = (s >= lo) & (s <= hi) if self.params["inclusive"] else (s > lo) & (s < hi)
        return keep & batch.valid


@register_actuator("gfpo")
class GFPO(Selector):
    """Per prompt group keep the k sequences with the highest metric; groups of <= k are kept whole.

    metric `efficiency` = r_i / max(1, length_i) (the study), `reward` = r_i, `shortest` = -length_i.
    Ties go to the earlier sequence in batch order (one stable batched sort on the (G, n) group matrix).
    With n = 5, k = 3 the kept fraction is exactly 0.6, uniform groups included."""

    reads = ("group", "response_mask")
    PARAMS = {
        "k": Param(int, 3, low=1, doc="kept per group; must be < rollout.n or GFPO is plain GRPO"),
        "metric": Param(str, "efficiency", choices=("efficiency", "reward", "shortest")),
    }
    passes = 0

    def select(self, scores: Tensor, batch: StepBatch) -> Tensor:
        length = signals.response_length(batch).clamp_min(1.0)
        metric = self.params["metric"]
        key = scores / length if metric == "efficiency" else scores if metric == "reward" else -length
        rank = signals.rank_within_group(batch, key, descending=True)
        return (rank >= 0) & (rank < self.params["k"]) & batch.valid


@register_actuator("max_variance")
class MaxVariance(Selector):
    """Per group keep n = max(1, round(keep_fraction * group size)) rewards with maximal variance: the a
    lowest plus the n - a highest after a stable sort, a the first maximiser over 0..n.

    `rounding: python_round` (default) reproduces the study's banker's rounding: round(2.5) = 2 keeps 2 of
    5 (kept_frac 0.4, P2); `half_up` keeps 3. A mixed binary group keeps one correct and one wrong."""

    reads = ("group",)
    PARAMS = {
        "keep_fraction": Param(float, 0.5, low=0.0, high=1.0, low_open=True),
        "rounding": Param(str, "python_round", choices=ROUNDING),
    }

    def select(self, scores: Tensor, batch: StepBatch) -> Tensor:
        layout = signals.group_layout(batch)
        m = layout.counts  # (G,)
        target = round_count(self.params["keep_fraction"] * m.double(), self.params["rounding"])
        n = torch.minimum(target.clamp_min(1), m)
        vals = layout.gather(scores.double(), float("inf"))  # (G, W), padding sorts last
        sorted_vals, order = torch.sort(vals, dim=1, stable=True)
        sorted_vals = torch.where(torch.isinf(sorted_vals), torch.zeros_like(sorted_vals), sorted_vals)
        g, w = vals.shape
        dev = vals.device
        zero = torch.zeros(g, 1, dtype=torch.float64, device=dev)
        p1 = torch.cat([zero, sorted_vals.cumsum(1)], 1)  # prefix sums (G, W+1)
        p2 = torch.cat([zero, (sorted_vals**2).cumsum(1)], 1)
        a = torch.arange(w + 1, device=dev).expand(g, w + 1)  # candidate number of lowest kept
        ok = a <= n[:, None]
        t = (n[:, None] - a).clamp_min(0)  # number of highest kept
        hi_start = (m[:, None] - t).clamp_min(0)
        ac = a.clamp(max=w)
        s1 = p1.gather(1, ac) + p1.gather(1, m[:, None].expand_as(a)) - p1.gather(1, hi_start)
        s2 = p2.gather(1, ac) + p2.gather(1, m[:, None].expand_as(a)) - p2.gather(1, hi_start)
        nn = n[:, None].double().clamp_min(1)
        var = s2 / nn - (s1 / nn) ** 2
        var = torch.where(ok, var, torch.full_like(var, -1.0))
        best_var = var.max(1, keepdim=True).values
        best = (var >= best_var - 1e-9 * (1 + best_var.abs())).to(torch.int8).argmax(1)  # first maximiser
        pos = torch.arange(w, device=dev).expand(g, w)
        hs = m - (n - best)
        keep_sorted = ((pos < best[:, None]) | (pos >= hs[:, None])) & (pos < m[:, None])
        keep_mat = torch.zeros_like(keep_sorted)
        keep_mat.scatter_(1, order, keep_sorted)
        return layout.scatter(keep_mat & layout.filled, fill=False) & batch.valid


@register_actuator("topk_fraction")
class TopKFraction(Selector):
    """Keep max(1, round(fraction * count)) sequences with the largest (or smallest) score.

    `scope: global` (the study) ranks the whole batch, so groups can be split and zero-advantage groups
    go first (P4); `scope: per_group` keeps max(1, round(fraction * n)) inside every group. Ties go to the
    earlier sequence in batch order. The floor of one is the reference's (DataFlex-RL `selectors.py`:
    `k = max(1, int(round(fraction * numel)))`): a tiny batch (B = 1, or B = 2 at fraction 0.25) keeps one
    sequence, never none; an empty batch (or group) keeps nothing."""

    PARAMS = {
        "fraction": Param(float, 0.5, low=0.0, high=1.0, low_open=True),
        "largest": Param(bool, True),
        "scope": Param(str, "global", choices=("global", "per_group")),
        "rounding": Param(str, "python_round", choices=ROUNDING),
    }

    @property
    def matched_structure(self) -> str:  # type: ignore[override]
        return "global" if self.params["scope"] == "global" else "per_group"

    def select(self, scores: Tensor, batch: StepBatch) -> Tensor:
        key = scores.float() if self.params["largest"] else -scores.float()
        valid = batch.valid
        frac = torch.tensor(self.params["fraction"], dtype=torch.float64, device=valid.device)
        if self.params["scope"] == "global":
            n_valid = int(valid.sum())
            k = max(1, int(round_count(frac * n_valid, self.params["rounding"]))) if n_valid else 0
            key = torch.where(valid, key, torch.full_like(key, float("-inf")))
            order = torch.sort(key, descending=True, stable=True).indices
            keep = torch.zeros_like(valid)
            keep[order[:k]] = True
            return keep & valid
        rank = signals.rank_within_group(batch, key, descending=True)
        layout = signals.group_layout(batch)
        k_g = torch.minimum(round_count(frac * layout.counts.double(), self.params["rounding"]).clamp_min(1),
                            layout.counts)
        g = batch.group
        return valid & (rank >= 0) & (rank < k_g[g])
