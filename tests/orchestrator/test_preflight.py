"""Preflight: a campaign that cannot succeed is refused by `plan`/`submit` before any compute.

Each bad campaign must exit 2 with a line naming the file and the fix, and leave nothing behind: no
ledger, no Ray head, no run directory (checked on disk). The CLI runs in-process (Typer's CliRunner).
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from cli import app
from orchestrator.engine.ledger import Attempt
from orchestrator.engine.ledger.states import AttemptStatus
from orchestrator.engine.ranges import check_positive
from orchestrator.engine.spec import SpecError, load_campaign
from orchestrator.engine.spec_fields import check_name, check_seeds

REPO = Path(__file__).resolve().parents[2]
runner = CliRunner()


def _project(tmp_path: Path, campaign: dict, policies: dict[str, dict] | None = None) -> Path:
    """A user's project directory outside the repo: own campaign YAML (+ own policy YAMLs)."""
    proj = tmp_path / "proj"
    (proj / "policy").mkdir(parents=True)
    for name, body in (policies or {}).items():
        (proj / "policy" / f"{name}.yaml").write_text(yaml.safe_dump(body, sort_keys=False))
    base = yaml.safe_load((REPO / "campaigns" / "demo.yaml").read_text())
    base.update(campaign)
    (proj / "c.yaml").write_text(yaml.safe_dump(base, sort_keys=False))
    return proj / "c.yaml"


def _submit(campaign: Path, workdir: Path, *extra: str):
    return runner.invoke(app, ["submit", str(campaign), "--workdir", str(workdir), *extra])


def _nothing_written(workdir: Path) -> None:
    assert not (workdir / "ledger.db").exists()
    assert not (workdir / "ray_head.json").exists() and not (workdir / "ray").exists()
    assert not (workdir / "runs").exists()


# --- pure checks --------------------------------------------------------------------------------


@pytest.mark.parametrize("seeds", [[-1], [2**32], [2**70], [True], [1.5], ["1"], [1, 1]])
def test_bad_seeds_are_refused(seeds):
    with pytest.raises(ValueError):
        check_seeds(seeds)


def test_good_seeds_pass():
    assert check_seeds([0, 1, 2**32 - 1]) == [0, 1, 2**32 - 1]


@pytest.mark.parametrize("name", ["../../escape", "a/b", "", "x\ny", ".hidden", "a..b", "x" * 200, 7])
def test_unsafe_names_are_refused(name):
    with pytest.raises(ValueError, match="not a safe name"):
        check_name(name, "campaign name")


@pytest.mark.parametrize("value,ok", [(float("nan"), False), (float("inf"), False), (0, False), (-1, False),
                                      (0.5, True), (3, True)])
def test_numeric_option_check(value, ok):
    assert (check_positive("--margin", value) is None) is ok


@pytest.mark.parametrize("override,needle", [
    ("seeds=[-3]", "seed -3 is out of range"),
    ("seeds=[true]", "is not an integer"),
    ("policies=[baseline,gfpo,gfpo]", "listed more than once"),
    ("name=../escape", "not a safe name"),
    ("+evaluation.limit=-5", "limit: got -5"),
    ("+evaluation.colour=red", "unknown key"),
    ("compute.cpus_per_run=0", "cpus_per_run"),
])
def test_spec_level_mistakes_name_the_key(override, needle):
    with pytest.raises(SpecError, match=needle.replace("[", r"\[")):
        load_campaign(REPO / "campaigns" / "demo.yaml", [override])


# --- the CLI: exit 2, one line per problem, nothing written ------------------------------------------


