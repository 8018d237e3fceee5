"""The scheduler: admits runs to the executor within a GPU budget, watches them, retries, records.

One `step()` reconciles every active run with its job (reattaching by `submission_id` after a
restart), then admits waiting runs in seed-major order while they fit the GPU capacity (first
fit, so a partial campaign already pairs up by seed). Failures are classified; deterministic
configuration errors go straight to `failed`, others retry with exponential backoff up to
`max_attempts` per stage, then `failed` (dead letter). An unreachable cluster raises
`ClusterUnreachable` and changes no run (rule 5). "Done" is written only after the stage's
outputs verify (rule 4). Every state change goes through the ledger's state machine.

Two orchestrators on one campaign: `run()` takes the campaign's driver lease first; a second one
reports the holder and waits (a dead holder on this host is taken over at once). Every decision in
`_reconcile` is made on the row re-read after claiming its lease, so a stale snapshot never drives a
transition. The lease has an epoch (a fencing token): a driver that finds its lease taken over (it was
stopped past its TTL and another took the campaign) raises LeaseLost at its next step, before any job
submission, ledger or MLflow write, and the ledger itself refuses its stale writes; a lease that merely
expired with nobody taking it is renewed. Submission ids carry the campaign's
per-ledger instance id; a job id of another instance
is never reattached. On `run()` recorded runs whose records no longer verify are reopened (resume
re-runs their record stage), and jobs of superseded or finished attempts are stopped.
"""

from __future__ import annotations

import json
import os
import socket
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from collections.abc import Callable, Mapping

from orchestrator.executor.base import (
    ClusterUnreachable,
    DuplicateSubmission,
    Executor,
    submission_id,
    submission_prefix,
)
from orchestrator.grid import RunSpec
from orchestrator.ledger import CampaignBusy, IllegalTransition, LeaseLost, Ledger, RunState
from orchestrator.ledger.base import RunRow
from orchestrator.ledger.states import ACTIVE, ACTIVE_STAGE, WAITING_STAGE, AttemptStatus
from orchestrator.paths import run_dir
from orchestrator.placement import fits, shape, take
from orchestrator.stages import evaluated_key, verify_evaluate, verify_train, write_run_spec

S = RunState


@dataclass
class SchedulerConfig:
    capacity_gpus: int = 0  # a cap on the GPUs all of this campaign's jobs hold together (0: none)
    nodes: int = 0  # the declared cluster (compute.nodes × gpus_per_node), used when Ray cannot report its nodes
    gpus_per_node: int = 0
    live_nodes: bool = True  # place runs on the live cluster's free GPUs (Executor.nodes()) when it reports them
    max_backfill: int = 8  # runs that may start ahead of a blocked bigger run before it reserves the cluster
    report_lag_s: float = 10.0  # a job this recent may not be in Ray's per-node usage yet: counted as ours
    max_parallel: int = 2
    poll_s: float = 1.0
    lease_ttl_s: float = 60.0
    max_attempts: int = 3
    backoff_s: float = 5.0
    backoff_max_s: float = 300.0
    cpus_per_job: float = 1.0
    eval_gpus: int = 1
    # A cluster that stops answering mid-campaign (a dashboard too busy to reply in time, a head restarting) is
    # polled again for this long before the command stops with exit 3 (no run marked failed either way).
    unreachable_grace_s: float = 120.0


def classify_failure(message: str, logs: str, exit_code: int | None) -> str:
    """config | health_gate (both deterministic: not retried) | oom | infra | error."""
    text = f"{message}\n{logs[-4000:]}".lower()
    if "windtunnel-stage-error: health_gate" in text:
        return "health_gate"
    if exit_code == 2 or "windtunnel-stage-error: config" in text:
        return "config"
    if "out of memory" in text or "cuda oom" in text or "outofmemoryerror" in text:
        return "oom"
    if any(k in text for k in _INFRA_HINTS):
        return "infra"
    return "error"


# Ray's words for a lost node or process (e.g. "The actor died because its node has died", "node ... marked
# dead", "raylet ... died") and the accelerator's: the stage never ran to its end through no fault of its config.
_INFRA_HINTS = ("node died", "node has died", "marked dead", "node was terminated", "raylet", "nccl",
                "enginedeaderror", "illegal memory access", "killed", "job supervisor actor died",
                "job_supervisor_actor_start_timeout", "unexpectedly exited", "worker died")


