"""Policy plugins: the modules a policy YAML names under `plugins:`, imported so their @register_* classes exist.

This is how a researcher's own scorer/actuator reaches every process that trains (a Ray job, a verl worker):
the YAML carries the import, not a hand-edited entry point. The one reader of the `plugins:` key: the CLI's
shipping of those modules to Ray jobs (orchestrator/engine/plugins.py) and campaign expansion read it here too.
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping
from typing import Any

from policies.errors import PolicyConfigError


def plugin_modules(cfg: Mapping[str, Any], where: str) -> list[str]:
    """The module names `cfg["plugins"]` lists (one name or a list; absent or null: none)."""
    mods = cfg.get("plugins") or []
    if isinstance(mods, str):
        mods = [mods]
    if not isinstance(mods, list) or not all(isinstance(m, str) and m for m in mods):
        raise PolicyConfigError(f"{where}: plugins: expected a list of importable module names, got {mods!r}")
    return mods


def import_plugins(cfg: Mapping[str, Any], where: str) -> None:
    """Import each module `cfg["plugins"]` names; `where` names the policy in errors."""
    for mod in plugin_modules(cfg, where):
        try:
            importlib.import_module(mod)
        except Exception as e:  # an import failure must be loud, never a silent fallback
            raise PolicyConfigError(
                f"{where}: plugins: cannot import {mod!r} ({type(e).__name__}: {e}); "
                "make it importable (installed package or on PYTHONPATH)") from e
