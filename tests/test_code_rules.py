"""Code rules checked over the package sources with `ast` (issue 14): run states are `RunState` members,
never bare strings, outside `orchestrator/engine/ledger/states.py`; imports point one way, down the layer order that
docs/DESIGN.md states (`LAYERS` below, checked equal to it) and no two modules import each other, directly or
round a loop.

Each checker is a pure function over source text, tested on small snippets first (so a checker that
finds nothing cannot pass by accident), then run over every product module.
"""

from __future__ import annotations

import ast
import re
import functools
from pathlib import Path

import pytest

from orchestrator.engine.ledger.states import AttemptStatus, RunState

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("cli", "tuning", "orchestrator", "training", "evaluation", "analysis", "policies", "campaigns", "wtcommon")
STATES = frozenset(s.value for s in RunState)
STATES_MODULE = Path("orchestrator/engine/ledger/states.py")


@functools.cache
def _parse(source: str) -> ast.Module:
    """One parse per source text for every rule (no rule changes a tree): the rules walked the same 300 files
    once each, 23 s of `make test-fast` (issue 56)."""
    return ast.parse(source)


def product_files() -> list[Path]:
    """Every .py file of the shipped packages, relative to the repo root."""
    return sorted(p.relative_to(ROOT) for pkg in PACKAGES for p in (ROOT / pkg).rglob("*.py"))


# ---------------------------------------------------------------- run-state literals

def bare_state_literals(source: str) -> list[tuple[int, str]]:
    """(line, value) of each string constant spelled like a run state that is used as a value: compared,
    in an `in (...)` tuple, assigned, passed, a key of a state-keyed dict.

    Allowed (not a state in code): docstrings; text inside f-strings (messages); a key of a dict literal
    that has other, non-state keys too (a JSON/record shape like {"expected": 4, "planned": 3})."""
    tree = _parse(source)
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
    assert found == [], ("use RunState / AttemptStatus members from orchestrator.engine.ledger.states:\n"
                         + "\n".join(found))


@pytest.mark.parametrize("enum", [RunState, AttemptStatus])
def test_state_members_are_their_stored_strings(enum: type) -> None:
    """The ledger stores and returns plain strings; a member must equal, hash and format as its string,
    so `row.state == RunState.failed`, `counts[RunState.failed]` and f-strings keep working."""
    for m in enum:
        assert m.name == m.value and m == m.value and hash(m) == hash(m.value) and f"{m}" == m.value
        assert {m.value: 1}[m] == 1


# ---------------------------------------------------------------- import direction and cycles

# The layers, bottom first: a package imports only packages below it. (The verl plugin in `policies/verl` scores
# rollouts with `evaluation`'s graders, so policies sit above evaluation; training writes a step's records with
# `analysis`; the CLI is the top floor, above the tuner that drives campaigns.)
LAYERS = ("wtcommon", "campaigns", "evaluation", "policies", "analysis", "training", "orchestrator", "tuning", "cli")
FORBIDDEN = {(low, high) for i, low in enumerate(LAYERS) for high in LAYERS[i + 1:]}
assert set(LAYERS) == set(PACKAGES)


