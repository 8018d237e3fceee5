"""What a campaign's own finished runs say its stages cost (issue 58): `campaign plan --workdir W` beside the
declared estimate.

The declared cost (`compute.hours_per_run` for `compute.hours_at_steps` steps, training only) is a guess made
before anything ran, and on a CPU campaign it left out evaluation and every stage's start. Once runs of the
campaign have finished in the work dir, its ledger holds each stage attempt's wall time: a train stage is
modelled as seconds per step (its wall time over the run's steps, start-up included, so a short run overstates
a step a little), an evaluate stage as seconds per scored checkpoint; each a median over the finished runs. The
duration is then the same list scheduling as the declared one (`accounting.makespan_hours`) with evaluation in.
"""

from __future__ import annotations

import statistics
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

from orchestrator.engine.grid import RunSpec
from orchestrator.engine.ledger.states import AttemptStatus
from orchestrator.engine.workdir import Workdir


@dataclass(frozen=True)
class MeasuredCost:
    """Medians over `runs` finished runs of the campaign in `workdir`; `hours` the planned runs' duration on
    `slots` job slots (CPU) or GPUs, None when a run cannot be scheduled."""

    workdir: str
    runs: int
    train_s_per_step: float
    eval_s_per_checkpoint: float
    hours: float | None = None
    slots: int = 0

    def run_hours(self, r: RunSpec) -> float:
        from orchestrator.accounting import checkpoints_evaluated

        return (r.steps * self.train_s_per_step + checkpoints_evaluated(r) * self.eval_s_per_checkpoint) / 3600

    def to_dict(self) -> dict[str, Any]:
        return {k: (round(v, 4) if isinstance(v, float) else v) for k, v in asdict(self).items()}


def measured_cost(workdir: Path, campaign: str, planned: list[RunSpec], gpus: int) -> MeasuredCost | None:
    """The campaign's finished stages in `workdir`'s ledger, or None (no ledger, never created here; no finished
    train and evaluate stage yet)."""
    from orchestrator.accounting import CPU_SLOTS, checkpoints_evaluated, makespan_hours
    from orchestrator.engine.ledger import open_ledger

    wd = Workdir.of(workdir)
    if not wd.has_ledger():
        return None
    led = open_ledger(wd)
    try:
        if campaign not in led.campaigns():
            return None
        specs = {r.run_key: RunSpec.from_json(r.spec_json) for r in led.runs(campaign)}
        attempts = led.attempts(campaign)
    finally:
        led.close()
    per_step, per_ckpt, done = [], [], set()
    for a in attempts:
        spec = specs.get(a.run_key)
        if a.status != AttemptStatus.succeeded or a.ended_at is None or spec is None:
            continue
        wall = a.ended_at - a.started_at
        if a.stage == "train":
            per_step.append(wall / max(1, spec.steps))
            done.add(a.run_key)
        elif a.stage == "evaluate":
            per_ckpt.append(wall / checkpoints_evaluated(spec))
    if not per_step or not per_ckpt:
        return None
    cost = MeasuredCost(str(workdir), len(done), statistics.median(per_step), statistics.median(per_ckpt))
    timed = [replace(r, est_hours=cost.run_hours(r)) for r in planned]
    cpu = all(r.gpus == 0 for r in planned)
    return replace(cost, hours=makespan_hours(timed, gpus, ndigits=4), slots=CPU_SLOTS if cpu else gpus)
