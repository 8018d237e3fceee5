"""`uniform`: the matched-random curriculum control. Same prompts per step as the curriculum it controls, chosen
uniformly without replacement within a step and epoch-style across steps (every allowed prompt once before any
twice). It reads no signal, so a curriculum's effect is measured against it at equal prompts rolled out."""

from __future__ import annotations

from typing import Any, ClassVar

import numpy as np

from policies.curricula.base import Curriculum
from policies.curricula.fresh import take_fresh
from policies.registry import Param


class Uniform(Curriculum):
    """Uniform epoch-style choice: the control, and the baseline order of the local sampler."""

    name = "uniform"
    signal = "none"
    PARAMS: ClassVar[dict[str, Param]] = {}
    STATE = ("seen",)

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.seen = np.zeros(self.pool_size, dtype=bool)

    def _propose(self, step: int, mask: np.ndarray, n: int) -> np.ndarray:
        return take_fresh(self.rng, self.seen, mask, n)

    def update(self, step: int, prompt_ids: np.ndarray, correct: np.ndarray) -> None:
        self.check_update(prompt_ids, correct)
