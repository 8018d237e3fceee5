"""The `campaign` command line: one Typer app; each area registers its own commands (each behind the one
error-to-exit-code mapping, cli/groups.py)."""

from __future__ import annotations

import typer

from cli import (
                 analysis_commands,
                 audit_commands,
                 campaign_commands,
                 difficulty_commands,
                 doctor_commands,
                 eval_commands,
                 head_commands,
                 memorization_commands,
                 policy_commands,
                 sequential_commands,
                 slurm_commands,
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

for _module in (analysis_commands, policy_commands, eval_commands, audit_commands, train_commands, difficulty_commands,
                campaign_commands, tune_commands, sequential_commands, doctor_commands, head_commands,
                slurm_commands):
    _module.register(app)
memorization_commands.register(app)


def _default_metavars(typer_app: typer.Typer) -> None:
    """Help that reads as values: every argument/option without its own metavar gets one from its name and
    type (`--workdir DIR`, `--max-parallel N`, `CAMPAIGN`), and flags show none (not `<bool>`)."""
    import inspect
    import typing
    from pathlib import Path

    from typer.models import ArgumentInfo, OptionInfo

    names = {"workdir": "DIR", "data_dir": "DIR", "out": "PATH", "out_dir": "DIR", "ledger_url": "URL",
             "ray_address": "URL", "campaign": "CAMPAIGN", "campaign_file": "FILE", "records": "RECORDS"}
    groups = [typer_app] + [g.typer_instance for g in typer_app.registered_groups if g.typer_instance]
    for grp in groups:
        for cmd in grp.registered_commands:
            if cmd.callback is None:
                continue
            sig = inspect.signature(cmd.callback)
            hints = typing.get_type_hints(cmd.callback, include_extras=True)
            # the annotations are strings (`from __future__ import annotations`): each evaluation makes a new
            # `typer.Option(...)`, so keep this one, or Typer would read a fresh one without the metavar set here
            cmd.callback.__annotations__.update(hints)
            for name, par in sig.parameters.items():
                ann = hints.get(name, par.annotation)
                infos = [m for m in getattr(ann, "__metadata__", ()) if isinstance(m, (OptionInfo, ArgumentInfo))]
                info = (par.default if isinstance(par.default, (OptionInfo, ArgumentInfo))
                        else (infos[0] if infos else None))
                if info is None or info.metavar is not None:
                    continue
                base = typing.get_args(ann)[0] if getattr(ann, "__metadata__", None) else ann
                args = [a for a in typing.get_args(base) if a is not type(None)]
                core = args[0] if args else base
                if core is bool:
                    info.metavar = "" if isinstance(info, OptionInfo) else "BOOL"
                elif name in names:
                    info.metavar = names[name]
                elif core in (int,):
                    info.metavar = "N"
                elif core in (float,):
                    info.metavar = "X"
                elif core is Path:
                    info.metavar = "PATH"
                elif typing.get_origin(core) is list:
                    info.metavar = name.upper().rstrip("S") + "..."
                else:
                    info.metavar = name.upper()


def _no_type_tags() -> None:
    """Typer prints a type column beside every parameter (`<str>`, `<list[str]>`, `<bool>`) that our metavars do
    not reach: an argument's (its name column already shows its metavar, `CAMPAIGN`, `RUN...`) and the flags
    Typer adds itself (`--help`, `--version`). Those show none; an option with a value keeps its metavar, and a
    choice its choices."""
    from typer.core import TyperArgument, TyperOption

    arg_type, opt_type = TyperArgument.display_type_rich, TyperOption.display_type_rich

    def argument_type(self: TyperArgument, ctx: typer.Context) -> str | None:
        return arg_type(self, ctx) if self.type_descriptor.is_choice else None

    def option_type(self: TyperOption, ctx: typer.Context) -> str | None:
        return None if self.is_flag and self.metavar is None else opt_type(self, ctx)

    TyperArgument.display_type_rich = argument_type  # type: ignore[method-assign,assignment]
    TyperOption.display_type_rich = option_type  # type: ignore[method-assign,assignment]


_default_metavars(app)
_no_type_tags()


def main() -> None:
    app()
