"""Code rules checked over the package sources with `ast` (issue 14): run states are `RunState` members,
never bare strings, outside `orchestrator/ledger/states.py`.

Each checker is a pure function over source text, tested on small snippets first (so a checker that
finds nothing cannot pass by accident), then run over every product module.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from orchestrator.ledger.states import AttemptStatus, RunState

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("orchestrator", "evaluation", "analysis", "policies", "campaigns")
STATES = frozenset(s.value for s in RunState)
STATES_MODULE = Path("orchestrator/ledger/states.py")


def product_files() -> list[Path]:
    """Every .py file of the shipped packages, relative to the repo root."""
    return sorted(p.relative_to(ROOT) for pkg in PACKAGES for p in (ROOT / pkg).rglob("*.py"))


# ---------------------------------------------------------------- run-state literals

def bare_state_literals(source: str) -> list[tuple[int, str]]:
    """(line, value) of each string constant spelled like a run state that is used as a value: compared,
    in an `in (...)` tuple, assigned, passed, a key of a state-keyed dict.

    Allowed (not a state in code): docstrings; text inside f-strings (messages); a key of a dict literal
    that has other, non-state keys too (a JSON/record shape like {"expected": 4, "planned": 3})."""
    tree = ast.parse(source)
    allowed: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
                allowed.add(id(first.value))
        elif isinstance(node, ast.JoinedStr):
            allowed.update(id(n) for n in ast.walk(node) if isinstance(n, ast.Constant))
        elif isinstance(node, ast.Dict):
            keys = [k for k in node.keys if k is not None]
            if any(not (isinstance(k, ast.Constant) and k.value in STATES) for k in keys):
                allowed.update(id(k) for k in keys)
    return sorted((n.lineno, n.value) for n in ast.walk(tree)
                  if isinstance(n, ast.Constant) and isinstance(n.value, str) and n.value in STATES
                  and id(n) not in allowed)


@pytest.mark.parametrize("snippet", [
    'if row.state == "failed": pass',
    'ok = row.state in ("recorded", "cancelled")',
    'ok = "queued" != row.state',
    'PENDING = ["planned", "queued"]',
    'dst = "cancelled"',
    'ledger.runs(c, ["failed"])',
    'counts.get("recorded", 0)',
    'ledger.end_attempt(c, sid, "cancelled")',
    'glyph = {"training": "T", "trained": "t"}',
    'vals = {"state": "queued", "reason": ""}',
    'def f(s="evaluating"): pass',
])
def test_the_state_literal_checker_finds_each_use_as_a_value(snippet: str) -> None:
    assert bare_state_literals(snippet), snippet


@pytest.mark.parametrize("snippet", [
    '"""A run is failed when its stage fails."""',
    'def f():\n    """recorded"""',
    'raise ValueError(f"{n} run(s) {\'failed\'}")',
    'mismatch = {"expected": 4, "planned": 3}',
    'if row.state == RunState.failed: pass',
    'x = "failure"',
])
def test_the_state_literal_checker_allows_docstrings_messages_and_record_shapes(snippet: str) -> None:
    assert bare_state_literals(snippet) == [], snippet


def test_no_bare_run_state_literal_outside_the_state_module() -> None:
    found = [f"{path}:{line}: {value!r}" for path in product_files() if path != STATES_MODULE
             for line, value in bare_state_literals((ROOT / path).read_text())]
    assert found == [], "use RunState / AttemptStatus members from orchestrator.ledger.states:\n" + "\n".join(found)


@pytest.mark.parametrize("enum", [RunState, AttemptStatus])
def test_state_members_are_their_stored_strings(enum: type) -> None:
    """The ledger stores and returns plain strings; a member must equal, hash and format as its string,
    so `row.state == RunState.failed`, `counts[RunState.failed]` and f-strings keep working."""
    for m in enum:
        assert m.name == m.value and m == m.value and hash(m) == hash(m.value) and f"{m}" == m.value
        assert {m.value: 1}[m] == 1
