"""Per-node placement (issue 22): what fits where, as pure functions, and the scheduler's admission on a cluster
whose nodes it reads from the executor, as Ray reports them (alive nodes and their free GPUs).

The executor here simulates Ray's per-node accounting (a job holds its GPUs on its nodes from submission to its
end; a dead node drops out of the report) on a virtual clock, like benchmarks/scheduler_sim.py; the same
admission against real Ray on a 3-node cluster is tests/cluster/test_cluster_campaigns.py."""

from __future__ import annotations

from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from orchestrator.engine.executor.base import Executor, JobStatus
from orchestrator.engine.ledger import open_ledger
from orchestrator.engine.ledger.states import RunState as S
from orchestrator.engine.placement import Node, fits, place, take
from orchestrator.engine.scheduler.loop import Scheduler, SchedulerConfig
from orchestrator.engine.scheduler.retries import classify_failure

# ---- pure functions ----------------------------------------------------------------------------------------

@settings(max_examples=200, deadline=None)
@given(st.lists(st.integers(0, 8), min_size=0, max_size=8), st.integers(1, 8), st.integers(1, 4))
def test_place_picks_distinct_nodes_that_each_have_room_exactly_when_fits(free, per_node, nnodes) -> None:
    idx = place(free, per_node, nnodes)
    assert (idx is not None) == fits(free, per_node, nnodes)
    if idx is not None:
        assert len(set(idx)) == nnodes and all(free[i] >= per_node for i in idx)
        left = list(free)
        assert take(left, per_node, nnodes) and sum(free) - sum(left) == per_node * nnodes


def test_best_fit_keeps_a_whole_node_free_for_a_run_that_needs_it() -> None:
    free = [8.0, 3.0, 8.0]
    assert take(free, 2, 1) and free == [8.0, 1.0, 8.0]  # the fullest node that fits, not the first
    assert fits(free, 8, 2)


# ---- the scheduler on a simulated cluster -------------------------------------------------------------------

class ClusterSim(Executor):
    """Jobs hold `per_node` GPUs on `nnodes` nodes (best fit) for `duration` virtual seconds; `nodes()` reports
    each alive node's free GPUs as Ray's autoscaler report does."""

    address = "sim://"

    def __init__(self, node_gpus: list[int], shapes: dict[str, tuple[int, int]], duration: float = 10.0):
        self.now = 0.0
        self.total = [float(g) for g in node_gpus]
        self.alive = [True] * len(node_gpus)
        self.shapes, self.duration = shapes, duration
        self.jobs: dict[str, tuple[float, list[int], int]] = {}  # sid -> (end, nodes, per_node)
        self.submitted: list[str] = []

    def free(self) -> list[float]:
        free = list(self.total)
        for end, idx, per in self.jobs.values():
            if end > self.now:
                for i in idx:
                    free[i] -= per
        return free

    def nodes(self) -> list[Node] | None:
        return [Node(f"n{i}", self.total[i], f, alive=True) for i, f in enumerate(self.free()) if self.alive[i]]

    def ping(self) -> None:
        return None

    def submit(self, submission_id, argv, *, env=None, num_cpus=0, num_gpus=0) -> None:
        run_key, stage = submission_id.split("-")[-3:-1]
        per, nn = self.shapes[run_key] if stage == "train" else (1, 1)
        free = [f if self.alive[i] else -1.0 for i, f in enumerate(self.free())]
        idx = place(free, per, nn)
        assert idx is not None, f"{submission_id}: submitted but Ray could not grant {nn} × {per} GPUs"
        self.jobs[submission_id] = (self.now + self.duration, idx, per)
        self.submitted.append(submission_id)

    def status(self, submission_id: str) -> JobStatus:
        if submission_id not in self.jobs:
            return JobStatus("MISSING")
        end, idx, _ = self.jobs[submission_id]
        if any(not self.alive[i] for i in idx):
            return JobStatus("FAILED", "The actor died because its node has died.", None)
        return JobStatus("SUCCEEDED" if self.now >= end else "RUNNING", exit_code=0)

    def logs(self, submission_id: str) -> str:
        return ""

    def stop(self, submission_id: str) -> bool:
        return True

    def running(self) -> int:
        return sum(1 for end, _, _ in self.jobs.values() if end > self.now)


