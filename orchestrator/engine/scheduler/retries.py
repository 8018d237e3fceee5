"""How the scheduler answers a failed stage, and reruns: the failure's class (deterministic configuration
errors and health gates are not retried; the rest retry with exponential backoff up to `max_attempts` per
stage, then `failed`, the dead letter), the runs of the same configuration stopped before they start,
`campaign retry`, and what `resume` reopens (infrastructure failures; recorded runs whose records no
longer verify).
"""

from __future__ import annotations

import json
from typing import Any
from collections.abc import Mapping

from orchestrator.engine.ledger import IllegalTransition, RunState
from orchestrator.engine.ledger.base import RunRow
from orchestrator.engine.ledger.states import ACTIVE_STAGE, AttemptStatus
from orchestrator.engine.scheduler.core import SchedulerBase
from orchestrator.engine.stages import evaluated_key

S = RunState


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
                "job_supervisor_actor_start_timeout", "unexpectedly exited", "worker died",
                # a verl rollout start-up or weight sync past its bound, ended by the launcher (training/rollout_guard)
                "rolloutstallerror")


def config_identity(spec: Mapping[str, Any]) -> str:
    """A run's configuration without its seed (run_key and run_id contain the seed): runs with equal
    identities differ only by seed, so a deterministic configuration error in one holds for all."""
    d = {k: v for k, v in spec.items() if k not in ("seed", "run_key", "run_id")}
    return json.dumps(d, sort_keys=True, default=str)


class Retries(SchedulerBase):
    """Failed stages (retried or dead-lettered), retries asked for, and the runs `resume` reopens."""

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

    def drain(self, reason: str) -> list[str]:
        """The allocation is ending (a Slurm time limit or preemption: SIGTERM): stop every in-flight stage's job
        and record its attempt as failed, class `infra`, the run back to where that stage starts (queued /
        trained) without counting against its retry cap, so the next driver (`campaign resume`, the next
        allocation) runs the stage again and nothing finished is redone. Run ids drained."""
        out = []
        for row in self.ledger.runs(self.campaign, [S.training, S.evaluating]):
            if not self._claim(row):
                continue  # another live orchestrator drives it
            row = self.ledger.get(self.campaign, row.run_key)
            if S(row.state) not in ACTIVE_STAGE:
                self.ledger.release(self.campaign, row.run_key, self.owner)
                continue
            stage = ACTIVE_STAGE[S(row.state)]
            self.executor.stop(row.submission_id)  # False when the cluster is already gone: recorded the same
            self.ledger.end_attempt(self.campaign, row.submission_id, AttemptStatus.failed, reason, "infra")
            try:
                r = self.ledger.transition(self.campaign, row.run_key, S.queued if stage == "train" else S.trained,
                                           expect=row.state, reason=f"drained ({stage}): {reason}",
                                           failure_class="infra", next_try_at=0.0)
            except IllegalTransition:
                continue
            finally:
                self.ledger.release(self.campaign, row.run_key, self.owner)
            self._notify(r, f"{stage} drained (infra): {reason}")
            out.append(row.run_id)
        self.ledger.event(self.campaign, "drained", f"{len(out)} in-flight stage(s): {reason}"[:500])
        return out

    def reopen_infra(self) -> list[str]:
        """Queue again the runs that failed for infrastructure reasons (a lost node, a dead head): nothing about
        their configuration was wrong, so `resume` gives them a fresh set of attempts (a verified train stage is
        skipped, not redone). Run ids reopened."""
        rows = [r for r in self.ledger.runs(self.campaign, [S.failed]) if r.failure_class == "infra"]
        for r in rows:
            self.retry([r], reason=f"reopened after an infrastructure failure: {r.reason[:300]}")
            self._notify(self.ledger.get(self.campaign, r.run_key), "reopened (infrastructure failure)")
        return [r.run_id for r in rows]

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
