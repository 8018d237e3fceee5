"""The list of verl internals `campaign doctor` checks on every node (policies/verl/internals.py): complete with
respect to the code, and resolvable in the installed verl."""

from __future__ import annotations

import ast
from pathlib import Path

from policies.verl.internals import VERL_INTERNALS as LISTED_VERL
from policies.verl.internals import VLLM_INTERNALS, resolve, resolve_all

VERL_INTERNALS = (*LISTED_VERL, *VLLM_INTERNALS)

ROOT = Path(__file__).resolve().parents[2]
EXTERNAL = ("verl", "transfer_queue")


def _imports(path: Path) -> set[tuple[str, str]]:
    """(module, name) for `from verl.x import name` and (module, "") for `import verl.x`, anywhere in the file."""
    out: set[tuple[str, str]] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] in EXTERNAL:
            out |= {(node.module, a.name) for a in node.names}
        elif isinstance(node, ast.Import):
            out |= {(a.name, "") for a in node.names if a.name.split(".")[0] in EXTERNAL}
    return out


def test_every_verl_name_the_plugin_and_the_backends_import_is_in_the_doctors_list():
    files = [*sorted((ROOT / "policies" / "verl").glob("*.py")), *sorted((ROOT / "orchestrator").rglob("*.py"))]
    listed = {(m, a.split(".")[0]) for m, a, _ in VERL_INTERNALS} | {(m, "") for m, _, _ in VERL_INTERNALS}
    missing = sorted(f"{f.relative_to(ROOT)}: {m}:{n}" for f in files for m, n in _imports(f)
                     # `from verl.utils import tensordict_utils` imports a module: listed as that module
                     if (m, n) not in listed and (f"{m}.{n}", "") not in listed
                     and not any(lm == f"{m}.{n}" for lm, _, _ in VERL_INTERNALS))
    assert not missing, f"add these to policies/verl/internals.py VERL_INTERNALS: {missing}"


def test_every_listed_internal_resolves_in_the_installed_verl():
    assert resolve_all() == []


def test_a_moved_internal_is_reported_with_the_missing_part():
    assert resolve("verl.workers.engine", "EngineRegistry.no_such_method") == (
        "verl.workers.engine.EngineRegistry.no_such_method: no attribute 'no_such_method'")
    err = resolve("verl.no_such_module", "X")
    assert err is not None and err.startswith("import verl.no_such_module: ModuleNotFoundError")
