"""What `campaign plan` prints of a planned campaign's accounting (orchestrator/plan_report.py): one line of
runs, cost and duration, the tables by sub-campaign, model, policy, seed and regime, and on request the seed
matrix, every run, the assumptions, the power table and the sequential design; warnings go to stderr. CSV is
one row per run. Heavy imports (analysis) happen inside the functions so `campaign --help` stays fast."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from rich.table import Table

from cli.console import err, out

if TYPE_CHECKING:
    from orchestrator.accounting import Accounting
    from orchestrator.engine.grid import RunSpec
    from orchestrator.plan_report import PlanReport
    from orchestrator.engine.spec import CampaignSpec

BREAKDOWNS = (("sub-campaign", "by_sub_campaign"), ("model", "by_model"), ("record campaign", "by_campaign_label"),
              ("policy", "by_policy"), ("seed", "by_seed"), ("regime", "by_regime"))


def print_plan_csv(run_rows: list[dict[str, Any]]) -> None:
    """--format csv: one row per run on stdout."""
    import csv
    import sys

    w = csv.DictWriter(sys.stdout, fieldnames=list(run_rows[0]) if run_rows else ["run_id"])
    w.writeheader()
    w.writerows(run_rows)


def print_plan(spec: CampaignSpec, rs: list[RunSpec], report: PlanReport, run_rows: list[dict[str, Any]], *,
               matrix: bool, runs: bool) -> None:
    """The table form of the accounting: what the campaign costs and how long it takes, then the details."""
    acc = report.accounting
    _print_headline(spec, rs, report)
    _print_breakdowns(acc)
    if matrix:
        _print_matrix(acc, rs)
    if runs:
        _print_runs(run_rows)
    if acc.assumptions:
        _print_assumptions(acc.assumptions)
    _print_power(report)
    _print_warnings(acc)


def _print_headline(spec: CampaignSpec, rs: list[RunSpec], report: PlanReport) -> None:
    """One line: runs, training (and evaluation) cost and the duration on the cluster; a CPU campaign's cost is
    CPU-hours, not "0.0 GPU-hours"."""
    acc = report.accounting
    n_gpus, span = report.duration.gpus, report.duration.hours
    where = f"{n_gpus} GPUs" if any(r.gpus for r in rs) else "2 CPU job slots"
    dur = ("cannot be scheduled (a run needs more GPUs than available)" if span is None
           else f"≈{span:,.1f} h ({span / 24:,.1f} days) on {where}")
    ev = ("evaluation GPU-hours not declared (compute.eval_gpu_hours_per_checkpoint)"
          if acc.eval_gpu_hours is None
          else f"evaluation ≈{acc.eval_gpu_hours:,} GPU-hours for {acc.eval_checkpoints} checkpoints"
          + ("" if acc.eval_sample_factor in (None, 1.0)
             else f" (sampled decoding: ×{acc.eval_sample_factor:.2f} the tokens of one greedy pass)"))
    if not any(r.gpus for r in rs):  # a CPU campaign: its cost is CPU-hours, not "0.0 GPU-hours"
        from orchestrator.progress import format_duration

        run_h = sum(r.est_hours for r in rs)
        cpu_h = run_h * spec.compute.cpus_per_run
        dur = f"≈{format_duration(run_h * 3600 / 2)} on 2 CPU job slots"
        cost = (f"{cpu_h:,.1f} training CPU-hours" if cpu_h >= 1
                else f"{format_duration(cpu_h * 3600)} of training CPU")
        out.print(f"[bold]{spec.name}[/]: {acc.total_runs} runs on CPU, ≈{cost} ({spec.compute.cpus_per_run} "
                  f"CPU per run, compute.hours_per_run); duration {dur}", highlight=False)
    else:
        out.print(f"[bold]{spec.name}[/]: {acc.total_runs} runs, ≈{acc.gpu_hours:,} training GPU-hours; "
                  f"{ev}; duration {dur}", highlight=False)
    if acc.budget is not None:
        b = acc.budget
        share = "" if b["lower_share"] is None else f", at least {b['lower_share']:.0%} of it"
        out.print(f"budget {b['rollout_tokens']:,} rollout tokens: each of the {b['runs']} budgeted runs stops after "
                  f"between {b['steps_at_least']} (every response at max_new_tokens) and {b['steps_cap']} steps "
                  f"(the cap); the estimate above is for the cap{share}", highlight=False)
    m = report.measured
    if m is not None:  # what the campaign's finished runs took: evaluation and every stage's start included
        from orchestrator.progress import format_duration

        where = f"{m.slots} CPU job slots" if not any(r.gpus for r in rs) else f"{m.slots} GPUs"
        took = ("cannot be scheduled" if m.hours is None
                else f"≈{format_duration(m.hours * 3600)} for every planned run on {where}")
        out.print(f"measured on {m.runs} finished run(s) in {m.workdir}: {m.train_s_per_step:,.1f} s a training step "
                  f"and {m.eval_s_per_checkpoint:,.1f} s an evaluated checkpoint (stage start-up included); "
                  f"{took}", highlight=False)


def _print_breakdowns(acc: Accounting) -> None:
    """Runs by sub-campaign, model, record campaign, policy, seed and regime (GPU-hours for the first two)."""
    for title, key in BREAKDOWNS:
        t = Table(title=f"runs by {title}")
        t.add_column(title)
        t.add_column("runs", justify="right")
        gh = {"by_sub_campaign": acc.gpu_hours_by_sub_campaign, "by_model": acc.gpu_hours_by_model}.get(key)
        if gh is not None:
            t.add_column("GPU-h", justify="right")
        for k, v in getattr(acc, key).items():
            t.add_row(str(k), str(v), *([f"{gh.get(k, 0):,}"] if gh is not None else []))
        out.print(t)


def _print_matrix(acc: Accounting, rs: list[RunSpec]) -> None:
    """--matrix: the seeds of each policy × model."""
    models = sorted({r.model for r in rs})
    t = Table(title="seeds by policy × model")
    t.add_column("policy")
    for m in models:
        t.add_column(m)
    for pol, by_m in acc.matrix.items():
        t.add_row(pol, *[",".join(map(str, by_m.get(m, []))) or "—" for m in models])
    out.print(t)


def _print_runs(run_rows: list[dict[str, Any]]) -> None:
    """--runs: every run (id, run_key, sub-campaign, GPUs, estimated hours)."""
    t = Table(title="runs")
    for c in ("run_id", "run_key", "sub_campaign", "gpus", "est_hours"):
        t.add_column(c, justify="right" if c in ("gpus", "est_hours") else "left")
    for r in run_rows:
        t.add_row(r["run_id"], r["run_key"], r["sub_campaign"], str(r["gpus"]), f"{r['est_hours']:.2f}")
    out.print(t)


def _print_assumptions(assumptions: list[dict[str, Any]]) -> None:
    """Every assumption the campaign's YAMLs declare, with its basis."""
    t = Table(title="assumptions (from the campaign YAMLs)")
    for c in ("where", "key", "value", "basis", "note"):
        t.add_column(c)
    for a in assumptions:
        t.add_row(a["where"], a["key"], "" if a["value"] is None else str(a["value"]), a["basis"], a["note"])
    out.print(t)


