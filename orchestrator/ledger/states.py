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

from enum import Enum


class RunState(str, Enum):
    planned = "planned"
    queued = "queued"
    training = "training"
    trained = "trained"
    evaluating = "evaluating"
    recorded = "recorded"
    failed = "failed"
    cancelled = "cancelled"


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
ACTIVE = frozenset({S.training, S.evaluating})
TERMINAL = frozenset({S.recorded, S.failed, S.cancelled})
REOPEN = frozenset({S.trained, S.queued})  # where `Ledger.reopen` may send a recorded run


class IllegalTransition(RuntimeError):
    """A transition the state machine does not allow (or the run was not in the expected state)."""


def check(src: RunState | str, dst: RunState | str) -> None:
    s, d = RunState(src), RunState(dst)
    if d not in ALLOWED[s]:
        raise IllegalTransition(f"illegal transition {s.value} → {d.value}; allowed: {sorted(x.value for x in ALLOWED[s])}")
