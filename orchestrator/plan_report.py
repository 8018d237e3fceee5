"""What `campaign plan` reports of a campaign before any compute, as one typed `PlanReport`: the accounting
(orchestrator.engine.grid), the duration on the cluster, each run, and at plan time the power table and a sequential
seed design for a power target (analysis/power.py, analysis/sequential/plan.py). The command prints it."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from wtcommon.errors import as_user_error

if TYPE_CHECKING:
    from orchestrator.accounting import Accounting
    from orchestrator.measured_cost import MeasuredCost

DURATION_METHOD = ("longest-first list scheduling of the runs' estimated hours on the GPUs; no failures, retries "
                   "or evaluation time")


def run_rows(runs: list) -> list[dict[str, Any]]:
    """One row per planned run: what `plan --runs` lists and `plan --format csv` writes."""
    return [{"run_id": r.run_id, "run_key": r.run_key, "sub_campaign": r.sub_campaign, "model": r.model,
             "policy": r.policy.name, "seed": r.seed, "gpus": r.gpus, "est_hours": round(r.est_hours, 3)}
            for r in runs]


@dataclass(frozen=True)
class Duration:
    """Wall hours (and days) of the runs on `gpus` GPUs, by `method`; None when a run needs more GPUs."""

    gpus: int
    hours: float | None
    days: float | None
    method: str = DURATION_METHOD


@dataclass(frozen=True)
class PlanReport:
    """`campaign plan`'s report: the accounting, the duration, and on request every run, the power table and a
    sequential seed design (those two are the analysis layer's JSON-ready mappings)."""

    accounting: Accounting
    duration: Duration
    runs: list[dict[str, Any]] | None = None
    power: dict[str, Any] | None = None
    sequential_plan: dict[str, Any] | None = None
    measured: MeasuredCost | None = None  # with --workdir, once runs of the campaign finished there

    def to_dict(self) -> dict[str, Any]:
        """The JSON form: the accounting's keys, then `duration`, and `runs`, `power`, `sequential_plan` and
        `measured` when present."""
        out: dict[str, Any] = {**self.accounting.to_dict(), "duration": asdict(self.duration)}
        for key in ("runs", "power", "sequential_plan"):
            if getattr(self, key) is not None:
                out[key] = getattr(self, key)
        if self.measured is not None:
            out["measured"] = self.measured.to_dict()
        return out


def plan_report(spec, runs: list, *, gpus: int | None = None, with_runs: bool = False, prior: Path | None = None,
                sd: float | None = None, margin: float = 1.0, target_power: float | None = None,
                effect: float | None = None, gpu_budget: float | None = None, familywise: str = "holm",
                sims: int = 400, workdir: Path | None = None) -> PlanReport:
    """The accounting of `runs` plus `duration` on `gpus` (default: the campaign's nodes × GPUs per node),
    `runs` (with `with_runs`), `power` (with `prior` records or a stated `sd`), `sequential_plan` (with a
    `target_power` for a real `effect`, checked against `gpu_budget` GPU-hours) and `measured` (the stage costs of
    the campaign's finished runs in `workdir`, when there are some). Bad records or settings for the power table
    raise `UserError` (exit 2) with the library's message."""
    from orchestrator.accounting import accounting, makespan_hours
    from orchestrator.measured_cost import measured_cost

    acc = accounting(spec, runs)
    n_gpus = gpus or spec.compute.nodes * spec.compute.gpus_per_node
    span = makespan_hours(runs, n_gpus)
    duration = Duration(n_gpus, span, None if span is None else round(span / 24, 1))
    power = seq = None
    if prior is not None or sd is not None:
        from analysis.power import power_section

        with as_user_error():  # RecordsError/SuiteError are ours; a library's ValueError on the records too
            power = power_section([r.flat() for r in runs], margin=margin, sd=sd,
                                  prior_path=str(prior) if prior else None, suite=spec.suite)
    if target_power is not None and effect is not None:
        from analysis.sequential.plan import campaign_comparisons, recommend

        with as_user_error():
            comp = campaign_comparisons([r.flat() for r in runs], (power or {})["comparisons"])
        seq = recommend(comp, power=target_power, effect=effect, budget=gpu_budget, n_sims=sims,
                        familywise=familywise)
        seq["plan_gpu_h"], seq["plan_runs"] = acc.gpu_hours, acc.total_runs
        seq["ratio_to_plan_gpu_h"] = (seq["recommended"]["gpu_h"] / acc.gpu_hours
                                      if seq["recommended"] and acc.gpu_hours else None)
    measured = measured_cost(workdir, spec.name, runs, n_gpus) if workdir is not None else None
    return PlanReport(acc, duration, run_rows(runs) if with_runs else None, power, seq, measured)

