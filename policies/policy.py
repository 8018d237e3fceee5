"""`DataPolicy`: mechanism + scorer + actuator + options, applied to one step's batch; `policies.loader`
builds it by name from a YAML block.

YAML (one file per configuration in `campaigns/policy/`, a plain mapping so it is also a Hydra
config-group member):

    name: gfpo
    mechanism: select                # none | select | reweight | mix | curriculum
    curriculum: {name: greso, params: {}}                 # curriculum (required), select/reweight/mix (optional)
    scorer:   {name: reward_difficulty, params: {}}      # omitted for none and mix
    actuator: {name: gfpo, params: {k: 3}}                # omitted for none
    loss_norm: all_tokens            # select only; all_tokens (study, P6) | kept_tokens
    recompute_advantages: false      # select only; GRPO advantages on the kept subset (P5)
    norm_adv_by_std: true            # used by recompute_advantages, as verl's GRPO
    warmup_step: 0                   # inactive while step < warmup_step
    control: null                    # {name: matched_random, structure: auto}
                                     # | {name: matched_update_tokens, mode: scale}
    domains: [math, logic, science]  # mix only; or passed to load_policy
    search_space: {actuator.k: {low: 1, high: 4}}       # optional, for tuning
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any
from collections.abc import Sequence

import torch
from torch import Tensor

from policies import controls, scorers as _scorers
from policies import signals
from policies.actuators.base import Selector
from policies.actuators.mix import DomainStats, Mixer
from policies.advantages import grpo_advantages
from policies.batch import StepBatch
from policies.registry import Entry


@dataclass
class PolicyResult:
    """What one step's policy does. `weights` (B, L) float32 multiply the per-token policy-gradient loss
    (None = leave the loss alone); `advantages` (B, L) replace the host's when the policy recomputes them."""

    weights: Tensor | None
    advantages: Tensor | None
    diagnostics: dict[str, float] = field(default_factory=dict)


def _weight_stats(w_seq: Tensor | None, w_tok: Tensor | None, batch: StepBatch) -> dict[str, float]:
    """Weight mean/std/max over valid tokens, from per-sequence weights in O(B) when possible."""
    length = signals.response_length(batch)
    n_tok = float(length.sum())
    if w_tok is not None:
        # token weights are zero outside the mask and >= 0: reduce without boolean indexing
        if n_tok > 0:
            mean = float(w_tok.sum(-1).double().sum()) / n_tok
            sq = float(torch.linalg.vector_norm(w_tok).double() ** 2) / n_tok
            std, mx = math.sqrt(max(sq - mean**2, 0.0)), float(w_tok.max())
        else:
            mean = std = mx = math.nan
        update = float(torch.count_nonzero(w_tok))
    else:
        w = w_seq if w_seq is not None else batch.valid.float()
        has = length > 0
        if n_tok > 0:
            mean = float((w * length).sum() / n_tok)
            var = float((w * w * length).sum() / n_tok) - mean**2
            std, mx = math.sqrt(max(var, 0.0)), float(w[has].max())
        else:
            mean = std = mx = math.nan
        update = float((length * (w > 0).float()).sum())
    return {"update_tokens": update, "valid_tokens": n_tok, "weight_mean": mean, "weight_std": std, "weight_max": mx}


