"""Reweighting actuators: soft weights after advantages, normalised to average 1 over a declared unit."""

from __future__ import annotations

import torch
from torch import Tensor

from policies.actuators.base import NORMALIZE, Reweighter
from policies.batch import StepBatch
from policies.registry import Param, register_actuator


def _norm(default: str) -> Param:
    return Param(str, default, choices=NORMALIZE, doc="unit over which the weights average 1")


@register_actuator("advantage_reweight")
class AdvantageReweight(Reweighter):
    """Token weights w_it = alpha * p_it + (1 - alpha) from the token-probability scorer, rescaled to mean
    1 over all valid tokens of the batch (the study's `ar`)."""

    granularity = "token"
    accepts_granularity = ("token",)
    PARAMS = {"alpha": Param(float, 0.5, low=0.0, high=1.0), "normalize": _norm("tokens")}
    # in-place scale (1), add the mask (1.5), row sums for the normaliser (0.5), divide (0.5 of 1 counted in the write)
    passes = 3.5

    def raw(self, scores: Tensor, batch: StepBatch) -> Tensor:
        a = self.params["alpha"]
        # scores are exp(log p) already zero outside the mask: a * p + (1 - a) * mask, in place
        return scores.mul_(a).add_(batch.mask, alpha=1.0 - a)


@register_actuator("per_advantage")
class PERAdvantage(Reweighter):
    """Sequence weights w_i = (s_i + eps)^alpha divided by their mean over real sequences (study `per`);
    zero-advantage sequences get about eps^alpha = 1e-4 before normalising."""

    PARAMS = {
        "alpha": Param(float, 0.5, low=0.0, high=4.0),
        "eps": Param(float, 1e-8, low=0.0, high=1.0, low_open=True),
        "normalize": _norm("sequences"),
    }

    def raw(self, scores: Tensor, batch: StepBatch) -> Tensor:
        w = (scores.float() + self.params["eps"]) ** self.params["alpha"]
        return torch.where(batch.valid, w, torch.zeros_like(w))


@register_actuator("softmax")
class Softmax(Reweighter):
    """Sequence weights w = B * softmax(s / T) over real sequences, divided by their mean (study `softmax`)."""

    PARAMS = {"temperature": Param(float, 1.0, low=0.0, low_open=True), "normalize": _norm("sequences")}

    def raw(self, scores: Tensor, batch: StepBatch) -> Tensor:
        z = (scores.float() / self.params["temperature"]).masked_fill(~batch.valid, float("-inf"))
        return torch.softmax(z, 0) * int(batch.valid.sum())


@register_actuator("difficulty_band")
class DifficultyBand(Reweighter):
    """Weight `focus_weight` where q_low <= score <= q_high (batch quantiles over real sequences, linear
    interpolation), else 1; then mean-normalised. On binary rewards this is not a mid-difficulty band (P3):
    give it the `group_solve_rate` scorer instead of `reward_difficulty` to weight by prompt difficulty."""

    PARAMS = {
        "low_q": Param(float, 0.25, low=0.0, high=1.0),
        "high_q": Param(float, 0.75, low=0.0, high=1.0),
        "focus_weight": Param(float, 2.0, low=0.0, low_open=True),
        "normalize": _norm("sequences"),
    }

    def raw(self, scores: Tensor, batch: StepBatch) -> Tensor:
        valid = batch.valid
        s = scores.float()
        q = torch.quantile(s[valid], torch.tensor([self.params["low_q"], self.params["high_q"]], device=s.device))
        inside = (s >= q[0]) & (s <= q[1])
        w = torch.ones_like(s).masked_fill_(inside, self.params["focus_weight"])
        return torch.where(valid, w, torch.zeros_like(w))