def module_name(path: Path) -> str:
    parts = list(path.with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imports_of(source: str, module: str, is_package: bool, known: set[str]) -> set[tuple[str, int]]:
    """(imported product module, line) for every import in `source`, at module level or inside a function.

    Imports under `if TYPE_CHECKING:` are left out: they never run, so they make neither an arrow nor a
    cycle. `from pkg import name` counts as `pkg.name` when that is a module, else as `pkg`."""
    tree = _parse(source)
    typing_only = {id(n) for node in ast.walk(tree) if isinstance(node, ast.If)
                   and "TYPE_CHECKING" in ast.unparse(node.test)
                   for stmt in node.body for n in ast.walk(stmt)}

    def resolve(name: str) -> str | None:
        while name and name not in known:
            name = name.rpartition(".")[0]
        return name or None

    out: set[tuple[str, int]] = set()
    for node in ast.walk(tree):
        if id(node) in typing_only:
            continue
        if isinstance(node, ast.Import):
            out |= {(m, node.lineno) for a in node.names if (m := resolve(a.name))}
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                pkg = module.split(".") if is_package else module.split(".")[:-1]
                base = ".".join(pkg[:len(pkg) - node.level + 1] + ([node.module] if node.module else []))
            out |= {(m, node.lineno) for a in node.names if (m := resolve(f"{base}.{a.name}") or resolve(base))}
    return {(m, line) for m, line in out if m != module}


def import_graph(files: dict[str, str]) -> dict[str, set[tuple[str, int]]]:
    """module -> {(imported module, line)} for `files` = {relative path: source}."""
    known = {module_name(Path(f)) for f in files}
    return {module_name(Path(f)): imports_of(src, module_name(Path(f)), Path(f).name == "__init__.py", known)
            for f, src in files.items()}


def wrong_arrows(graph: dict[str, set[tuple[str, int]]]) -> list[str]:
    return sorted(f"{m}:{line} imports {t}" for m, edges in graph.items() for t, line in edges
                  if (m.split(".")[0], t.split(".")[0]) in FORBIDDEN)


def cycles(graph: dict[str, set[tuple[str, int]]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan), each sorted."""
    succ = {m: {t for t, _ in edges if t in graph} for m, edges in graph.items()}
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in succ[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                found.append(sorted(comp))

    for v in sorted(succ):
        if v not in index:
            visit(v)
    return sorted(found)


def test_the_import_checker_sees_arrows_function_level_imports_and_cycles() -> None:
    files = {
        "evaluation/a.py": "def f():\n    from orchestrator.b import g\n",
        "orchestrator/b.py": "from evaluation import a\n",
        "orchestrator/__init__.py": "",
        "evaluation/__init__.py": "",
        "analysis/c.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from analysis.d import X\n",
        "analysis/d.py": "from . import c\n",
        "policies/e.py": "import orchestrator.b as b\n",
    }
    g = import_graph(files)
    assert wrong_arrows(g) == ["evaluation.a:2 imports orchestrator.b", "policies.e:1 imports orchestrator.b"]
    assert cycles(g) == [["evaluation.a", "orchestrator.b"]]  # c -> d is typing-only: no cycle


@functools.cache
def _product_graph() -> dict[str, set[tuple[str, int]]]:
    return import_graph({str(p): (ROOT / p).read_text() for p in product_files()})


def stated_layers(design: str) -> tuple[str, ...]:
    """The layer order as DESIGN.md writes it: the backticked names of its "Imports run one way" sentence."""
    start = design.index("Imports run one way")
    return tuple(re.findall(r"`(\w+)`", design[start:design.index("(", start)]))


def test_the_layer_order_is_stated_once_and_enforced_as_stated() -> None:
    assert stated_layers("Imports run one way, bottom-up: `a` → `b` →\n`c` (a package ...") == ("a", "b", "c")
    assert stated_layers((ROOT / "docs/DESIGN.md").read_text()) == LAYERS


def test_imports_point_one_way() -> None:
    assert wrong_arrows(_product_graph()) == []


def test_no_import_cycles() -> None:
    assert cycles(_product_graph()) == []


def lonely_common_modules(graph: dict[str, set[tuple[str, int]]]) -> list[str]:
    """wtcommon modules imported by fewer than two other packages: not common, so they belong in their one user
    (`wtcommon` exists only for what several layers need and the layer order would otherwise forbid)."""
    users: dict[str, set[str]] = {m: set() for m in graph if m.startswith("wtcommon.")}
    for m, edges in graph.items():
        for t, _ in edges:
            if t in users and not m.startswith("wtcommon"):
                users[t].add(m.split(".")[0])
    return sorted(f"{m}: imported by {sorted(u) or 'nothing'}" for m, u in users.items() if len(u) < 2)


def test_the_common_module_checker_counts_the_packages_that_import_it() -> None:
    files = {"wtcommon/__init__.py": "", "wtcommon/a.py": "", "wtcommon/b.py": "", "wtcommon/c.py": "",
             "cli/x.py": "from wtcommon import a, b\n", "cli/y.py": "from wtcommon.b import f\n",
             "training/z.py": "def g():\n    from wtcommon.a import h\n", "wtcommon/d.py": "from wtcommon import c\n"}
    assert lonely_common_modules(import_graph(files)) == ["wtcommon.b: imported by ['cli']",
                                                          "wtcommon.c: imported by nothing",
                                                          "wtcommon.d: imported by nothing"]


def test_wtcommon_holds_only_what_two_packages_share() -> None:
    assert lonely_common_modules(_product_graph()) == []


# Inside the orchestrator the same one-way rule, one level down: the engine (spec → grid → ledger → scheduler →
# executor → stages) imports no other part of the orchestrator; the cluster code imports the engine and itself; the
# campaign path and the features (session, campaign, tracking, demo, ...) import both.
ORCHESTRATOR_LAYERS = ("orchestrator.engine", "orchestrator.cluster")


def orchestrator_part(module: str) -> int:
    """0 for the engine, 1 for the cluster code, 2 for the rest of the orchestrator."""
    return next((i for i, p in enumerate(ORCHESTRATOR_LAYERS) if module == p or module.startswith(p + ".")),
                len(ORCHESTRATOR_LAYERS))


def wrong_orchestrator_arrows(graph: dict[str, set[tuple[str, int]]]) -> list[str]:
    return sorted(f"{m}:{line} imports {t}" for m, edges in graph.items() for t, line in edges
                  if m.startswith("orchestrator.") and t.startswith("orchestrator.")
                  and orchestrator_part(t) > orchestrator_part(m))


def test_the_orchestrator_checker_sees_the_engine_importing_a_feature() -> None:
    files = {"orchestrator/__init__.py": "", "orchestrator/engine/__init__.py": "",
             "orchestrator/cluster/__init__.py": "",
             "orchestrator/engine/grid.py": "def f():\n    from orchestrator.tracking import t\n",
             "orchestrator/engine/stages.py": "from orchestrator.engine import grid\n",
             "orchestrator/cluster/head.py": "from orchestrator.engine import grid\nfrom orchestrator import demo\n",
             "orchestrator/tracking.py": "from orchestrator.cluster import head\n",
             "orchestrator/demo.py": "from orchestrator.engine.grid import f\n"}
    assert wrong_orchestrator_arrows(import_graph(files)) == [
        "orchestrator.cluster.head:2 imports orchestrator.demo",
        "orchestrator.engine.grid:2 imports orchestrator.tracking"]


def test_the_engine_imports_no_feature_and_the_cluster_code_only_the_engine() -> None:
    assert wrong_orchestrator_arrows(_product_graph()) == []


def package_shares(files: dict[str, int]) -> dict[str, float]:
    """Each top-level folder's share of the lines in `files` ({relative path: line count})."""
    total = sum(files.values())
    shares: dict[str, float] = {}
    for f, n in files.items():
        top = Path(f).parts[0]
        shares[top] = shares.get(top, 0.0) + n / total
    return shares


def test_the_share_checker_counts_lines_per_top_level_folder() -> None:
    shares = package_shares({"a/x.py": 30, "a/b/y.py": 40, "c/z.py": 30})
    assert shares == pytest.approx({"a": 0.7, "c": 0.3})


def test_no_package_holds_over_a_third_of_the_code() -> None:
    """One package holding most of the code is a house with one room (issue 23: orchestrator held 48%).
    The code is every shipped package plus benchmarks/, tests excluded."""
    files = {str(p): len((ROOT / p).read_text().splitlines())
             for p in [*product_files(), *(q.relative_to(ROOT) for q in (ROOT / "benchmarks").rglob("*.py"))]}
    shares = package_shares(files)
    assert max(shares.values()) < 0.35, sorted(shares.items(), key=lambda kv: -kv[1])


# ---------------------------------------------------------------- typed errors

def name_comparisons(source: str) -> list[int]:
    """Lines comparing `type(x).__name__` (or `x.__class__.__name__`) with something: matching a class by
    its name instead of `except`/`isinstance` on the class itself."""
    return sorted(n.lineno for n in ast.walk(_parse(source)) if isinstance(n, ast.Compare)
                  and any(isinstance(x, ast.Attribute) and x.attr == "__name__"
                          and isinstance(x.value, ast.Call | ast.Attribute)
                          and (isinstance(x.value, ast.Attribute) and x.value.attr == "__class__"
                               or isinstance(x.value, ast.Call) and getattr(x.value.func, "id", "") == "type")
                          for x in [n.left, *n.comparators]))


def test_the_name_comparison_checker() -> None:
    assert name_comparisons('if type(e).__name__ == "PolicyConfigError": pass') == [1]
    assert name_comparisons('ok = "X" != e.__class__.__name__') == [1]
    assert name_comparisons('print(type(e).__name__)\nif __name__ == "__main__": pass') == []


def test_no_error_is_matched_by_its_class_name() -> None:
    found = [f"{p}:{line}" for p in product_files() for line in name_comparisons((ROOT / p).read_text())]
    assert found == [], "catch or isinstance() the class itself:\n" + "\n".join(found)


# ---------------------------------------------------------------- the ledger interface

def test_callers_use_the_ledger_interface_not_its_sql_implementation() -> None:
    """`orchestrator.engine.ledger.base.Ledger` lists what callers use; only `open_ledger` knows SQLLedger."""
    found = [f"{p}:{n.lineno}" for p in product_files() if not str(p).startswith("orchestrator/engine/ledger/")
             for n in ast.walk(_parse((ROOT / p).read_text()))
             if isinstance(n, ast.ImportFrom) and any(a.name == "SQLLedger" for a in n.names)
             or isinstance(n, ast.Name) and n.id == "SQLLedger"]
    assert found == []


def test_the_ledger_abc_declares_every_method_the_sql_ledger_offers() -> None:
    from orchestrator.engine.ledger.base import Ledger
    from orchestrator.engine.ledger.sql import SQLLedger

    # dir(), not vars(): SQLLedger's methods come from the classes it composes (orchestrator/engine/ledger/sql_*.py)
    public = {m for m in dir(SQLLedger) if not m.startswith("_") and callable(getattr(SQLLedger, m))}
    assert "transition" in public and public - set(dir(Ledger)) == set()


# ---------------------------------------------------------------- citations resolve inside the repo

CITATION = re.compile(r"\b(STUDY|DESIGN|VERL)\.md(?:,? (?:§\s?|section )(\d+(?:\.\d+)?)|,? ([LP]\d+)| rule (\d+))?")


def unresolved_citations(text: str, docs: dict[str, str]) -> list[str]:
    """Each `STUDY.md §3.5` / `STUDY.md L11` / `DESIGN.md rule 2` in `text` that names a document not in
    `docs` (name -> its text), a section heading it lacks, a pitfall code not in its tables, or a rule
    number it does not list."""
    bad = []
    for m in CITATION.finditer(text):
        doc, section, code, rule = m.group(1) + ".md", m.group(2), m.group(3), m.group(4)
        body = docs.get(doc)
        if body is None:
            bad.append(m.group(0))
        elif section and not re.search(rf"(?m)^#+ {re.escape(section)}\.?\s", body):
            bad.append(m.group(0))
        elif code and not re.search(rf"(?m)^\| {code} \|", body):
            bad.append(m.group(0))
        elif rule and not re.search(rf"(?m)^{rule}\. ", body):
            bad.append(m.group(0))
    return bad


def test_citation_checker_finds_what_does_not_resolve() -> None:
    docs = {"STUDY.md": "## 3. Configs\n### 3.5 Controls\n| L11 | x |\n", "DESIGN.md": "1. one\n2. two\n"}
    ok = "see STUDY.md §3.5, STUDY.md section 3, STUDY.md L11 and DESIGN.md rule 2"
    assert unresolved_citations(ok, docs) == []
    assert unresolved_citations("STUDY.md §9.9, STUDY.md P4, DESIGN.md rule 7, VERL.md §2", docs) == [
        "STUDY.md §9.9", "STUDY.md P4", "DESIGN.md rule 7", "VERL.md §2"]


def test_every_document_the_code_cites_is_in_docs_and_has_the_cited_part() -> None:
    docs = {p.name: p.read_text() for p in (ROOT / "docs").glob("*.md")}
    files = [p for d in (*PACKAGES, "tests", "benchmarks", "docs") for p in (ROOT / d).rglob("*")
             if p.suffix in (".py", ".yaml", ".md") and p.is_file()] + [ROOT / "README.md"]
    files = [p for p in files if p != Path(__file__).resolve()]  # this file's snippets cite on purpose
    bad = {str(p.relative_to(ROOT)): b for p in files if p.parent != ROOT / "docs" or p.name == "verl_on_cpu.md"
           if (b := unresolved_citations(p.read_text(), docs))}
    assert not bad, f"citations that do not resolve in docs/: {bad}"
    assert not [str(p.relative_to(ROOT)) for p in files if re.search(r"\bcontract[ -]\d", p.read_text())], \
        "'contract N' names a document that does not exist"


# ---------------------------------------------------------------- one error root

BUILTIN_EXCEPTIONS = frozenset({"BaseException", "Exception", "RuntimeError", "ValueError", "KeyError", "TypeError",
                                "OSError", "IOError", "LookupError", "AttributeError", "NotImplementedError"})
ROOTS = frozenset({"WindtunnelError", "UserError", "ClusterError", "RunFailed"})


def exceptions_outside_the_tree(source: str) -> list[tuple[int, str]]:
    """(line, class) of each exception class that derives from a builtin exception and from none of ours (the
    root `wtcommon.errors.WindtunnelError` itself excepted). Warnings are not errors: `*Warning` bases pass."""
    out = []
    for n in ast.walk(_parse(source)):
        if not isinstance(n, ast.ClassDef) or n.name == "WindtunnelError":
            continue
        bases = [b.id if isinstance(b, ast.Name) else b.attr if isinstance(b, ast.Attribute) else "" for b in n.bases]
        if any(b in BUILTIN_EXCEPTIONS for b in bases) and not any(b not in BUILTIN_EXCEPTIONS for b in bases):
            out.append((n.lineno, n.name))
    return out


def test_the_error_root_checker() -> None:
    assert exceptions_outside_the_tree("class A(RuntimeError): pass\nclass B(ValueError, KeyError): pass") == [
        (1, "A"), (2, "B")]
    assert exceptions_outside_the_tree("class A(UserError): pass\nclass B(WindtunnelError, RuntimeError): pass\n"
                                       "class C(SpecError): pass\nclass W(UserWarning): pass\n"
                                       "class D(errors.RunFailed): pass") == []


def test_every_exception_class_is_in_the_windtunnel_error_tree() -> None:
    """Issue 23: one root, so a command can catch one type and map its exit code in one place."""
    from orchestrator.campaign import CampaignError
    from orchestrator.engine.executor import ClusterUnreachable
    from orchestrator.engine.spec import SpecError
    from wtcommon.errors import WindtunnelError

    found = [f"{p}:{line} {name}" for p in product_files() for line, name in
             exceptions_outside_the_tree((ROOT / p).read_text())]
    assert found == [], "derive from wtcommon.errors (UserError, ClusterError, RunFailed or WindtunnelError):\n" + \
        "\n".join(found)
    assert all(issubclass(c, WindtunnelError) for c in (CampaignError, ClusterUnreachable, SpecError))
    assert (SpecError.exit_code, ClusterUnreachable.exit_code) == (2, 3) and issubclass(SpecError, ValueError)


EXITS = frozenset({"fail", "_fail", "Exit", "Abort", "SystemExit", "exit"})


def exit_mapping_catches(source: str) -> list[tuple[int, str]]:
    """(line, caught) of each `except` whose body maps the error to an exit itself: it calls `fail(...)` (or
    `_fail`, `sys.exit`) or raises `typer.Exit`/`typer.Abort`/`SystemExit`. In cli/ that is the one place's job
    (cli/errors.py: a `WindtunnelError` exits with its `exit_code`); a catch may convert a foreign exception
    into one of ours (`raise UserError(...) from exc`), handle it, or re-raise it."""
    def name(f: ast.expr) -> str:
        f = f.func if isinstance(f, ast.Call) else f
        return f.id if isinstance(f, ast.Name) else f.attr if isinstance(f, ast.Attribute) else ""

    out = []
    for h in ast.walk(_parse(source)):
        if not isinstance(h, ast.ExceptHandler):
            continue
        body = [n for stmt in h.body for n in ast.walk(stmt)]
        if any((isinstance(n, ast.Call) and name(n) in EXITS) or
               (isinstance(n, ast.Raise) and n.exc is not None and name(n.exc) in EXITS) for n in body):
            out.append((h.lineno, ast.unparse(h.type) if h.type is not None else ""))
    return out


def test_the_exit_mapping_catch_checker() -> None:
    src = ("try:\n    load()\nexcept SuiteError as e:\n    _fail(str(e))\n"
           "try:\n    x()\nexcept (A, B):\n    raise typer.Exit(2)\n"
           "try:\n    x()\nexcept ValueError:\n    if True:\n        console.fail('bad', 1)\n"
           "try:\n    x()\nexcept:\n    sys.exit(3)\n"
           "try:\n    x()\nexcept KeyError:\n    raise SystemExit\n")
    assert exit_mapping_catches(src) == [(3, "SuiteError"), (7, "(A, B)"), (11, "ValueError"), (16, ""),
                                         (20, "KeyError")]
    assert exit_mapping_catches("try:\n    x()\nexcept ValueError as e:\n    raise UserError(str(e)) from e\n"
                                "try:\n    x()\nexcept MetricsFileError:\n    return\n"
                                "try:\n    x()\nexcept ClusterAuthError:\n    raise\n"
                                "try:\n    x()\nexcept TuneError as e:\n    err.print(e)\n"
                                "_fail('not in a catch')\nraise typer.Exit(1)\n") == []


def test_no_cli_catch_maps_an_error_to_an_exit_itself() -> None:
    """Issue 23: one error root, one place that maps it to an exit code (cli/errors.py, applied to every command
    as `register()` attaches it). A command lets our errors propagate; a library's own exception it converts
    into a `WindtunnelError` subclass with the message, never into `typer.Exit` at the catch."""
    found = [f"{p}:{line} except {caught}" for p in product_files()
             if p.parts[0] == "cli" and p != Path("cli/errors.py")
             for line, caught in exit_mapping_catches((ROOT / p).read_text())]
    assert found == [], "raise (or convert into) a WindtunnelError subclass instead; cli/errors.py exits:\n" + \
        "\n".join(found)



def fail_calls(source: str) -> list[int]:
    """Lines that call `fail(...)`/`_fail(...)` (cli.console's print-and-exit) directly."""
    return [n.lineno for n in ast.walk(_parse(source)) if isinstance(n, ast.Call)
            and ((isinstance(n.func, ast.Name) and n.func.id in ("fail", "_fail"))
                 or (isinstance(n.func, ast.Attribute) and n.func.attr == "fail"))]


def test_the_fail_call_checker() -> None:
    assert fail_calls("_fail('x')\nconsole.fail('y', 3)\nif a:\n    fail('z')\nraise UserError('ok')\n") == [1, 2, 4]


def test_commands_raise_errors_and_only_cli_errors_exits_with_their_code() -> None:
    """Issue 23: a command that refuses its input raises `UserError` (or another `WindtunnelError`); only
    cli/errors.py turns one into a printed line and an exit code, so every exit code is decided in one place."""
    found = [f"{p}:{line}" for p in product_files() if p.parts[0] == "cli" and p != Path("cli/errors.py")
             for line in fail_calls((ROOT / p).read_text())]
    assert found == [], "raise UserError(...) (exit 2), ClusterError (3) or RunFailed (1) instead:\n" + "\n".join(found)


# ---------------------------------------------------------------- one job per module in analysis/

MAX_ANALYSIS_LINES = 400


def long_modules(files: dict[str, str], limit: int = MAX_ANALYSIS_LINES, prefix: str | None = "analysis") -> list[str]:
    """`path: n lines` for each module of `files` (relative path -> source) under `prefix` (None: all), at any
    depth, that has more than `limit` lines: a module that long is doing more than one job (issue 23)."""
    return sorted(f"{p}: {n} lines" for p, src in files.items()
                  if (prefix is None or Path(p).parts[0] == prefix) and (n := len(src.splitlines())) > limit)


def test_the_module_length_checker() -> None:
    files = {"analysis/a.py": "x = 1\n" * 401, "analysis/sequential/b.py": "x = 1\n" * 500,
             "analysis/c.py": "x = 1\n" * 400, "orchestrator/d.py": "x = 1\n" * 900}
    assert long_modules(files) == ["analysis/a.py: 401 lines", "analysis/sequential/b.py: 500 lines"]


def test_no_analysis_module_is_over_400_lines() -> None:
    files = {str(p): (ROOT / p).read_text() for p in product_files() if p.parts[0] == "analysis"}
    assert any("/" in f.removeprefix("analysis/") for f in files), "the check must see analysis/ subpackages"
    assert long_modules(files) == [], "split the module by the jobs it does (issue 23):\n" + \
        "\n".join(long_modules(files))


# ---------------------------------------------------------------- CLI commands are module-level functions

def nested_commands(source: str) -> list[tuple[int, str]]:
    """(line, name) of each function decorated as a command (`@<app>.command(...)`, `@<app>.callback(...)`, with
    or without the call) that is defined inside another function: a closure cannot be imported or tested."""
    def is_command(d: ast.expr) -> bool:
        f = d.func if isinstance(d, ast.Call) else d
        return isinstance(f, ast.Attribute) and f.attr in ("command", "callback")

    found: list[tuple[int, str]] = []

    def visit(node: ast.AST, in_function: bool) -> None:
        for child in ast.iter_child_nodes(node):
            is_fn = isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef))
            if is_fn and in_function and any(is_command(d) for d in child.decorator_list):
                found.append((child.lineno, child.name))
            visit(child, in_function or is_fn)

    visit(_parse(source), False)
    return found


