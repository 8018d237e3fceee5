"""verl's own vLLM rollout on vLLM's CPU build, in a campaign as a user submits it (issue 48).

`campaigns/demo_verl_vllm.yaml` (baseline and reward_gap_greso: a domain mixer composed with the GRESO curriculum,
seed 1, 2 GRPO steps, `rollout.name: vllm`, evaluated through the vLLM backend) copied outside the repo and
submitted to the suite's shared Ray head, both runs training at once. The mixer run's verl session is SIGKILLed
after its first checkpoint; the scheduler's retry resumes it from `global_step_1`.

What it proves: both runs recorded (trained through vLLM, merged, evaluated through vLLM); every step logs verl's
rollout-vs-actor probability gap and it is small (the weight sync reached the server: a server on stale weights
drifts from the actor after step 1); the mixer's domain counts and the curriculum's prompt ids reach the rollouts;
two runs on one node kept their own weight-transfer sockets; afterwards no process of either run is alive and no
shared-memory segment of theirs is left. Cost: 3 verl launches with a vLLM engine each + 2 vLLM evaluations, about
5-7 min of both cores. The second test makes the weight sync fail for real (verl's own worker extension, whose
in-place reload vLLM's CPU build refuses) and checks the run ends as an infrastructure failure within its bound:
one launch, about 2 min."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
import yaml

from orchestrator.engine.ledger.states import AttemptStatus
from tests.campaign_ledger import kill_after_first_checkpoint, reaped, runs_and_attempts, verl_metrics
from training.rollout_guard import shm_segments
from tests.components import started

REPO = Path(__file__).resolve().parents[2]
CAMPAIGN = str(Path(sys.executable).with_name("campaign"))
pytestmark = [pytest.mark.slow, pytest.mark.timeout(1800)]


def _fixtures(wd: Path, n_items: int) -> None:
    from evaluation.benchmark_data import write_manifest
    from training.synthetic import write_eval_fixtures

    paths = write_eval_fixtures(wd / "data" / "eval", seed=42, n_items=n_items, suite="db12")
    write_manifest(wd / "data" / "eval", sorted(paths), kind="fixture")  # as `campaign demo` does


def _submit(camp: Path, wd: Path, head, log: Path) -> subprocess.Popen:
    addr, tok = head
    env = {**os.environ, "RAY_AUTH_TOKEN_PATH": str(tok), "RAY_AUTH_MODE": "token"}
    with open(log, "w") as fh:
        return subprocess.Popen([CAMPAIGN, "submit", str(camp), "--ray-address", addr, "--workdir", str(wd),
                                 "--max-parallel", "2"], env=env, cwd=camp.parent, stdout=fh,
                                stderr=subprocess.STDOUT)


def _alive_under(folder: Path) -> list[str]:
    """Command lines of live processes that name `folder` (a run's processes all do: its dirs, its temp dir)."""
    out = []
    for cmd in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            text = cmd.read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if str(folder) in text:
            out.append(text[:200])
    return out


@pytest.mark.component("verl-vllm")
def test_a_verl_campaign_trains_through_vllm_resumes_and_leaves_nothing(tmp_path, head):
    spec = yaml.safe_load((REPO / "campaigns" / "demo_verl_vllm.yaml").read_text())
    wd = tmp_path / "wd"
    _fixtures(wd, spec["evaluation"]["fixture_items"])
    project = tmp_path / "project"  # the user's own folder, outside the repo
    project.mkdir()
    camp = project / "demo_verl_vllm.yaml"
    camp.write_text(yaml.safe_dump(spec, sort_keys=False))
    shm_before = shm_segments()

    proc = _submit(camp, wd, head, tmp_path / "submit.log")
    with reaped(proc):
        killed = kill_after_first_checkpoint(proc, wd / "runs" / "demo_verl_vllm", "reward_gap_greso")
        rc = proc.wait(timeout=1500)
    assert rc == 0, (tmp_path / "submit.log").read_text()[-4000:]

    runs, attempts = runs_and_attempts(wd, "demo_verl_vllm")
    assert len(runs) == 2 and {r.state for r in runs} == {"recorded"}, [(r.run_id, r.state, r.reason) for r in runs]
    key = {r.run_id.split("/")[2]: r.run_key for r in runs}
    tries = [a for a in attempts if a.run_key == key["reward_gap_greso"] and a.stage == "train"]
    assert len(tries) >= 2 and tries[0].status == AttemptStatus.failed  # the SIGKILL, then the resumed retry

    run_dirs = {p: wd / "runs" / "demo_verl_vllm" / k for p, k in key.items()}
    assert killed == run_dirs["reward_gap_greso"] / "train"
    # both were training at once (two vLLM servers, two weight-transfer sockets, one node), read from the ledger's
    # recorded order, not from wall-clock gaps (a launch's start under load moved past the other's end once): the
    # killed run's first train attempt was dispatched before baseline's ended and ended after baseline's began
    base = [a for a in attempts if a.run_key == key["baseline"] and a.stage == "train"][0]
    assert tries[0].started_at < base.ended_at and base.started_at < tries[0].ended_at, (tries[0], base)
    for p, d in run_dirs.items():
        log = (d / "train" / "train.log").read_text()
        assert "vLLMHttpServer" in log and "update_weights done" in log, p  # verl's own vLLM server served it
        started("verl-vllm", f"{p}: verl's vLLMHttpServer served the rollouts, weights synced")
        done = json.loads((d / "train_done.json").read_text())
        assert [c["step"] for c in done["checkpoints"]] == [1, 2]
        m = verl_metrics(Path(done["metrics_path"]))
        assert sorted(m) == [1, 2], p
        for step in (1, 2):  # verl's own metric: rollout log-probs (vLLM) vs the actor's recomputed ones
            assert 0 <= m[step]["training/rollout_probs_diff_max"] < 0.05, (p, step, m[step])
        assert (d / "records.parquet").exists()
        ev_logs = list((d / "eval").rglob("*.items.jsonl.gz"))  # evaluated through vLLM: its item log
        assert ev_logs and all(f.stat().st_size > 0 for f in ev_logs), p
    done = json.loads((run_dirs["reward_gap_greso"] / "train_done.json").read_text())
    mixed = verl_metrics(Path(done["metrics_path"]))
    for step in (1, 2):  # the mixer's target reached what vLLM rolled out; the curriculum proposed the prompts
        counts = [mixed[step][f"windtunnel/rolled_out_prompts_{d}"] for d in ("math", "logic", "science")]
        assert sum(counts) == 4, counts
    assert (run_dirs["reward_gap_greso"] / "train" / "rollout_ids.jsonl").read_text().strip()
    records = pd.read_parquet(wd / "results" / "demo_verl_vllm" / "records.parquet")
    assert set(records["policy"]) == {"baseline", "reward_gap_greso"} and records["accuracy"].notna().all()
    # the campaign's `baselines: {mix: baseline}` travel with its records: the verdicts pair the mixer with
    # baseline (the campaign ships no `static`), as `campaign demo --backend verl-vllm` prints them
    verdicts = subprocess.run([CAMPAIGN, "verdicts", str(wd / "results" / "demo_verl_vllm" / "records.parquet")],
                              capture_output=True, text=True, timeout=300)
    assert verdicts.returncode == 0, verdicts.stderr[-2000:]
    assert "reward_gap_greso" in verdicts.stdout and "baseline" in verdicts.stdout, verdicts.stdout

    assert _alive_under(wd / "runs") == []
    assert {s for s in shm_segments() - shm_before if s.startswith("verl_weights_")} == set()


def test_a_failing_weight_sync_ends_the_run_as_infra_within_its_bound(tmp_path, head):
    """The real failure, not an injected one: verl's own worker extension reloads weights in place, which vLLM's CPU
    build refuses (`'Parameter' object has no attribute 'weight_loader'`); verl's trainer then waits on its socket
    for ever. With `WINDTUNNEL_WEIGHT_SYNC_S: 20` the launcher ends the launch 20 s into the first weight sync."""
    root = tmp_path / "campaigns"
    for group in ("policy", "recipe", "model", "suite"):
        (root / group).mkdir(parents=True)
        for f in (REPO / "campaigns" / group).glob("*.yaml"):
            (root / group / f.name).write_text(f.read_text())
    recipe = yaml.safe_load((root / "recipe" / "verl_vllm_cpu_tiny.yaml").read_text())
    recipe["overrides"]["+actor_rollout_ref.rollout.engine_kwargs.vllm.worker_extension_cls"] = (
        "verl.workers.rollout.vllm_rollout.utils.vLLMColocateWorkerExtension")
    recipe["env"]["WINDTUNNEL_WEIGHT_SYNC_S"] = "20"
    (root / "recipe" / "verl_vllm_cpu_tiny.yaml").write_text(yaml.safe_dump(recipe, sort_keys=False))
    spec = yaml.safe_load((REPO / "campaigns" / "demo_verl_vllm.yaml").read_text())
    spec.update(name="vfault", policies=["baseline"], retries={"max_attempts": 1})
    camp = root / "vfault.yaml"
    camp.write_text(yaml.safe_dump(spec, sort_keys=False))
    wd = tmp_path / "wd"
    _fixtures(wd, spec["evaluation"]["fixture_items"])
    shm_before = shm_segments()

    proc = _submit(camp, wd, head, tmp_path / "submit.log")
    with reaped(proc):
        proc.wait(timeout=900)
    runs, attempts = runs_and_attempts(wd, "vfault")
    assert [r.state for r in runs] == ["failed"], [(r.run_id, r.state, r.reason) for r in runs]
    [train] = [a for a in attempts if a.stage == "train"]
    assert train.failure_class == "infra", (train.failure_class, train.reason)
    assert "within 20 s" in train.reason and "weight sync" in train.reason, train.reason
    log = (wd / "runs" / "vfault" / runs[0].run_key / "train" / "train.log").read_text()
    # the cause in the run's log: the watchdog's line naming the wait (vLLM's own `weight_loader` error is above it
    # when the worker's output reached the driver before the launch was ended)
    assert "windtunnel: verl's rollout did not finish the first weight sync" in log
    assert train.ended_at is not None
    assert _alive_under(wd / "runs") == []
    assert {s for s in shm_segments() - shm_before if s.startswith("verl_weights_")} == set()
