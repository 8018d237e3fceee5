"""Actuator bases: each turns scores into one kind of action and declares its granularity.

- `Selector.select(scores, batch) -> keep (B,) bool` (sequence granularity; 0/1 weights after advantages)
- `Reweighter.weigh(scores, batch) -> weights (B,) or (B, L)`, normalised over a declared unit
- `Mixer.mix(stats) -> proportions (D,)` before rollout (see `policies.actuators.mix`)
"""

from __future__ import annotations

from typing import Any, ClassVar
from collections.abc import Mapping

import torch
from torch import Tensor

from policies import signals
from policies.batch import StepBatch
from policies.registry import Param

ROUNDING = ("python_round", "half_up", "floor", "ceil")


def round_count(x: Tensor, rule: str) -> Tensor:
    """Keep counts from fractional targets. `python_round` is round-half-to-even, exactly what the study's
    `round(0.5 * 5) == 2` did (STUDY.md P2); `half_up` gives 3 there."""
    if rule == "python_round":
        return torch.round(x).long()  # torch.round is half-to-even, like Python's round
    if rule == "half_up":
        return torch.floor(x + 0.5).long()
    if rule == "floor":
        return torch.floor(x).long()
    return torch.ceil(x).long()


class Actuator:
    mechanism: ClassVar[str] = "none"
    granularity: ClassVar[str] = "sequence"
    PARAMS: ClassVar[Mapping[str, Param]] = {}
    passes: ClassVar[float] = 0.0  # extra (B, L) passes beyond the scorer's (1 = one read + one write)
    accepts_granularity: ClassVar[tuple[str, ...]] = ("sequence",)
    reads: ClassVar[tuple[str, ...]] = ()  # batch fields read beyond the scorer's output

    def __init__(self, **params: Any) -> None:
        self.params = params


class Selector(Actuator):
    """Keep mask over sequences; the policy turns it into 0/1 token weights."""

    mechanism = "select"
    # how a matched-random control must copy this selector's counts: per group, globally, or whole groups
    matched_structure: ClassVar[str] = "per_group"

    def select(self, scores: Tensor, batch: StepBatch) -> Tensor:  # pragma: no cover - abstract
        raise NotImplementedError


NORMALIZE = ("sequences", "tokens", "informative_tokens")


class Reweighter(Actuator):
    """Soft weights. `normalize` says over which unit they average 1:
    `sequences` (mean over real sequences; the study's per-sequence rule, P7), `tokens` (mean over valid
    tokens, so verl's token-mean loss keeps its scale), `informative_tokens` (mean over valid tokens of
    sequences with non-zero advantage, so zero-advantage groups do not inflate the rest, P7)."""

    mechanism = "reweight"

    def raw(self, scores: Tensor, batch: StepBatch) -> Tensor:  # pragma: no cover - abstract
        """Unnormalised weights: (B,) per sequence, or (B, L) per token and already zero outside the
        mask. May reuse (mutate) `scores`, which the policy hands over and does not read again."""
        raise NotImplementedError

    def weigh(self, scores: Tensor, batch: StepBatch) -> Tensor:
        w = self.raw(scores, batch)
        return normalise(w, batch, self.params.get("normalize", "sequences"))


def normalise(w: Tensor, batch: StepBatch, unit: str) -> Tensor:
    """Scale (B,) or (B, L) weights so they average 1 over `unit` (see `Reweighter`)."""
    valid = batch.valid
    if unit == "sequences":
        if w.dim() == 2:
            per_seq = (w * batch.mask).sum(-1) / batch.mask.sum(-1).clamp_min(1)
            denom = per_seq[valid].mean()
        else:
            denom = w[valid].mean()
    else:
        # token units: weighted by per-row token counts, so no (B, L) temporary is needed; token-level
        # weights are already zero outside the mask (Reweighter.raw contract)
        length = signals.response_length(batch)
        rows = torch.ones_like(length, dtype=torch.bool) if unit == "tokens" else signals.informative(batch)
        row_mass = w.sum(-1) if w.dim() == 2 else w * length
        denom = row_mass[rows].sum() / length[rows].sum().clamp_min(1)
    if not bool(torch.isfinite(denom)) or float(denom) <= 0:
        return torch.ones_like(w) * (batch.mask if w.dim() == 2 else batch.valid.float())
    return w.div_(denom) if w.dim() == 2 else w / denom