def test_the_nested_command_checker() -> None:
    src = ("def register(app):\n"
           "    @app.command('a')\n"
           "    def a(): pass\n"
           "    @group.callback()\n"
           "    def b(): pass\n"
           "    if True:\n"
           "        @app.command\n"
           "        def c(): pass\n")
    assert nested_commands(src) == [(3, "a"), (5, "b"), (8, "c")]
    assert nested_commands("@app.command('a')\ndef a():\n    def helper(): pass\n"
                           "def register(app):\n    app.command('a')(a)\n    @functools.wraps(a)\n"
                           "    def w(): pass\n"
                           "class K:\n    @app.command()\n    def m(self): pass\n") == []


def test_cli_commands_are_module_level_functions() -> None:
    """Issue 23: each command a plain function that a test can import; `register()` only attaches them."""
    found = [f"{p}:{line} {name}" for p in product_files() for line, name in
             nested_commands((ROOT / p).read_text())]
    assert found == [], "define the command at module level and attach it in register():\n" + "\n".join(found)


def test_the_ledger_file_name_is_decided_in_one_place() -> None:
    """Issue 23: where a work dir's ledger lives is `orchestrator.engine.workdir.Workdir`'s to say."""
    benchmarks = sorted(p.relative_to(ROOT) for p in (ROOT / "benchmarks").rglob("*.py"))
    found = [str(p) for p in product_files() + benchmarks if p != Path("orchestrator/engine/workdir.py")
             and any(isinstance(n, ast.Constant) and n.value == "ledger.db" for n in ast.walk(_parse((ROOT / p)
                                                                                                       .read_text())))]
    assert found == []


