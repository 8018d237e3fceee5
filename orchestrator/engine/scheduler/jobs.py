"""The scheduler's side of a run's jobs on the executor: the stage command line, starting a stage's next
attempt, submitting a lost job again under its id, and stopping jobs (orphans of finished or superseded
attempts; cancelled runs).

Every submission is preceded by a driver check (`Ledger.check_driver`), so a driver whose lease was taken
over never starts a job.
"""

from __future__ import annotations

from pathlib import Path

from orchestrator.engine.executor.base import ClusterUnreachable, DuplicateSubmission, submission_id
from orchestrator.engine.grid import RunSpec
from orchestrator.engine.ledger import IllegalTransition, RunState
from orchestrator.engine.ledger.base import RunRow
from orchestrator.engine.ledger.states import ACTIVE, WAITING_STAGE, AttemptStatus
from orchestrator.engine.paths import run_dir
from orchestrator.engine.scheduler.core import SchedulerBase
from orchestrator.engine.stages import write_run_spec

S = RunState


class Jobs(SchedulerBase):
    """Starts, restarts and stops the campaign's stage jobs."""

    def argv(self, stage: str, spec: RunSpec, attempt: str = "") -> list[str]:
        path = write_run_spec(spec, self.workdir) if self.write_specs else Path("run_spec.json")
        return [self.python, "-m", "orchestrator.engine.stages", stage, "--run-spec", str(path), "--workdir",
                str(self.workdir), *(["--attempt", attempt] if attempt else [])]

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

    def _resubmit(self, row: RunRow, stage: str) -> None:
        """Submit the run's current attempt again under its own id: the ledger says it was submitted, the
        cluster never saw it (a crash between the two, or a new head)."""
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
            return
        self.ledger.event(self.campaign, "resubmitted", row.submission_id, row.run_key)

    def stop_orphans(self) -> int:
        """Stop jobs whose attempt is still marked running but is not its run's current job (the run was
        superseded by a changed spec, cancelled, or moved on): they would only burn the cluster."""
        n = 0
        for a in self.ledger.running_attempts(self.campaign):
            if not a.superseded_by and S(a.run_state) in ACTIVE and a.run_submission == a.submission_id:
                continue
            why = "superseded by a changed spec" if a.superseded_by else f"run is {a.run_state}"
            if self.ours(a.submission_id):
                self.executor.stop(a.submission_id)
            self.ledger.end_attempt(self.campaign, a.submission_id, AttemptStatus.cancelled, why)
            n += 1
        return n

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
                    from orchestrator.engine.stages import cancel_attempt

                    cancel_attempt(run_dir(self.workdir, self._spec(row)), row.submission_id)
                self.executor.stop(row.submission_id)
                self.ledger.end_attempt(self.campaign, row.submission_id, AttemptStatus.cancelled)
            self.ledger.transition(self.campaign, row.run_key, S.cancelled, reason=reason)
            n += 1
        return n