def config_identity(spec: Mapping[str, Any]) -> str:
    """A run's configuration without its seed (run_key and run_id contain the seed): runs with equal
    identities differ only by seed, so a deterministic configuration error in one holds for all."""
    d = {k: v for k, v in spec.items() if k not in ("seed", "run_key", "run_id")}
    return json.dumps(d, sort_keys=True, default=str)


def orchestrator_id() -> str:
    return f"{socket.gethostname()}:{os.getpid()}"


def _owner_dead(owner: str) -> bool:
    """A lease held by a process on this host that no longer exists (SIGKILLed orchestrator)."""
    host, _, pid = owner.rpartition(":")
    if host != socket.gethostname() or not pid.isdigit():
        return False
    try:
        os.kill(int(pid), 0)
    except ProcessLookupError:
        return True
    except PermissionError:
        return False
    return False


@dataclass
class Scheduler:
    ledger: Ledger
    campaign: str
    executor: Executor
    workdir: Path
    cfg: SchedulerConfig = field(default_factory=SchedulerConfig)
    owner: str = field(default_factory=orchestrator_id)
    on_change: Callable[[RunRow, str], None] | None = None  # (row, what) for progress/ingestion
    python: str = sys.executable
    # stage -> verify(spec, workdir) -> manifest | None; the stage modules' verifiers by default
    verifiers: dict[str, Callable[[RunSpec, Path], dict | None]] = field(
        default_factory=lambda: {"train": verify_train, "evaluate": verify_evaluate})
    clock: Callable[[], float] = time.time
    write_specs: bool = True  # False only in simulation (benchmarks/scheduler_sim.py)
    # called once with (holder, expires) when another orchestrator drives the campaign; default: stderr
    on_busy: Callable[[str, float], None] | None = None
    tracker: Any = None  # orchestrator.tracking.CampaignTracker: MLflow kept in step after every poll

    def __post_init__(self) -> None:
        self.workdir = Path(self.workdir).resolve()
        self._instance: str | None = None
        self._nnodes: dict[str, int] = {}
        self._submitted_at: dict[str, float] = {}
        self._job_state: dict[str, str] = {}
        self._passed: dict[str, int] = {}  # blocked run -> runs started ahead of it (the backfill bound)

    @property
    def instance(self) -> str:
        """This ledger's instance id of the campaign (in every submission id)."""
        if self._instance is None:
            self._instance = self.ledger.campaign_instance(self.campaign)
        return self._instance

    def ours(self, sid: str) -> bool:
        """Whether a submission id belongs to this campaign instance (else never reattach to it)."""
        return sid.startswith(submission_prefix(self.campaign, self.instance))

    # -- helpers ---------------------------------------------------------------------------
    def _spec(self, row: RunRow) -> RunSpec:
        return row.spec

    def _need(self, row: RunRow, stage: str) -> int:
        return row.gpus if stage == "train" else min(self.cfg.eval_gpus, row.gpus)

    def _notify(self, row: RunRow, what: str) -> None:
        if self.on_change:
            self.on_change(row, what)

    def _claim(self, row: RunRow) -> bool:
        if row.lease_owner and row.lease_owner != self.owner and _owner_dead(row.lease_owner):
            self.ledger.update(self.campaign, row.run_key, lease_expires=0.0)
        return self.ledger.claim(self.campaign, row.run_key, self.owner, self.cfg.lease_ttl_s)

    def enqueue(self) -> int:
        n = 0
        for row in self.ledger.runs(self.campaign, [S.planned]):
            self.ledger.transition(self.campaign, row.run_key, S.queued, expect=S.planned)
            n += 1
        return n

    def argv(self, stage: str, spec: RunSpec, attempt: str = "") -> list[str]:
        path = write_run_spec(spec, self.workdir) if self.write_specs else Path("run_spec.json")
        return [self.python, "-m", "orchestrator.stages", stage, "--run-spec", str(path), "--workdir",
                str(self.workdir), *(["--attempt", attempt] if attempt else [])]

    # -- one cycle -------------------------------------------------------------------------
    def step(self) -> dict[str, int]:
        self.ledger.heartbeat(self.owner, self.cfg.lease_ttl_s)
        rows = self.ledger.runs(self.campaign)
        used, n_active = 0, 0
        holding: list[RunRow] = []
        for row in rows:
            if S(row.state) in ACTIVE:
                held = self._reconcile(row)
                if held:
                    used += self._need(row, ACTIVE_STAGE[S(row.state)])
                    n_active += 1
                    holding.append(row)
        now = self.clock()
        free, totals = self._free_gpus(holding, now)
        waiting = [r for r in self.ledger.runs(self.campaign, list(WAITING_STAGE)) if r.next_try_at <= now]
        blocked: RunRow | None = None
        for row in waiting:  # already in seed-major order (ledger order = plan order)
            if n_active >= self.cfg.max_parallel:
                break
            stage = WAITING_STAGE[S(row.state)]
            need = self._need(row, stage)
            per_node, nnodes = self._shape(row, stage)
            if per_node and totals and not fits(totals, per_node, nnodes):
                self._unplaceable(row, per_node, nnodes)  # stays queued, the reason in `status`
                continue
            if blocked is not None and self._passed.get(blocked.run_key, 0) >= self.cfg.max_backfill:
                break  # reservation: the blocked run has been passed often enough; nothing else starts first
            if self.cfg.capacity_gpus and used + need > self.cfg.capacity_gpus:
                continue  # first fit: a smaller run may still fit
            trial = list(free)
            if per_node and totals and not take(trial, per_node, nnodes):
                blocked = blocked or row
                continue
            if not self._claim(row):
                continue
            if not self._submit(row, stage):
                continue
            free = trial
            self._submitted_at[row.run_key] = now
            used += need
            n_active += 1
            if blocked is not None:
                self._passed[blocked.run_key] = self._passed.get(blocked.run_key, 0) + 1
        if blocked is None:
            self._passed.clear()
        else:
            self._passed = {blocked.run_key: self._passed.get(blocked.run_key, 0)}
        self.stop_orphans()
        self._track()
        return self._counts()

    # -- placement -------------------------------------------------------------------------
    def _shape(self, row: RunRow, stage: str) -> tuple[int, int]:
        """(GPUs per node, nodes) a stage of this run holds: training its model's shape, evaluation one GPU."""
        if stage != "train":
            return self._need(row, stage), 1
        if row.run_key not in self._nnodes:
            self._nnodes[row.run_key] = self._spec(row).nnodes
        nnodes = self._nnodes[row.run_key]
        return row.gpus // nnodes, nnodes

    def _free_gpus(self, holding: list[RunRow], now: float) -> tuple[list[float], list[float]]:
        """(free, total) GPUs per node as Ray will grant them now.

        Live (the executor reports its nodes): Ray's per-node free GPUs of the alive nodes, less the runs we
        submitted that Ray may not count yet (its job still PENDING, or newer than the report). Declared
        (no report): the campaign's `nodes × gpus_per_node` less every run we hold."""
        nodes = self.executor.nodes() if self.cfg.live_nodes else None
        if nodes is not None:
            alive = [n for n in nodes if n.alive]
            free = [n.free_gpus for n in alive]
            totals = [n.gpus for n in alive]
            unseen = [r for r in holding if self._job_state.get(r.run_key) == "PENDING"
                      or now - self._submitted_at.get(r.run_key, 0.0) < self.cfg.report_lag_s]
        else:
            if not (self.cfg.nodes and self.cfg.gpus_per_node):  # no node shape declared: only capacity_gpus counts
                return [], []
            free = [float(self.cfg.gpus_per_node)] * self.cfg.nodes
            totals = list(free)
            unseen = holding
        for r in sorted(unseen, key=lambda r: -r.gpus):
            per_node, nnodes = self._shape(r, ACTIVE_STAGE[S(r.state)])
            if per_node:
                take(free, per_node, nnodes)  # a run that no longer fits (a node died) holds nothing here
        return free, totals

    def _unplaceable(self, row: RunRow, per_node: int, nnodes: int) -> None:
        """Say once, in the run's reason, why it waits: no node set of the cluster can ever hold it."""
        why = f"waiting: needs {shape(per_node, nnodes)} and no {nnodes} node(s) of the cluster have that many GPUs"
        if row.reason != why:
            self.ledger.update(self.campaign, row.run_key, reason=why)
            self.ledger.event(self.campaign, "unplaceable", why, row.run_key)

    def _track(self) -> None:
        """Sync MLflow; a tracking failure is an event and a warning, never a stopped campaign."""
        if self.tracker is None:
            return
        self.ledger.check_driver(self.campaign)  # never an MLflow write after a takeover
        try:
            self.tracker.sync()
        except LeaseLost:
            raise
        except Exception as exc:
            msg = f"MLflow sync failed: {type(exc).__name__}: {exc}"[:500]
            if not getattr(self, "_tracking_warned", False):  # once per scheduler: not an event per poll
                self.ledger.event(self.campaign, "tracking_error", msg)
                print(f"warning: {msg}; the campaign continues (tried again every poll)", file=sys.stderr)
                self._tracking_warned = True

    def _submit(self, row: RunRow, stage: str) -> bool:
        """Start the stage's next attempt; False when the row moved on since our snapshot."""
        spec = self._spec(row)
        row = self.ledger.get(self.campaign, row.run_key)
        sid = submission_id(row.run_key, stage, row.attempts + 1, self.campaign, self.instance)
        dst = S.training if stage == "train" else S.evaluating
        try:
            if row.superseded_by or WAITING_STAGE.get(S(row.state)) != stage:
                raise IllegalTransition(f"run {row.run_key} is {row.state} now")
            self.ledger.start_attempt(self.campaign, row.run_key, row.state, dst, stage, sid)
        except IllegalTransition:
            self.ledger.release(self.campaign, row.run_key, self.owner)
            return False
        self.ledger.check_driver(self.campaign)  # no job submitted after a takeover
        try:
            self.executor.submit(sid, self.argv(stage, spec, sid), num_cpus=self.cfg.cpus_per_job)
        except DuplicateSubmission:
            pass  # a previous incarnation submitted it: reattach on the next poll
        except (RuntimeError, OSError) as exc:  # transient cluster-side refusal: the next poll sees MISSING
            if isinstance(exc, ClusterUnreachable):
                raise
            self.ledger.event(self.campaign, "submit_error", f"{sid}: {exc}"[:500], row.run_key)
        self._notify(self.ledger.get(self.campaign, row.run_key), f"submitted {stage}")
        return True

    def _reconcile(self, row: RunRow) -> bool:
        """Advance one active run from its job's status; True while it still holds resources."""
        if not self._claim(row):
            return True  # another live orchestrator owns it: count its GPUs, leave it alone
        row = self.ledger.get(self.campaign, row.run_key)  # decide on the row as it is now, not the snapshot
        if row.superseded_by or S(row.state) not in ACTIVE:
            self.ledger.release(self.campaign, row.run_key, self.owner)
            return False
        try:
            return self._advance(row)
        except IllegalTransition as exc:  # advanced by someone else between our read and write
            self.ledger.event(self.campaign, "stale", str(exc)[:500], row.run_key)
            self.ledger.release(self.campaign, row.run_key, self.owner)
            return False

    def _advance(self, row: RunRow) -> bool:
        stage = ACTIVE_STAGE[S(row.state)]
        if not self.ours(row.submission_id):
            # a job id of another campaign instance (a ledger copied from another work dir, or made before
            # instance ids): never reattach; run the stage again under our own id
            self.ledger.end_attempt(self.campaign, row.submission_id, AttemptStatus.failed,
                                    "submission id of another campaign instance")
            self.ledger.event(self.campaign, "foreign_submission", row.submission_id, row.run_key)
            back = S.queued if stage == "train" else S.trained
            self.ledger.transition(self.campaign, row.run_key, back, expect=row.state,
                                   reason="resubmitting under this campaign instance's id", next_try_at=0.0)
            self.ledger.release(self.campaign, row.run_key, self.owner)
            return False
        st = self.executor.status(row.submission_id)
        self._job_state[row.run_key] = st.state
        if st.state == "MISSING":  # ledger says submitted, cluster never saw it (crash or new head)
            self.ledger.check_driver(self.campaign)
            try:
                self.executor.submit(row.submission_id, self.argv(stage, self._spec(row), row.submission_id),
                                     num_cpus=self.cfg.cpus_per_job)
            except DuplicateSubmission:
                pass
            except (RuntimeError, OSError) as exc:
                if isinstance(exc, ClusterUnreachable):
                    raise
                self.ledger.event(self.campaign, "submit_error", f"{row.submission_id}: {exc}"[:500], row.run_key)
                return True
            self.ledger.event(self.campaign, "resubmitted", row.submission_id, row.run_key)
            return True
        if not st.done:
            return True
        spec = self._spec(row)
        if st.state == "SUCCEEDED":
            verified = self.verifiers[stage](spec, self.workdir)
            if verified is not None:
                self.ledger.end_attempt(self.campaign, row.submission_id, AttemptStatus.succeeded)
                if stage == "train":
                    r = self.ledger.transition(self.campaign, row.run_key, S.trained, expect=S.training,
                                               compute=verified.get("compute", {}),
                                               outputs={**row.outputs,
                                                        "train": str(run_dir(self.workdir, spec) / "train_done.json")})
                else:
                    compute = {**row.compute, "eval_wall_s": verified.get("eval_wall_s", 0.0)}
                    r = self.ledger.transition(self.campaign, row.run_key, S.recorded, expect=S.evaluating,
                                               compute=compute,
                                               outputs={**row.outputs, "records": verified["records"]})
                self.ledger.release(self.campaign, row.run_key, self.owner)
                self._notify(r, f"{stage} done")
                return False
            if stage == "evaluate" and evaluated_key(spec, self.workdir) not in (None, spec.eval_key):
                # scored under the settings it was submitted with, and the spec changed them meanwhile: again
                self.ledger.end_attempt(self.campaign, row.submission_id, AttemptStatus.succeeded)
                r = self.ledger.transition(self.campaign, row.run_key, S.trained, expect=S.evaluating,
                                           reason="evaluation settings changed while it was evaluated: again")
                self.ledger.release(self.campaign, row.run_key, self.owner)
                self._notify(r, "re-evaluating: evaluation settings changed")
                return False
            self._fail(row, stage, "outputs failed verification after the job succeeded", "error")
            return False
        logs = self.executor.logs(row.submission_id)
        self._fail(row, stage, (st.message or st.state)[:500], classify_failure(st.message, logs, st.exit_code), logs)
        return False

    def stop_orphans(self) -> int:
        """Stop jobs whose attempt is still marked running but is not its run's current job (the run was
        superseded by a changed spec, cancelled, or moved on): they would only burn the cluster."""
        n = 0
        for a in self.ledger.running_attempts(self.campaign):
            if not a["superseded_by"] and S(a["run_state"]) in ACTIVE and a["run_submission"] == a["submission_id"]:
                continue
            why = "superseded by a changed spec" if a["superseded_by"] else f"run is {a['run_state']}"
            if self.ours(a["submission_id"]):
                self.executor.stop(a["submission_id"])
            self.ledger.end_attempt(self.campaign, a["submission_id"], AttemptStatus.cancelled, why)
            n += 1
        return n

    def repair(self) -> list[str]:
        """Reopen recorded runs whose records no longer verify (deleted, changed): to `trained` so the
        record stage runs again, or to `queued` when the training outputs are gone too. Run ids reopened."""
        out = []
        for row in self.ledger.runs(self.campaign, [S.recorded]):
            spec = self._spec(row)
            if self.verifiers["evaluate"](spec, self.workdir) is not None:
                continue
            to = S.trained if self.verifiers["train"](spec, self.workdir) is not None else S.queued
            outputs = {k: v for k, v in row.outputs.items() if k not in ("records", "failures")}
            stale = evaluated_key(spec, self.workdir) not in (None, spec.eval_key)
            why = ("evaluation settings changed: re-evaluating with the current ones" if stale and to == S.trained
                   else f"records of {row.run_id} missing or changed")
            try:
                r = self.ledger.reopen(self.campaign, row.run_key, to, f"{why}: re-running its "
                                       f"{'record' if to == S.trained else 'train and record'} stage",
                                       outputs=outputs)
            except IllegalTransition:
                continue
            self._notify(r, "re-evaluating: evaluation settings changed" if stale else "records missing: reopened")
            out.append(row.run_id)
        return out

    def _fail(self, row: RunRow, stage: str, reason: str, klass: str, logs: str = "") -> None:
        tail = [ln for ln in logs.splitlines() if "windtunnel-stage-error" in ln]
        reason = (tail[-1] if tail else reason)[:4000]  # a health-gate line names every failing benchmark
        self.ledger.end_attempt(self.campaign, row.submission_id, AttemptStatus.failed, reason, klass)
        failures = dict(row.outputs.get("failures", {}))
        failures[stage] = failures.get(stage, 0) + 1
        outputs = {**row.outputs, "failures": failures}
        back = S.queued if stage == "train" else S.trained
        if klass in ("config", "health_gate") or failures[stage] >= self.cfg.max_attempts:
            why = {"config": "deterministic configuration error",
                   "health_gate": "evaluation health gate failed (not retried)"}.get(
                klass, f"retry cap {self.cfg.max_attempts} reached")
            r = self.ledger.transition(self.campaign, row.run_key, S.failed, stage=stage, reason=f"{why}: {reason}",
                                       failure_class=klass, outputs=outputs)
            if klass == "config":
                self._stop_same_config(row, stage, reason)
        else:
            delay = min(self.cfg.backoff_s * 2 ** (failures[stage] - 1), self.cfg.backoff_max_s)
            r = self.ledger.transition(self.campaign, row.run_key, back, reason=f"retrying after {klass}: {reason}",
                                       failure_class=klass, next_try_at=self.clock() + delay, outputs=outputs)
        self.ledger.release(self.campaign, row.run_key, self.owner)
        self._notify(r, f"{stage} failed ({klass})")

    def _stop_same_config(self, failed: RunRow, stage: str, reason: str) -> None:
        """A deterministic configuration error fails every not-yet-started run of the same configuration (the
        same spec but for the seed) without submitting it: each would fail the same way after its own start-up
        (on the paper program, GPU-hours apiece). `campaign retry` brings them back once the cause is fixed."""
        key = config_identity(failed.spec.to_dict())
        waiting = [S.planned, S.queued] + ([S.trained] if stage == "evaluate" else [])
        for r in self.ledger.runs(self.campaign, waiting):
            if r.run_key == failed.run_key or config_identity(r.spec.to_dict()) != key:
                continue
            why = (f"not started: {failed.run_id}, the same configuration at another seed, failed with a "
                   f"deterministic configuration error ({reason[:300]}); fix it, then `campaign retry`")
            try:
                if r.state == S.planned:
                    self.ledger.transition(self.campaign, r.run_key, S.queued, expect=S.planned)
                done = self.ledger.transition(self.campaign, r.run_key, S.failed,
                                              expect=S.trained if r.state == S.trained else S.queued,
                                              stage=stage, reason=why, failure_class="config")
            except IllegalTransition:  # another orchestrator moved it meanwhile: leave it to that one
                continue
            self._notify(done, f"{stage} not started (same configuration failed)")

    # -- loop ------------------------------------------------------------------------------
    def pending(self) -> int:
        rows = self.ledger.runs(self.campaign, [S.planned, S.queued, S.training, S.trained, S.evaluating])
        return len(rows)

    def acquire(self, *, wait: bool = True, timeout_s: float | None = None) -> bool:
        """Take the campaign's driver lease. Held by another live orchestrator: report it once
        (`on_busy`, else stderr) and wait for it (or raise CampaignBusy when `wait` is False);
        False when `timeout_s` ran out first."""
        t0 = time.time()
        reported = False
        while True:
            ok, holder, expires = self.ledger.claim_driver(self.campaign, self.owner, self.cfg.lease_ttl_s)
            if not ok and _owner_dead(holder):  # SIGKILLed on this host: take over now
                ok, holder, expires = self.ledger.claim_driver(self.campaign, self.owner, self.cfg.lease_ttl_s,
                                                               steal_from=holder)
            if ok:
                return True
            if not wait:
                raise CampaignBusy(self.campaign, holder, expires)
            if not reported:
                if self.on_busy:
                    self.on_busy(holder, expires)
                else:
                    print(f"{CampaignBusy(self.campaign, holder, expires)}; waiting for it", file=sys.stderr,
                          flush=True)
                reported = True
            if timeout_s is not None and time.time() - t0 > timeout_s:
                return False
            time.sleep(self.cfg.poll_s)

    def run(self, *, timeout_s: float | None = None, on_tick: Callable[[dict[str, int]], None] | None = None,
            wait: bool = True) -> dict[str, int]:
        """Drive the campaign until nothing is pending (or `timeout_s`): take the driver lease, reopen
        recorded runs whose records are gone and runs that failed for infrastructure reasons, then step. A second
        orchestrator waits for the first."""
        t0 = time.time()
        if not self.acquire(wait=wait, timeout_s=timeout_s):
            return self._counts()
        lost = False
        try:
            self.repair()
            self.reopen_infra()
            self.enqueue()
            down_since: float | None = None
            while True:
                try:
                    counts = self.step()
                except ClusterUnreachable as exc:
                    if exc.exit_code != 3:  # a refused token is not transient
                        raise
                    now = time.time()
                    if down_since is None:
                        down_since = now
                        self.ledger.event(self.campaign, "cluster_unreachable", f"{exc}"[:500])
                    if now - down_since >= self.cfg.unreachable_grace_s:
                        raise
                    time.sleep(max(self.cfg.poll_s, min(5.0, self.cfg.unreachable_grace_s / 10)))
                    continue
                if down_since is not None:
                    self.ledger.event(self.campaign, "cluster_reachable", f"after {time.time() - down_since:.0f} s")
                    down_since = None
                if on_tick:
                    on_tick(counts)
                if self.pending() == 0 or (timeout_s is not None and time.time() - t0 > timeout_s):
                    self.ledger.check_driver(self.campaign)  # taken over meanwhile: not a clean finish
                    return counts
                time.sleep(self.cfg.poll_s)
        except LeaseLost:
            lost = True  # the lease is another orchestrator's now: touch nothing, not even to release it
            raise
        finally:
            if not lost:
                self.ledger.release_driver(self.campaign, self.owner)

    def _counts(self) -> dict[str, int]:
        counts: dict[str, int] = {}
        for r in self.ledger.runs(self.campaign):
            counts[r.state] = counts.get(r.state, 0) + 1
        return counts

    def cancel(self, rows: list[RunRow], reason: str = "cancelled by user") -> int:
        """Stop each row's active job and mark it `cancelled` with `reason` (e.g. a tuning trial's pruning).

        A job Ray still holds PENDING (waiting for resources) cannot be stopped yet: Ray queues the stop until
        its supervisor starts. Its attempt is also written to the run dir's cancel list, which the stage reads
        first, so when Ray does start it the stage exits at once without doing any work."""
        n = 0
        for row in rows:
            if S(row.state) in (S.recorded, S.cancelled):
                continue
            if S(row.state) == S.failed:
                continue
            if S(row.state) in ACTIVE and row.submission_id:
                if self.write_specs:
                    from orchestrator.stages import cancel_attempt

                    cancel_attempt(run_dir(self.workdir, self._spec(row)), row.submission_id)
                self.executor.stop(row.submission_id)
                self.ledger.end_attempt(self.campaign, row.submission_id, AttemptStatus.cancelled)
            self.ledger.transition(self.campaign, row.run_key, S.cancelled, reason=reason)
            n += 1
        return n

    def retry(self, rows: list[RunRow], reason: str = "retry requested") -> int:
        n = 0
        for row in rows:
            if S(row.state) not in (S.failed, S.cancelled):
                continue
            outputs = {k: v for k, v in row.outputs.items() if k != "failures"}
            self.ledger.transition(self.campaign, row.run_key, S.queued, reason=reason,
                                   next_try_at=0.0, failure_class="", outputs=outputs)
            n += 1
        return n

    def reopen_infra(self) -> list[str]:
        """Queue again the runs that failed for infrastructure reasons (a lost node, a dead head): nothing about
        their configuration was wrong, so `resume` gives them a fresh set of attempts (a verified train stage is
        skipped, not redone). Run ids reopened."""
        rows = [r for r in self.ledger.runs(self.campaign, [S.failed]) if r.failure_class == "infra"]
        for r in rows:
            self.retry([r], reason=f"reopened after an infrastructure failure: {r.reason[:300]}")
            self._notify(self.ledger.get(self.campaign, r.run_key), "reopened (infrastructure failure)")
        return [r.run_id for r in rows]