# ---------------------------------------------------------------- one registry idiom (issue 37)

def plain_dict_registries(source: str) -> list[tuple[int, str]]:
    """(line, table) of each module-level plain dict (`{}`, `dict()`, a dict comprehension) that a `register*`
    function of the same module writes by key: a registry outside the one idiom (wtcommon/registry.py), which
    would overwrite a taken name silently or refuse it in its own words."""
    tree = _parse(source)
    plain: dict[str, int] = {}
    for node in tree.body:
        target, value = None, None
        if isinstance(node, ast.Assign) and len(node.targets) == 1:
            target, value = node.targets[0], node.value
        elif isinstance(node, ast.AnnAssign):
            target, value = node.target, node.value
        if isinstance(target, ast.Name) and (isinstance(value, (ast.Dict, ast.DictComp)) or (
                isinstance(value, ast.Call) and isinstance(value.func, ast.Name) and value.func.id == "dict")):
            plain[target.id] = node.lineno
    found = set()
    for fn in ast.walk(tree):
        if isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)) and fn.name.lstrip("_").startswith("register"):
            for node in ast.walk(fn):
                targets = node.targets if isinstance(node, ast.Assign) else []
                for t in targets:
                    if isinstance(t, ast.Subscript) and isinstance(t.value, ast.Name) and t.value.id in plain:
                        found.add((plain[t.value.id], t.value.id))
    return sorted(found)


