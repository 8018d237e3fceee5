"""Equal-budget tuning (tuning/ + `campaign tune`)."""

from __future__ import annotations

import math
import shutil
import sqlite3
from pathlib import Path

import optuna
import pandas as pd
import pytest
import yaml

from orchestrator.engine.grid import expand
from orchestrator.engine.spec import load_campaign
from policies import load_policy
from tuning.intermediate import paired_score
from tuning.report import equal_budgets, report, write_tuned_policy
from tuning.request import TuneError, TuneRequest
from tuning.runner import tune
from tuning.space import apply_params, default_params, search_space, suggest
from tuning.validation import validation_run

REPO = Path(__file__).resolve().parents[2]


def _policy(name: str) -> dict:
    return yaml.safe_load((REPO / "campaigns" / "policy" / f"{name}.yaml").read_text())


def _val_suite(path: Path) -> Path:
    path.write_text(yaml.safe_dump({
        "name": "val_tiny", "version": "1", "domains": ["math", "logic"],
        "benchmarks": [{"id": "val_math", "domain": "math", "n_items": 8, "grader": "math"},
                       {"id": "val_logic", "domain": "logic", "n_items": 8, "grader": "knights_knaves"}],
        "aggregates": [{"name": "VAL", "kind": "mean", "benchmarks": "all"}],
    }))
    return path


def test_search_space_types_and_defaults_follow_the_yaml():
    gfpo, mix = _policy("gfpo"), _policy("reward_gap")
    sg, sm = search_space(gfpo, "gfpo"), search_space(mix, "reward_gap")
    assert sg["actuator.k"]["_kind"] == "int"
    assert sm["actuator.temperature"]["_kind"] == "float" and sm["actuator.temperature"]["log"] is True
    assert default_params(gfpo, sg) == {"actuator.k": 3}
    fixed = optuna.trial.FixedTrial({"actuator.k": 2})
    assert suggest(fixed, sg) == {"actuator.k": 2}
    cfg = apply_params(gfpo, {"actuator.k": 2})
    assert cfg["actuator"]["params"]["k"] == 2 and gfpo["actuator"]["params"]["k"] == 3  # copy, not in place
    study = optuna.create_study(sampler=optuna.samplers.RandomSampler(seed=1))
    for _ in range(20):
        t = study.ask()
        p = suggest(t, sm)
        assert 0.05 <= p["actuator.temperature"] <= 2.0 and 0.0 <= p["actuator.floor"] <= 0.2
        load_policy(apply_params(mix, p))  # every suggestion is a valid policy
        study.tell(t, 0.0)


def test_policy_without_search_space_is_refused():
    with pytest.raises(TuneError, match="no search_space"):
        search_space(_policy("baseline"), "baseline")


def test_paired_score_uses_final_step_and_common_seeds():
    trial = pd.DataFrame({"seed": [1, 1, 2, 2, 3], "step": [4, 8, 4, 8, 8], "VAL": [0.0, 50.0, 0.0, 40.0, 99.0]})
    ref = pd.DataFrame({"seed": [1, 2], "step": [8, 8], "VAL": [45.0, 41.0]})
    score, n = paired_score(trial, ref, "VAL")
    assert n == 2 and score == pytest.approx(((50 - 45) + (40 - 41)) / 2)
    ref_nan = ref.assign(VAL=[45.0, float("nan")])
    assert math.isnan(paired_score(trial, ref_nan, "VAL")[0])


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    root = tmp_path / "campaigns"
    shutil.copytree(REPO / "campaigns" / "policy", root / "policy")
    (root / "model").mkdir()
    (root / "model" / "m0.yaml").write_text("name: m0\npath: hf/m0\n")
    (root / "recipe").mkdir()
    (root / "recipe" / "noop.yaml").write_text("name: noop\nsleep_s: 0.1\n")
    (root / "small.yaml").write_text(yaml.safe_dump({
        "name": "small", "backend": "noop", "models": ["m0"], "recipe": "noop", "steps": 2,
        "policies": ["baseline", "gfpo", "static", "reward_gap"], "seeds": [1, 2],
        "compute": {"nodes": 1, "gpus_per_node": 0, "gpus_per_run": 0, "hours_per_run": 0.01},
        "retries": {"max_attempts": 1, "backoff_s": 0.1, "backoff_max_s": 0.2},
    }))
    return root


