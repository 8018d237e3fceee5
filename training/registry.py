"""Training backends by name, registered the way policies register scorers: a `@register_backend(name)`
decorator on the class, in the one registry idiom (wtcommon/registry.py: a second class under a taken name is
refused, an unknown name is refused with the close names). Apart from `backend.py` (the interface the backends
import), so that the backends import the interface and only this registry imports the shipped ones: no cycle.

A shipped backend's module is imported on first use, so asking for `noop` never loads torch and `local` never
loads the verl launcher's Hydra stack. A plugin backend registers itself when its module is imported (a
policy's `plugins:` list, or any import before `get_backend`)."""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import TypeVar

from training.backend import TrainingBackend, TrainingConfigError
from wtcommon.registry import Registry

B = TypeVar("B", bound=type[TrainingBackend])

# name -> the module whose import registers it (and what it is, for the error message)
MODULES = {
    "local": ("training.local", "CPU GRPO on tiny models"),
    "verl": ("training.verl_launcher", "GPU, verl.trainer.main_ppo"),
    "noop": ("training.noop", "no model: the campaign path alone, for tests"),
}
BACKENDS: Registry[type[TrainingBackend]] = Registry("training backend", TrainingConfigError)


def register_backend(name: str) -> Callable[[B], B]:
    """Class decorator: `name` selects this backend in recipes (`backend: name`) and `--backend`."""

    def deco(cls: B) -> B:
        BACKENDS[name] = cls  # a different class under a taken name: refused
        cls.name = name
        return cls

    return deco


def get_backend(name: str) -> TrainingBackend:
    """A new instance of backend `name` (a shipped one's module imported now, a plugin's already)."""
    if name in MODULES:
        importlib.import_module(MODULES[name][0])
    return BACKENDS.lookup(name, also=MODULES)()  # unknown: the close names among shipped and plugin ones