def test_the_registry_idiom_checker() -> None:
    plain = ("TABLE: dict[str, type] = {}\n"
             "def register_thing(name):\n    def deco(cls):\n        TABLE[name] = cls\n        return cls\n"
             "    return deco\n")
    assert plain_dict_registries(plain) == [(1, "TABLE")]
    assert plain_dict_registries(plain.replace("= {}", "= dict()")) == [(1, "TABLE")]
    one_idiom = plain.replace("= {}", '= Registry("thing", ValueError)')
    assert plain_dict_registries(one_idiom) == []
    assert plain_dict_registries("CACHE = {}\ndef fill(k, v):\n    CACHE[k] = v\n") == []  # not a registry


def test_every_registry_is_the_one_idiom() -> None:
    bad = [f"{p}:{line}: {name} is a plain dict written by a register function; make it a wtcommon.registry.Registry"
           for p in product_files() for line, name in plain_dict_registries((ROOT / p).read_text())]
    assert not bad, "\n".join(bad)


# ---------------------------------------------------------------- one home for content hashes (issue 37)

HASHING_MODULE = Path("wtcommon/hashing.py")


def hand_rolled_json_hashes(source: str) -> list[int]:
    """Lines where JSON is serialised straight into a hash: `hashlib.<algo>(json.dumps(...)...)`, `h.update(
    json.dumps(...)...)`, or a blob `json.dumps(...)` handed to `text_hash`. Such a key belongs to
    wtcommon/hashing.py's `digest(obj, spaced=...)`, where both stored serialisations live."""
    tree = _parse(source)

    def has_dumps(node: ast.AST) -> bool:
        return any(isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr == "dumps"
                   and isinstance(n.func.value, ast.Name) and n.func.value.id == "json" for n in ast.walk(node))

    found = set()
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        f = node.func
        hashing = ((isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name) and f.value.id == "hashlib")
                   or (isinstance(f, ast.Attribute) and f.attr == "update")
                   or (isinstance(f, ast.Name) and f.id == "text_hash"))
        if hashing and any(has_dumps(a) for a in node.args):
            found.add(node.lineno)
    return sorted(found)


