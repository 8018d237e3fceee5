"""Exit codes as documented (issue 59): docs/guide/cli.md's table, the CLI's `EXIT_CODES` and every code the
product can exit with agree, and every command's --help ends with them."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import typer
from typer.testing import CliRunner

from cli import app
from cli.errors import EXIT_CODES, EXIT_EPILOG

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("cli", "tuning", "orchestrator", "training", "evaluation", "analysis", "policies", "wtcommon")


def guide_codes() -> set[int]:
    text = (ROOT / "docs" / "guide" / "cli.md").read_text()
    table = text.split("## Exit codes", 1)[1].split("\n## ", 1)[0]
    return {int(m) for m in re.findall(r"^\| (\d+) \|", table, re.M)}


def exit_codes_in(source: str) -> list[tuple[int, int]]:
    """(line, code) of every literal exit code: `exit_code = N` in a class, `typer.Exit(N)`, `sys.exit(N)` and
    `fail(message, N)`."""
    out = []
    for n in ast.walk(ast.parse(source)):
        if isinstance(n, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "exit_code" for t in n.targets) \
                and isinstance(n.value, ast.Constant) and isinstance(n.value.value, int):
            out.append((n.lineno, n.value.value))
        if isinstance(n, ast.Call):
            name = ast.unparse(n.func)
            args = [a for a in n.args if isinstance(a, ast.Constant) and isinstance(a.value, int)
                    and not isinstance(a.value, bool)]
            if name in ("typer.Exit", "sys.exit", "Exit") and args:
                out.append((n.lineno, args[0].value))
            if name == "fail" and len(n.args) > 1 and n.args[1] in args:
                out.append((n.lineno, n.args[1].value))  # type: ignore[attr-defined]
    return out


def test_the_checker_finds_each_kind_of_exit() -> None:
    src = ("class E(Exception):\n    exit_code = 7\n"
           "def f():\n    raise typer.Exit(9)\n"
           "def g():\n    sys.exit(3)\n"
           "def h():\n    fail('no', 6)\n")
    assert exit_codes_in(src) == [(2, 7), (4, 9), (6, 3), (8, 6)]


def test_the_guide_the_cli_and_the_code_name_the_same_exit_codes() -> None:
    assert guide_codes() == set(EXIT_CODES)
    files = [p for pkg in PACKAGES for p in sorted((ROOT / pkg).rglob("*.py"))]
    every = [(p, line, code) for p in files for line, code in exit_codes_in(p.read_text())]
    assert {1, 2, 3, 4, 5} <= {code for _, _, code in every}  # the scan sees the product's own exits
    found = [f"{p.relative_to(ROOT)}:{line} exits {code}" for p, line, code in every if code not in EXIT_CODES]
    assert not found, found


def _commands(cmd, path=()):
    yield path, cmd
    for name, sub in getattr(cmd, "commands", {}).items():
        yield from _commands(sub, (*path, name))


def test_every_command_ends_its_help_with_the_exit_codes() -> None:
    root = typer.main.get_command(app)
    missing = [" ".join(p) for p, c in _commands(root) if p and not getattr(c, "commands", None)
               and c.epilog != EXIT_EPILOG]
    assert not missing, missing
    res = CliRunner().invoke(app, ["compare", "--help"], terminal_width=200)
    assert res.exit_code == 0 and "Exit codes: 0 done; 1 runs or a check failed; 2 bad input" in res.output
