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


def test_validate_lists_every_problem_of_every_file_at_once(tmp_path):
    """Three mistakes in one file and one in another: all four are listed in one run (before: the first only)."""
    bad = tmp_path / "bad.yaml"
    bad.write_text("name: bad\nmechanism: select\ncolour: red\nscorer: {name: advantage_magnitude}\n"
                   "actuator: {name: topk_fraction, params: {fraction: 1.5, scope: everywhere}}\nloss_norm: kept\n")
    worse = tmp_path / "worse.yaml"
    worse.write_text("name: worse\nmechanism: select\nscorer: {name: advantage_magnitud}\n"
                     "actuator: {name: topk_fraction}\n")
    r = CliRunner().invoke(_app(), ["policies", "validate", str(bad), str(POLICY_DIR / "gfpo.yaml"), str(worse)],
                           env={"COLUMNS": "300"})
    assert r.exit_code == 2, r.output
    text = " ".join(r.output.split())
    assert "5 problem(s)" in text
    for needle in ("unknown key(s) ['colour']", "actuator.params.fraction (actuator 'topk_fraction'): got 1.5",
                   "actuator.params.scope (actuator 'topk_fraction'): got 'everywhere'", "loss_norm: got 'kept'",
                   "unknown scorer 'advantage_magnitud'"):
        assert needle in text, needle
    assert f"ok {POLICY_DIR / 'gfpo.yaml'}" in text  # a good file among bad ones is still said to be good
    assert str(bad) in text and str(worse) in text


def _project(tmp_path: Path) -> Path:
    proj = tmp_path / "proj"
    (proj / "policy").mkdir(parents=True)
    (proj / "policy" / "brevity.yaml").write_text(
        "name: brevity\nmechanism: select\nscorer: {name: advantage_magnitude}\n"
        "actuator: {name: topk_fraction, params: {fraction: 0.4}}\n")
    (proj / "policy" / "gfpo.yaml").write_text(  # the project's own gfpo shadows the shipped one, as in submit
        "name: gfpo\nmechanism: select\nscorer: {name: reward_difficulty}\nactuator: {name: gfpo, params: {k: 2}}\n")
    (proj / "c.yaml").write_text("name: c\nmodels: [tiny_qwen2]\nrecipe: cpu_tiny\npolicies: [baseline, brevity]\n")
    return proj


def test_show_resolves_names_as_submit_does(tmp_path, monkeypatch):
    proj = _project(tmp_path)
    monkeypatch.chdir(proj)  # a project folder: its policies first, then the shipped ones
    r = CliRunner().invoke(_app(), ["policies", "show", "brevity"])
    assert r.exit_code == 0 and "fraction=0.4" in r.output, r.output
    r = CliRunner().invoke(_app(), ["policies", "show", "gfpo"])
    assert r.exit_code == 0 and "k=2" in r.output, r.output
    r = CliRunner().invoke(_app(), ["policies", "show", "maxvar"])  # shipped, not in the project
    assert r.exit_code == 0 and "rounding=python_round" in r.output
    monkeypatch.chdir(tmp_path)  # outside the project: --campaign names it
    r = CliRunner().invoke(_app(), ["policies", "show", "brevity", "--campaign", str(proj / "c.yaml")])
    assert r.exit_code == 0 and "fraction=0.4" in r.output, r.output
    r = CliRunner().invoke(_app(), ["policies", "show", "gfpo", "--campaign", str(proj / "c.yaml")])
    assert "k=2" in r.output
    r = CliRunner().invoke(_app(), ["policies", "show", "gfpo"])
    assert r.exit_code == 0 and "k=3" in r.output  # no project here: the shipped gfpo


def test_an_unknown_name_suggests_from_project_and_shipped_policies(tmp_path, monkeypatch):
    monkeypatch.chdir(_project(tmp_path))
    for typo, close in (("brevty", "brevity"), ("maxvr", "maxvar")):
        r = CliRunner().invoke(_app(), ["policies", "show", typo], env={"COLUMNS": "300"})
        assert r.exit_code == 2 and f"did you mean {close}" in " ".join(r.output.split()), r.output


def test_list_shows_curricula_with_their_schemas_and_show_their_parameters():
    r = CliRunner().invoke(_app(), ["policies"], env={"COLUMNS": "300"})
    assert r.exit_code == 0, r.output
    assert "Curricula" in r.output and "candidate_ratio: float in [1.0, inf] (default 16.0)" in r.output
    assert "curriculum=mopps(target=0.5" in r.output  # the configuration's curriculum block, not "-"
    r = CliRunner().invoke(_app(), ["policies", "show", "mopps"], env={"COLUMNS": "300"})
    assert r.exit_code == 0, r.output
    assert "curriculum: mopps(target=0.5, decay=1.0, candidate_ratio=16.0" in r.output
    assert "decay: float in [0.0, 1.0] (default 1.0) - lambda" in r.output and "signal: accuracy" in r.output


MIDBAND = '''import numpy as np
from policies import Curriculum, register_curriculum


@register_curriculum("t_midband_cli")
class Midband(Curriculum):
    signal = "none"

    def _propose(self, step, mask, n):
        return np.flatnonzero(mask)[:n]

    def update(self, step, prompt_ids, correct):
        self.check_update(prompt_ids, correct)
'''


def test_the_list_holds_the_projects_policies_and_curricula_beside_the_shipped_ones(tmp_path, monkeypatch):
    """issue 58: inside a project, `campaign policies` listed the shipped configurations only (its curriculum
    missing though `show` found it), and `--dir` hid the shipped ones."""
    import sys

    proj = _project(tmp_path)
    (proj / "t_midband_mod.py").write_text(MIDBAND)
    (proj / "policy" / "midband.yaml").write_text(
        "name: midband\nmechanism: curriculum\ncurriculum: {name: t_midband_cli}\nplugins: [t_midband_mod]\n")
    monkeypatch.delitem(sys.modules, "t_midband_mod", raising=False)
    monkeypatch.chdir(proj)
    r = CliRunner().invoke(_app(), ["policies"], env={"COLUMNS": "300"})
    assert r.exit_code == 0, r.output
    conf = r.output.split("Configurations")[1].splitlines()
    rows = {ln.split("│")[1].strip(): ln for ln in conf if ln.count("│") > 3}
    assert "project" in rows["midband"] and "curriculum=t_midband_cli" in rows["midband"]
    assert "project" in rows["brevity"] and "shipped" in rows["maxvar"]  # the shipped ones beside
    assert "t_midband_cli" in r.output.split("Curricula")[1].split("Configurations")[0]  # its rule is listed
    gfpo = [ln for ln in conf if ln.split("│")[1:2] and ln.split("│")[1].strip() == "gfpo"]
    assert len(gfpo) == 2 and "project" in gfpo[0] and "shadowed" in gfpo[1]  # resolves to the project's
    monkeypatch.chdir(tmp_path)  # outside the project: --dir adds the folder, the shipped ones stay
    r = CliRunner().invoke(_app(), ["policies", "--dir", str(proj / "policy")], env={"COLUMNS": "300"})
    assert r.exit_code == 0 and "brevity" in r.output and "maxvar" in r.output, r.output
