"""The `campaign` command line: one Typer app; each area registers its own commands."""

from __future__ import annotations

import typer

from orchestrator.cli import (
    analysis_commands,
    campaign_commands,
    eval_commands,
    policy_commands,
    sequential_commands,
    train_commands,
    tune_commands,
)

app = typer.Typer(
    name="campaign",
    help="Windtunnel: matched-seed comparisons of RLVR data policies.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    context_settings={"help_option_names": ["-h", "--help"]},
)


def _version(value: bool) -> None:
    if value:
        from importlib.metadata import PackageNotFoundError, version

        try:
            typer.echo(f"windtunnel {version('windtunnel')}")
        except PackageNotFoundError:
            typer.echo("windtunnel (not installed as a package)")
        raise typer.Exit()


@app.callback()
def _root(version: bool = typer.Option(False, "--version", callback=_version, is_eager=True,
                                       help="print the version and exit")) -> None:
    """Windtunnel: matched-seed comparisons of RLVR data policies."""

for _module in (analysis_commands, policy_commands, eval_commands, train_commands, campaign_commands, tune_commands,
                sequential_commands):
    _module.register(app)


def main() -> None:
    app()