class DataPolicy:
    """A validated, ready-to-apply data policy (see the module docstring for the YAML)."""

    def __init__(self, config: dict[str, Any], *, seed: int, domains: Sequence[str] | None, rollout_n: int | None,
                 scorer_entry: Entry | None, scorer_params: dict, actuator_entry: Entry | None, actuator_params: dict):
        self.config = config
        self.name: str = config["name"]
        self.mechanism: str = config["mechanism"]
        self.seed = seed
        self.domains = list(domains) if domains else []
        self.rollout_n = rollout_n
        self.warmup_step: int = config.get("warmup_step", 0)
        self.loss_norm: str = config.get("loss_norm", "all_tokens")
        self.recompute_advantages: bool = config.get("recompute_advantages", False)
        self.norm_adv_by_std: bool = config.get("norm_adv_by_std", True)
        self.control: dict | None = config.get("control")
        self.curriculum: dict | None = config.get("curriculum")  # {name, params}, built by the trainer on its pool
        self.dynamic_sampling: dict | None = config.get("dynamic_sampling")  # {oversample, max_rounds}: the trainer
        self.scorer = scorer_entry.cls(**scorer_params) if scorer_entry else None
        self.actuator = actuator_entry.cls(**actuator_params) if actuator_entry else None
        self.stats: DomainStats | None = None
        self._props: Tensor | None = None
        if isinstance(self.actuator, Mixer):
            self.stats = DomainStats(len(self.domains), self.actuator.params["window"],
                                     self.actuator.params["window_unit"],
                                     needs_abs_adv=self.actuator.params.get("signal") == "mean_abs_advantage")
            self._props = torch.full((len(self.domains),), 1.0 / len(self.domains))

    def __repr__(self) -> str:
        return f"DataPolicy(name={self.name!r}, mechanism={self.mechanism!r})"

    @property
    def reads(self) -> tuple[str, ...]:
        """Batch fields the policy needs (the verl hook fetches only these)."""
        base = ("response_mask", "rewards")
        extra = self.scorer.reads if self.scorer else ()
        if self.mechanism == "mix":
            extra = ("advantages", "domain")
        return tuple(dict.fromkeys(base + tuple(extra) + (("group",) if self.mechanism == "select" else ())))

    @property
    def passes(self) -> float:
        """(B, L) memory passes one step needs, declared for the benchmark. One pass = one read + one write
        of a (B, L) float32 tensor into existing memory. A fresh (B, L) output (the weights, recomputed
        advantages) counts one more pass: the OS zeroes new pages before we write them (measured: a fresh
        `mask * w` costs two preallocated passes)."""
        if self.mechanism in ("none", "curriculum"):
            return 0.5  # the response-length reduction for diagnostics (one read)
        if self.mechanism == "mix":
            return 0.5 + (3.0 if self.stats is not None and self.stats.needs_abs_adv else 0.0)
        p = 0.5  # response length (one read of the mask)
        token_level = self.scorer is not None and self.scorer.granularity == "token"
        # sequence weights: write mask * w into a fresh tensor (1 + 1 fresh); token weights: the scorer's
        # fresh exp output is reused in place (+1 fresh) and the stats are four reductions (sum, norm, max,
        # count: 2)
        p += 3.0 if token_level else 2.0
        p += self.scorer.passes if self.scorer else 0
        p += self.actuator.passes if self.actuator else 0
        uses_abs_adv = isinstance(self.scorer, _scorers.AdvantageMagnitude)
        informative = self.actuator is not None and self.actuator.params.get("normalize") == "informative_tokens"
        if informative and not uses_abs_adv:
            p += 3.0  # mean |advantage| to find the informative rows
        if self.recompute_advantages:
            p += 2.0  # fresh (B, L) advantages: mask * a
        return p

    # ---- selection / reweighting ---------------------------------------------------------------
    def apply(self, batch: StepBatch, step: int) -> PolicyResult:
        """The policy's action on one step's batch (after advantages, before the actor update)."""
        inactive = self.mechanism in ("none", "mix", "curriculum") or step < self.warmup_step
        if inactive:
            diag = _weight_stats(None, None, batch)
            diag.update(kept_frac=1.0, active=0.0)
            if self._props is not None:
                diag.update({f"target_prop_{d}": float(p) for d, p in zip(self.domains, self._props, strict=True)})
            return PolicyResult(None, None, diag)
        # an active select/reweight policy has both (validated by parse_policy)
        assert self.scorer is not None and self.actuator is not None
        scores = self.scorer.score(batch)
        valid = batch.valid
        n_valid = max(int(valid.sum()), 1)
        advantages = None
        w_tok = None
        if isinstance(self.actuator, Selector):
            keep = self.actuator.select(scores, batch)
            selector_keep = keep
            w_seq = keep.float()
            ctl = self.control
            if ctl is not None:
                gen = controls.control_generator(self.seed, step, self.name)
                if ctl["name"] == "matched_random":
                    structure = ctl.get("structure", "auto")
                    if structure == "auto":
                        structure = self.actuator.matched_structure
                    keep = controls.matched_random(keep, batch, structure, gen)
                    w_seq = keep.float()
                else:
                    w_seq = controls.matched_update_tokens(keep, batch, ctl.get("mode", "scale"), gen)
                    keep = w_seq > 0
            if self.loss_norm == "kept_tokens":
                length = signals.response_length(batch)
                kept_tok = float((length * w_seq).sum())
                if kept_tok > 0:
                    w_seq = w_seq * (float(length.sum()) / kept_tok)
            if self.recompute_advantages:
                advantages = grpo_advantages(batch, keep, self.norm_adv_by_std)
            kept_frac = float((keep & valid).sum()) / n_valid
            extra = {"selector_kept_frac": float((selector_keep & valid).sum()) / n_valid}
        else:
            w = self.actuator.weigh(scores, batch)
            if w.dim() == 2:
                w_tok, w_seq = w, None  # already zero outside the mask (Reweighter.raw contract)
            else:
                w_seq = torch.where(valid, w, torch.zeros_like(w))
            kept_frac = 1.0
            extra = {}
        if w_tok is not None:
            weights = w_tok
        else:
            assert w_seq is not None  # every branch above sets one of the two
            weights = batch.mask * w_seq[:, None]
        diag = _weight_stats(w_seq if w_tok is None else None, w_tok, batch)
        diag.update(kept_frac=kept_frac, active=1.0, **extra)
        return PolicyResult(weights.to(torch.float32), advantages, diag)

    # ---- curricula ------------------------------------------------------------------------------
    def build_curriculum(self, pool_size: int, batch_size: int, *, seed: int, domains: Any = None,
                         pass_rates: Any = None) -> Any:
        """The policy's curriculum (`policies.curricula.base.Curriculum`) over the trainer's pool, or None.
        `seed`: the trainer's curriculum stream (its own, so a curriculum's draws move no other random choice)."""
        if self.curriculum is None:
            return None
        from policies.curricula.registry import build_curriculum

        return build_curriculum(self.curriculum["name"], self.curriculum["params"], pool_size, batch_size,
                                seed, domains=domains, pass_rates=pass_rates)

    # ---- mixing --------------------------------------------------------------------------------
    def observe(self, batch: StepBatch, step: int) -> dict[str, float]:
        """Feed one step's signals to a mixer; recompute proportions on schedule. Returns diagnostics
        (per-domain window reward and the new target proportions)."""
        if self.stats is None:
            return {}
        # stats exist only for a mixer, which starts from uniform proportions (__init__)
        assert self.actuator is not None and self._props is not None
        self.stats.update(batch)
        upd = self.actuator.params["update_step"]
        if step >= self.warmup_step and (step - self.warmup_step) % upd == 0:
            self._props = self.actuator.mix(self.stats)
        m = self.stats.mean("reward")
        out = {f"domain_reward_{d}": float(v) for d, v in zip(self.domains, m, strict=True)}
        out.update({f"target_prop_{d}": float(p) for d, p in zip(self.domains, self._props, strict=True)})
        return out

    def proportions(self, step: int | None = None) -> Tensor:
        """(D,) current target sampling proportions (uniform before the first update; uniform for non-mixers)."""
        if self._props is None:
            d = max(len(self.domains), 1)
            return torch.full((d,), 1.0 / d)
        return self._props.clone()

    def state_dict(self) -> dict:
        """Mixer state as plain lists (JSON-serialisable)."""
        return {"props": None if self._props is None else self._props.tolist(),
                "stats": self.stats.state_dict() if self.stats else None}

    def load_state_dict(self, state: dict) -> None:
        self._props = None if state["props"] is None else torch.as_tensor(state["props"], dtype=torch.float32)
        if self.stats is not None and state.get("stats") is not None:
            self.stats.load_state_dict(state["stats"])
