"""Ledger interface (Optuna-storage style): a small abstract base; implementations by URL."""

from __future__ import annotations

import abc
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any
from collections.abc import Callable, Iterable

from orchestrator.engine.ledger.states import AttemptStatus, RunState
from wtcommon.errors import RunFailed, WindtunnelError

if TYPE_CHECKING:
    from orchestrator.engine.grid import RunSpec


@dataclass
class RunRow:
    campaign: str
    run_key: str
    run_id: str
    state: RunState
    order: int
    gpus: int
    spec_json: str
    stage: str = ""
    reason: str = ""
    attempts: int = 0
    submission_id: str = ""
    lease_owner: str = ""
    lease_expires: float = 0.0
    next_try_at: float = 0.0
    failure_class: str = ""
    mlflow_run_id: str = ""
    compute: dict[str, Any] = field(default_factory=dict)
    outputs: dict[str, Any] = field(default_factory=dict)
    updated_at: float = 0.0
    superseded_by: str = ""  # run_key of the row that replaced this one (a changed spec); "" = current

    def __post_init__(self) -> None:
        self.state = RunState(self.state)  # the stored text becomes the member (an unknown one is refused)

    @property
    def spec(self) -> RunSpec:
        """The run's `RunSpec`, parsed from the stored `spec_json` (the one place a stored run spec is read:
        callers take this, never the JSON). Not cached: a row's fields stay its only state (`RunRow(**vars(row))`
        copies it)."""
        from orchestrator.engine.grid import RunSpec

        return RunSpec.from_json(self.spec_json)


@dataclass(frozen=True)
class Attempt:
    """One submission of one stage of a run (the `attempts` table): its job, when it ran and how it ended."""

    id: int
    campaign: str
    run_key: str
    attempt: int
    stage: str
    submission_id: str
    started_at: float
    ended_at: float | None
    status: AttemptStatus
    reason: str
    failure_class: str

    def __post_init__(self) -> None:
        object.__setattr__(self, "status", AttemptStatus(self.status))

    @property
    def duration_s(self) -> float | None:
        """Seconds from start to end; None while it runs."""
        return None if self.ended_at is None else float(self.ended_at) - float(self.started_at)


@dataclass(frozen=True)
class RunningAttempt(Attempt):
    """An attempt still marked running, with the state, current submission and generation of its run."""

    run_state: RunState = RunState.queued
    run_submission: str = ""
    superseded_by: str = ""

    def __post_init__(self) -> None:
        super().__post_init__()
        object.__setattr__(self, "run_state", RunState(self.run_state))


@dataclass(frozen=True)
class Event:
    """One line of a campaign's history (the `events` table): a transition (src -> dst) or a named event."""

    id: int
    ts: float
    campaign: str
    run_key: str
    kind: str
    src: str
    dst: str
    detail: str


class LedgerError(WindtunnelError, RuntimeError):
    """The ledger cannot be opened or used as configured (bad URL, missing driver); says what to fix."""

    exit_code = 2


class NotInLedger(WindtunnelError, KeyError):
    """A campaign or run the ledger does not hold was asked for; the message names it and the ledger."""

    exit_code = 2

    def __str__(self) -> str:  # KeyError's str would quote the message
        return str(self.args[0]) if self.args else ""


class CampaignBusy(WindtunnelError, RuntimeError):
    """Another live orchestrator holds the campaign's driver lease."""

    def __init__(self, campaign: str, holder: str, expires: float):
        self.campaign, self.holder, self.expires = campaign, holder, expires
        super().__init__(f"campaign {campaign!r} is being driven by orchestrator {holder} (its lease runs "
                         f"{max(0.0, expires - time.time()):.0f} s more and is renewed while it lives); "
                         "wait for it to finish, or stop that process first")


class LeaseLost(RunFailed):
    """This orchestrator's driver lease is gone: another orchestrator took the campaign over (a newer epoch),
    or the lease expired while this one was stopped or stalled. Its epoch (the fencing token every write of
    a driver carries) is stale, so the ledger refuses its writes; the driver stops without touching anything."""

    exit_code = 4

    def __init__(self, campaign: str, owner: str, epoch: int, holder: str, current: int, expired: bool = False):
        self.campaign, self.owner, self.epoch, self.holder, self.current = campaign, owner, epoch, holder, current
        if holder and holder != owner:
            what = f"orchestrator {holder} took it over (epoch {current})"
        elif current != epoch:
            what = f"another orchestrator drove it meanwhile (epoch {current}) and released it"
        else:
            what = "it expired while this process was stopped or stalled past its lease"
        super().__init__(f"campaign {campaign!r}: this orchestrator ({owner}) lost its driver lease (epoch {epoch}): "
                         f"{what}; it stopped at once and wrote nothing more (no ledger, job or MLflow write). "
                         "`campaign status` shows who drives it; `campaign resume` continues it when it is free")


@dataclass
class UpsertDiff:
    """What a (re)submission changed: run_ids new, changed (new run_key) and unchanged; removed.
    `refreshed`: unchanged run_keys whose stored spec changed in what does not retrain (evaluation settings,
    references); `reevaluate`: the run ids whose evaluation settings changed (filled by the session)."""

    new: list[str] = field(default_factory=list)
    changed: list[str] = field(default_factory=list)
    unchanged: list[str] = field(default_factory=list)
    removed: list[str] = field(default_factory=list)
    refreshed: list[str] = field(default_factory=list)
    reevaluate: list[str] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        return {k: len(getattr(self, k)) for k in ("new", "changed", "unchanged", "removed", "reevaluate")} | {
            "changed_ids": self.changed[:50], "removed_ids": self.removed[:50],
            "reevaluate_ids": self.reevaluate[:50]}


