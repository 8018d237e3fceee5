"""`campaign policies`: list, show, validate, check."""

from __future__ import annotations

from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from cli import console, policy_commands

POLICY_DIR = Path(__file__).resolve().parents[2] / "campaigns" / "policy"


@pytest.fixture(autouse=True)
def wide_console(monkeypatch: pytest.MonkeyPatch) -> None:
    """Rich reads COLUMNS when a Console is made (at import, maybe long before this test), so the
    runner's env does not widen it; tables would wrap names at 80 columns."""
    monkeypatch.setattr(console.out, "width", 300)
    monkeypatch.setattr(console.err, "width", 300)


def _app() -> typer.Typer:
    app = typer.Typer()
    policy_commands.register(app)

    @app.command("noop")
    def _noop() -> None:  # a second command so Typer keeps `policies` as a sub-command
        pass

    return app


def test_list_shows_scorers_actuators_and_configs():
    r = CliRunner().invoke(_app(), ["policies"], env={"COLUMNS": "200"})
    assert r.exit_code == 0, r.output
    for word in ("group_solve_rate", "max_variance", "dump_ucb", "gfpo", "matched_random_gfpo", "loss_norm"):
        assert word in r.output


def test_show_and_unknown_name():
    r = CliRunner().invoke(_app(), ["policies", "show", "maxvar"], env={"COLUMNS": "200"})
    assert r.exit_code == 0 and "rounding=python_round" in r.output
    r = CliRunner().invoke(_app(), ["policies", "show", "maxvarr"])
    assert r.exit_code == 2 and "maxvarr" in r.output and "known:" in r.output


def test_validate_exit_2_naming_file_and_field(tmp_path):
    f = tmp_path / "bad.yaml"
    f.write_text("name: bad\nmechanism: select\nscorer: {name: reward_difficulty}\nactuator: {name: gfpo, params: {k: "
                 "9}}\n")
    r = CliRunner().invoke(_app(), ["policies", "validate", str(f), "--rollout-n", "5"], env={"COLUMNS": "300"})
    assert r.exit_code == 2
    assert "actuator.params.k" in r.output and "'bad'" in r.output
    r = CliRunner().invoke(_app(), ["policies", "validate", str(POLICY_DIR / "gfpo.yaml"), "--rollout-n", "5"])
    assert r.exit_code == 0 and "ok" in r.output


def test_check_passes_with_the_installed_plugin():
    r = CliRunner().invoke(_app(), ["policies", "check"], env={"COLUMNS": "200"})
    assert r.exit_code == 0, r.output
    assert "windtunnel_sync" in r.output
