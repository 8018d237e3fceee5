"""One interface for both training backends.

The orchestrator builds a `TrainRequest`, asks `registry.get_backend(name)` for a backend and gets back a
`TrainResult` whose checkpoints are verifiable (each has a `completed.json` written last). The
local backend trains tiny models on CPU; the verl backend launches `verl.trainer.main_ppo`.
"""

from __future__ import annotations

import abc
import json
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from wtcommon.files import short_hash


class TrainingError(RuntimeError):
    """A training run could not start or did not finish; the message names the cause and the fix."""


class TrainingConfigError(TrainingError):
    """A deterministic problem in the request or recipe (bad seed, step counts, backend name): the
    evaluate/train stage reports it as a configuration error, never retried."""


@dataclass(frozen=True)
class Checkpoint:
    """A finished checkpoint: `path` is an HF-format directory (config, weights, tokenizer)."""

    step: int
    path: Path


@dataclass
class TrainRequest:
    """Everything that determines one training run.

    `policy` is the policy YAML content (a mapping); `recipe` the recipe YAML content;
    `model_path` an HF directory or a built-in name such as `builtin:tiny_qwen2`;
    `train_files` Parquet files in the study's schema (empty: the recipe's synthetic corpus).
    `extra` carries backend options (e.g. `cache_dir`, `mlflow_uri`, `policy_path`, `model`).
    """

    run_id: str
    run_key: str
    policy: dict[str, Any]
    seed: int
    out_dir: Path
    recipe: dict[str, Any]
    model_path: str
    train_files: list[str] = field(default_factory=list)
    total_steps: int = 0
    save_freq: int = 0
    extra: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.out_dir = Path(self.out_dir)
        if not isinstance(self.seed, int) or isinstance(self.seed, bool):
            raise TrainingConfigError(f"TrainRequest.seed must be an int, got {self.seed!r}")
        if self.total_steps < 0 or self.save_freq < 0:
            raise TrainingConfigError("TrainRequest.total_steps and save_freq must be >= 0 "
                                      "(0 = take the recipe's value)")

    def config_hash(self) -> str:
        """Short hash of what changes the trained weights (not out_dir, run_id or extras)."""
        payload = {
            "policy": self.policy,
            "seed": self.seed,
            "recipe": self.recipe,
            "model_path": self.model_path,
            "train_files": list(self.train_files),
            "total_steps": self.total_steps,
        }
        blob = json.dumps(payload, sort_keys=True, default=str).encode()
        return short_hash(blob)


@dataclass
class TrainResult:
    """Checkpoints in step order, the per-step metrics JSONL and the run's compute account."""

    checkpoints: list[Checkpoint]
    metrics_path: Path
    compute: dict[str, float]

    def to_json(self) -> dict[str, Any]:
        d = asdict(self)
        d["checkpoints"] = [{"step": c.step, "path": str(c.path)} for c in self.checkpoints]
        d["metrics_path"] = str(self.metrics_path)
        return d


class TrainingBackend(abc.ABC):
    """A way to turn a `TrainRequest` into checkpoints."""

    name: str
    needs_train_files: bool = True  # False: the stage does not resolve the corpus for this backend

    @abc.abstractmethod
    def train(self, req: TrainRequest) -> TrainResult:
        """Train (or return the already finished result of) `req`; raise `TrainingError` on failure."""
