"""Pruning on intermediate checkpoints through the real orchestrator (slow): a local Ray head, the SQLite
ledger, the local CPU GRPO backend on the tiny model, the evaluator on the shipped `synth_dev` suite."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import optuna
import pytest
import yaml

from analysis.aggregates import run_table
from analysis.records import read_records
from evaluation.suite import load_suite
from orchestrator.engine.ledger import open_ledger
from tuning.request import TuneRequest
from tuning.runner import tune
from wtcommon.polling import wait_until

REPO = Path(__file__).resolve().parents[2]
# the full trial and its reference report intermediate values at steps 4, 8, 12, 16; the pruned trial must still
# be training when it is pruned at 8: alone on an idle machine it was stopped 1 to 4 steps after its pruning
# point, so 12 steps of margin for a loaded one
STEPS, SAVE, PRUNE_AT = 20, 4, 8


def _tree(tmp_path: Path) -> Path:
    """campaigns/ with the repo's policies, tiny model and cpu_tiny recipe (checkpoints every SAVE steps)."""
    root = tmp_path / "campaigns"
    shutil.copytree(REPO / "campaigns" / "policy", root / "policy")
    (root / "model").mkdir()
    shutil.copy(REPO / "campaigns" / "model" / "tiny_qwen2.yaml", root / "model")
    (root / "recipe").mkdir()
    recipe = yaml.safe_load((REPO / "campaigns" / "recipe" / "cpu_tiny.yaml").read_text())
    # same data + warm-up as cpu_tiny, so the cached base model is reused; no held-out eval before the end
    recipe["trainer"].update({"val_before_train": False, "eval_freq": 1000, "val_samples": 0})
    (root / "recipe" / "cpu_tiny.yaml").write_text(yaml.safe_dump(recipe, sort_keys=False))
    campaign = yaml.safe_load((REPO / "campaigns" / "tune_demo.yaml").read_text())
    campaign.update({"name": "prune", "policies": ["baseline", "gfpo"], "seeds": [1], "steps": STEPS,
                     "save_freq": SAVE})
    campaign["evaluation"]["limit"] = 8  # 8 items per dev benchmark: intermediate evaluations stay quick
    (root / "prune.yaml").write_text(yaml.safe_dump(campaign, sort_keys=False))
    return root


@pytest.mark.slow
def test_a_trial_is_pruned_at_an_intermediate_checkpoint_while_its_job_trains(tmp_path, head, monkeypatch):
    from orchestrator.engine.executor import RayJobsExecutor

    address, tok = head  # the session's shared head (--ray-address + the environment's token)
    monkeypatch.setenv("RAY_AUTH_TOKEN_PATH", str(tok))
    monkeypatch.setenv("RAY_AUTH_MODE", "token")
    root, work = _tree(tmp_path), tmp_path / "w"
    url = f"sqlite:///{work / 'ledger.db'}"
    req = dict(campaign=root / "prune.yaml", policies=["gfpo"], workdir=work, run_timeout_s=600, ray_address=address)
    # 1. trial 0 (the YAML's k=3) runs full length, reporting its intermediate values, never pruned
    rep = tune(TuneRequest(**req, trials=1, prune=False))
    assert rep["gfpo"]["states"] == {"COMPLETE": 1}
    # 2. trial 1 (k=2, different runs) under a pruner that must prune at the first step >= PRUNE_AT
    study = optuna.load_study(study_name="prune:gfpo", storage=url)
    study.enqueue_trial({"actuator.k": 2})
    rep = tune(TuneRequest(**req, trials=2, pruner=optuna.pruners.ThresholdPruner(lower=1e9, n_warmup_steps=PRUNE_AT)))
    ledger = open_ledger(url)
    rows = {r.run_id: r for r in ledger.runs("prune.tune.gfpo@synth_dev")}
    pruned = rows["prune/tiny_qwen2/gfpo~t1/s1"]
    executor = RayJobsExecutor(address, token_file=tok)
    # stop_job asks Ray to stop it; the job reaches STOPPED moments later
    wait_until(lambda: executor.status(pruned.submission_id).state != "RUNNING", 60, 0.5)
    status = executor.status(pruned.submission_id)

    assert rep["gfpo"]["trials"] == 2 and rep["gfpo"]["states"] == {"COMPLETE": 1, "PRUNED": 1}
    study = optuna.load_study(study_name="prune:gfpo", storage=url)
    full, cut = study.trials
    # the full-length trial: complete, intermediate values at every intermediate checkpoint's training step
    assert full.state == optuna.trial.TrialState.COMPLETE and full.params == {"actuator.k": 3}
    assert sorted(full.intermediate_values) == list(range(SAVE, STEPS, SAVE))
    t0, ref = rows["prune/tiny_qwen2/gfpo~t0/s1"], rows["prune/tiny_qwen2/baseline/s1"]
    assert t0.state == "recorded" and ref.state == "recorded"
    # paired: the value at step s is trial - reference on DEV-3 at s, as the evaluate stage's records score them
    suite = load_suite("synth_dev")
    dev = {name: run_table(read_records(row.outputs["records"], suite=suite), suite).set_index("step")["DEV-3"]
           for name, row in (("t0", t0), ("ref", ref))}
    for step, value in full.intermediate_values.items():
        assert value == pytest.approx(dev["t0"][step] - dev["ref"][step], abs=1e-9)
    # the pruned trial: values at the training steps up to the pruning point, then stopped there
    assert cut.state == optuna.trial.TrialState.PRUNED and cut.params == {"actuator.k": 2}
    assert sorted(cut.intermediate_values) == [SAVE, PRUNE_AT]
    assert cut.user_attrs["pruned_at_step"] == PRUNE_AT
    assert pruned.state == "cancelled" and pruned.reason == f"pruned by tuning trial 1 at step {PRUNE_AT}"
    assert status.state == "STOPPED"  # the Ray job was stopped by the scheduler's cancel path
    train = work / "tune" / "runs" / "prune.tune.gfpo@synth_dev" / pruned.run_key / "train"
    steps = [json.loads(line)["step"] for line in (train / "metrics.jsonl").read_text().splitlines() if line.strip()]
    assert PRUNE_AT <= max(steps) < STEPS  # training was cut short, after the pruning point
    assert not (train.parent / "train_done.json").exists()
    # the study's best (the only complete trial) becomes a named policy a follow-up campaign plans with
    from orchestrator.engine.grid import expand
    from orchestrator.engine.spec import load_campaign
    from tuning.report import report, write_tuned_policy

    path = write_tuned_policy(report(url, "prune")["gfpo"], "gfpo", root / "policy")
    spec = load_campaign(root / "prune.yaml", ["policies=[baseline,gfpo_tuned]"])
    runs = [r for r in expand(spec, data_root=tmp_path) if r.policy.name == path.stem]
    assert [r.policy.cfg["actuator"]["params"]["k"] for r in runs] == [3] and runs[0].reference == "baseline"
