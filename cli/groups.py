"""Attaching commands: each behind the one error-to-exit-code mapping (cli/errors.py), and command groups shared
by several areas (`campaign data ...`, `campaign audit ...`).

Every area's `register()` attaches its commands with `command()` and its group callbacks with `callback()`, so
any app built from `register()` (the main one, a test's) turns a `WindtunnelError` into its exit code the same
way (tests/test_code_rules.py checks every registered callback is wrapped).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import typer

from cli.errors import EXIT_EPILOG, exits_cleanly


def command(app: typer.Typer, name: str, fn: Callable[..., Any]) -> None:
    """Attach `fn` to `app` as the command `name`, behind the one error-to-exit-code mapping; its --help ends with
    the exit codes."""
    app.command(name, epilog=EXIT_EPILOG)(exits_cleanly(fn))


def callback(group: typer.Typer, fn: Callable[..., Any]) -> None:
    """Make `fn` the callback of `group` (what `campaign <group>` alone runs), behind the same mapping."""
    group.callback(epilog=EXIT_EPILOG)(exits_cleanly(fn))


def subgroup(app: typer.Typer, name: str, help: str) -> typer.Typer:
    """The `name` sub-app of `app`, created on first use: each area adds its commands to the same group."""
    for g in app.registered_groups:
        if g.name == name and g.typer_instance is not None:
            return g.typer_instance
    group = typer.Typer(help=help, no_args_is_help=True)
    app.add_typer(group, name=name)
    return group
