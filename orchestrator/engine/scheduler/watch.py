"""The scheduler watching its runs: each active run's job status moves the run on (done once its outputs
verify, rule 4; failed stages to `scheduler_retries`; a job the cluster lost is submitted again; a job id
of another campaign instance is never reattached), and MLflow is kept in step after every poll.

Every decision is made on the row re-read after claiming its lease, so a stale snapshot never drives a
transition.
"""

from __future__ import annotations

import sys

from orchestrator.engine.grid import RunSpec
from orchestrator.engine.ledger import IllegalTransition, LeaseLost, RunState
from orchestrator.engine.ledger.base import RunRow
from orchestrator.engine.ledger.states import ACTIVE, ACTIVE_STAGE, AttemptStatus
from orchestrator.engine.paths import run_dir
from orchestrator.engine.scheduler.jobs import Jobs
from orchestrator.engine.scheduler.retries import Retries, classify_failure
from orchestrator.engine.stages import evaluated_key

S = RunState


class Watching(Jobs, Retries):
    """Reconciles active runs with their jobs; syncs tracking."""

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
        """Act on the status of the run's current job; True while the run still holds resources."""
        stage = ACTIVE_STAGE[S(row.state)]
        if not self.ours(row.submission_id):
            return self._foreign(row, stage)
        st = self.executor.status(row.submission_id)
        self._job_state[row.run_key] = st.state
        if st.state == "MISSING":  # ledger says submitted, cluster never saw it (crash or new head)
            self._resubmit(row, stage)
            return True
        if not st.done:
            return True
        spec = self._spec(row)
        if st.state == "SUCCEEDED":
            self._succeeded(row, stage, spec)
            return False
        logs = self.executor.logs(row.submission_id)
        self._fail(row, stage, (st.message or st.state)[:500], classify_failure(st.message, logs, st.exit_code), logs)
        return False

    def _foreign(self, row: RunRow, stage: str) -> bool:
        """A job id of another campaign instance (a ledger copied from another work dir, or made before
        instance ids): never reattach; run the stage again under our own id."""
        self.ledger.end_attempt(self.campaign, row.submission_id, AttemptStatus.failed,
                                "submission id of another campaign instance")
        self.ledger.event(self.campaign, "foreign_submission", row.submission_id, row.run_key)
        back = S.queued if stage == "train" else S.trained
        self.ledger.transition(self.campaign, row.run_key, back, expect=row.state,
                               reason="resubmitting under this campaign instance's id", next_try_at=0.0)
        self.ledger.release(self.campaign, row.run_key, self.owner)
        return False

    def _succeeded(self, row: RunRow, stage: str, spec: RunSpec) -> None:
        """A job that succeeded: the stage is done once its outputs verify; an evaluation scored under
        settings the spec changed meanwhile runs again; anything else is a failed stage."""
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
            return
        got = evaluated_key(spec, self.workdir) if stage == "evaluate" else None
        if got not in (None, spec.eval_key):
            again = self.__dict__.setdefault("_reevaluated", {})  # run key -> re-evaluations this driver asked for
            if again.get(row.run_key, 0) >= 1:
                # this driver submitted it with these settings and it scored under others once more: the stage job
                # computes the key with other code than the driver (Windtunnel upgraded under a running campaign)
                self._fail(row, stage, f"the evaluate stage wrote evaluation key {got}, this driver's is "
                           f"{spec.eval_key}: the stage jobs run other Windtunnel code than the driver (upgraded "
                           "while the campaign ran?); stop it and run `campaign resume` with one version everywhere",
                           "error")
                return
            again[row.run_key] = again.get(row.run_key, 0) + 1
            # scored under the settings it was submitted with, and the spec changed them meanwhile: again
            self.ledger.end_attempt(self.campaign, row.submission_id, AttemptStatus.succeeded)
            r = self.ledger.transition(self.campaign, row.run_key, S.trained, expect=S.evaluating,
                                       reason="evaluation settings changed while it was evaluated: again")
            self.ledger.release(self.campaign, row.run_key, self.owner)
            self._notify(r, "re-evaluating: evaluation settings changed")
            return
        self._fail(row, stage, "outputs failed verification after the job succeeded", "error")

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
