"""Scorers: turn a `StepBatch` into one signal per sequence (B,) or per token (B, L).

Each class declares `granularity` and the batch fields it `reads`, so the verl hook fetches only those
from the TransferQueue and the benchmark knows how many (B, L) passes it costs.
"""

from __future__ import annotations

from typing import Any, ClassVar
from collections.abc import Mapping

import torch
from torch import Tensor

from policies import signals
from policies.batch import StepBatch
from policies.errors import PolicyConfigError
from policies.registry import Param, register_scorer


class Scorer:
    """Base: `score(batch) -> Tensor` at `granularity` ("sequence" -> (B,), "token" -> (B, L))."""

    granularity: ClassVar[str] = "sequence"
    reads: ClassVar[tuple[str, ...]] = ()
    PARAMS: ClassVar[Mapping[str, Param]] = {}
    # (B, L) memory passes the score needs; one pass = one read + one write of a (B, L) float32 tensor
    passes: ClassVar[float] = 0.0

    def __init__(self, **params: Any) -> None:
        self.params = params

    def score(self, batch: StepBatch) -> Tensor:  # pragma: no cover - abstract
        raise NotImplementedError


@register_scorer("advantage_magnitude")
class AdvantageMagnitude(Scorer):
    """s_i = mean (agg "mean") or sum (agg "sum") of |advantage| over sequence i's valid tokens."""

    reads = ("advantages", "response_mask")
    PARAMS = {"agg": Param(str, "mean", choices=("mean", "sum"), doc="token aggregation")}
    passes = 3.0  # |adv| into a scratch buffer (1), times the mask in place (1.5), row sums (0.5)

    def score(self, batch: StepBatch) -> Tensor:
        if self.params["agg"] == "mean":
            return signals.mean_abs_advantage(batch)
        return signals.mean_abs_advantage(batch) * signals.response_length(batch)


@register_scorer("reward_difficulty")
class RewardDifficulty(Scorer):
    """r_i = the sequence's summed reward (the study's name; higher = easier for the model)."""

    reads = ("rewards", "response_mask")

    def score(self, batch: StepBatch) -> Tensor:
        return signals.sequence_reward(batch)


@register_scorer("group_solve_rate")
class GroupSolveRate(Scorer):
    """rate_i = share of sequence i's prompt group with reward > success_threshold (float32, like the study)."""

    reads = ("rewards",)
    PARAMS = {"success_threshold": Param(float, 0.5, doc="reward above which a rollout counts as solved")}

    def score(self, batch: StepBatch) -> Tensor:
        return signals.group_solve_rate(batch, self.params["success_threshold"])


@register_scorer("token_prob")
class TokenProb(Scorer):
    """p_it = exp(old log-prob) of each response token (B, L); 0 on masked tokens."""

    granularity = "token"
    reads = ("old_log_probs", "response_mask")
    passes = 2.5  # exp (read + write), then an in-place multiply by the mask (two reads + one write)

    def score(self, batch: StepBatch) -> Tensor:
        if batch.old_log_probs is None:
            raise PolicyConfigError("scorer 'token_prob' needs StepBatch.old_log_probs (got None)")
        p = torch.exp(batch.old_log_probs.float())
        return p.mul_(batch.mask)