def test_plan_lists_every_problem_at_once(tmp_path):
    bad = {"bad_scorer": {"name": "bad_scorer", "mechanism": "select", "scorer": {"name": "no_such_scorer"},
                          "actuator": {"name": "topk_fraction", "params": {"fraction": 0.5}}},
           "bad_fraction": {"name": "bad_fraction", "mechanism": "select", "scorer": {"name": "advantage_magnitude"},
                            "actuator": {"name": "topk_fraction", "params": {"fraction": 7}}}}
    camp = _project(tmp_path, {"policies": ["baseline", "bad_scorer", "bad_fraction"],
                               "compute": {"nodes": 1, "gpus_per_node": 0, "gpus_per_run": 0, "hours_per_run": 0.01,
                                           "cpus_per_run": 1000}}, bad)
    res = runner.invoke(app, ["plan", str(camp), "--data-dir", str(tmp_path / "no_data")])
    assert res.exit_code == 2, res.output
    text = res.output
    assert "problem(s) found before any compute" in text
    assert "bad_scorer.yaml" in text and "no_such_scorer" in text
    assert "bad_fraction.yaml" in text and "fraction" in text
    assert "cpus_per_run" in text and "1000" in text
    assert "no_data: evaluation data directory not found" in text
    assert "Traceback" not in text


def test_submit_with_missing_eval_data_exits_2_before_any_job(tmp_path):
    wd = tmp_path / "w"
    res = _submit(REPO / "campaigns" / "demo.yaml", wd)
    assert res.exit_code == 2, res.output
    assert "evaluation data directory not found" in res.output and "--data-dir" in res.output
    _nothing_written(wd)


def test_submit_with_an_invalid_policy_exits_2(tmp_path):
    camp = _project(tmp_path, {"policies": ["baseline", "broken"]},
                    {"broken": {"name": "broken", "mechanism": "select", "scorer": {"name": "advantage_magnitude"},
                                "actuator": {"name": "topk_fraction", "params": {"fraction": 7}}}})
    wd = tmp_path / "w"
    res = _submit(camp, wd)
    assert res.exit_code == 2 and "broken.yaml" in res.output and "fraction" in res.output, res.output
    _nothing_written(wd)


def test_submit_with_a_negative_seed_exits_2(tmp_path):
    wd = tmp_path / "w"
    res = _submit(REPO / "campaigns" / "demo.yaml", wd, "seeds=[1,-2]")
    assert res.exit_code == 2 and "seed -2 is out of range" in res.output, res.output
    _nothing_written(wd)


def test_submit_with_an_unimportable_plugin_exits_2(tmp_path):
    camp = _project(tmp_path, {"policies": ["baseline", "ghost"]},
                    {"ghost": {"name": "ghost", "mechanism": "select", "plugins": ["no_such_module_xyz"],
                               "scorer": {"name": "advantage_magnitude"},
                               "actuator": {"name": "topk_fraction", "params": {"fraction": 0.5}}}})
    wd = tmp_path / "w"
    res = _submit(camp, wd)
    assert res.exit_code == 2 and "cannot import 'no_such_module_xyz'" in res.output, res.output
    _nothing_written(wd)


def test_resume_with_a_mistyped_workdir_creates_nothing(tmp_path):
    wd = tmp_path / "typo"
    for cmd in (["resume", "demo"], ["cancel", "demo"], ["watch", "demo", "--once"], ["logs", "demo", "x"]):
        res = runner.invoke(app, [*cmd, "--workdir", str(wd)])
        assert res.exit_code == 2 and "no ledger in this work directory" in res.output, (cmd, res.output)
    assert not wd.exists()


# --- data synthetic --------------------------------------------------------------------------------


def test_data_synthetic_terminates_and_writes_a_manifest_submit_accepts(tmp_path):
    out = tmp_path / "data"
    res = runner.invoke(app, ["data", "synthetic", "--out", str(out), "--per-domain", "50",
                              "--test-per-domain", "32", "--eval-items", "4"])
    assert res.exit_code == 0, res.output
    assert (out / "eval" / "manifest.json").exists()
    res = runner.invoke(app, ["plan", str(REPO / "campaigns" / "demo.yaml"), "--data-dir", str(out / "eval")])
    assert res.exit_code == 0, res.output


def test_data_synthetic_refuses_an_impossible_disjoint_heldout(tmp_path):
    # math level 0 has 25 distinct prompts: 32 disjoint held-out prompts cannot exist (this used to loop forever)
    res = runner.invoke(app, ["data", "synthetic", "--out", str(tmp_path / "d"), "--per-domain", "10",
                              "--test-per-domain", "32", "--heldout", "disjoint"])
    assert res.exit_code == 2 and "only 25 distinct prompts" in res.output, res.output


