"""The errors a training run or a stage's backend raises: here, below `backend` and `config`, so both raise them
without importing each other (the `TrainRequest` in `backend` types its recipe with `config`), and the
orchestrator's stages, above, classify them (config, health gate) without a backend importing up."""

from __future__ import annotations

from wtcommon.errors import RunFailed


class TrainingError(RunFailed):
    """A training run could not start or did not finish; the message names the cause and the fix."""


class TrainingConfigError(TrainingError):
    """A deterministic problem in the request or recipe (bad seed, step counts, backend name): the
    evaluate/train stage reports it as a configuration error, never retried."""


class StageConfigError(RunFailed):
    """A deterministic error in a run's configuration, raised by a stage (train, evaluate): retrying cannot
    help."""


class StageHealthGateError(RunFailed):
    """The checkpoint failed an evaluation health gate: deterministic (not retried), but a model-quality
    finding rather than a configuration error, so it is its own failure class (`health_gate`)."""


__all__ = ["StageConfigError", "StageHealthGateError", "TrainingConfigError", "TrainingError"]
