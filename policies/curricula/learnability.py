"""`learnability` (Foster & Foerster, "Learning to Reason at the Frontier of Learnability", 2025): sample prompts
in proportion to p(1 - p), p the prompt's running success rate: the variance of its reward, largest at 0.5 and
zero for prompts always or never solved, which give GRPO no gradient.

Running rate: p = successes / rollouts, both decayed by `decay` per update of the prompt (1 = all history; 0 = the
empirical mean of the prompt's latest group). A prompt never rolled out reads `unseen_p` (0.5: sampled first).
Departures from the paper (LILO, §4 Algorithm 2, §5; no public code found): it estimates p afresh each step from
N_learnability = 8 rollouts of |D| = 4 x |B| uniformly drawn candidates and trains on the top |B| by p(1 - p),
paying those rollouts; this rule reads the history instead, over the whole pool, and samples in proportion
(campaigns/policy/learnability.yaml says the same).
Sampling is without replacement, proportional to the weights (Efraimidis-Spirakis: the n smallest E_i / w_i,
E_i ~ Exp(1), which is the same distribution as drawing one at a time with probability w / sum(w)). Prompts of
weight 0 are only taken when too few have a positive weight (uniformly, counted in `fallback_uniform`)."""

from __future__ import annotations

from typing import Any, ClassVar

import numpy as np

from policies.curricula.base import Curriculum, top_n
from policies.registry import Param


def weighted_without_replacement(rng: np.random.Generator, w: np.ndarray, mask: np.ndarray,
                                 n: int) -> tuple[np.ndarray, int]:
    """(n ids from mask, drawn proportional to w without replacement, in draw order; how many had to be
    zero-weight fills, drawn uniformly)."""
    e = rng.standard_exponential(w.size)
    pos = mask & (w > 0)
    with np.errstate(divide="ignore"):
        keys = -e / w  # largest key = smallest E / w; w = 0 gives -inf, never positive-mask anyway
    k = int(pos.sum())
    if k >= n:
        return top_n(keys, pos, n), 0
    first = top_n(keys, pos, k) if k else np.zeros(0, dtype=np.int64)
    fill = top_n(e, mask & ~pos, n - k)  # uniform among the zero-weight ones
    return np.concatenate([first, fill]), n - k


class Learnability(Curriculum):
    """Sample proportional to p(1 - p) of the running success rate."""

    name = "learnability"
    signal = "accuracy: per-rollout correctness in {0,1}"
    PARAMS: ClassVar[dict[str, Param]] = {
        "decay": Param(float, 1.0, low=0.0, high=1.0, doc="weight kept by a prompt's history at each of its updates"),
        "unseen_p": Param(float, 0.5, low=0.0, high=1.0, low_open=True, high_open=True,
                          doc="success rate assumed for a prompt never rolled out"),
    }
    STATE = ("successes", "rollouts")

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.successes = np.zeros(self.pool_size, dtype=np.float64)
        self.rollouts = np.zeros(self.pool_size, dtype=np.float64)
        self._derive()

    def _derive(self) -> None:
        self.p = self.success_rate()
        self.weight = self.p * (1.0 - self.p)

    def success_rate(self, ids: np.ndarray | None = None) -> np.ndarray:
        """Running success rate of `ids` (all prompts when None); `unseen_p` for a prompt never rolled out."""
        s, r = (self.successes, self.rollouts) if ids is None else (self.successes[ids], self.rollouts[ids])
        return np.where(r > 0, s / np.where(r > 0, r, 1.0), self.params["unseen_p"])

    def _propose(self, step: int, mask: np.ndarray, n: int) -> np.ndarray:
        ids, fill = weighted_without_replacement(self.rng, self.weight, mask, n)
        self.last_diagnostics.update(fallback_uniform=float(fill), mean_p_proposed=float(self.p[ids].mean()),
                                     mean_weight_proposed=float(self.weight[ids].mean()))
        return ids

    def update(self, step: int, prompt_ids: np.ndarray, correct: np.ndarray) -> None:
        ids, c = self.check_update(prompt_ids, correct)
        d = self.params["decay"]
        self.successes[ids] = d * self.successes[ids] + c.sum(axis=1)
        self.rollouts[ids] = d * self.rollouts[ids] + c.shape[1]
        p = self.success_rate(ids)
        self.p[ids], self.weight[ids] = p, p * (1.0 - p)