def test_plugin_project_dir_is_importable_for_policies_validate(tmp_path):
    """The README's `campaign policies validate policy/brevity.yaml`: the plugin module sits in the project
    directory (the folder above policy/), which the console script puts on the import path."""
    proj = tmp_path / "proj"
    (proj / "policy").mkdir(parents=True)
    (proj / "wt_readme_plugin.py").write_text(
        "from policies import register_scorer, signals\nfrom policies.scorers import Scorer\n\n"
        "@register_scorer('wt_readme_length')\nclass WtReadmeLength(Scorer):\n    reads = ('response_mask',)\n\n"
        "    def score(self, batch):\n        return signals.response_length(batch)\n")
    (proj / "policy" / "short.yaml").write_text(yaml.safe_dump({
        "name": "short", "mechanism": "select", "plugins": ["wt_readme_plugin"], "scorer": {"name": "wt_readme_length"},
        "actuator": {"name": "topk_fraction", "params": {"fraction": 0.4, "largest": False, "scope": "per_group"}}}))
    res = runner.invoke(app, ["policies", "validate", str(proj / "policy" / "short.yaml"), "--rollout-n", "8"])
    assert res.exit_code == 0 and "ok" in res.output, res.output
    res = runner.invoke(app, ["policies", "validate", str(proj / "policy" / "short.yaml"), "--rollout-n", "0"])
    assert res.exit_code == 2 and "--rollout-n" in res.output


# --- status: driver and ETA (pure) -----------------------------------------------------------------


def _row(state: str, owner: str = "", expires: float = 0.0):
    from orchestrator.engine.ledger.base import RunRow

    return RunRow(campaign="c", run_key=state + owner, run_id="r", state=state, order=0, gpus=0, spec_json="{}",
                  lease_owner=owner, lease_expires=expires)


def test_driver_status_tells_driving_idle_and_done():
    from orchestrator.progress import driver_status

    assert driver_status([_row("recorded")], now=100)["state"] == "done"
    assert driver_status([_row("queued")], now=100)["state"] == "idle"  # pending, nobody holds it: resume
    assert driver_status([_row("queued", "h:1", 90.0)], now=100)["state"] == "idle"  # expired lease
    d = driver_status([_row("training", "h:1", 130.0)], now=100)
    assert d == {"state": "driving", "owner": "h:1", "lease_left_s": 30.0}
    assert driver_status([_row("queued")], now=100, driver=("h:2", 160.0))["owner"] == "h:2"


def _att(stage: str, started: float, ended: float | None, status: str = "succeeded") -> Attempt:
    """A ledger attempt with only what the code under test reads set."""
    return Attempt(id=0, campaign="c", run_key="k", attempt=1, stage=stage, submission_id="s", started_at=started,
                   ended_at=ended, status=AttemptStatus(status), reason="", failure_class="")


def test_eta_from_finished_attempts():
    from orchestrator.progress import eta_seconds

    att = [_att("train", 0, 30, "succeeded"),
           _att("train", 0, 50, "succeeded"),
           _att("evaluate", 0, 10, "succeeded"),
           _att("train", 0, 999, "failed")]
    rows = [_row("queued"), _row("trained"), _row("recorded")]
    # queued: median train 40 + eval 10; trained: eval 10 -> 60 s of work on 2 parallel jobs
    assert eta_seconds(rows, att, parallel=2) == 30.0
    assert eta_seconds(rows, att[:2], parallel=2) is None  # no evaluate attempt finished yet: unknown, not 0


@pytest.mark.parametrize("override,hint", [("seed=[1,2]", "did you mean `seeds`"),
                                           ("+sedes=[1,2]", "did you mean 'seeds'"),
                                           ("+compute.gpus_pernode=1", "did you mean 'gpus_per_node'")])
