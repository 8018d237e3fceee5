"""The run state machine. Every ledger transition is checked against `ALLOWED`.

planned → queued → training → trained → evaluating → recorded; any active state may go to
failed (with stage and reason) or cancelled; failed/cancelled go back to queued only through
an explicit retry/resume; a run whose cluster vanished mid-stage goes back to queued (not failed:
rule 5) and a stage whose lease expired is requeued by the next orchestrator. A recorded run whose
outputs no longer verify (records file deleted) is reopened to trained (re-run the record stage) or
queued (training outputs gone too) by `Ledger.reopen` only (the scheduler's repair on resume): no
ordinary transition leaves recorded.
"""

from __future__ import annotations

from enum import StrEnum
from wtcommon.errors import WindtunnelError


class RunState(StrEnum):
    """A run's state. A StrEnum whose names equal its values, so a member equals, hashes and formats as the
    plain string the ledger stores (`row.state` is a str; `{RunState.failed: ...}[row.state]` works), and
    reprs as that string too, so a printed mapping of states reads `{'recorded': 3}` as the text it stood for."""

    planned = "planned"
    queued = "queued"
    training = "training"
    trained = "trained"
    evaluating = "evaluating"
    recorded = "recorded"
    failed = "failed"
    cancelled = "cancelled"

    def __repr__(self) -> str:
        return repr(self.value)


S = RunState
ALLOWED: dict[RunState, frozenset[RunState]] = {
    S.planned: frozenset({S.queued, S.cancelled}),
    S.queued: frozenset({S.training, S.evaluating, S.cancelled, S.failed, S.planned}),
    S.training: frozenset({S.trained, S.failed, S.cancelled, S.queued}),
    S.trained: frozenset({S.evaluating, S.failed, S.cancelled, S.queued}),
    S.evaluating: frozenset({S.recorded, S.failed, S.cancelled, S.trained}),
    S.recorded: frozenset(),
    S.failed: frozenset({S.queued, S.cancelled}),
    S.cancelled: frozenset({S.queued}),
}
# A job runs for the run in an ACTIVE state; the stage it runs (the scheduler's and the attempts' stage name).
ACTIVE_STAGE: dict[RunState, str] = {S.training: "train", S.evaluating: "evaluate"}
ACTIVE = frozenset(ACTIVE_STAGE)
# A WAITING run is ready for the stage named here.
WAITING_STAGE: dict[RunState, str] = {S.queued: "train", S.trained: "evaluate"}
TERMINAL = frozenset({S.recorded, S.failed, S.cancelled})
PENDING = frozenset(set(RunState) - TERMINAL)  # not finished yet: planned … evaluating
REOPEN = frozenset({S.trained, S.queued})  # where `Ledger.reopen` may send a recorded run


class AttemptStatus(StrEnum):
    """An attempt's status (the `attempts` table). `failed`/`cancelled` are spelled like run states but are
    another vocabulary: an attempt ends, its run may go back to queued."""

    running = "running"
    succeeded = "succeeded"
    failed = "failed"
    cancelled = "cancelled"


class IllegalTransition(WindtunnelError, RuntimeError):
    """A transition the state machine does not allow (or the run was not in the expected state)."""


def check(src: RunState, dst: RunState) -> None:
    s, d = RunState(src), RunState(dst)
    if d not in ALLOWED[s]:
        raise IllegalTransition(f"illegal transition {s.value} → {d.value}; allowed: "
                                f"{sorted(x.value for x in ALLOWED[s])}")
