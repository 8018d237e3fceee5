"""`campaign slurm` on a real Slurm (issue 52): Debian's munged, slurmctld and a slurmd per node started here
(tests/slurm_cluster.py), nodes of two logical GPUs as gres. The batch script, the allocation's Ray head (and, on
two nodes, the worker `srun` starts on the second), `campaign doctor`, `campaign submit --drain-on-sigterm`, the
SIGTERM of scancel or of the time limit's `--signal` mid-campaign and the chained second allocation are all the
real thing; only the training backend is the noop one.

Cost, measured on the shared 2-core machine while other suites ran (2026-12; CPU: the tests' whole process tree,
Slurm daemons and Ray included): the scancel test (two allocations of two nodes, 2 noop runs of 4 s) 195-305 s of
wall time; the time-limit test (two one-node allocations, one noop run of 60 s trained twice) 200-260 s; both
together 400 s and ~130 CPU-s. Most of it is each allocation's Ray start and the doctor's Ray job. Skipped
with its reason where Slurm is not installed or the test does not run as root.
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


def _campaign(root: Path, nnodes: int = 1, sleep_s: float = 4, seeds: tuple[int, ...] = (1, 2)) -> Path:
    """A noop run per seed of two GPUs on each of `nnodes` nodes (one run at a time: the allocation has `nnodes`
    nodes of two GPUs), `sleep_s` of training apiece."""
    (root / "model").mkdir(parents=True)
    (root / "recipe").mkdir()
    (root / "model" / "g1.yaml").write_text(yaml.safe_dump({"name": "g1", "path": "builtin:tiny_qwen2",
                                                             "gpus_per_node": 2, "nnodes": nnodes}))
    (root / "recipe" / "slow.yaml").write_text(yaml.safe_dump({"name": "slow", "sleep_s": sleep_s}))
    spec = {"name": "slurmy", "backend": "noop", "models": ["g1"], "recipe": "slow", "steps": 2,
            "policies": ["baseline"], "seeds": list(seeds),
            "retries": {"max_attempts": 2, "backoff_s": 1, "backoff_max_s": 2},
            "compute": {"nodes": nnodes, "gpus_per_node": 2, "hours_per_run": 0.01}}
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


def _submit(slurm, camp: Path, wd: Path, *opts: str) -> tuple:
    """`campaign slurm ... --chain 2`: the two jobs, each printed with its log."""
    p = subprocess.run([CAMPAIGN, "slurm", str(camp), "--workdir", str(wd), *opts, "--chain", "2"], env=slurm.env,
                       capture_output=True, text=True, cwd=REPO, timeout=120)
    assert p.returncode == 0, p.stdout + p.stderr
    first, second = read_jobs(wd)
    assert f"submitted slurm job {first.job_id}: log {first.log}" in p.stdout
    assert f"submitted slurm job {second.job_id} (after {first.job_id})" in p.stdout
    return first, second


def _finished_once(slurm, wd: Path, first, second) -> tuple[str, str]:
    """Wait for both allocations to end, then: every run recorded, the first job's drained attempts failed as
    infra with the SIGTERM reason, no finished stage executed again, the second job ended 0 and `campaign status`
    says so, no Ray process of either job left. The two jobs' logs."""
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
    assert jobs[first.job_id].state == "ENDED" and "drained" in jobs[first.job_id].detail, jobs
    assert jobs[second.job_id].state == "ENDED" and jobs[second.job_id].detail == "exit 0", jobs
    st = subprocess.run([CAMPAIGN, "status", "slurmy", "--workdir", str(wd)], env=slurm.env, capture_output=True,
                        text=True, cwd=REPO, timeout=120)
    assert f"slurm job {second.job_id}: ENDED (exit 0)" in st.stdout, st.stdout
    left = [q.pid for q in psutil.process_iter(["cmdline"])
            if any(f"/tmp/wt-slurm-{j}" in a for j in jobs for a in (q.info["cmdline"] or []))]
    assert not left, f"Ray processes of the allocations still running: {left}"
    return log1, log2


