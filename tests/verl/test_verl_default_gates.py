"""A verl CPU campaign as a user writes it (issue 24): `campaigns/demo_verl.yaml` (baseline and gfpo × 2 seeds,
verl's own trainer) copied outside the repo and submitted to a Ray head started by hand (the suite's shared
`ray start --head` with token auth), at the suite's DEFAULT health gates (parse rate >= 0.5, truncation <= 0.2).

What it proves: every run is recorded at the default gates (the verl recipe starts from the warmed-up base model);
MLflow holds verl's own training metrics per step for every cell (kept_frac, grad_norm, scores); the report's
intervention check sees gfpo act (kept fraction < 1) and flags nobody; then changing only a gate and a
generation limit re-evaluates all four runs without retraining (checkpoint files untouched, one train execution)
and the records carry the new evaluation hash.

Cost: about 4 verl launches + 8 evaluations, ~10 min of both cores (the suite's largest single test)."""

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

REPO = Path(__file__).resolve().parents[2]
CAMPAIGN = str(Path(sys.executable).with_name("campaign"))

pytestmark = [pytest.mark.slow, pytest.mark.timeout(2400)]


def _submit(camp: Path, wd: Path, addr: str, env: dict[str, str], log: Path) -> subprocess.CompletedProcess:
    return subprocess.run([CAMPAIGN, "submit", str(camp), "--ray-address", addr, "--workdir", str(wd),
                           "--max-parallel", "2"], env=env, cwd=camp.parent, capture_output=True, text=True,
                          timeout=2000)


def test_verl_campaign_at_default_gates_streams_metrics_and_reevaluates_on_a_gate_change(tmp_path, head):
    from analysis.intervention import flag_policies, run_summary, runs_from_dir
    from analysis.records import read_records
    from evaluation.benchmark_data import write_manifest
    from evaluation.settings import evaluation_hash
    from orchestrator import tracking
    from orchestrator.ledger import open_ledger
    from orchestrator.session import plan
    from orchestrator.training.synthetic import write_eval_fixtures

    addr, tok = head
    env = {**os.environ, "RAY_AUTH_TOKEN_PATH": str(tok), "RAY_AUTH_MODE": "token"}
    wd = tmp_path / "wd"
    spec = yaml.safe_load((REPO / "campaigns" / "demo_verl.yaml").read_text())
    assert "gates" not in spec["evaluation"]  # the suite's defaults, as shipped
    paths = write_eval_fixtures(wd / "data" / "eval", seed=42, n_items=spec["evaluation"]["fixture_items"],
                                suite="db12")
    write_manifest(wd / "data" / "eval", sorted(paths), kind="fixture")  # as `campaign demo` does
    project = tmp_path / "project"  # the user's own folder, outside the repo
    project.mkdir()
    camp = project / "demo_verl.yaml"
    shutil.copy(REPO / "campaigns" / "demo_verl.yaml", camp)

    res = _submit(camp, wd, addr, env, tmp_path / "submit1.log")
    assert res.returncode == 0, (res.stdout + res.stderr)[-4000:]
    led = open_ledger(wd)
    runs = led.runs("demo_verl")
    assert len(runs) == 4 and {r.state for r in runs} == {"recorded"}, [(r.run_id, r.state, r.reason) for r in runs]
    run_id_of = {r.run_key: r.run_id for r in runs}
    led.close()

    # MLflow: verl's per-step training metrics in every cell
    ml = tracking.client(tracking.default_uri(wd))
    cells = ml.search_runs([ml.get_experiment_by_name("demo_verl").experiment_id])
    assert len(cells) == 4
    for c in cells:
        grad = ml.get_metric_history(c.info.run_id, "train/actor/grad_norm")
        assert sorted(m.step for m in grad) == [1, 2], c.info.run_name
        assert len(ml.get_metric_history(c.info.run_id, "train/critic/score/mean")) == 2
        if "/gfpo/" in run_id_of[c.data.tags[tracking.RUN_KEY_TAG]]:
            kept = ml.get_metric_history(c.info.run_id, "train/windtunnel/kept_frac")
            assert [m.value for m in sorted(kept, key=lambda m: m.step)] == [0.75, 0.75]  # 3 of each 4 kept

    # the report's intervention check: gfpo acted, nobody flagged
    records = wd / "results" / "demo_verl" / "records.parquet"
    df = read_records(records)
    flags = flag_policies(run_summary(runs_from_dir(df, wd / "runs" / "demo_verl")))
    gfpo = flags[flags["policy"] == "gfpo"].iloc[0]
    assert gfpo["kept_frac"] == pytest.approx(0.75) and gfpo["flag"] == "", flags.to_dict("records")
    assert (flags["flag"] == "").all(), flags[["policy", "flag", "reason"]]
    first_hash = set(df["eval_hash"])
    assert len(first_hash) == 1 and "" not in first_hash

    # change only the evaluation: a gate and the generation limit
    ckpts = {}
    for d in (wd / "runs" / "demo_verl").iterdir():
        m = json.loads((d / "train_done.json").read_text())
        ckpts[d.name] = {p: p.stat().st_mtime_ns for c in m["checkpoints"] for p in Path(c["path"]).iterdir()
                         if p.is_file()}
    spec["evaluation"]["gates"] = {"min_parse_rate": 0.4}
    spec["evaluation"]["max_gen_toks"] = 28
    camp.write_text(yaml.safe_dump(spec, sort_keys=False))
    res = _submit(camp, wd, addr, env, tmp_path / "submit2.log")
    assert res.returncode == 0, (res.stdout + res.stderr)[-4000:]
    assert "4 to re-evaluate" in res.stdout, res.stdout
    for d in (wd / "runs" / "demo_verl").iterdir():
        assert {p: p.stat().st_mtime_ns for p in ckpts[d.name]} == ckpts[d.name], d.name  # not retrained
    led = open_ledger(wd)
    attempts = led.attempts("demo_verl")
    assert {r.state for r in led.runs("demo_verl")} == {"recorded"}
    led.close()
    for key in ckpts:  # one successful training per run, two evaluations
        ok = [a["stage"] for a in attempts if a["run_key"] == key and a["status"] == "succeeded"]
        assert ok.count("train") == 1 and ok.count("evaluate") == 2, (key, ok)
    df2 = pd.read_parquet(records)
    _, planned = plan(camp)
    want = evaluation_hash(planned[0].eval_key, wd / "data" / "eval")
    assert set(df2["eval_hash"]) == {want} and want not in first_hash