def test_tuning_refuses_the_test_suite_as_validation(tree, tmp_path):
    req = TuneRequest(campaign=tree / "small.yaml", policies=["gfpo"], trials=1, workdir=tmp_path / "w")
    with pytest.raises(TuneError, match="no validation suite"):
        tune(req)
    req.validation_suite = "db12"
    with pytest.raises(TuneError, match="is the final test suite"):
        tune(req)


def test_trial_runs_change_only_what_the_trial_changes(tree, tmp_path):
    spec = load_campaign(tree / "small.yaml")
    runs = expand(spec, data_root=tmp_path)
    g = next(r for r in runs if r.policy.name == "gfpo" and r.seed == 1)
    b = next(r for r in runs if r.policy.name == "baseline" and r.seed == 1)
    val = str(_val_suite(tmp_path / "val.yaml"))
    t1 = validation_run(g, "small.tune.gfpo", val, {}, apply_params(g.policy.cfg, {"actuator.k": 2}), trial=1)
    t2 = validation_run(g, "small.tune.gfpo", val, {}, apply_params(g.policy.cfg, {"actuator.k": 2}), trial=5)
    t3 = validation_run(g, "small.tune.gfpo", val, {}, apply_params(g.policy.cfg, {"actuator.k": 4}), trial=2)
    ref = validation_run(b, "small.tune.gfpo", val, {})
    assert t1.run_key == t2.run_key != t3.run_key  # same params -> same training, trained once
    assert t1.policy.cfg["actuator"]["params"]["k"] == 2 and "search_space" not in t1.policy.cfg
    assert t1.suite == val and t1.evaluation.all_checkpoints is True
    assert ref.run_key == validation_run(b, "other", val, {}).run_key  # references shared by all trials
    assert t1.run_id == "small/m0/gfpo~t1/s1"


def test_tuned_yaml_is_a_policy_a_follow_up_campaign_uses(tree, tmp_path):
    entry = {"policy_cfg": _policy("gfpo"), "best_params": {"actuator.k": 2}, "best_value": 1.5, "default_value": 0.5,
             "study": "small:gfpo", "best_trial": 3, "trials": 4, "aggregate": "VAL", "validation_suite": "val_tiny"}
    path = write_tuned_policy(entry, "gfpo", tree / "policy")
    assert path.name == "gfpo_tuned.yaml"
    cfg = yaml.safe_load(path.read_text())
    assert cfg["name"] == "gfpo_tuned" and "search_space" not in cfg
    assert load_policy(cfg).name == "gfpo_tuned"
    spec = load_campaign(tree / "small.yaml", ["policies=[baseline,gfpo_tuned]"])
    runs = [r for r in expand(spec, data_root=tmp_path) if r.policy.name == "gfpo_tuned"]
    assert len(runs) == 2 and all(r.policy.cfg["actuator"]["params"]["k"] == 2 for r in runs)
    assert all(r.reference == "baseline" for r in runs)
    with pytest.raises(TuneError, match="no completed trial"):
        write_tuned_policy({**entry, "best_params": {}}, "gfpo", tree / "policy")


def test_cli_tune_bad_input_exits_2(tree, tmp_path, campaign_cli):
    p = campaign_cli(["tune", str(tree / "small.yaml"), "--policy", "gfpo", "--trials", "1",
                      "--workdir", str(tmp_path / "w")])
    assert p.returncode == 2 and "no validation suite" in p.stderr and "Traceback" not in p.stderr
    p = campaign_cli(["tune", str(tree / "small.yaml"), "--report", "--workdir", str(tmp_path / "w")])
    assert p.returncode == 2 and "no tuning study" in p.stderr


