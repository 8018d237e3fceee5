"""`greso` (Zheng et al., "Act Only When It Pays", arXiv 2506.02177): skip, before rollout, prompts whose recent
rollouts had zero reward variance, each still retried with a small adaptive probability.

The rule, as in the paper and its public code (Infini-AI-Lab/GRESO, `all_probabilistic`):
* per prompt, z_easy = how many of its latest groups in a row were all correct, z_hard = all wrong;
* in the epoch stream, a prompt is kept with probability max(p_easy ** z_easy, retry_floor) (easy streak) or
  max(p_hard ** z_hard, retry_floor) (hard streak), else skipped for this epoch; no streak: always kept;
* after each step, the share of rolled-out groups that were all correct (all wrong) is compared with its target,
  target_zero_variance / 3 (x 2/3 for all wrong, which are likelier to change as the policy improves): above
  target, p -= delta (skip more); below, p += delta; p stays in [min_p, max_p]. Adaptation starts after one
  epoch of the code's dataloader, floor(pool / batch) updates (Infini-AI-Lab/GRESO at b277843,
  `verl/trainer/ppo/ray_trainer.py` line 453: `drop_last=True`; line 1207: `if epoch > 0`); ceil, as before,
  adapted one step late when the pool is not a multiple of the batch.

Zero variance is exact: every rollout of the group 1 (all correct) or 0 (all wrong), read from per-rollout
correctness. A step whose skips leave too few prompts (a solved pool) walks at most the rest of the epoch and one
fresh epoch, then fills uniformly and counts it in `fallback_uniform`: never an empty batch, never a hang.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar

import numpy as np

from policies.curricula.base import Curriculum
from policies.errors import PolicyConfigError
from policies.registry import Param

EXACT = 1e-9  # correctness within this of 0 / 1 counts as wrong / right


def streaks(z_easy: np.ndarray, z_hard: np.ndarray, ids: np.ndarray, correct: np.ndarray) -> tuple[np.ndarray,
                                                                                                    np.ndarray]:
    """Masks (all correct, all wrong) of the groups, updating the streak counters in place."""
    easy = correct.min(axis=1) >= 1.0 - EXACT
    hard = correct.max(axis=1) <= EXACT
    z_easy[ids] = np.where(easy, z_easy[ids] + 1, 0)
    z_hard[ids] = np.where(hard, z_hard[ids] + 1, 0)
    return easy, hard


def keep_probability(z_easy: np.ndarray, z_hard: np.ndarray, p_easy: float, p_hard: float,
                     floor: float) -> np.ndarray:
    """(pool,) probability that a prompt is rolled out when the epoch stream reaches it."""
    keep = np.ones(z_easy.shape, dtype=np.float64)
    e, h = z_easy > 0, z_hard > 0
    keep[e] = np.maximum(p_easy ** z_easy[e], floor)
    keep[h] = np.maximum(p_hard ** z_hard[h], floor)
    return keep


class Greso(Curriculum):
    """Skip zero-variance prompts with probability 1 - max(p ** streak, floor); p adapts to a target share."""

    name = "greso"
    signal = "accuracy: per-rollout correctness in {0,1} (zero variance = all 1 or all 0)"
    PARAMS: ClassVar[dict[str, Param]] = {
        "p_easy": Param(float, 0.5, low=0.0, high=1.0, low_open=True, high_open=True,
                        doc="initial base retry probability of an all-correct streak"),
        "p_hard": Param(float, 0.5, low=0.0, high=1.0, low_open=True, high_open=True,
                        doc="initial base retry probability of an all-wrong streak"),
        "target_zero_variance": Param(float, 0.25, low=0.0, high=1.0, low_open=True, high_open=True,
                                      doc="target share of zero-variance groups (1/3 easy, 2/3 hard)"),
        "delta": Param(float, 0.01, low=0.0, high=1.0, doc="step of the adaptation of p_easy / p_hard"),
        "min_p": Param(float, 0.05, low=0.0, high=1.0, doc="lower clamp of p_easy / p_hard"),
        "max_p": Param(float, 0.95, low=0.0, high=1.0, doc="upper clamp of p_easy / p_hard"),
        "retry_floor": Param(float, 0.01, low=0.0, high=1.0, doc="the least retry probability"),
    }
    STATE = ("z_easy", "z_hard", "seen", "p_easy", "p_hard", "n_updates")

    @classmethod
    def check_params(cls, params: Mapping[str, Any]) -> None:
        if params["min_p"] > params["max_p"]:
            raise PolicyConfigError(f"curriculum 'greso': params.min_p {params['min_p']} > params.max_p "
                                    f"{params['max_p']}; set min_p <= max_p")

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.z_easy = np.zeros(self.pool_size, dtype=np.int32)
        self.z_hard = np.zeros(self.pool_size, dtype=np.int32)
        self.seen = np.zeros(self.pool_size, dtype=bool)
        self.p_easy, self.p_hard = float(self.params["p_easy"]), float(self.params["p_hard"])
        self.n_updates = 0

    def _propose(self, step: int, mask: np.ndarray, n: int) -> np.ndarray:
        keep_p = keep_probability(self.z_easy, self.z_hard, self.p_easy, self.p_hard, self.params["retry_floor"])
        taken: list[np.ndarray] = []
        need, skipped = n, 0
        for _ in range(2):  # the rest of this epoch, then one fresh epoch
            ids, n_skipped = self._walk(mask, keep_p, need)
            taken.append(ids)
            skipped += n_skipped
            need -= ids.size
            if need == 0:
                break
            mask = mask.copy()
            mask[ids] = False
            if not mask.any():
                break
        fallback = need
        if need:  # every allowed prompt would be skipped: uniform fill, counted
            rest = mask.copy()
            rest[np.concatenate(taken)] = False
            taken.append(self.rng.choice(np.flatnonzero(rest), size=need, replace=False))
        out = np.concatenate(taken)
        self.seen[out] = True
        self.last_diagnostics.update(skipped=float(skipped), fallback_uniform=float(fallback),
                                     p_easy=self.p_easy, p_hard=self.p_hard,
                                     mean_keep_p_proposed=float(keep_p[out].mean()))
        return out

    def _walk(self, mask: np.ndarray, keep_p: np.ndarray, n: int) -> tuple[np.ndarray, int]:
        """Walk the epoch stream (unseen allowed prompts in a random order) keeping each with keep_p, until n
        are kept or the epoch ends (then the epoch is reset over `mask`). Returns (kept ids, skipped count)."""
        cand = np.flatnonzero(mask & ~self.seen)
        if cand.size == 0:
            self.seen[mask] = False
            cand = np.flatnonzero(mask)
        order = self.rng.random(cand.size)  # position in the epoch stream
        kept = self.rng.random(cand.size) < keep_p[cand]
        ck, ko = cand[kept], order[kept]
        if ck.size > n:
            pos = np.argpartition(ko, n - 1)[:n]
            ck, ko = ck[pos], ko[pos]
        elif ck.size < n:
            self.seen[mask] = False  # the epoch is over for the allowed set
            return ck[np.argsort(ko, kind="stable")], int(cand.size - ck.size)
        consumed = cand[order <= ko.max()]  # kept ones taken, skipped ones passed by
        self.seen[consumed] = True
        return ck[np.argsort(ko, kind="stable")], int(consumed.size - n)

    def update(self, step: int, prompt_ids: np.ndarray, correct: np.ndarray) -> None:
        ids, c = self.check_update(prompt_ids, correct)
        if ids.size == 0:
            return
        easy, hard = streaks(self.z_easy, self.z_hard, ids, c)
        self.n_updates += 1
        if self.n_updates > self.pool_size // self.batch_size:  # the dataloader drops the last partial batch
            self.p_easy, self.p_hard = adapt(self.p_easy, self.p_hard, float(easy.mean()), float(hard.mean()),
                                             self.params)
        self.last_diagnostics.update(zero_variance_share=float((easy | hard).mean()), p_easy=self.p_easy,
                                     p_hard=self.p_hard)


def adapt(p_easy: float, p_hard: float, easy_share: float, hard_share: float,
          params: dict[str, Any]) -> tuple[float, float]:
    """One adaptation step: a share at or above its target lowers that p (skip more), below raises it."""
    target = params["target_zero_variance"]
    d, lo, hi = params["delta"], params["min_p"], params["max_p"]
    p_easy = max(p_easy - d, lo) if easy_share >= target / 3 else min(p_easy + d, hi)
    p_hard = max(p_hard - d, lo) if hard_share >= target * 2 / 3 else min(p_hard + d, hi)
    return p_easy, p_hard
