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

Next-round size (`next_round`): `fixed` (the default, DAPO's) draws oversample x batch prompts every round;
`greso` is GRESO's adaptive size (arXiv 2506.02177; Infini-AI-Lab/GRESO at b277843,
verl/trainer/ppo/ray_trainer.py lines 1154-1162): the first round draws the cap (oversample x batch, GRESO's
`sampling_batch_size`), each later one int(remaining / (1 - z) x safety) prompts, z the zero-variance share of
the round before and `remaining` the informative groups still missing, clipped to [min_round x batch, cap]
(GRESO: safety 1.25, at least 64 prompts of its 256-prompt batch: min_round 0.25). Where it departs: GRESO marks
a round whose estimate fits under the cap as the last and trains on a short batch after it (`last_sampling`);
here rounds go on until the batch is full or `max_rounds`, as under `fixed`; a round with no informative group
(z = 1, a division by zero in GRESO) is followed by a full cap.

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
# `next_round: greso` and its parameters; written into the block only when given, so a block without them (the
# fixed rule) keeps the config, and so the run key, it had before the option existed.
NEXT_ROUND = Param(str, "fixed", choices=("fixed", "greso"),
                   doc="each round's size: fixed (oversample x batch) or greso (adaptive, from the last round's "
                       "zero-variance share)")
GRESO_PARAMS: dict[str, Param] = {
    "safety": Param(float, 1.25, low=1.0, high=10.0,
                    doc="greso: over-draw on the estimate remaining / informative rate (GRESO: 1.25)"),
    "min_round": Param(float, 0.25, low=0.0, high=64.0,
                       doc="greso: a later round draws at least this x batch prompts, within the cap (GRESO: 64 "
                           "prompts of a 256-prompt batch)"),
}


def check_dynamic_sampling(block: Any, where: str) -> dict[str, Any]:
    """A policy's `dynamic_sampling:` block (a mapping of PARAMS, `{}` for the defaults) with defaults filled;
    a bad field is a PolicyConfigError naming it."""
    if block is None or block is True:
        block = {}
    if not isinstance(block, Mapping):
        raise PolicyConfigError(f"{where}: dynamic_sampling: expected a mapping of {sorted(PARAMS)} (or {{}} for "
                                f"the defaults), got {block!r}")
    allowed = {**PARAMS, "next_round": NEXT_ROUND, **GRESO_PARAMS}
    unknown = sorted(set(block) - set(allowed))
    if unknown:
        raise PolicyConfigError(f"{where}: dynamic_sampling: unknown parameter(s) {unknown}; "
                                f"allowed: {sorted(allowed)}")
    out = {k: p.check(block[k], f"{where}: dynamic_sampling.{k}") if k in block else p.default
           for k, p in PARAMS.items()}
    rule = NEXT_ROUND.check(block.get("next_round", "fixed"), f"{where}: dynamic_sampling.next_round")
    extra = sorted(set(block) & set(GRESO_PARAMS))
    if rule == "fixed":
        if extra:
            raise PolicyConfigError(f"{where}: dynamic_sampling: {extra} only with next_round: greso")
        return out  # no next_round key: the fixed rule's block is the one written before the option existed
    out["next_round"] = rule
    out.update({k: p.check(block[k], f"{where}: dynamic_sampling.{k}") if k in block else p.default
                for k, p in GRESO_PARAMS.items()})
    if out["min_round"] > out["oversample"]:  # a round is clipped to at most the cap (oversample x batch)
        raise PolicyConfigError(f"{where}: dynamic_sampling.min_round: got {out['min_round']}, above oversample "
                                f"{out['oversample']}: a round never draws more than oversample x batch prompts; "
                                "give min_round <= oversample")
    return out


def round_options(block: Mapping[str, Any]) -> dict[str, Any]:
    """The next-round keywords of `dynamic_sample` from a checked block (the fixed rule's when it names none)."""
    return {"next_round": block.get("next_round", "fixed"),
            **{k: block.get(k, p.default) for k, p in GRESO_PARAMS.items()}}


def next_round_size(next_round: str, cap: int, batch: int, remaining: int, informative_share: float,
                    safety: float, min_round: float) -> int:
    """Prompts to draw in a round after the first (before the pool's limit): `cap` under the fixed rule; under
    greso int(remaining / informative_share x safety) (GRESO's 1 - zero_variance_ratio, line 1156 at b277843)
    clipped to [ceil(min_round x batch), cap] (lines 1161-1162), the cap after a round with no informative
    group."""
    if next_round == "fixed" or informative_share <= 0.0:
        return cap
    est = int(remaining / informative_share * safety)
    return min(cap, max(est, int(math.ceil(min_round * batch)), 1))


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
        rollouts generated per informative group kept, the zero-variance fill of a short batch, and the rounds'
        sizes in prompts (mean, first, last: the adaptive rule shows in the later rounds)."""
        kept = len(self.kept)
        sizes = [float(d.size) for d in self.drawn]
        return {"rounds": float(self.rounds), "generated_prompts": float(self.generated_prompts),
                "generated_rollouts": float(self.generated_rollouts),
                "informative_groups": float(self.informative_groups), "kept_groups": float(kept),
                "rollouts_per_informative_group": self.generated_rollouts / kept if kept else math.nan,
                "filled_zero_variance": float(len(self.filled)),
                "round_size_mean": float(np.mean(sizes)) if sizes else math.nan,
                "round_size_first": sizes[0] if sizes else math.nan,
                "round_size_last": sizes[-1] if sizes else math.nan}


def dynamic_sample(draw: Callable[[int, int, np.ndarray], np.ndarray], roll: Callable[[int, np.ndarray], np.ndarray],
                   batch: int, pool_size: int, oversample: float, max_rounds: int, next_round: str = "fixed",
                   safety: float = 1.25, min_round: float = 0.25) -> DynamicSample:
    """Rounds of `draw(round, n, used)` (n unique prompt ids none of which is `used`, a (pool,) bool mask) and
    `roll(round, ids)` ((len(ids), K) per-rollout correctness), until `batch` informative groups are kept, the
    round cap or the pool is spent; each round's n from `next_round_size` (at most oversample x batch). A Python
    loop over rounds (at most `max_rounds`), vectorised within each."""
    out = DynamicSample()
    used = np.zeros(pool_size, dtype=bool)
    last_zero: list[tuple[int, int]] = []
    cap = int(math.ceil(oversample * batch))
    want = cap
    for r in range(max_rounds):
        n = min(want, int((~used).sum()))
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
        want = next_round_size(next_round, cap, batch, batch - len(out.kept), float(ok.mean()), safety, min_round)
    out.filled = last_zero[: batch - len(out.kept)]
    return out