@pytest.mark.slow
def test_equal_budget_studies_through_the_real_orchestrator(tree, tmp_path, head, monkeypatch):
    """noop backend through real Ray Jobs + SQLite ledger: each policy gets exactly the budget,
    the studies sit in the ledger database, every run is a ledger row; noop scores are NaN, so
    every trial fails loudly with the reason (missing is never 0)."""
    address, tok = head  # the session's shared head (--ray-address + the environment's token)
    monkeypatch.setenv("RAY_AUTH_TOKEN_PATH", str(tok))
    monkeypatch.setenv("RAY_AUTH_MODE", "token")
    val = _val_suite(tmp_path / "val.yaml")
    work = tmp_path / "w"
    rep = tune(TuneRequest(campaign=tree / "small.yaml", policies=["gfpo", "reward_gap"], trials=2, workdir=work,
                           validation_suite=str(val), seeds=[1], run_timeout_s=240, max_parallel=2,
                           ray_address=address))
    assert set(rep) == {"gfpo", "reward_gap"} and equal_budgets(rep)
    assert all(r["trials"] == 2 and r["states"] == {"FAIL": 2} for r in rep.values())
    con = sqlite3.connect(work / "ledger.db")
    tables = {r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type='table'")}
    assert {"runs", "studies", "trials"} <= tables
    rows = con.execute("SELECT campaign, run_id, state FROM runs WHERE campaign LIKE "
                       "'small.tune.%@val_tiny'").fetchall()
    con.close()
    assert {r[2] for r in rows} == {"recorded"}
    ids = {r[1] for r in rows}
    assert "small/m0/baseline/s1" in ids and "small/m0/static/s1" in ids
    assert any(i.startswith("small/m0/gfpo~t0/") for i in ids)  # trial 0 = the YAML's own setting
    study = optuna.load_study(study_name="small:gfpo", storage=f"sqlite:///{work / 'ledger.db'}")
    assert study.trials[0].user_attrs.get("is_default") is True
    assert "NaN" in study.trials[0].user_attrs["reason"]
    assert report(f"sqlite:///{work / 'ledger.db'}", "small")["gfpo"]["trials"] == 2


def test_a_tuning_campaign_is_submitted_and_collected_by_the_campaign_path(tree, tmp_path):
    """Issue 23: the tuner is a client of the campaign path. Its runs are registered by `campaign.submit` under
    the tuning campaign's name (with the campaign's spec); a trial's records, on the validation suite, are read
    back for its run keys only without writing (`Session.records_frame`), and the tuning campaign's records file
    is collected like any campaign's, each run read against its own suite (not the default test suite)."""
    from orchestrator.campaign import submit
    from orchestrator.engine.stages import stage_evaluate, stage_train
    from orchestrator.engine.workdir import Workdir
    from orchestrator.session import Session

    (tree / "recipe" / "noop.yaml").write_text("name: noop\nsimulate: {base: 50.0}\n")  # scores, not NaN
    spec = load_campaign(tree / "small.yaml")
    val = str(_val_suite(tmp_path / "val.yaml"))
    camp = "small.tune.gfpo@val_tiny"
    base = [r for r in expand(spec, data_root=tmp_path) if r.policy.name in ("baseline", "gfpo")]
    refs = [validation_run(r, camp, val, {}) for r in base if r.policy.name == "baseline"]
    trial = [validation_run(r, camp, val, {}, r.policy.cfg, trial=0) for r in base if r.policy.name == "gfpo"]
    (tmp_path / "w").mkdir()
    tune_wd = Workdir(tmp_path / "w").sub("tune")
    sess = Session(tune_wd.root, ledger_url=tune_wd.ledger_url)
    diff, _ = submit(sess, spec, refs + trial, campaign=camp)
    assert len(diff.new) == 4 and sess.ledger.runs(spec.name) == []  # the tuning campaign's rows only
    assert sess.records_frame(camp) is None  # nothing recorded yet
    led = sess.ledger
    for r in led.runs(camp):  # the states a driver walks a run through
        led.transition(camp, r.run_key, "queued")
        led.start_attempt(camp, r.run_key, "queued", "training", "train", f"sid-{r.run_key}")
        stage_train(r.spec, tune_wd.root)
        led.transition(camp, r.run_key, "trained")
        led.start_attempt(camp, r.run_key, "trained", "evaluating", "evaluate", f"sid-{r.run_key}-e")
        records = stage_evaluate(r.spec, tune_wd.root)["records"]
        led.transition(camp, r.run_key, "recorded", outputs={"records": records})
    mine = sess.records_frame(camp, {r.run_key for r in trial})
    assert set(mine["run_key"]) == {r.run_key for r in trial} and set(mine["benchmark"]) == {"val_math", "val_logic"}
    assert not (tune_wd.root / "results").exists()  # reading a trial's records writes nothing
    out = sess.collect_records(camp)
    assert out == tune_wd.root / "results" / camp / "records.parquet"
    assert set(pd.read_parquet(out)["run_key"]) == {r.run_key for r in refs + trial}
    sess.close()
