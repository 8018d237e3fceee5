"""Self-check: import the plugin the way verl does and fail loudly if the trainer did not register.

verl loads `verl.plugins` entry points with `ep.load()` inside a try/except that only logs at DEBUG, so a
broken plugin surfaces much later as "Unknown trainer". This check repeats the discovery step and raises.
"""

from __future__ import annotations

import importlib
import importlib.metadata as md

from policies.verl.launcher import ENTRY_POINT, PLUGIN_MODULE
from wtcommon.errors import WindtunnelError


class PluginCheckError(WindtunnelError, RuntimeError):
    """The verl plugin is not installed or not registered (exit 1); the message says it was the self-check."""

    def __init__(self, reason: str) -> None:
        super().__init__(f"verl plugin self-check failed: {reason}")


def self_check() -> list[str]:
    """Run the checks; returns human-readable lines for what passed, raises `PluginCheckError` otherwise."""
    lines = []
    eps = [ep for ep in md.entry_points(group="verl.plugins") if ep.name == ENTRY_POINT]
    if not eps:
        raise PluginCheckError(f"entry point verl.plugins:{ENTRY_POINT} not found; reinstall the package (pip install "
                               "-e .)")
    ep = eps[0]
    if ep.value != PLUGIN_MODULE:
        raise PluginCheckError(f"entry point {ENTRY_POINT} points at {ep.value!r}, expected {PLUGIN_MODULE!r}")
    lines.append(f"entry point verl.plugins:{ENTRY_POINT} = {ep.value}")
    try:
        ep.load()  # exactly what verl/__init__.py does
    except Exception as exc:
        raise PluginCheckError(f"loading {ep.value} failed: {type(exc).__name__}: {exc}") from exc
    lines.append(f"imported {ep.value}")
    from verl.trainer.ppo.v1.trainer_base import TRAINER_REGISTRY, get_trainer_cls

    plugin = importlib.import_module(PLUGIN_MODULE)
    name = plugin.TRAINER_NAME
    if name not in TRAINER_REGISTRY:
        raise PluginCheckError(f"trainer {name!r} is not in verl's TRAINER_REGISTRY ({sorted(TRAINER_REGISTRY)})")
    cls = get_trainer_cls(name)
    if cls is not plugin.WindtunnelTrainer:
        raise PluginCheckError(f"TRAINER_REGISTRY[{name!r}] is {cls!r}, not the plugin's class")
    lines.append(f"trainer {name!r} registered -> {cls.__module__}.{cls.__qualname__}")
    return lines
