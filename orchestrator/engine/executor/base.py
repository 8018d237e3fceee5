"""Executor interface: submit a stage job by a deterministic `submission_id`, poll it, stop it.

Implementations are chosen by address (Optuna-style): the Ray Jobs API for a local head or a
cluster. The orchestrator, not the job, accounts GPUs (verl allocates its own inside a job).
"""

from __future__ import annotations

import abc
from typing import TYPE_CHECKING
from dataclasses import dataclass
from collections.abc import Mapping, Sequence
from wtcommon.errors import ClusterError, WindtunnelError

if TYPE_CHECKING:
    from orchestrator.engine.placement import Node


class ClusterUnreachable(ClusterError):
    """The cluster could not be contacted. Never a run failure (rule 5): runs stay as they are."""


class NoJobAgent(ClusterUnreachable):
    """The head answers but its job agent is not up yet (a just-started head): worth waiting a little longer."""


class DuplicateSubmission(WindtunnelError, RuntimeError):
    """The submission_id already exists on the cluster: the caller reattaches instead of resubmitting."""


@dataclass(frozen=True)
class JobStatus:
    state: str  # PENDING | RUNNING | SUCCEEDED | FAILED | STOPPED | MISSING
    message: str = ""
    exit_code: int | None = None

    @property
    def done(self) -> bool:
        return self.state in ("SUCCEEDED", "FAILED", "STOPPED")


class Executor(abc.ABC):
    address: str

    @abc.abstractmethod
    def ping(self) -> None:
        """Raise ClusterUnreachable when the cluster does not answer."""

    @abc.abstractmethod
    def submit(self, submission_id: str, argv: Sequence[str], *, env: Mapping[str, str] | None = None,
               num_cpus: float = 0, num_gpus: float = 0) -> None: ...

    @abc.abstractmethod
    def status(self, submission_id: str) -> JobStatus: ...

    @abc.abstractmethod
    def logs(self, submission_id: str) -> str: ...

    @abc.abstractmethod
    def stop(self, submission_id: str) -> bool: ...

    def nodes(self) -> list[Node] | None:
        """The live cluster's nodes with Ray's own free GPUs, or None when this executor cannot tell (the
        scheduler then places runs on the campaign's declared cluster)."""
        return None


def submission_id(run_key: str, stage: str, attempt: int, campaign: str = "", instance: str = "") -> str:
    """Deterministic per (campaign instance, run, stage, attempt): a restarted orchestrator finds its
    job again, the same cell in two campaigns (same run_key) never collides on one cluster, and
    neither does the same campaign driven from two work dirs (each ledger has its own `instance`)."""
    from wtcommon.hashing import text_hash

    tag = text_hash(campaign, 6) if campaign else "x"
    return f"wt-{tag}-{instance}-{run_key}-{stage}-a{attempt}" if instance else f"wt-{tag}-{run_key}-{stage}-a{attempt}"


def submission_prefix(campaign: str, instance: str) -> str:
    """What every submission id of this campaign instance starts with (the reattachment check)."""
    return submission_id("", "", 0, campaign, instance).split("--", 1)[0] + "-"
