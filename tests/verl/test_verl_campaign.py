"""verl for real (issue 11): a 2 policies x 2 seeds campaign with the `verl_cpu_tiny` recipe, submitted with
`campaign submit` to a local Ray head, trains through verl's own `main_ppo` + `windtunnel_sync` + the plugin's
`hf` rollout, merges verl's checkpoints to HF, evaluates them and records every run. Slow (CPU verl).

The head is the suite's shared one (tests/conftest.py `head`): a `ray start --head` with token auth
(`orchestrator/executor/local_head.py`), reached only through `--ray-address` and the token, as a user submits
to a cluster they started by hand; so this run is also the "cluster started by hand: no ray.init error" check."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
import yaml

from policies.verl.reward_audit import AUDIT_ENV, read_calls

REPO = Path(__file__).resolve().parents[2]
CAMPAIGN = str(Path(sys.executable).with_name("campaign"))

pytestmark = [pytest.mark.slow, pytest.mark.timeout(2400)]  # several CPU verl runs on 2 cores


def _tree(tmp: Path) -> Path:
    root = tmp / "campaigns"
    for group in ("policy", "recipe", "model", "suite"):
        shutil.copytree(REPO / "campaigns" / group, root / group)
    # every run's reward-loop workers record each compute_score call (policies/verl/reward_audit.py)
    recipe = yaml.safe_load((root / "recipe" / "verl_cpu_tiny.yaml").read_text())
    recipe["env"][AUDIT_ENV] = str(tmp / "reward_calls")
    (root / "recipe" / "verl_cpu_tiny.yaml").write_text(yaml.safe_dump(recipe, sort_keys=False))
    # GFPO keeping ONE rollout per group of 4: its weights must change verl's actor update
    gfpo = yaml.safe_load((root / "policy" / "gfpo.yaml").read_text())
    gfpo.update(name="gfpo_k1", actuator={"name": "gfpo", "params": {"k": 1, "metric": "efficiency"}})
    gfpo.pop("search_space", None)
    (root / "policy" / "gfpo_k1.yaml").write_text(yaml.safe_dump(gfpo))
    demo = yaml.safe_load((REPO / "campaigns" / "demo.yaml").read_text())
    demo.update(name="vcpu", backend="verl", recipe="verl_cpu_tiny", policies=["baseline", "gfpo_k1"], seeds=[1, 2],
                steps=2, save_freq=1, baselines={"select": "baseline", "reweight": "baseline", "mix": "baseline"})
    # a 2-layer model after 2 verl steps: the demo's relaxed health gates (the suite's 0.5 parse rate is for real
    # models)
    demo["evaluation"] = {**demo["evaluation"], "gates": {"min_parse_rate": 0.2, "max_truncation_rate": 0.5}}
    (root / "vcpu.yaml").write_text(yaml.safe_dump(demo, sort_keys=False))
    return root / "vcpu.yaml"


def _metrics(path: Path) -> dict[int, dict]:
    out = {}
    for line in path.read_text().splitlines():
        obj = json.loads(line)
        out[int(obj["step"])] = obj.get("data") or {}
    return out


def test_verl_campaign_trains_isolated_runs_and_records_them(tmp_path, head):
    from evaluation.benchmark_data import write_manifest
    from orchestrator.training.synthetic import write_eval_fixtures

    addr, tok = head
    env = {**os.environ, "RAY_AUTH_TOKEN_PATH": str(tok), "RAY_AUTH_MODE": "token"}
    wd = tmp_path / "wd"
    paths = write_eval_fixtures(wd / "data" / "eval", seed=42, n_items=16, suite="db12")
    write_manifest(wd / "data" / "eval", sorted(paths), kind="fixture")  # as `campaign demo` does
    camp = _tree(tmp_path)
    p = subprocess.run([CAMPAIGN, "submit", str(camp), "--ray-address", addr, "--workdir", str(wd), "--max-parallel",
                        "2"],
                       env=env, cwd=REPO, capture_output=True, text=True, timeout=1500)
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]

    from orchestrator.ledger import open_ledger

    led = open_ledger(wd)
    runs = led.runs("vcpu")
    led.close()
    assert len(runs) == 4 and {r.state for r in runs} == {"recorded"}, [(r.run_id, r.state) for r in runs]

    run_dirs = sorted((wd / "runs" / "vcpu").iterdir())
    rt = {d.name: json.loads((d / "train" / "verl_runtime.json").read_text()) for d in run_dirs}
    # isolation: every run had its own Ray runtime and its own TransferQueue controller ...
    assert len({r["gcs_address"] for r in rt.values()}) == 4
    assert len({r["tq_controller_actor_id"] for r in rt.values()}) == 4
    # ... and at least two of them trained at the same time
    spans = sorted((r["started_at"], r["ended_at"]) for r in rt.values())
    assert any(spans[i + 1][0] < spans[i][1] for i in range(len(spans) - 1)), spans

    by_run = {}
    for r in runs:
        d = wd / "runs" / "vcpu" / r.run_key
        manifest = json.loads((d / "train_done.json").read_text())
        assert [c["step"] for c in manifest["checkpoints"]] == [1, 2]  # a checkpoint each step, merged to HF
        for c in manifest["checkpoints"]:
            assert (Path(c["path"]) / "config.json").exists()
        by_run[(r.run_id.split("/")[2], r.run_id.rsplit("/s", 1)[1])] = _metrics(Path(manifest["metrics_path"]))
        assert (d / "records.parquet").exists()
        # submitted to a `ray start --head` cluster with token auth: verl's ray.init never tried to join it
        assert "must not be provided" not in (d / "train" / "train.log").read_text()
    for seed in ("1", "2"):
        base, sel = by_run[("baseline", seed)], by_run[("gfpo_k1", seed)]
        assert sorted(base) == sorted(sel) == [1, 2]
        # the selector's kept fraction is in verl's own logged metrics: 1 of every 4 rollouts
        assert sel[1]["windtunnel/kept_frac"] == pytest.approx(0.25)
        # the weights reached the loss: a different actor update than baseline at the same seed and step
        assert sel[1]["actor/grad_norm"] != pytest.approx(base[1]["actor/grad_norm"], rel=1e-6)
    # compute_score ran exactly once for every rollout of every run (4 runs x 2 steps x 4 prompts x 4 samples),
    # and the audited scores are the ones verl's reward metrics report
    calls = read_calls(camp.parent.parent / "reward_calls")
    steps = [m for run in by_run.values() for m in run.values()]
    assert len(calls) == sum(m["windtunnel/rollouts"] for m in steps) == 4 * 2 * 16
    verl_sum = sum(m["critic/score/mean"] * m["windtunnel/rollouts"] for m in steps)
    assert sum(c["score"] for c in calls) == pytest.approx(verl_sum)
    records = pd.read_parquet(wd / "results" / "vcpu" / "records.parquet")
    assert set(records["policy"]) == {"baseline", "gfpo_k1"} and records["accuracy"].notna().all()
