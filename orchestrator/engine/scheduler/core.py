"""What every part of the scheduler shares: its configuration, the orchestrator's identity (and whether a
lease holder on this host is dead), and `SchedulerBase`, the state and small helpers the parts build on.

The parts (`scheduler_admission`, `scheduler_jobs`, `scheduler_watch`, `scheduler_retries`) are classes over
`SchedulerBase`; `orchestrator.engine.scheduler.loop.Scheduler` composes them and holds the fields.
"""

from __future__ import annotations

import os
import socket
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from collections.abc import Callable

from orchestrator.engine.executor.base import Executor, submission_prefix
from orchestrator.engine.grid import RunSpec
from orchestrator.engine.ledger import Ledger
from orchestrator.engine.ledger.base import RunRow


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


def orchestrator_id() -> str:
    return f"{socket.gethostname()}:{os.getpid()}"


def owner_dead(owner: str) -> bool:
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


class SchedulerBase:
    """The scheduler's fields (declared by the `Scheduler` dataclass, typed here for its parts) and the
    helpers every part uses: the campaign instance, GPU needs, change notices, run leases."""

    ledger: Ledger
    campaign: str
    executor: Executor
    workdir: Path
    cfg: SchedulerConfig
    owner: str
    on_change: Callable[[RunRow, str], None] | None
    python: str
    verifiers: dict[str, Callable[[RunSpec, Path], dict | None]]
    clock: Callable[[], float]
    write_specs: bool
    on_busy: Callable[[str, float], None] | None
    tracker: Any
    _instance: str | None
    _nnodes: dict[str, int]
    _submitted_at: dict[str, float]
    _job_state: dict[str, str]
    _passed: dict[str, int]

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
        if row.lease_owner and row.lease_owner != self.owner and owner_dead(row.lease_owner):
            self.ledger.update(self.campaign, row.run_key, lease_expires=0.0)
        return self.ledger.claim(self.campaign, row.run_key, self.owner, self.cfg.lease_ttl_s)
