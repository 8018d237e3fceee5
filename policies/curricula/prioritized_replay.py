"""`prioritized_replay` (prioritized prompt replay, arXiv 2601.02648): priority from each prompt's empirical
success rate, heap-style sampling of the highest priorities, and a periodic retest of solved and unsolved ones.

The rule (from the paper's one-line description; its exact priority function was not available to us, so it is
stated here): p = successes / rollouts over the prompt's history; priority p(1 - p) (the GRPO reward variance,
largest at 0.5), 1.0 for a prompt never rolled out (explored first). A prompt whose rate is exactly 0 (unsolved)
or 1 (solved) is parked: it leaves the priority heap, and every `retest_interval` steps a `retest_fraction` of
the batch goes to parked prompts, least recently rolled out first. The rest of the batch is **sampled by
priority**, without replacement (P(prompt) proportional to its priority, Efraimidis-Spirakis keys u^(1/priority)
from one uniform draw per step): popping the top of the heap deterministically re-selected the same batch step
after step (in a closed-loop simulation most rollouts went to one batch's worth of prompts), which is not what
prioritized replay samples. When too few unparked prompts are allowed, parked ones fill the batch (oldest first,
counted in `filled_from_parked`)."""

from __future__ import annotations

from typing import Any, ClassVar

import numpy as np

from policies.curricula.base import Curriculum, top_n
from policies.registry import Param



def priorities(successes: np.ndarray, rollouts: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """((pool,) priority, (pool,) parked mask)."""
    seen = rollouts > 0
    p = successes / np.where(seen, rollouts, 1.0)
    parked = seen & ((p <= 0.0) | (p >= 1.0))
    return np.where(seen, p * (1.0 - p), 1.0), parked


class PrioritizedReplay(Curriculum):
    """Sample by priority p(1 - p); park solved / unsolved prompts and retest them periodically."""

    name = "prioritized_replay"
    signal = "accuracy: per-rollout correctness in {0,1}"
    PARAMS: ClassVar[dict[str, Param]] = {
        "retest_interval": Param(int, 10, low=1, doc="every this many steps, retest parked prompts"),
        "retest_fraction": Param(float, 0.1, low=0.0, high=1.0, doc="share of the batch retested at those steps"),
    }
    STATE = ("successes", "rollouts", "last_step")

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.successes = np.zeros(self.pool_size, dtype=np.float64)
        self.rollouts = np.zeros(self.pool_size, dtype=np.float64)
        self.last_step = np.full(self.pool_size, -1, dtype=np.int64)
        self._derive()

    def _derive(self) -> None:
        self.prio, self.parked = priorities(self.successes, self.rollouts)

    def _propose(self, step: int, mask: np.ndarray, n: int) -> np.ndarray:
        prio, parked = self.prio, self.parked
        u = self.rng.random(self.pool_size)
        park_mask, heap_mask = mask & parked, mask & ~parked
        r = int(round(self.params["retest_fraction"] * n)) if step % self.params["retest_interval"] == 0 else 0
        r = max(min(r, int(park_mask.sum())), n - int(heap_mask.sum()))
        oldest = -(self.last_step + 0.5 * u)  # least recently rolled out first, random among equals
        retest = top_n(oldest, park_mask, r) if r else np.zeros(0, dtype=np.int64)
        with np.errstate(divide="ignore"):  # u = 0 (probability 2^-53): key -inf, drawn last
            keys = np.log(u) / prio  # log of u^(1/priority): the n largest are a priority-weighted sample
        popped = top_n(keys, heap_mask, n - r)
        heap_short = max(0, n - int(heap_mask.sum()))
        self.last_diagnostics.update(retested=float(r - heap_short), filled_from_parked=float(heap_short),
                                     parked=float(park_mask.sum()),
                                     mean_priority_proposed=float(prio[popped].mean()) if popped.size else 0.0)
        return np.concatenate([popped, retest])

    def update(self, step: int, prompt_ids: np.ndarray, correct: np.ndarray) -> None:
        ids, c = self.check_update(prompt_ids, correct)
        self.successes[ids] += c.sum(axis=1)
        self.rollouts[ids] += c.shape[1]
        self.last_step[ids] = step
        self.prio[ids], self.parked[ids] = priorities(self.successes[ids], self.rollouts[ids])