def test_the_json_hash_checker() -> None:
    src = "import hashlib, json\nk = hashlib.sha256(json.dumps(x).encode()).hexdigest()\n"
    assert hand_rolled_json_hashes(src) == [2]
    assert hand_rolled_json_hashes("h.update(json.dumps(r, sort_keys=True).encode())\n") == [1]
    assert hand_rolled_json_hashes("k = text_hash(json.dumps(x, sort_keys=True))\n") == [1]
    assert hand_rolled_json_hashes("k = digest(x, spaced=True)\nh = hashlib.sha256(b'seed')\n") == []
    assert hand_rolled_json_hashes("path.write_text(json.dumps(x))\n") == []  # writing JSON is not hashing it


def test_json_is_hashed_only_in_the_hashing_module() -> None:
    bad = [f"{p}:{line}" for p in product_files() if p != HASHING_MODULE
           for line in hand_rolled_json_hashes((ROOT / p).read_text())]
    assert not bad, "hash objects with wtcommon.hashing.digest (say spaced=True for a key born spaced):\n" + \
        "\n".join(bad)


def hand_rolled_json_writes(source: str) -> list[int]:
    """Lines that write sorted JSON through `atomic_write_text(path, json.dumps(..., sort_keys=True))`: the
    format `wtcommon.atomic.atomic_write_json` writes, spelled again (JSONL and unsorted files are not it)."""
    found = []
    for node in ast.walk(_parse(source)):
        if (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "atomic_write_text"
                and len(node.args) == 2 and isinstance(a := node.args[1], ast.Call)
                and isinstance(a.func, ast.Attribute) and a.func.attr == "dumps"
                and any(k.arg == "sort_keys" for k in a.keywords)):
            found.append(node.lineno)
    return found


