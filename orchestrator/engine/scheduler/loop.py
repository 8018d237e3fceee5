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

The parts, one module each: admission and placement (`scheduler_admission`), starting and stopping jobs
(`scheduler_jobs`), watching runs and tracking (`scheduler_watch`), failures and reruns
(`scheduler_retries`), over the shared state and configuration (`scheduler_core`). This module holds the
fields, one step, and the driver loop.
"""

from __future__ import annotations

import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from collections.abc import Callable

from orchestrator.engine.executor.base import ClusterUnreachable, Executor
from orchestrator.engine.grid import RunSpec
from orchestrator.engine.ledger import CampaignBusy, LeaseLost, Ledger, RunState
from orchestrator.engine.ledger.base import RunRow
from orchestrator.engine.ledger.states import ACTIVE, ACTIVE_STAGE
from orchestrator.engine.scheduler.admission import Admission
from orchestrator.engine.scheduler.core import SchedulerConfig, orchestrator_id, owner_dead
from orchestrator.engine.scheduler.watch import Watching
from orchestrator.engine.stages import verify_evaluate, verify_train
from wtcommon.errors import WindtunnelError

__all__ = ["Drained", "Scheduler", "SchedulerConfig", "orchestrator_id"]

S = RunState


class Drained(WindtunnelError, RuntimeError):
    """The driver was asked to stop (`Scheduler.stop` set: SIGTERM at an allocation's end) and drained its
    in-flight stages, each recorded as an infra failure; `campaign resume` (the next allocation) goes on. Exit 5."""

    exit_code = 5

    def __init__(self, campaign: str, drained: list[str], reason: str):
        super().__init__(f"{campaign}: stopped ({reason}); {len(drained)} in-flight stage(s) drained and recorded as "
                         "infra failures; `campaign resume` (or the next allocation) runs them again")
        self.drained = drained


@dataclass
class Scheduler(Admission, Watching):
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
    tracker: Any = None  # orchestrator.campaign_tracking.CampaignTracker: MLflow kept in step after every poll
    # set (by a signal handler) to stop: the loop drains its in-flight stages (`drain`) and raises Drained
    stop: threading.Event | None = None
    stop_reason: str = "the driver was stopped"

    def __post_init__(self) -> None:
        self.workdir = Path(self.workdir).resolve()
        self._instance: str | None = None
        self._nnodes: dict[str, int] = {}
        self._submitted_at: dict[str, float] = {}
        self._job_state: dict[str, str] = {}
        self._passed: dict[str, int] = {}  # blocked run -> runs started ahead of it (the backfill bound)

    def enqueue(self) -> int:
        n = 0
        for row in self.ledger.runs(self.campaign, [S.planned]):
            self.ledger.transition(self.campaign, row.run_key, S.queued, expect=S.planned)
            n += 1
        return n

    # -- one cycle -------------------------------------------------------------------------
    def step(self) -> dict[str, int]:
        self.ledger.heartbeat(self.owner, self.cfg.lease_ttl_s)
        holding: list[RunRow] = []
        for row in self.ledger.runs(self.campaign):
            if S(row.state) in ACTIVE and self._reconcile(row):
                holding.append(row)
        used = sum(self._need(row, ACTIVE_STAGE[S(row.state)]) for row in holding)
        self._admit(holding, used, self.clock())
        self.stop_orphans()
        self._track()
        return self._counts()

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
            if not ok and owner_dead(holder):  # SIGKILLed on this host: take over now
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
                if self.stop is not None and self.stop.is_set():
                    raise Drained(self.campaign, self.drain(self.stop_reason), self.stop_reason)
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
                self._pause()
        except LeaseLost:
            lost = True  # the lease is another orchestrator's now: touch nothing, not even to release it
            raise
        finally:
            if not lost:
                self.ledger.release_driver(self.campaign, self.owner)

    def _pause(self) -> None:
        """One poll interval; cut short when `stop` is set."""
        if self.stop is None:
            time.sleep(self.cfg.poll_s)
        else:
            self.stop.wait(self.cfg.poll_s)

    def _counts(self) -> dict[str, int]:
        counts: dict[str, int] = {}
        for r in self.ledger.runs(self.campaign):
            counts[r.state] = counts.get(r.state, 0) + 1
        return counts
