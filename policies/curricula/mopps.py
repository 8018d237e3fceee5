"""`mopps` (Qu et al., Model Predictive Prompt Selection, arXiv 2507.04632): a Beta posterior per prompt on its
success rate; Thompson-sample it and roll out the prompts whose sampled rate is nearest the target.

The rule, as in the paper and its public code (thu-rllab/MoPPS at a883f51: `recipe/ours/mopps.py`, strategy `topk`):
* each step draws `candidate_ratio` x batch candidates from the epoch stream (uniform, without replacement; the
  code's `tasksampler.ts_ratio`), samples theta_i ~ Beta(alpha_i, beta_i) for each and keeps the batch with the
  smallest (theta_i - target)^2 (`mopps.py` lines 49-51, `bandit_target_mean` 0.5);
* after the rollouts, with s_i the group's success rate and K its rollouts (`mopps.py` lines 77-78):
  alpha_i <- decay * alpha_i + (1 - decay) * alpha_0 + s_i K, beta_i likewise with (1 - s_i) K. Prior
  alpha_0 = beta_0 = 1.
Defaults are the code's **math** runs (`scripts/math/math_verl_1.5b_topk_noinit.sh` line 131: ts_ratio 16; no
decay override, so `config/our_trainer.yaml` line 41: bandit_decay_ratio 1.0, no forgetting), the setting closest
to our reasoning suites; its countdown runs use ts_ratio 8 and decay 0.5 (`scripts/countdown/
cd_verl_3b_topk_noinit.sh` lines 133 and 138), an inline variant away (`{base: mopps, params: {candidate_ratio:
8, decay: 0.5}}`).
"""

from __future__ import annotations

from typing import Any, ClassVar

import numpy as np

from policies.curricula.base import Curriculum
from policies.curricula.fresh import take_fresh
from policies.registry import Param


def thompson_nearest(rng: np.random.Generator, alpha: np.ndarray, beta: np.ndarray, cand: np.ndarray, n: int,
                     target: float) -> tuple[np.ndarray, np.ndarray]:
    """(the n candidates whose Beta draw is nearest `target`, nearest first; their draws)."""
    theta = rng.beta(alpha[cand], beta[cand])
    dist = (theta - target) ** 2
    pos = np.argpartition(dist, n - 1)[:n] if n < cand.size else np.arange(cand.size)
    pos = pos[np.argsort(dist[pos], kind="stable")]
    return cand[pos], theta[pos]


def posterior_update(alpha: np.ndarray, beta: np.ndarray, ids: np.ndarray, correct: np.ndarray, decay: float,
                     a0: float, b0: float) -> None:
    """MoPPS' decayed Beta update, in place, from (len(ids), K) per-rollout correctness."""
    k = correct.shape[1]
    s = correct.mean(axis=1)
    alpha[ids] = decay * alpha[ids] + (1.0 - decay) * a0 + s * k
    beta[ids] = decay * beta[ids] + (1.0 - decay) * b0 + (1.0 - s) * k


class MoPPS(Curriculum):
    """Thompson-sampled Beta posteriors, nearest the target first."""

    name = "mopps"
    signal = "accuracy: per-rollout correctness in {0,1} (the code's bandit_metric: acc)"
    PARAMS: ClassVar[dict[str, Param]] = {
        "target": Param(float, 0.5, low=0.0, high=1.0, low_open=True, high_open=True,
                        doc="success rate the sampled posterior should be nearest"),
        "decay": Param(float, 1.0, low=0.0, high=1.0, doc="lambda: weight kept by the old posterior each update"),
        "candidate_ratio": Param(float, 16.0, low=1.0, doc="candidates drawn per step, as a multiple of the batch"),
        "prior_alpha": Param(float, 1.0, low=0.0, low_open=True),
        "prior_beta": Param(float, 1.0, low=0.0, low_open=True),
    }
    STATE = ("alpha", "beta", "seen")

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.alpha = np.full(self.pool_size, self.params["prior_alpha"], dtype=np.float64)
        self.beta = np.full(self.pool_size, self.params["prior_beta"], dtype=np.float64)
        self.seen = np.zeros(self.pool_size, dtype=bool)

    def _propose(self, step: int, mask: np.ndarray, n: int) -> np.ndarray:
        m = min(int(round(self.params["candidate_ratio"] * n)), int(mask.sum()))
        cand = take_fresh(self.rng, self.seen, mask, m)
        ids, theta = thompson_nearest(self.rng, self.alpha, self.beta, cand, n, self.params["target"])
        self.last_diagnostics.update(candidates=float(m), mean_theta_proposed=float(theta.mean()),
                                     mean_p_proposed=float((self.alpha[ids] / (self.alpha[ids] + self.beta[ids]))
                                                           .mean()))
        return ids

    def update(self, step: int, prompt_ids: np.ndarray, correct: np.ndarray) -> None:
        ids, c = self.check_update(prompt_ids, correct)
        if ids.size:
            posterior_update(self.alpha, self.beta, ids, c, self.params["decay"], self.params["prior_alpha"],
                             self.params["prior_beta"])

    def posterior_mean(self) -> np.ndarray:
        """(pool,) alpha / (alpha + beta): the model's estimate of each prompt's success rate."""
        return self.alpha / (self.alpha + self.beta)
