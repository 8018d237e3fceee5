"""`prompt_replay` (arXiv 2603.21177): keep a buffer of medium-difficulty prompts and replay them, preferring a
success rate near 0.5, with a cooldown between replays and a cap on how often one prompt is replayed.

The rule: after a step, a prompt whose group success rate lies in [band_low, band_high] enters (or stays in) the
buffer with that rate; outside the band it leaves. Each step, floor(replay_fraction x batch) prompts are replayed
from the buffer: prompts not rolled out in the last `cooldown` steps and replayed fewer than `max_reuse` times,
nearest `target` first (ties random). A prompt reaching `max_reuse` leaves the buffer for good. The rest of the
batch is fresh: the epoch stream, uniform without replacement.

Defaults and the replay budget follow the authors' public code (baroian/GRPO_prompt_replay at 9e406c7,
`open-instruct/open_instruct/grpo_fast.py`): lines 202-210, `prompt_replay_fraction` 0.5, `cooldown_steps` 5,
`max_reuse_time` 20, `min_pass_rate` 0.24, `max_pass_rate` 0.7 (inclusive); line 750, the fraction is at most
0.5 (here a larger one is refused rather than clipped); line 886, the budget is floor(prompts_per_step x
fraction) (Python's round, before, replayed one prompt fewer or more on odd batches); line 1016, the replay heap
pops the prompt nearest 0.5 first (`target` here)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar

import numpy as np

from policies.curricula.base import Curriculum, top_n
from policies.curricula.fresh import take_fresh
from policies.errors import PolicyConfigError
from policies.registry import Param

NEVER = -(2**40)  # last_used of a prompt never rolled out: every cooldown has passed


class PromptReplay(Curriculum):
    """Half fresh, half replayed from a buffer of medium prompts nearest p = 0.5."""

    name = "prompt_replay"
    signal = "accuracy: per-rollout correctness in {0,1}"
    PARAMS: ClassVar[dict[str, Param]] = {
        "replay_fraction": Param(float, 0.5, low=0.0, high=0.5,
                                 doc="share of each batch replayed from the buffer (at most half, as the code)"),
        "band_low": Param(float, 0.24, low=0.0, high=1.0, doc="lowest group success rate admitted to the buffer"),
        "band_high": Param(float, 0.7, low=0.0, high=1.0, doc="highest group success rate admitted"),
        "target": Param(float, 0.5, low=0.0, high=1.0, low_open=True, high_open=True,
                        doc="preferred success rate of a replayed prompt"),
        "cooldown": Param(int, 5, low=0, doc="steps a prompt waits after a rollout before it is replayed"),
        "max_reuse": Param(int, 20, low=1, doc="replays of one prompt before it leaves the buffer"),
    }
    STATE = ("rate", "in_buffer", "reuse", "last_used", "seen")

    @classmethod
    def check_params(cls, params: Mapping[str, Any]) -> None:
        if params["band_low"] > params["band_high"]:
            raise PolicyConfigError(f"curriculum 'prompt_replay': params.band_low {params['band_low']} > "
                                    f"params.band_high {params['band_high']}; set band_low <= band_high")

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.rate = np.zeros(self.pool_size, dtype=np.float64)
        self.in_buffer = np.zeros(self.pool_size, dtype=bool)
        self.reuse = np.zeros(self.pool_size, dtype=np.int32)
        self.last_used = np.full(self.pool_size, NEVER, dtype=np.int64)
        self.seen = np.zeros(self.pool_size, dtype=bool)

    def _propose(self, step: int, mask: np.ndarray, n: int) -> np.ndarray:
        eligible = mask & self.in_buffer & (step - self.last_used >= self.params["cooldown"])
        r = min(int(np.floor(self.params["replay_fraction"] * n)), int(eligible.sum()))  # the code's floor
        u = self.rng.random(self.pool_size)
        replay = top_n(-np.abs(self.rate - self.params["target"]) + 1e-12 * u, eligible, r) if r else \
            np.zeros(0, dtype=np.int64)
        self.reuse[replay] += 1
        self.in_buffer[replay[self.reuse[replay] >= self.params["max_reuse"]]] = False
        rest = mask.copy()
        rest[replay] = False
        fresh = take_fresh(self.rng, self.seen, rest, n - r)
        out = np.concatenate([replay, fresh])
        self.last_used[out] = step
        self.last_diagnostics.update(replayed=float(r), buffer=float(self.in_buffer.sum()),
                                     mean_rate_replayed=float(self.rate[replay].mean()) if r else 0.0)
        return out

    def update(self, step: int, prompt_ids: np.ndarray, correct: np.ndarray) -> None:
        ids, c = self.check_update(prompt_ids, correct)
        s = c.mean(axis=1)
        self.rate[ids] = s
        medium = (s >= self.params["band_low"]) & (s <= self.params["band_high"])
        self.in_buffer[ids] = medium & (self.reuse[ids] < self.params["max_reuse"])