def test_the_json_writer_checker() -> None:
    assert hand_rolled_json_writes("atomic_write_text(p, json.dumps(o, indent=2, sort_keys=True))\n") == [1]
    assert hand_rolled_json_writes("atomic_write_json(p, o, indent=2)\n") == []
    assert hand_rolled_json_writes('atomic_write_text(p, "".join(json.dumps(r) + "\\n" for r in rows))\n') == []


def test_sorted_json_files_are_written_by_the_one_writer() -> None:
    bad = [f"{p}:{line}" for p in product_files() if p != Path("wtcommon/atomic.py")
           for line in hand_rolled_json_writes((ROOT / p).read_text())]
    assert not bad, "use wtcommon.atomic.atomic_write_json(path, obj, indent=...):\n" + "\n".join(bad)


# ---------------------------------------------------------------- one work-dir layout (issue 37)

LAYOUT_MODULE = Path("orchestrator/engine/paths.py")
# analysis/ finds a records file's runs from its path alone and cannot import orchestrator (the layer order)
LAYOUT_READERS = frozenset({Path("analysis/items.py")})


def hand_built_layout_paths(source: str) -> list[int]:
    """Lines that spell the work dir's "runs" or "results" folder into a path: an operand of `/`, or an argument
    of `inside(...)` / `.joinpath(...)`. orchestrator/engine/paths.py says where they are."""
    found = set()
    for node in ast.walk(_parse(source)):
        parts: list[ast.AST] = []
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Div):
            parts = [node.left, node.right]
        elif isinstance(node, ast.Call) and ((isinstance(node.func, ast.Name) and node.func.id == "inside") or (
                isinstance(node.func, ast.Attribute) and node.func.attr == "joinpath")):
            parts = list(node.args)
        if any(isinstance(p, ast.Constant) and p.value in ("runs", "results") for p in parts):
            found.add(node.lineno)
    return sorted(found)


def test_the_layout_path_checker() -> None:
    assert hand_built_layout_paths('p = workdir / "runs" / campaign\n') == [1]
    assert hand_built_layout_paths('p = inside(root, "results", c, "records.parquet")\n') == [1]
    assert hand_built_layout_paths('p = root.joinpath("runs", c)\n') == [1]
    assert hand_built_layout_paths('t.add_column("runs")\nacc["results"] = 1\np = campaign_runs(w, c)\n') == []


def test_the_work_dir_layout_is_spelled_in_one_place() -> None:
    bad = [f"{p}:{line}" for p in product_files() if p != LAYOUT_MODULE and p not in LAYOUT_READERS
           for line in hand_built_layout_paths((ROOT / p).read_text())]
    assert not bad, ("use orchestrator.engine.paths (runs_root, campaign_runs, run_dir, results_file):\n"
                     + "\n".join(bad))


# ---------------------------------------------------------------- one deadline loop (issue 37)

POLLING_MODULE = Path("wtcommon/polling.py")


def hand_rolled_deadlines(source: str) -> list[int]:
    """Lines that set a deadline from the clock (`deadline = time.time() + ...`, or `time.monotonic()`) or loop
    on one (`while time.monotonic() < ...`): the loop wtcommon/polling.py's `wait_until` already is. A lease's
    expiry written to the ledger (`.values(lease_expires=time.time() + ttl)`) is a stored time, not a loop."""
    def clock(n: ast.AST) -> bool:
        return (isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr in ("time", "monotonic")
                and isinstance(n.func.value, ast.Name) and n.func.value.id == "time")

    found = set()
    for node in ast.walk(_parse(source)):
        v = node.value if isinstance(node, ast.Assign) else None
        if isinstance(v, ast.BinOp) and isinstance(v.op, ast.Add) and (clock(v.left) or clock(v.right)):
            found.add(node.lineno)
        elif isinstance(node, ast.While) and isinstance(node.test, ast.Compare) and (
                clock(node.test.left) or any(clock(c) for c in node.test.comparators)):
            found.add(node.lineno)
    return sorted(found)


