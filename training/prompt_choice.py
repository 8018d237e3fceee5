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

import json
from pathlib import Path
from typing import Any

import numpy as np

from training.backend import TrainingError
from wtcommon.prompt_ids import IDS_FILE, read_prompt_ids


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


def curriculum_batch(curriculum: Any, step: int, counts: np.ndarray | None, pool_domain: np.ndarray) -> np.ndarray:
    """The step's prompt ids from the curriculum: the whole batch, or `counts[d]` within each domain d."""
    if counts is None:
        return np.asarray(curriculum.propose(step), dtype=np.int64)
    parts: list[np.ndarray] = []
    diag_sum: dict[str, float] = {}
    for d, c in enumerate(np.asarray(counts, dtype=np.int64)):
        if c <= 0:
            continue
        parts.append(np.asarray(curriculum.propose(step, allowed=pool_domain == d, n=int(c)), dtype=np.int64))
        for k, v in curriculum.last_diagnostics.items():  # counts add over the domains' calls
            diag_sum[k] = diag_sum.get(k, 0.0) + float(v)
    curriculum.last_diagnostics = diag_sum
    return np.concatenate(parts)


class PromptIdLog:
    """`<out>/rollout_ids.jsonl`: one line `{"step": s, "ids": [...]}` per step, appended and flushed, so a
    resumed run keeps the lines up to its checkpoint and continues the file."""

    def __init__(self, out_dir: Path, *, resume_step: int | None) -> None:
        self.path = Path(out_dir) / IDS_FILE
        kept = read_prompt_ids(self.path, upto=resume_step) if resume_step is not None else {}
        self._f = open(self.path, "w")
        for s in sorted(kept):
            self._write(s, kept[s])

    def _write(self, step: int, ids: np.ndarray) -> None:
        self._f.write(json.dumps({"step": int(step), "ids": [int(i) for i in ids]}) + "\n")
        self._f.flush()

    def log(self, step: int, ids: np.ndarray) -> None:
        self._write(step, ids)

    def close(self) -> None:
        self._f.close()
