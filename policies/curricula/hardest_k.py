"""`hardest_k` (arXiv 2508.14094, "hard examples are all you need"): a static curriculum. One pass of the base
model over the pool gives each prompt's pass rate; keep the hardest `fraction` of the pool (lowest pass rate,
ties broken by the seed) and train on it uniformly, epoch-style. A cheap offline baseline for the adaptive rules:
it reads no signal during training.

The kept subset is part of the saved state: its ties are broken by the seed, so a run restored under another
seed (or after the pre-pass cache changed) keeps the subset it trained on rather than silently drawing another.

Needs `pass_rates` (the difficulty pre-pass, keyed by model + pool + decoding); without them, or with a kept set
smaller than the batch, construction is refused naming the field and the fix."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar

import numpy as np

from policies.curricula.base import Curriculum
from policies.curricula.fresh import take_fresh
from policies.errors import PolicyConfigError
from policies.registry import Param


def hardest(pass_rates: np.ndarray, fraction: float, rng: np.random.Generator) -> np.ndarray:
    """(pool,) bool mask of the ceil(fraction * pool) prompts of lowest pass rate, ties broken at random."""
    k = int(np.ceil(fraction * pass_rates.size))
    order = np.lexsort((rng.random(pass_rates.size), pass_rates))
    keep = np.zeros(pass_rates.size, dtype=bool)
    keep[order[:k]] = True
    return keep


class HardestK(Curriculum):
    """Uniform over the hardest fraction of the pool by the base model's pass rate."""

    name = "hardest_k"
    signal = "base-model pass rate per prompt (offline pre-pass); nothing during training"
    needs_pass_rates = True
    PARAMS: ClassVar[dict[str, Param]] = {
        "fraction": Param(float, 0.1, low=0.0, high=1.0, low_open=True, doc="share of the pool kept, hardest first"),
    }
    STATE = ("seen", "keep")  # the subset too: a restore under another seed keeps the run's own (ties broken anew)

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        if self.pass_rates is None:
            raise PolicyConfigError("curriculum 'hardest_k': pass_rates: missing; hardest_k needs the base model's "
                                    "pass rate per prompt: run the difficulty pre-pass for this model, pool and "
                                    "decoding first")
        self.keep = hardest(self.pass_rates, self.params["fraction"], np.random.default_rng([self.seed, 1]))
        if int(self.keep.sum()) < self.batch_size:
            raise PolicyConfigError(f"curriculum 'hardest_k': params.fraction {self.params['fraction']} keeps "
                                    f"{int(self.keep.sum())} of {self.pool_size} prompts, fewer than the batch "
                                    f"{self.batch_size}; raise fraction to at least "
                                    f"{self.batch_size / self.pool_size:.4g}")
        self.seen = np.zeros(self.pool_size, dtype=bool)

    def _propose(self, step: int, mask: np.ndarray, n: int) -> np.ndarray:
        kept = mask & self.keep
        k = int(kept.sum())
        if k >= n:
            return take_fresh(self.rng, self.seen, kept, n)
        # a caller's `allowed` (one domain's quota) holds fewer hard prompts than asked: the hardest of the rest
        rest = mask & ~self.keep
        assert self.pass_rates is not None
        extra = np.flatnonzero(rest)[np.argsort(self.pass_rates[rest], kind="stable")[: n - k]]
        self.last_diagnostics["filled_outside_hardest"] = float(n - k)
        return np.concatenate([np.flatnonzero(kept), extra])

    def update(self, step: int, prompt_ids: np.ndarray, correct: np.ndarray) -> None:
        self.check_update(prompt_ids, correct)

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """A state saved before the subset was part of it (no `keep`) restores with the subset this seed draws,
        as it did then."""
        super().load_state_dict(state if "keep" in state else {**state, "keep": self.keep})