def _print_power(report: PlanReport) -> None:
    """The power table (--prior/--sd) and the sequential seed design for a --power target, when asked."""
    if report.power is not None:
        from analysis.power import power_table

        out.print(power_table(report.power))
    if report.sequential_plan is not None:
        from analysis.sequential.plan import plan_lines

        tab, lines = plan_lines(report.sequential_plan, report.accounting.gpu_hours, report.accounting.total_runs)
        out.print(tab)
        for line in lines:
            out.print(line, highlight=False)


def _print_warnings(acc: Accounting) -> None:
    """On stderr: runs without their campaign-local reference, run counts the overridden grid changed, and in a
    budgeted campaign what its checkpoint grid cannot resolve for tokens-to-target."""
    if acc.missing_references:
        err.print(f"warning: {len(acc.missing_references)} runs lack their campaign-local reference, "
                  f"e.g. {acc.missing_references[:3]}")
    for where, m in acc.expected_runs_mismatch.items():
        err.print(f"warning: {where}: declares {m['expected']} runs, the overridden grid has {m['planned']}",
                  highlight=False)
    for line in (acc.budget or {}).get("grid_warnings", []):  # what the checkpoint grid cannot resolve (issue 58)
        err.print(f"warning: tokens-to-target: {line}", highlight=False)
