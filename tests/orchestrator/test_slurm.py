"""`campaign slurm` on a real Slurm (issue 52): Debian's munged, slurmctld and slurmd started here
(tests/slurm_cluster.py), one node with two logical GPUs as gres. The batch script, the allocation's Ray head,
`campaign doctor`, `campaign submit --drain-on-sigterm`, scancel's SIGTERM mid-campaign and the chained second
allocation are all the real thing; only the training backend is the noop one.

Cost: ~120 s of wall time on the shared 2-core machine (measured 119-133 s): two allocations, each starting a Ray
head and running the doctor's Ray job (Ray's job start is most of it), and 2 noop runs of 4 s. Skipped with its
reason where Slurm is not installed or the test does not run as root.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest
import yaml

from orchestrator.cluster.slurm import SlurmRequest, batch_script, read_jobs
from orchestrator.engine.ledger import open_ledger
from tests.campaign_ledger import runs_and_attempts
from tests.slurm_cluster import missing, start

REPO = Path(__file__).resolve().parents[2]
CAMPAIGN = str(Path(sys.executable).with_name("campaign"))


def _campaign(root: Path) -> Path:
    """2 noop runs of two GPUs each (one at a time on the node's two), 4 s of training apiece."""
    (root / "model").mkdir(parents=True)
    (root / "recipe").mkdir()
    (root / "model" / "g1.yaml").write_text(yaml.safe_dump({"name": "g1", "path": "builtin:tiny_qwen2",
                                                             "gpus_per_node": 2, "nnodes": 1}))
    (root / "recipe" / "slow.yaml").write_text(yaml.safe_dump({"name": "slow", "sleep_s": 4}))
    spec = {"name": "slurmy", "backend": "noop", "models": ["g1"], "recipe": "slow", "steps": 2,
            "policies": ["baseline"], "seeds": [1, 2],
            "retries": {"max_attempts": 2, "backoff_s": 1, "backoff_max_s": 2},
            "compute": {"nodes": 1, "gpus_per_node": 2, "hours_per_run": 0.01}}
    path = root / "slurmy.yaml"
    path.write_text(yaml.safe_dump(spec, sort_keys=False))
    return path


def test_batch_script_asks_for_the_shape_and_the_drain_signal(tmp_path: Path) -> None:
    """The script is what sbatch reads: one task per node, GPUs as gres, SIGTERM to the batch step S seconds before
    the limit, the log under W/slurm/, and `exec` of the runner (so the signal reaches it)."""
    camp = tmp_path / "c.yaml"
    camp.write_text("name: c\n")
    text = batch_script(SlurmRequest(camp, tmp_path / "w", nodes=4, gpus_per_node=8, cpus_per_node=64,
                                     time_limit="24:00:00", signal_s=600, partition="gpu"), "c")
    lines = text.splitlines()
    for opt in ("--nodes=4", "--ntasks-per-node=1", "--cpus-per-task=64", "--gres=gpu:8", "--time=24:00:00",
                "--signal=B:TERM@600", f"--output={tmp_path / 'w' / 'slurm'}/%j.out", "--partition=gpu"):
        assert f"#SBATCH {opt}" in lines
    assert lines[-1].startswith("exec ") and "orchestrator.cluster.slurm_job run" in lines[-1]
    assert "--gpus-per-node 8" in lines[-1] and "--cpus-per-node 64" in lines[-1]


def test_the_jobs_record_is_what_status_shows_when_slurm_does_not_answer(tmp_path: Path, monkeypatch) -> None:
    """`W/slurm/jobs.json` keeps each allocation (the runner's states included, a job submitted by hand added);
    without `squeue` the last recorded state is shown, and a corrupt record is bad input naming the file."""
    from orchestrator.cluster.slurm import SlurmJob, allocation_lines, record_job, slurm_dir, update_job
    from wtcommon.errors import UserError

    monkeypatch.setenv("PATH", str(tmp_path / "empty"))  # no squeue: Slurm does not answer
    wd = tmp_path / "w"
    record_job(wd, SlurmJob("11", "c", "s", str(wd / "slurm" / "11.out"), 2, 4))
    record_job(wd, SlurmJob("12", "c", "s", str(wd / "slurm" / "12.out"), 2, 4, dependency="11"))
    update_job(wd, "11", "ENDED", "exit 5 after SIGTERM (drained)")
    update_job(wd, "99", "RUNNING", "Ray http://10.0.0.1:8265 on gpu01")  # `sbatch W/slurm/c.sbatch` by hand
    assert [j.job_id for j in read_jobs(wd)] == ["11", "12", "99"]
    assert allocation_lines(wd)[:2] == [
        f"slurm job 11: ENDED (exit 5 after SIGTERM (drained)); 2 node(s) x 4 GPU(s); log {wd}/slurm/11.out",
        f"slurm job 12: SUBMITTED; 2 node(s) x 4 GPU(s), after 11; log {wd}/slurm/12.out"]
    (slurm_dir(wd) / "jobs.json").write_text("{not json")
    with pytest.raises(UserError, match="jobs.json"):
        allocation_lines(wd)


def test_bad_shape_or_spec_exits_2_before_sbatch(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("name: bad\nbackend: noop\n")
    p = subprocess.run([CAMPAIGN, "slurm", str(bad), "--workdir", str(tmp_path / "w")], capture_output=True,
                       text=True, cwd=REPO, timeout=120)
    assert p.returncode == 2 and "Traceback" not in p.stderr and "bad.yaml" in p.stderr
    assert not (tmp_path / "w" / "slurm").exists()


def _wait(cond, timeout_s: float, what: str) -> None:
    t0 = time.time()
    while not cond():
        if time.time() - t0 > timeout_s:
            raise AssertionError(f"timed out after {timeout_s:.0f} s waiting for {what}")
        time.sleep(1)


def _states(wd: Path) -> dict[str, int]:
    if not (wd / "ledger.db").exists():
        return {}
    led = open_ledger(wd)
    try:
        out: dict[str, int] = {}
        for r in led.runs("slurmy") if "slurmy" in led.campaigns() else []:
            out[r.state] = out.get(r.state, 0) + 1
        return out
    finally:
        led.close()


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_campaign_survives_scancel_and_finishes_in_the_next_allocation(tmp_path: Path) -> None:
    """Two chained allocations; the first is scancelled once one run is recorded and others are training. Its
    driver drains them (attempts failed, class infra), the second allocation finishes the campaign: every run
    recorded once, no finished stage executed again, no Ray or Slurm process left."""
    why = missing()
    if why:
        pytest.skip(why)
    slurm = start(Path(f"/tmp/wt-slurm-test-{os.getpid()}"), gpus=2, cpus=8)
    wd = tmp_path / "w"
    try:
        camp = _campaign(tmp_path / "proj")
        p = subprocess.run([CAMPAIGN, "slurm", str(camp), "--workdir", str(wd), "--gpus", "2", "--cpus", "8",
                            "--chain", "2"], env=slurm.env, capture_output=True, text=True, cwd=REPO, timeout=120)
        assert p.returncode == 0, p.stdout + p.stderr
        first, second = read_jobs(wd)
        assert f"submitted slurm job {first.job_id}: log {first.log}" in p.stdout
        assert f"submitted slurm job {second.job_id} (after {first.job_id})" in p.stdout
        _wait(lambda: _states(wd).get("recorded", 0) >= 1 and _states(wd).get("training", 0) >= 1, 400,
              f"a run recorded and one training in job {first.job_id} ({Path(first.log)})")
        st = subprocess.run([CAMPAIGN, "status", "slurmy", "--workdir", str(wd)], env=slurm.env, capture_output=True,
                            text=True, cwd=REPO, timeout=120)
        assert f"slurm job {first.job_id}: RUNNING" in st.stdout and f"log {first.log}" in st.stdout, st.stdout
        assert slurm.run("scancel", first.job_id).returncode == 0
        _wait(lambda: not slurm.queued(first.job_id) and not slurm.queued(second.job_id), 500,
              f"both allocations to end ({Path(second.log)})")
        log1, log2 = Path(first.log).read_text(), Path(second.log).read_text()
        assert "$ doctor --workdir" in log1 and "$ submit" in log1 and "$ submit" in log2, log1 + log2
        rows, attempts = runs_and_attempts(wd, "slurmy")
        assert {r.state for r in rows} == {"recorded"}, [(r.run_id, r.state, r.reason) for r in rows]
        drained = [a for a in attempts if a.failure_class == "infra"]
        assert drained and all("SIGTERM" in a.reason for a in drained), attempts
        for r in rows:  # nothing lost, nothing finished run twice: one success per stage, and a stage executed
            # again only where its attempt was drained (a drained job may not have started yet: at most one more)
            execs = (wd / "runs" / "slurmy" / r.run_key / "executions.log").read_text().split()
            for stage in ("train", "evaluate"):
                mine = [a for a in attempts if a.run_key == r.run_key and a.stage == stage]
                assert [a.status for a in mine if a.failure_class != "infra"] == ["succeeded"], mine
                n_drained = sum(1 for a in mine if a.failure_class == "infra")
                assert 1 <= execs.count(stage) <= 1 + n_drained, (r.run_id, stage, execs, mine)
        jobs = {j.job_id: j for j in read_jobs(wd)}
        assert jobs[first.job_id].state == "ENDED" and "drained" in jobs[first.job_id].detail
        assert jobs[second.job_id].state == "ENDED" and jobs[second.job_id].detail == "exit 0"
        st = subprocess.run([CAMPAIGN, "status", "slurmy", "--workdir", str(wd)], env=slurm.env, capture_output=True,
                            text=True, cwd=REPO, timeout=120)
        assert f"slurm job {second.job_id}: ENDED (exit 0)" in st.stdout, st.stdout
        left = [q.pid for q in psutil.process_iter(["cmdline"])
                if any(f"/tmp/wt-slurm-{j}" in a for j in jobs for a in (q.info["cmdline"] or []))]
        assert not left, f"Ray processes of the allocations still running: {left}"
    finally:
        slurm.stop()
