"""Which prompts a local GRPO step rolls out, and the record of that choice.

Why a module of its own: the choice composes three sources (the epoch order of plain GRPO, a mixer's domain
counts, a curriculum's per-prompt proposals) and every run logs what it chose (`rollout_ids.jsonl`), so the
intervention check can compare a curriculum's prompts with its baseline's under the same seed.

Composition rule (docs/guide/policies.md, "curricula"): a mixer sets how many prompts each domain gets
(`DomainSampler.counts`), then the curriculum picks that many within each domain (`propose(allowed=domain)`);
without a mixer the curriculum picks the whole batch. A post-rollout selector or reweighter then acts on the
rollouts of the chosen prompts, as without a curriculum.
"""

from __future__ import annotations

import numpy as np

from policies.curricula.compose import COUNT_DIAGNOSTICS, curriculum_batch, merge_diagnostics
from training.backend import TrainingError
from wtcommon.prompt_ids import PromptIdLog

__all__ = ["COUNT_DIAGNOSTICS", "PromptIdLog", "check_domain_pools", "curriculum_batch", "merge_diagnostics",
           "zero_variance_share"]


def zero_variance_share(correct: np.ndarray) -> float:
    """The share of groups (rows of a (P, K) correctness array) whose K rollouts all agree: GRPO gives them zero
    advantage, so their rollouts were generated for no gradient (the waste a curriculum tries to avoid)."""
    c = np.asarray(correct, dtype=np.float64)
    if c.ndim != 2 or c.shape[0] == 0:
        return float("nan")
    return float(np.mean(np.all(c == c[:, :1], axis=1)))


def check_domain_pools(pool_domain: np.ndarray, names: list[str], batch_size: int) -> None:
    """A curriculum under a mixer draws a domain's whole count from that domain without repeats, so each domain
    must hold at least one batch of prompts (a mixer may give one domain the whole batch)."""
    sizes = np.bincount(np.asarray(pool_domain, dtype=np.int64), minlength=len(names))
    short = [f"{n} ({int(s)})" for n, s in zip(names, sizes, strict=True) if s < batch_size]
    if short:
        raise TrainingError(f"curriculum with a mixer: domain pool(s) {short} hold fewer prompts than "
                            f"actor.prompts_per_step = {batch_size}; lower prompts_per_step or add prompts")
