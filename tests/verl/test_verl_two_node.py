"""verl across two nodes (issue 22): the `verl_cpu_tiny` recipe with `nnodes: 2` on the suite's 3-node local
cluster (logical GPUs), submitted beside a one-node verl run of the same campaign.

What it proves: the two-node run's placement group holds two distinct shared-cluster nodes, its private Ray
runtime spans exactly those (one private node per bundle) and verl's FSDP ranks run on two different Ray nodes;
its checkpoints are merged, evaluated and recorded; the one-node run trains at the same time in a runtime of its
own (different GCS, different TransferQueue controller). Cost: about 250 s of CPU (two verl launches, the
two-node one with two private Ray nodes), on the shared `ray_cluster3`."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from orchestrator.engine.ledger import open_ledger

REPO = Path(__file__).resolve().parents[2]
CAMPAIGN = str(Path(sys.executable).with_name("campaign"))

pytestmark = [pytest.mark.slow, pytest.mark.timeout(2400)]


def _tree(tmp: Path) -> Path:
    root = tmp / "campaigns"
    for group in ("policy", "recipe", "model", "suite"):
        shutil.copytree(REPO / "campaigns" / group, root / group)
    tiny = yaml.safe_load((root / "model" / "tiny_qwen2.yaml").read_text())
    # the same tiny model on two nodes of one logical GPU each (verl's CPU platform names its device GPU)
    (root / "model" / "tiny_2n.yaml").write_text(yaml.safe_dump({**tiny, "name": "tiny_2n", "gpus_per_node": 1,
                                                                 "nnodes": 2}))
    # two ranks of one GPU each share the recipe's 16 sequences per step: 8 per rank, so micro-batches of 8
    recipe = yaml.safe_load((root / "recipe" / "verl_cpu_tiny.yaml").read_text())
    for key in ("actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu",
                "actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu"):
        recipe["overrides"][key] = 8
    (root / "recipe" / "verl_cpu_tiny.yaml").write_text(yaml.safe_dump(recipe, sort_keys=False))
    demo = yaml.safe_load((REPO / "campaigns" / "demo.yaml").read_text())
    demo.update(name="v2n", backend="verl", recipe="verl_cpu_tiny", models=["tiny_2n", "tiny_qwen2"],
                policies=["baseline"], seeds=[1], steps=2, save_freq=2,
                baselines={"select": "baseline", "reweight": "baseline", "mix": "baseline"},
                retries={"max_attempts": 2, "backoff_s": 1, "backoff_max_s": 2},
                compute={"nodes": 3, "gpus_per_node": 4, "hours_per_run": 0.01, "cpus_per_run": 1})
    demo["evaluation"] = {**demo["evaluation"], "fixture_items": 8}  # at the suite's default health gates
    (root / "v2n.yaml").write_text(yaml.safe_dump(demo, sort_keys=False))
    return root / "v2n.yaml"


def test_a_two_node_verl_run_spans_two_nodes_beside_a_one_node_run(ray_cluster3, tmp_path) -> None:
    from evaluation.benchmark_data import write_manifest
    from training.synthetic import write_eval_fixtures

    c = ray_cluster3
    wd = tmp_path / "wd"
    paths = write_eval_fixtures(wd / "data" / "eval", seed=42, n_items=8, suite="db12")
    write_manifest(wd / "data" / "eval", sorted(paths), kind="fixture")
    env = {**os.environ, "RAY_AUTH_TOKEN_PATH": str(c.token_file), "RAY_AUTH_MODE": "token"}
    p = subprocess.run([CAMPAIGN, "submit", str(_tree(tmp_path)), "--workdir", str(wd), "--ray-address", c.address,
                        "--max-parallel", "2"], env=env, cwd=REPO, capture_output=True, text=True, timeout=2000)
    led = open_ledger(wd)
    attempts = led.attempts("v2n")
    if p.returncode != 0:  # say why: each failed attempt's reason and the end of its run's train log
        why = [f"{a.submission_id}: {a.reason[-1500:]}" for a in attempts if a.status == "failed"]
        logs = [f"{d}:\n{d.read_text()[-3000:]}" for d in (wd / "runs" / "v2n").glob("*/train/*.log")]
        pytest.fail("\n".join([p.stdout[-3000:], *why, *logs]))
    runs = {r.run_id.split("/")[1]: r for r in led.runs("v2n")}
    led.close()
    assert {r.state for r in runs.values()} == {"recorded"}, [(k, r.state, r.reason) for k, r in runs.items()]
    two, one = (wd / "runs" / "v2n" / runs[m].run_key for m in ("tiny_2n", "tiny_qwen2"))

    placement = json.loads((two / "train_done.json").read_text())["placement"]
    shared = placement["node_ids"]
    assert placement["nnodes"] == 2 and len(set(shared)) == 2  # two distinct shared-cluster nodes reserved
    private = placement["private_nodes"]
    assert [n["node_id"] for n in private] == shared  # one private node started in each reserved bundle
    rt_two = json.loads((two / "train" / "verl_runtime.json").read_text())
    rt_one = json.loads((one / "train" / "verl_runtime.json").read_text())
    assert rt_two["gcs_address"] == private[0]["gcs"]  # verl ran in the run's own runtime on those nodes
    ranks = rt_two["rank_nodes"]
    assert ranks is not None and len(ranks) == 2 and len(set(ranks)) == 2, ranks  # FSDP ranks on two nodes
    # isolation: the one-node run had a runtime and a TransferQueue of its own, and the two trained at once
    assert rt_one["gcs_address"] != rt_two["gcs_address"]
    assert rt_one["tq_controller_actor_id"] != rt_two["tq_controller_actor_id"]
    trained = {a.run_key: (a.started_at, a.ended_at) for a in attempts
               if a.stage == "train" and a.status == "succeeded"}
    (s1, e1), (s2, e2) = trained[runs["tiny_2n"].run_key], trained[runs["tiny_qwen2"].run_key]
    assert s1 < e2 and s2 < e1, trained  # the stages that trained them ran at the same time
    assert "placement" not in json.loads((one / "train_done.json").read_text())
    # checkpoints merged to HF and evaluated
    for d in (two, one):
        done = json.loads((d / "train_done.json").read_text())
        assert [c["step"] for c in done["checkpoints"]] == [2]
        assert (Path(done["checkpoints"][0]["path"]) / "config.json").exists()
        assert json.loads((d / "eval_done.json").read_text())["rows"] > 0