class Ledger(abc.ABC):
    """Everything the scheduler, session, tracking and CLI use of a ledger: callers are typed against this
    class, never an implementation (`open_ledger` picks one by URL)."""

    url: str  # where it lives (an SQLAlchemy URL); shown to users and used for the sequential-looks table

    @abc.abstractmethod
    def upsert_campaign(self, name: str, spec_json: str, runs: Iterable[dict[str, Any]]) -> UpsertDiff:
        """Idempotent by run_key; a run_id whose run_key changed supersedes (cancels) the old row."""

    @abc.abstractmethod
    def runs(self, campaign: str, states: Iterable[RunState] | None = None) -> list[RunRow]: ...

    @abc.abstractmethod
    def get(self, campaign: str, run_key: str) -> RunRow: ...

    def find(self, campaign: str, ident: str) -> list[RunRow]:
        """Runs whose run_key or run_id equals `ident`, or whose run_id starts with it."""
        return [r for r in self.runs(campaign) if r.run_key == ident or r.run_id == ident or r.run_id.startswith(ident)]

    @abc.abstractmethod
    def transition(self, campaign: str, run_key: str, to: RunState, *, expect: RunState | None = None,
                   stage: str | None = None, reason: str | None = None, **fields: Any) -> RunRow: ...

    @abc.abstractmethod
    def update(self, campaign: str, run_key: str, **fields: Any) -> None: ...

    @abc.abstractmethod
    def reopen(self, campaign: str, run_key: str, to: RunState, reason: str, **fields: Any) -> RunRow:
        """A recorded run whose outputs no longer verify goes back to trained or queued."""

    @abc.abstractmethod
    def claim(self, campaign: str, run_key: str, owner: str, ttl_s: float) -> bool: ...

    @abc.abstractmethod
    def heartbeat(self, owner: str, ttl_s: float) -> int: ...

    @abc.abstractmethod
    def release(self, campaign: str, run_key: str, owner: str) -> None: ...

    @abc.abstractmethod
    def add_attempt(self, campaign: str, run_key: str, stage: str, submission_id: str) -> int: ...

    @abc.abstractmethod
    def end_attempt(self, campaign: str, submission_id: str, status: AttemptStatus | str, reason: str = "",
                    failure_class: str = "") -> None: ...

    @abc.abstractmethod
    def attempts(self, campaign: str, run_key: str | None = None) -> list[Attempt]: ...

    @abc.abstractmethod
    def events(self, campaign: str, run_key: str | None = None) -> list[Event]: ...

    @abc.abstractmethod
    def campaigns(self) -> list[str]: ...

    @abc.abstractmethod
    def campaign_spec(self, name: str) -> str | None: ...

    @abc.abstractmethod
    def campaign_instance(self, name: str) -> str:
        """The campaign's instance id in this ledger (created once); submission ids carry it."""

    @abc.abstractmethod
    def claim_driver(self, name: str, owner: str, ttl_s: float, *, steal_from: str = "") -> tuple[bool, str, float]:
        """Take the campaign's driver lease: (ok, holder, expires)."""

    @abc.abstractmethod
    def release_driver(self, name: str, owner: str) -> None: ...

    @abc.abstractmethod
    def driver_epoch(self, name: str) -> int:
        """The campaign's driver epoch: the fencing token, incremented on every takeover of the lease."""

    @abc.abstractmethod
    def check_driver(self, name: str) -> None:
        """Raise LeaseLost when this ledger object drives `name` under an epoch that is no longer current
        (another orchestrator took over); a no-op for a ledger object that does not drive it."""

    @abc.abstractmethod
    def driver(self, name: str) -> tuple[str, float] | None:
        """(holder, expires) of the campaign's driver lease, or None."""

    @abc.abstractmethod
    def superseded(self, campaign: str) -> list[RunRow]:
        """Rows of earlier generations of the campaign's runs."""

    @abc.abstractmethod
    def running_attempts(self, campaign: str) -> list[RunningAttempt]: ...

    @abc.abstractmethod
    def start_attempt(self, campaign: str, run_key: str, src: RunState, dst: RunState, stage: str,
                      submission_id: str) -> int: ...

    @abc.abstractmethod
    def event(self, campaign: str, kind: str, detail: str = "", run_key: str = "") -> None: ...

    @abc.abstractmethod
    def record_looks(self, campaign: str, rows: list[dict[str, Any]],
                     check: Callable[[list[dict[str, Any]]], None] | None = None) -> int:
        """Store interim-look rows (one per look x comparison, replacing the same key); `check` is given
        the campaign's stored rows inside the write transaction and raises to refuse the write."""

    @abc.abstractmethod
    def looks(self, campaign: str) -> list[dict[str, Any]]:
        """The campaign's stored look rows, ordered by look and comparison."""

    @abc.abstractmethod
    def schema_version(self) -> int: ...

    @abc.abstractmethod
    def close(self) -> None: ...
