"""The analysis commands on a Typer app of their own, invoked in-process (CliRunner): what the analysis CLI tests
share."""

from __future__ import annotations

import typer
from typer.testing import CliRunner

from cli import analysis_commands


def analysis_app() -> typer.Typer:
    app = typer.Typer()
    analysis_commands.register(app)
    return app


def invoke(*args: str):
    """`campaign <args>` for the analysis commands: the CliRunner result (exit_code, output)."""
    return CliRunner().invoke(analysis_app(), list(args))
