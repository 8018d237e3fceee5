"""Command groups shared by several areas (`campaign data ...`, `campaign audit ...`)."""

from __future__ import annotations

import typer


def subgroup(app: typer.Typer, name: str, help: str) -> typer.Typer:
    """The `name` sub-app of `app`, created on first use: each area adds its commands to the same group."""
    for g in app.registered_groups:
        if g.name == name and g.typer_instance is not None:
            return g.typer_instance
    group = typer.Typer(help=help, no_args_is_help=True)
    app.add_typer(group, name=name)
    return group