def _campaign(tmp_path: Path, shapes: dict[str, tuple[int, int]], node_gpus: list[int], **cfg):
    from orchestrator.engine.grid import PolicyRef, RunSpec

    led = open_ledger(tmp_path)
    rows = []
    for key, (per, nn) in shapes.items():
        spec = RunSpec(run_key=key, run_id=f"c/m/{key}/s1", campaign="c", sub_campaign="c", group="c", model="m",
                       policy=PolicyRef(key, "none"), reference=key, seed=1, steps=1, save_freq=1, regime="",
                       recipe_name="noop", backend="noop", suite="db12", gpus=per * nn, est_hours=0.1,
                       model_cfg={"gpus_per_node": per, "nnodes": nn})
        rows.append({"run_key": key, "run_id": spec.run_id, "gpus": spec.gpus, "spec_json": spec.to_json()})
    led.upsert_campaign("c", "{}", rows)
    ex = ClusterSim(node_gpus, shapes)
    ok = lambda spec, wd: {"compute": {}, "records": ""}  # noqa: E731 - simulated outputs verify
    sched = Scheduler(led, "c", ex, tmp_path, SchedulerConfig(max_parallel=100, report_lag_s=0.0, **cfg),
                      verifiers={"train": ok, "evaluate": ok}, clock=lambda: ex.now, write_specs=False)
    sched.enqueue()
    return led, ex, sched


def test_runs_start_only_where_a_node_has_room_not_where_the_total_would(tmp_path: Path) -> None:
    shapes = {f"r{i}": (3, 1) for i in range(4)}  # 3 nodes × 4 GPUs: 12 in total, but one 3-GPU run per node
    led, ex, sched = _campaign(tmp_path, shapes, [4, 4, 4])
    sched.step()
    assert ex.running() == 3 and [r.state for r in led.runs("c")].count(S.training) == 3


def test_a_run_that_fits_no_node_waits_with_its_reason_and_blocks_nothing(tmp_path: Path) -> None:
    led, ex, sched = _campaign(tmp_path, {"big": (8, 1), "two": (4, 2), "small": (2, 1)}, [4, 4])
    sched.step()
    rows = {r.run_key: r for r in led.runs("c")}
    assert rows["big"].state == S.queued and "needs 8 GPU(s) on one node" in rows["big"].reason
    assert rows["two"].state == S.training  # 2 nodes × 4 GPUs: both nodes, at once (STRICT_SPREAD)
    assert "big" not in " ".join(ex.submitted)
    assert any(e.kind == "unplaceable" for e in led.events("c", "big"))


def test_a_dead_node_shrinks_what_the_scheduler_admits(tmp_path: Path) -> None:
    led, ex, sched = _campaign(tmp_path, {f"r{i}": (4, 1) for i in range(3)}, [4, 4, 4], max_attempts=3)
    ex.alive[2] = False  # lost before anything started: two runs fit, not three
    sched.step()
    assert ex.running() == 2
    ex.alive[0] = False  # lost mid-train: its run fails as infrastructure and is retried, not counted against it
    sched.step()
    lost = [r for r in led.runs("c") if r.failure_class == "infra"]
    assert len(lost) == 1 and lost[0].state == S.queued and "node has died" in lost[0].reason


def test_a_blocked_two_node_run_is_passed_at_most_max_backfill_times(tmp_path: Path) -> None:
    shapes = {"a": (2, 1), "big": (4, 2), **{f"s{i}": (2, 1) for i in range(8)}}
    led, ex, sched = _campaign(tmp_path, shapes, [4, 4], max_backfill=2)
    for _ in range(12):
        sched.step()
        if led.get("c", "big").state != S.queued:
            break
        ex.now += 5.0
    started = [sid.split("-")[-3] for sid in ex.submitted if sid.endswith("train-a1")]
    assert "big" in started
    assert started.index("big") <= 1 + 2 + 1, started  # `a`, at most 2 backfilled, then the reservation holds


def test_node_loss_messages_are_infrastructure_failures() -> None:
    for msg in ("The actor died because its node has died. Node Id: 8c3b", "Job supervisor actor died",
                "node 10.0.0.3 was marked dead", "JOB_SUPERVISOR_ACTOR_START_TIMEOUT"):
        assert classify_failure(msg, "", None) == "infra", msg
    assert classify_failure("windtunnel-stage-error: config: bad", "", 2) == "config"


def test_resume_reopens_runs_that_failed_for_infrastructure(tmp_path: Path) -> None:
    led, ex, sched = _campaign(tmp_path, {"r0": (1, 1), "r1": (1, 1)}, [4])
    for key, klass in (("r0", "infra"), ("r1", "error")):
        led.transition("c", key, S.failed, reason=f"{klass} failure", failure_class=klass)
    assert sched.reopen_infra() == ["c/m/r0/s1"]
    assert led.get("c", "r0").state == S.queued and led.get("c", "r1").state == S.failed