def test_the_deadline_checker() -> None:
    assert hand_rolled_deadlines("deadline = time.time() + 5\n") == [1]
    assert hand_rolled_deadlines("while time.monotonic() < end:\n    pass\n") == [1]
    assert hand_rolled_deadlines("t0 = time.time()\nelapsed = time.time() - t0\nwait_until(ok, 5)\n") == []
    assert hand_rolled_deadlines("q.values(lease_expires=time.time() + ttl)\n") == []


def test_deadline_loops_are_the_one_loop() -> None:
    bad = [f"{p}:{line}" for p in product_files() if p != POLLING_MODULE
           for line in hand_rolled_deadlines((ROOT / p).read_text())]
    assert not bad, "wait with wtcommon.polling.wait_until(condition, timeout_s, interval_s):\n" + "\n".join(bad)


# ---------------------------------------------------------------- no function a reader must scroll (issue 37)

MAX_FUNCTION_LINES, MAX_FILE_LINES = 80, 500


def long_functions(source: str, limit: int = MAX_FUNCTION_LINES) -> list[tuple[int, str, int]]:
    """(line, name, length) of every function or method of `source` longer than `limit` lines (decorators
    excluded, the signature and docstring included: what a reader scrolls through)."""
    return sorted((n.lineno, n.name, n.end_lineno - n.lineno + 1) for n in ast.walk(_parse(source))
                  if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)) and n.end_lineno is not None
                  and n.end_lineno - n.lineno + 1 > limit)


def test_the_function_length_checker() -> None:
    body = "".join(f"    x{i} = {i}\n" for i in range(79))
    assert long_functions(f"def short():\n{body}") == []  # 80 lines with its def
    assert long_functions(f"def long():\n{body}    y = 1\n") == [(1, "long", 81)]
    assert long_functions(f"class C:\n    def m(self):\n    {body.replace(chr(10), chr(10) + '    ')}"
                          "    y = 1\n        z = 2\n") == [(2, "m", 82)]


def test_the_file_length_checker() -> None:
    files = {"cli/a.py": "x = 1\n" * 501, "benchmarks/b.py": "x = 1\n" * 500}
    assert long_modules(files, MAX_FILE_LINES, prefix=None) == ["cli/a.py: 501 lines"]


def code_outside_tests() -> list[Path]:
    """The shipped packages and the benchmark scripts (tests are exempt: a test module holds many cases)."""
    return product_files() + sorted(p.relative_to(ROOT) for p in (ROOT / "benchmarks").rglob("*.py"))


def test_no_function_over_80_lines_and_no_file_over_500_outside_tests() -> None:
    files = {str(p): (ROOT / p).read_text() for p in code_outside_tests()}
    assert any(f.startswith("benchmarks/") for f in files)
    long = [f"{p}:{line} {name}: {n} lines" for p, src in files.items() for line, name, n in long_functions(src)]
    assert not long, f"split these along their steps (≤ {MAX_FUNCTION_LINES} lines):\n" + "\n".join(long)
    big = long_modules(files, MAX_FILE_LINES, prefix=None)
    assert not big, f"split these by the jobs they do (≤ {MAX_FILE_LINES} lines):\n" + "\n".join(big)


# ---------------------------------------------------------------- graders read the conclusion (issue 49)

def raw_response_graders(source: str) -> list[tuple[int, str]]:
    """(line, name) of each function registered with `register_grader` whose first parameter is not annotated
    `Conclusion`: a family that would parse the raw response instead of what `evaluation.graders.conclusion`
    reads (the reasoning block cut, the conclusion from the last final-answer statement)."""
    found = []
    for fn in ast.walk(_parse(source)):
        if not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        registered = any(isinstance(d, ast.Call) and getattr(d.func, "id", getattr(d.func, "attr", "")) ==
                         "register_grader" for d in fn.decorator_list)
        if not registered:
            continue
        args = fn.args.posonlyargs + fn.args.args
        ann = args[0].annotation if args else None
        name = ann.id if isinstance(ann, ast.Name) else ann.value if isinstance(ann, ast.Constant) else None
        if name != "Conclusion":
            found.append((fn.lineno, fn.name))
    return found


def test_the_raw_response_grader_checker() -> None:
    raw = '@register_grader("x", version="1", budget_s=1.0)\ndef grade_x(response: str, gold: str):\n    return 0\n'
    assert raw_response_graders(raw) == [(2, "grade_x")]
    assert raw_response_graders(raw.replace("response: str", "response")) == [(2, "grade_x")]
    assert raw_response_graders(raw.replace("response: str", "c: Conclusion")) == []
    assert raw_response_graders(raw.replace("@register_grader", "@reg.register_grader")) == [(2, "grade_x")]
    assert raw_response_graders("def helper(text: str):\n    return text\n") == []  # not a registered grader


def test_every_grader_family_grades_the_conclusion() -> None:
    bad = [f"{p}:{line}: {name} is registered as a grader but takes the raw response; take `c: Conclusion` "
           "(evaluation/graders/conclusion.py) and parse `c.text`"
           for p in product_files() for line, name in raw_response_graders((ROOT / p).read_text())]
    assert not bad, "\n".join(bad)
    from evaluation.graders.registry import REGISTRY

    assert len(REGISTRY) >= 3  # math, multiple_choice, knights_knaves (and any family added later)
    src = (ROOT / "evaluation/graders/registry.py").read_text()
    assert "read_conclusion(response" in src  # the registry hands every family the conclusion, never the raw text
