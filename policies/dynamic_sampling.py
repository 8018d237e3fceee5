"""Dynamic sampling (DAPO, arXiv 2503.14476, `recipe/dapo` in verl): over-sample prompts, drop the groups whose
rollouts all agree (GRPO gives them zero advantage: generated for no gradient), and draw again until the batch
holds `batch` informative groups or `max_rounds` rounds were drawn.

The rule, as verl's DAPO trainer runs it (`algorithm.filter_groups`, `data.gen_batch_size`,
`max_num_gen_batches`): each round rolls out `oversample` x batch prompts (the DAPO recipe: gen_batch_size =
3 x train_batch_size), keeps the groups whose metric varies (here per-rollout **accuracy**, never the shaped
score: a filter on `score` lets all-wrong groups through under shaped rewards, verl-recipe #125), and stops once
`batch` are kept (the surplus of the last round is dropped, as DAPO truncates). Every generated rollout counts
toward the rollout-token budget, the kept ones or not. Where it departs: DAPO raises once `max_num_gen_batches`
rounds leave the batch short; here the batch is filled with the last round's zero-variance groups (zero
advantage, no gradient) and the shortfall is logged (`ds/filled_zero_variance`), so a run on an easy pool trains
on rather than dies.

Pure and framework-free: `dynamic_sample` takes a `draw` and a `roll` function, so the local trainer, a
simulation and the unit test drive the same rule.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from policies.errors import PolicyConfigError
from policies.registry import Param

PARAMS: dict[str, Param] = {
    "oversample": Param(float, 3.0, low=1.0, high=64.0,
                        doc="prompts rolled out per round, as a multiple of the batch (DAPO's gen_batch_size / "
                            "train_batch_size: 3)"),
    "max_rounds": Param(int, 10, low=1, high=1000, doc="rounds per step at most (DAPO's max_num_gen_batches: 10)"),
}


def check_dynamic_sampling(block: Any, where: str) -> dict[str, Any]:
    """A policy's `dynamic_sampling:` block (a mapping of PARAMS, `{}` for the defaults) with defaults filled;
    a bad field is a PolicyConfigError naming it."""
    if block is None or block is True:
        block = {}
    if not isinstance(block, Mapping):
        raise PolicyConfigError(f"{where}: dynamic_sampling: expected a mapping of {sorted(PARAMS)} (or {{}} for "
                                f"the defaults), got {block!r}")
    unknown = sorted(set(block) - set(PARAMS))
    if unknown:
        raise PolicyConfigError(f"{where}: dynamic_sampling: unknown parameter(s) {unknown}; allowed: {sorted(PARAMS)}")
    return {k: p.check(block[k], f"{where}: dynamic_sampling.{k}") if k in block else p.default
            for k, p in PARAMS.items()}


def informative(correct: np.ndarray) -> np.ndarray:
    """(groups,) bool: the groups of a (groups, K) per-rollout correctness array whose rollouts do not all agree."""
    c = np.asarray(correct, dtype=np.float64)
    return c.max(axis=1) > c.min(axis=1) if c.size else np.zeros(c.shape[0], dtype=bool)


@dataclass
class DynamicSample:
    """One step's dynamic sampling: the kept groups as (round, position in that round's prompts), what was drawn
    and generated in all rounds."""

    kept: list[tuple[int, int]] = field(default_factory=list)
    filled: list[tuple[int, int]] = field(default_factory=list)  # zero-variance groups filling a short batch
    drawn: list[np.ndarray] = field(default_factory=list)  # each round's prompt ids
    informative_groups: int = 0
    rollouts_per_group: int = 0

    @property
    def rounds(self) -> int:
        return len(self.drawn)

    @property
    def generated_prompts(self) -> int:
        return int(sum(d.size for d in self.drawn))

    @property
    def generated_rollouts(self) -> int:
        return self.generated_prompts * self.rollouts_per_group

    def diagnostics(self) -> dict[str, float]:
        """What the step logs: rounds, prompts and rollouts generated, informative groups found and kept, the
        rollouts generated per informative group kept, and the zero-variance fill of a short batch."""
        kept = len(self.kept)
        return {"rounds": float(self.rounds), "generated_prompts": float(self.generated_prompts),
                "generated_rollouts": float(self.generated_rollouts),
                "informative_groups": float(self.informative_groups), "kept_groups": float(kept),
                "rollouts_per_informative_group": self.generated_rollouts / kept if kept else math.nan,
                "filled_zero_variance": float(len(self.filled))}


def dynamic_sample(draw: Callable[[int, int, np.ndarray], np.ndarray], roll: Callable[[int, np.ndarray], np.ndarray],
                   batch: int, pool_size: int, oversample: float, max_rounds: int) -> DynamicSample:
    """Rounds of `draw(round, n, used)` (n unique prompt ids none of which is `used`, a (pool,) bool mask) and
    `roll(round, ids)` ((len(ids), K) per-rollout correctness), until `batch` informative groups are kept, the
    round cap or the pool is spent. A Python loop over rounds (at most `max_rounds`), vectorised within each."""
    out = DynamicSample()
    used = np.zeros(pool_size, dtype=bool)
    last_zero: list[tuple[int, int]] = []
    for r in range(max_rounds):
        n = min(int(math.ceil(oversample * batch)), int((~used).sum()))
        if n < 1:
            break
        ids = np.asarray(draw(r, n, used.copy()), dtype=np.int64)
        used[ids] = True
        correct = np.asarray(roll(r, ids), dtype=np.float64)
        out.drawn.append(ids)
        out.rollouts_per_group = int(correct.shape[1])
        ok = informative(correct)
        out.informative_groups += int(ok.sum())
        take = np.flatnonzero(ok)[: batch - len(out.kept)]
        out.kept += [(r, int(i)) for i in take]
        last_zero = [(r, int(i)) for i in np.flatnonzero(~ok)]
        if len(out.kept) >= batch:
            break
    out.filled = last_zero[: batch - len(out.kept)]
    return out
