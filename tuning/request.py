"""What a `campaign tune` call asks for (`TuneRequest`) and the error when it cannot run (`TuneError`).

A module of their own: every other part of the package takes the one or raises the other.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from wtcommon.errors import UserError


class TuneError(UserError):
    """A tuning request that cannot run; the message names the policy, the key and the fix."""


@dataclass
class TuneRequest:
    campaign: str | Path
    policies: Sequence[str]
    trials: int
    workdir: Path
    validation_suite: str | None = None
    validation_data: Path | None = None
    aggregate: str | None = None
    seeds: Sequence[int] | None = None
    ledger_url: str | None = None
    ray_address: str | None = None
    overrides: Sequence[str] = ()
    sampler_seed: int = 0
    prune: bool = True
    prune_warmup_steps: int | None = None  # MedianPruner n_warmup_steps in training steps; default half the run
    pruner: Any = None  # an optuna pruner instance overriding the default MedianPruner (tests, experiments)
    run_timeout_s: float | None = None
    out_dir: Path | None = None
    max_parallel: int | None = None
    on_event: Callable[[str], None] | None = field(default=None, repr=False)
