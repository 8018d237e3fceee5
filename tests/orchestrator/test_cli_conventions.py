"""CLI conventions a user relies on: -h, --version, $WINDTUNNEL_WORKDIR, plain `watch` output off a terminal,
and a legend under `status` (in-process, Typer's CliRunner: no terminal)."""

from __future__ import annotations

import pkgutil
import re
from pathlib import Path

import pytest
from typer.testing import CliRunner

from cli import app
from orchestrator.session import Session, plan

REPO = Path(__file__).resolve().parents[2]
runner = CliRunner()


def _submitted(workdir: Path) -> None:
    spec, runs = plan(REPO / "campaigns" / "demo.yaml", ["policies=[baseline,gfpo]", "seeds=[1]"])
    sess = Session(workdir=workdir)
    sess.submit(spec, runs)
    sess.close()


def test_short_help_and_version():
    assert runner.invoke(app, ["-h"]).exit_code == 0
    r = runner.invoke(app, ["status", "-h"])
    assert r.exit_code == 0 and "--workdir" in r.output
    r = runner.invoke(app, ["--version"])
    assert r.exit_code == 0 and r.output.startswith("windtunnel ")


def test_workdir_from_the_environment_and_a_status_legend(tmp_path):
    _submitted(tmp_path / "w")
    r = runner.invoke(app, ["status", "demo"], env={"WINDTUNNEL_WORKDIR": str(tmp_path / "w")})
    assert r.exit_code == 0, r.output
    assert "planned=2" in r.output and "legend:" in r.output
    assert "no orchestrator is driving this campaign" in r.output  # planned runs, nobody holds them


def test_watch_off_a_terminal_prints_plain_lines(tmp_path):
    _submitted(tmp_path / "w")
    r = runner.invoke(app, ["watch", "demo", "--workdir", str(tmp_path / "w"), "--once"])
    assert r.exit_code == 0
    lines = r.output.strip().splitlines()
    assert len(lines) == 1 and lines[0].endswith("demo: planned=2")


def test_commands_accept_the_spec_file_as_well_as_the_name(tmp_path):
    _submitted(tmp_path / "w")
    by_file = runner.invoke(app, ["status", str(REPO / "campaigns" / "demo.yaml"), "--workdir", str(tmp_path / "w")])
    by_name = runner.invoke(app, ["status", "demo", "--workdir", str(tmp_path / "w")])
    assert by_file.exit_code == 0 and by_file.output == by_name.output


def test_option_metavars_read_as_values():
    r = runner.invoke(app, ["submit", "-h"], terminal_width=200)
    assert r.exit_code == 0
    assert "--workdir" in r.output and " DIR " in r.output and " URL " in r.output
    ours = [ln for ln in r.output.splitlines() if "Show this message" not in ln]  # Typer's own --help line
    assert not any("<bool>" in ln or "<int>" in ln for ln in ours)


def _command_paths() -> list[list[str]]:
    """Every `campaign` command and sub-command, as the words that reach it."""
    paths: list[list[str]] = [[c.name] for c in app.registered_commands if c.name]
    for g in app.registered_groups:
        if g.typer_instance is not None:
            paths += [[g.name, c.name] for c in g.typer_instance.registered_commands if c.name and g.name]
            paths.append([g.name] if g.name else [])
    return paths


@pytest.mark.parametrize("words", _command_paths(), ids=" ".join)
def test_help_shows_no_type_tags(words):
    """Issue 23: help shows metavars (`CAMPAIGN`, `DIR`, `N`), never Typer's type tags (`<str>`, `<bool>`,
    `<list[str]>`), for arguments, options and the `--help` flag alike."""
    r = runner.invoke(app, [*words, "--help"], terminal_width=200)
    assert r.exit_code == 0, r.output
    tags = re.findall(r"<(?:str|bool|int|float|list\[[a-z]+\]|path|file|dir)>", r.output)
    assert tags == [], f"{' '.join(words)} --help shows {tags}"


def _registered_callbacks(typer_app) -> list[tuple[str, object]]:
    """(name, callback) of every command and sub-group callback of `typer_app`, one level of groups deep."""
    found = [(c.name or "?", c.callback) for c in typer_app.registered_commands]
    for g in typer_app.registered_groups:
        sub = g.typer_instance
        if sub is None:
            continue
        found += [(f"{g.name} {c.name}", c.callback) for c in sub.registered_commands]
        if sub.registered_callback is not None and sub.registered_callback.callback is not None:
            found.append((f"{g.name} (callback)", sub.registered_callback.callback))
    return found


AREAS = sorted(m.name for m in pkgutil.iter_modules([str(REPO / "cli")]) if m.name.endswith("_commands"))


@pytest.mark.parametrize("area", AREAS)
def test_every_app_built_by_register_maps_errors_to_exit_codes(area):
    """Issue 23: the error-to-exit-code mapping (cli/errors.py) is applied as `register()` attaches a command,
    so an app a test builds from one area's `register()` exits as the main app does (no traceback, the
    error's exit code), with no catch of its own in the command."""
    import importlib

    import typer

    app_ = typer.Typer()
    importlib.import_module(f"cli.{area}").register(app_)
    found = _registered_callbacks(app_)
    assert found, f"cli.{area}.register() attached nothing"
    bare = [name for name, cb in found if not getattr(cb, "exits_cleanly", False)]
    assert bare == [], f"attach these with cli.groups.command()/callback(): {bare}"


def test_an_app_built_from_register_alone_exits_2_on_bad_input(tmp_path):
    """The behaviour the wrapping gives: a suite error raised deep in `campaign verdicts` exits 2 with one
    error line and no traceback on an app holding only the analysis commands."""
    import typer

    from cli import analysis_commands

    app_ = typer.Typer()
    analysis_commands.register(app_)
    records = tmp_path / "r.csv"
    records.write_text("x\n1\n")
    r = runner.invoke(app_, ["verdicts", str(records), "--suite", str(tmp_path / "no_such_suite.yaml")])
    assert r.exit_code == 2, r.output
    assert "no_such_suite" in r.output and "Traceback" not in r.output
