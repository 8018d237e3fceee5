"""Policy plugins: the modules a policy YAML names under `plugins:`, imported so their @register_* classes exist.

This is how a researcher's own scorer/actuator reaches every process that trains (a Ray job, a verl worker):
the YAML carries the import, not a hand-edited entry point. The one reader of the `plugins:` key: the CLI's
shipping of those modules to Ray jobs (orchestrator/engine/plugins.py) and campaign expansion read it here too.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
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


@contextmanager
def _no_bytecode() -> Iterator[None]:
    """Import without writing `__pycache__`: the plugin's folder is the user's (a checkout, a shared filesystem
    that every node imports from), and a check such as `campaign policies validate` writes nothing anywhere."""
    saved = sys.dont_write_bytecode
    sys.dont_write_bytecode = True
    try:
        yield
    finally:
        sys.dont_write_bytecode = saved


def import_plugins(cfg: Mapping[str, Any], where: str) -> None:
    """Import each module `cfg["plugins"]` names; `where` names the policy in errors."""
    for mod in plugin_modules(cfg, where):
        try:
            with _no_bytecode():
                importlib.import_module(mod)
        except Exception as e:  # an import failure must be loud, never a silent fallback
            raise PolicyConfigError(_import_failure(mod, e, where)) from e


def _not_found(mod: str, e: BaseException) -> bool:
    """The module itself (or a package above it) is missing, as opposed to an import inside its code failing."""
    name = getattr(e, "name", None)
    return isinstance(e, ModuleNotFoundError) and name is not None and (mod == name or mod.startswith(name + "."))


def _import_failure(mod: str, e: BaseException, where: str) -> str:
    """The fix for each failure: a module that is not there needs the path; one whose code raised needs its code
    fixed (the exception and where in the module it was raised)."""
    if _not_found(mod, e):
        return (f"{where}: plugins: cannot import {mod!r}: no module of that name; make it importable (an installed "
                "package, or its folder on PYTHONPATH) or fix the name")
    import traceback

    frames = traceback.extract_tb(e.__traceback__)
    own = [f for f in frames if "importlib" not in f.filename]
    at = f" at {own[-1].filename}:{own[-1].lineno}" if own else ""
    fix = (f"install {e.name!r} or fix the module's import of it" if isinstance(e, ModuleNotFoundError) and e.name
           else "fix the module's code (the error is in it, not in the path)")
    return (f"{where}: plugins: module {mod!r} was found but its code failed while importing: "
            f"{type(e).__name__}: {e}{at}; {fix}")
