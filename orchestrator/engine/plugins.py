"""The researcher's own policy modules (`plugins:` in a policy YAML): importable by the CLI, shipped to jobs.

Why: a policy YAML names its plugin modules and every process that loads the policy imports them. The
CLI finds them in the campaign's project directory (its config root, put on `sys.path`); Ray jobs get
them through `runtime_env.py_modules`, so a job on a remote cluster, whose nodes never saw the
researcher's files, imports the same code. Loading a plugin runs its code: only list modules you trust.
"""

from __future__ import annotations

import importlib.util
import sys
import sysconfig
from pathlib import Path
from typing import Any
from collections.abc import Iterable

from wtcommon.errors import UserError


class PluginNotFound(UserError):
    """A plugin module a campaign names is neither in its project directory nor installed."""


def add_project_path(root: str | Path | None) -> None:
    """Make the campaign's project directory importable (first on `sys.path`), once."""
    if not root:
        return
    p = str(Path(root).resolve())
    if p not in sys.path:
        sys.path.insert(0, p)


def plugin_names(policy_cfgs: Iterable[dict[str, Any]]) -> list[str]:
    """Distinct top-level module names listed under `plugins:` by these (resolved, checked) policy configs."""
    from policies.plugins import plugin_modules

    names: dict[str, None] = {}
    for cfg in policy_cfgs:
        for m in plugin_modules(cfg, f"policy {cfg.get('name', '?')}"):
            names[m.split(".")[0]] = None
    return list(names)


def _installed(path: Path) -> bool:
    """True for modules installed into the environment (every node of a cluster has the same env)."""
    roots = {sysconfig.get_paths()[k] for k in ("purelib", "platlib")}
    return any(path.is_relative_to(Path(r).resolve()) for r in roots)


OWN_PACKAGES = frozenset({"orchestrator", "policies", "evaluation", "analysis"})


def plugin_paths(names: Iterable[str], stage_dir: Path) -> list[str]:
    """The package directory of each plugin module to ship to jobs (runtime_env `py_modules` takes
    directories): a package as it is; a single-file module `m.py` staged as the package `stage_dir/m/`
    (its `__init__.py` is a copy of the file, refreshed when the file changes). Modules installed in the
    environment are not shipped. Raises PluginNotFound (a UserError) naming a module that cannot be found."""
    out: list[str] = []
    for name in names:
        if name in OWN_PACKAGES:
            continue
        spec = importlib.util.find_spec(name)
        if spec is None:
            raise PluginNotFound(f"plugin module {name!r} cannot be found; put it in the campaign's project directory "
                             "or install it")
        if spec.submodule_search_locations:
            path = Path(list(spec.submodule_search_locations)[0]).resolve()
            if not _installed(path):
                out.append(str(path))
        elif spec.origin and spec.origin.endswith(".py"):
            src = Path(spec.origin).resolve()
            if not _installed(src):
                out.append(str(_stage_module(src, Path(stage_dir) / name)))
    return out


def _stage_module(src: Path, pkg: Path) -> Path:
    """`pkg/__init__.py` = the module file (atomic, rewritten only when it changed)."""
    from wtcommon.atomic import atomic_write_bytes

    pkg.mkdir(parents=True, exist_ok=True)
    target, data = pkg / "__init__.py", src.read_bytes()
    if not target.exists() or target.read_bytes() != data:
        atomic_write_bytes(target, data)
    return pkg


def project_root_of_policy(path: str | Path) -> Path:
    """The project directory of a policy YAML: the parent of its `policy/` folder, else its own folder."""
    p = Path(path).resolve().parent
    return p.parent if p.name == "policy" else p