def test_override_mistakes_suggest_the_nearest_key(override, hint):
    with pytest.raises(SpecError, match=re.escape(hint)):
        load_campaign(REPO / "campaigns" / "demo.yaml", [override])


@pytest.mark.parametrize("parts", [("runs", "..", "..", "escape"), ("results", "/etc", "x"), ("runs", "a/../../../b")])
def test_paths_the_tool_writes_stay_inside_the_work_dir(parts, tmp_path):
    from orchestrator.engine.stages import StageConfigError, inside

    with pytest.raises(StageConfigError, match="outside the work directory"):
        inside(tmp_path / "w", *parts)
    assert inside(tmp_path / "w", "runs", "demo", "abc") == (tmp_path / "w" / "runs" / "demo" / "abc").resolve()


def test_a_single_file_plugin_is_staged_as_a_package_for_py_modules(tmp_path, monkeypatch):
    """Ray's job client uploads py_modules entries as directories: `m.py` goes as the package `m/`."""
    from orchestrator.engine.plugins import plugin_names, plugin_paths

    (tmp_path / "proj").mkdir()
    (tmp_path / "proj" / "wt_stage_probe.py").write_text("X = 1\n")
    monkeypatch.syspath_prepend(str(tmp_path / "proj"))
    names = plugin_names([{"plugins": ["wt_stage_probe"]}, {"plugins": "wt_stage_probe"}, {}])
    assert names == ["wt_stage_probe"]
    (staged,) = plugin_paths(names, tmp_path / "w" / "plugins")
    assert Path(staged).name == "wt_stage_probe" and (Path(staged) / "__init__.py").read_text() == "X = 1\n"
    assert plugin_paths(["policies", "yaml"], tmp_path / "w" / "plugins") == []  # own and installed: not shipped


def test_gpu_runs_are_refused_on_the_local_head_and_a_model_without_room_at_plan(tmp_path):
    """`submit` without --ray-address runs on the work dir's local head (no GPUs); `plan` checks each run against
    the declared nodes (GPUs per node × nnodes), not the cluster's total; a local backend cannot span nodes."""
    proj = _project(tmp_path, {"backend": "noop", "models": ["one"],
                               "compute": {"nodes": 2, "gpus_per_node": 4, "hours_per_run": 0.01}})
    (proj.parent / "model").mkdir()
    for name, per, nn in (("one", 1, 1), ("wide", 4, 3), ("fat", 8, 1)):
        (proj.parent / "model" / f"{name}.yaml").write_text(yaml.safe_dump(
            {"name": name, "path": "builtin:tiny_qwen2", "gpus_per_node": per, "nnodes": nn}))
    wd = tmp_path / "wd"
    res = _submit(proj, wd)
    assert res.exit_code == 2 and "local head, which has no GPUs" in res.output and "--ray-address" in res.output
    _nothing_written(wd)
    spec = yaml.safe_load(proj.read_text())
    spec.update(models=["wide", "fat"], compute={"nodes": 2, "gpus_per_node": 4, "hours_per_run": 0.01})
    proj.write_text(yaml.safe_dump(spec))
    res = runner.invoke(app, ["plan", str(proj)])  # 8 GPUs in total would hold either; no 3 or 8-GPU node does
    assert res.exit_code == 2
    assert "'wide': a run needs 3 node(s) × 4 GPU(s)" in res.output and "'fat': a run needs 8 GPU(s) on one node" \
        in res.output
    spec.update(backend="local", models=["wide"], compute={"nodes": 3, "gpus_per_node": 4, "hours_per_run": 0.01})
    proj.write_text(yaml.safe_dump(spec))
    res = runner.invoke(app, ["plan", str(proj)])
    assert res.exit_code == 2 and "nnodes: 3, but the 'local' backend trains on one node only" in res.output
    (proj.parent / "model" / "wide.yaml").write_text(yaml.safe_dump({"name": "wide", "path": "x", "gpus": 8}))
    res = runner.invoke(app, ["plan", str(proj)])
    assert res.exit_code == 2 and "key 'gpus': ambiguous" in res.output and "gpus_per_node" in res.output