@pytest.mark.slow
@pytest.mark.timeout(900)
@pytest.mark.component("slurm")
def test_campaign_survives_scancel_and_finishes_in_the_next_allocation(tmp_path: Path) -> None:
    """Two chained allocations of two Slurm nodes each (a Ray head on the first, a worker started by `srun
    --overlap` on the second; each run spans both nodes); the first is scancelled once one run is recorded and the
    other is training. Its driver drains them (attempts failed, class infra), the second allocation finishes the
    campaign: every run recorded once, no finished stage executed again, no Ray or Slurm process left."""
    why = missing()
    if why:
        pytest.skip(why)
    slurm = start(Path(f"/tmp/wt-slurm-test-{os.getpid()}"), gpus=2, cpus=8, nodes=2)
    wd = tmp_path / "w"
    try:
        camp = _campaign(tmp_path / "proj", nnodes=2)
        first, second = _submit(slurm, camp, wd, "--nodes", "2", "--gpus", "2", "--cpus", "8")
        _wait(lambda: _states(wd).get("recorded", 0) >= 1 and _states(wd).get("training", 0) >= 1, 400,
              f"a run recorded and one training in job {first.job_id} ({Path(first.log)})")
        st = subprocess.run([CAMPAIGN, "status", "slurmy", "--workdir", str(wd)], env=slurm.env, capture_output=True,
                            text=True, cwd=REPO, timeout=120)
        assert f"slurm job {first.job_id}: RUNNING" in st.stdout and f"log {first.log}" in st.stdout, st.stdout
        assert "2 node(s) x 2 GPU(s)" in st.stdout, st.stdout
        assert slurm.run("scancel", first.job_id).returncode == 0
        log1, log2 = _finished_once(slurm, wd, first, second)
        for log in (log1, log2):
            assert "Ray cluster of 2 node(s) up" in log, log
    finally:
        slurm.stop()


def _run_time_s(slurm, job_id: str) -> int:
    """How long the job has run (`scontrol show job`'s RunTime, [D-]HH:MM:SS)."""
    out = slurm.run("scontrol", "show", "job", "-o", job_id).stdout
    fields = dict(f.split("=", 1) for f in out.split() if "=" in f)
    days, _, hms = fields["RunTime"].rpartition("-")
    h, m, sec = (int(x) for x in hms.split(":"))
    return int(days or 0) * 86400 + h * 3600 + m * 60 + sec


@pytest.mark.slow
@pytest.mark.timeout(900)
@pytest.mark.component("slurm")
def test_the_time_limit_drains_the_allocation_and_the_next_one_finishes(tmp_path: Path) -> None:
    """The allocation's time limit, not scancel, ends the first of two chained jobs: `--signal 90` is sbatch's
    `--signal=B:TERM@90`, and once the campaign's one run is training the test lowers the job's limit
    (`scontrol update TimeLimit`, minutes) so that it ends 60-120 s from now: slurmctld's next limit check (every
    30 s; it signals up to 30 s early) sends SIGTERM to the batch step, the driver drains the training stage
    (attempt failed, class infra, reason SIGTERM) and exits 5 before the limit; the second job trains the run again
    and evaluates it once. Lowering the limit of a running job (root may) is what makes this deterministic on a
    loaded machine: a limit fixed at submission would have to guess how long the Ray start and the doctor take.

    Cost: ~4 min of wall time on the shared 2-core machine (see the module docstring), most of it the two
    allocations' Ray start and doctor; 1 noop run of 60 s (longer than the signal's delay), trained twice."""
    why = missing()
    if why:
        pytest.skip(why)
    slurm = start(Path(f"/tmp/wt-slurm-test-{os.getpid()}"), gpus=2, cpus=8)
    wd = tmp_path / "w"
    try:
        camp = _campaign(tmp_path / "proj", sleep_s=60, seeds=(1,))
        first, second = _submit(slurm, camp, wd, "--gpus", "2", "--cpus", "8", "--time", "10", "--signal", "90")
        script = Path(first.script).read_text()
        assert "#SBATCH --time=10" in script and "#SBATCH --signal=B:TERM@90" in script, script
        _wait(lambda: _states(wd).get("training", 0) >= 1, 400, f"the run training in job {first.job_id} "
              f"({Path(first.log)})")
        limit_min = (_run_time_s(slurm, first.job_id) + 90 + 30) // 60  # ends in (60, 120] s: signalled at once
        upd = slurm.run("scontrol", "update", f"JobId={first.job_id}", f"TimeLimit={limit_min}")
        assert upd.returncode == 0, upd.stderr
        _finished_once(slurm, wd, first, second)
        _, attempts = runs_and_attempts(wd, "slurmy")
        drained = [a for a in attempts if a.failure_class == "infra"]
        assert [a.stage for a in drained] == ["train"], attempts
    finally:
        slurm.stop()
