"""Training backends by name, registered the way policies register scorers: a `@register_backend(name)`
decorator on the class. Apart from `backend.py` (the interface the backends import), so that the backends
import the interface and only this registry imports the backends: no cycle.

A backend's module is imported on first use, so asking for `noop` never loads torch and `local` never
loads the verl launcher's Hydra stack."""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import TypeVar

from training.backend import TrainingBackend, TrainingConfigError

B = TypeVar("B", bound=type[TrainingBackend])

# name -> the module whose import registers it (and what it is, for the error message)
MODULES = {
    "local": ("training.local", "CPU GRPO on tiny models"),
    "verl": ("training.verl_launcher", "GPU, verl.trainer.main_ppo"),
    "noop": ("training.noop", "no model: the campaign path alone, for tests"),
}
BACKENDS: dict[str, type[TrainingBackend]] = {}


def register_backend(name: str) -> Callable[[B], B]:
    """Class decorator: `name` selects this backend in recipes (`backend: name`) and `--backend`."""

    def deco(cls: B) -> B:
        if name not in MODULES:
            raise TrainingConfigError(f"backend {name!r}: add it to training.registry.MODULES")
        cls.name = name
        BACKENDS[name] = cls
        return cls

    return deco


def get_backend(name: str) -> TrainingBackend:
    """A new instance of backend `name`."""
    if name not in MODULES:
        known = "; ".join(f"{n!r} ({what})" for n, (_, what) in MODULES.items())
        raise TrainingConfigError(f"unknown training backend {name!r}; choose {known}")
    importlib.import_module(MODULES[name][0])
    return BACKENDS[name]()
