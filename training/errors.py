"""The errors a training run raises: here, below `backend` and `config`, so both raise them without importing
each other (the `TrainRequest` in `backend` types its recipe with `config`)."""

from __future__ import annotations

from wtcommon.errors import RunFailed


class TrainingError(RunFailed):
    """A training run could not start or did not finish; the message names the cause and the fix."""


class TrainingConfigError(TrainingError):
    """A deterministic problem in the request or recipe (bad seed, step counts, backend name): the
    evaluate/train stage reports it as a configuration error, never retried."""


__all__ = ["TrainingConfigError", "TrainingError"]
