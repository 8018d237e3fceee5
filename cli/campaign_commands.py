"""`campaign plan|submit|status|watch|resume|cancel|retry|logs|demo` and `campaign data train`.

The commands parse arguments and print; driving a campaign is `orchestrator.campaign`, what `status` shows of
its progress is `orchestrator.progress`. Heavy imports (Ray, MLflow, pandas, Hydra) happen inside the commands
so `campaign --help` is fast.
Exit codes: 2 bad input (spec, records, unknown campaign/run), 3 cluster unreachable (no run is
marked failed), 1 runs ended failed.
"""

from __future__ import annotations

import os
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Annotated

import typer
from rich.table import Table

from cli.console import err, out
from cli.groups import command, subgroup
from cli.options import CampaignArg, JsonOpt, LedgerUrlOpt, OutDirOpt, RayAddressOpt, RunsArg, WorkdirOpt
from wtcommon.errors import ClusterError, UserError
from wtcommon.jsonsafe import dumps as json_dumps  # strict JSON: NaN/Infinity are null


from campaigns import config_root

DEMO_CAMPAIGN = config_root() / "demo.yaml"
DEMO_CAMPAIGNS = {"local": DEMO_CAMPAIGN, "verl": config_root() / "demo_verl.yaml"}


def _plan(campaign: str, overrides: list[str] | None, data_root: Path | None = None):
    """Compose, validate and expand a campaign (SpecError/CorpusError, exit 2, naming file and key)."""
    from orchestrator.session import plan

    return plan(campaign, overrides or [], data_root=data_root)


def _preflight(spec, runs, eval_data: Path | None, *, local_head: bool, ray_address: str | None = None,
               workdir: Path | None = None, runs_on_local_head: bool = False) -> None:
    """Policies, seeds, recipes, resources and (when `eval_data` is given) the evaluation data, before any
    compute; every problem is listed at once and nothing is written (exit 2). With `ray_address`, runs are
    checked against the live cluster's nodes (an unreachable cluster exits 3, a refused token 2)."""
    from orchestrator.preflight import Context, preflight

    nodes, where = None, f"the live cluster at {ray_address}" if ray_address else ""
    if ray_address:
        from orchestrator.session import cluster_executor

        nodes = cluster_executor(ray_address, workdir).nodes()
    elif runs_on_local_head:
        # `submit` without --ray-address runs on the work dir's local head, which has no GPUs (CPU campaigns)
        from orchestrator.placement import Node

        cpus = float(os.cpu_count() or 1)
        nodes, where = [Node("local-head", 0.0, 0.0, cpus, cpus)], ("the work dir's local head, which has no GPUs "
                                                                     "(GPU runs go to your cluster: --ray-address)")
    preflight(spec, runs, Context(data_dir=eval_data, local_cpus=os.cpu_count() if local_head else None,
                                  nodes=nodes, cluster_address=where))


def _cluster_checks(address: str, workdir: Path, runs) -> None:
    """`campaign doctor`'s quick part before any compute on a user's cluster: every node's versions against this
    machine's, the work dir shared with every node, and room for each run shape; exit 2 listing the problems."""
    from orchestrator.cluster_doctor import cheap_checks
    from orchestrator.session import cluster_executor

    needs = sorted({(f"model {r.model}", r.gpus_per_node, r.nnodes) for r in runs if r.gpus_per_node})
    bad = cheap_checks(cluster_executor(address, workdir), workdir.resolve(), needs=needs)
    if bad:
        raise UserError(f"{len(bad)} problem(s) with the cluster at {address} found before any compute (`campaign "
                        f"doctor "
                        f"--workdir {workdir}` shows every "
                        f"check):\n" + "\n".join(f"  - {r.node}: {r.check}: {r.result}; "
                                                                                   f"fix: {r.fix}" for r in bad))


def _session(workdir: Path, ledger_url: str | None = None, ray_address: str | None = None, *,
             remember: bool = False):
    """`orchestrator.campaign.open_session`; a ledger that cannot be opened (LedgerError) is bad input (exit 2)."""
    from orchestrator.campaign import open_session

    return open_session(workdir, ledger_url, ray_address, remember=remember)


def _check_ray_address(ray_address: str | None) -> None:
    """A malformed --ray-address is bad input (exit 2), found before the campaign is planned or anything written."""
    from orchestrator.ray_address import parse_ray_address

    if ray_address is not None:
        parse_ray_address(ray_address)


def _existing_workdir(workdir: Path, ledger_url: str | None, campaign: str | None = None) -> None:
    """Commands that act on a submitted campaign never create a work directory (a mistyped --workdir
    would otherwise leave an empty ledger behind). The message names the campaign first: the user typed it."""
    from orchestrator.workdir import Workdir

    Workdir(workdir, ledger_url).require_ledger(workdir, campaign)


@contextmanager
def _cluster_context(what: str) -> Iterator[None]:
    """An unreachable cluster's error (exit 3) with what it means for this command added; a refused token
    (exit 2, the user's to fix) as it is."""
    from orchestrator.executor import ClusterUnreachable
    from orchestrator.executor.ray_jobs import ClusterAuthError

    try:
        yield
    except ClusterAuthError:
        raise
    except ClusterUnreachable as exc:
        raise ClusterError(f"{exc}; {what}") from exc


def _campaign_name(arg: str) -> str:
    """A campaign name from the one argument convention: a ledger name, or the campaign file/directory
    `submit` was given (its `name`)."""
    if arg.endswith((".yaml", ".yml")) or os.sep in arg or Path(arg).is_dir():
        from orchestrator.spec import load_campaign

        return load_campaign(arg).name
    return arg


def _require_campaign(sess, campaign: str) -> None:
    if sess.ledger.campaign_spec(campaign) is None:
        known = sess.ledger.campaigns()
        raise UserError(f"campaign '{campaign}' is not in the ledger {sess.ledger.url}; known: {known or 'none'}; "
                        f"run `campaign "
                        "submit` first")


def _drive(sess, campaign: str, *, timeout_s: float | None = None, max_parallel: int | None = None,
           matrix: bool = True) -> None:
    """Drive the campaign to the end (progress on stderr), print its matrix (unless `matrix` is False: stdout
    then holds only what the caller printed, e.g. `submit --json`); exit 1 when runs ended failed."""
    from orchestrator.campaign import drive_campaign
    from orchestrator.ledger.states import RunState
    from orchestrator.progress import status_matrix

    counts = drive_campaign(sess, campaign, out=out, err=err, timeout_s=timeout_s, max_parallel=max_parallel)
    if matrix:
        out.print(status_matrix(sess, campaign))
    if counts.get(RunState.failed):
        raise typer.Exit(1)


def _stop_own_head(workdir: Path, started_here: bool, keep_head: bool) -> None:
    """Stop the work dir's local Ray head when this command started it (`submit`, `resume`), unless --keep-head;
    a head that was running before the command is left alone."""
    from orchestrator.executor.local_head import running_head, stop_head

    if started_here and not keep_head and running_head(workdir) is not None:
        pids = stop_head(workdir)
        err.print(f"stopped the local Ray head this command started ({len(pids)} processes; --keep-head keeps it)",
                  highlight=False)


def _print_summary(summary, *, dry_run: bool, as_json: bool) -> None:
    """`submit`'s summary (orchestrator.submit_summary): the same words with and without --dry-run; --json: one
    JSON object on stdout."""
    if as_json:
        typer.echo(json_dumps({**summary.as_json(), "dry_run": dry_run}))
        return
    for line in summary.lines(dry_run=dry_run):
        out.print(line, highlight=False, markup=False, soft_wrap=True)


def plan_cmd(
    campaign: str = typer.Argument(..., help="campaign file or directory, e.g. campaigns/paper"),
    overrides: list[str] | None = typer.Argument(None, help="Hydra overrides, e.g. seeds=[1,2,3]"),
    fmt: str = typer.Option("table", "--format", help="table | json | csv (csv: one row per run)"),
    as_json: JsonOpt = False,
    runs: bool = typer.Option(False, "--runs", help="also list every run (id, run_key, sub-campaign)"),
    matrix: bool = typer.Option(False, "--matrix", help="also show the policy × model matrix of seeds"),
    gpus: int | None = typer.Option(None, "--gpus", min=1, help="GPUs available for the duration estimate "
                                       "(default: the campaign's compute.nodes × gpus_per_node)"),
    workdir: Path | None = typer.Option(None, "--workdir", help="also check the evaluation data this work "
                                           "directory's campaign would read"),
    data_dir: Path | None = typer.Option(None, "--data-dir", help="also check this evaluation data directory"),
    ray_address: str | None = typer.Option(None, "--ray-address", help="also check every run fits the live "
                                           "cluster's nodes (GPUs per node × nnodes)"),
    prior: Path | None = typer.Option(None, "--prior", help="records of earlier runs: SD for the power table"),
    sd: float | None = typer.Option(None, "--sd", help="stated SD of paired differences (points): power table"),
    margin: float = typer.Option(1.0, "--margin", help="effect of interest (points) for the power table"),
    target_power: float | None = typer.Option(None, "--power", help="with --prior/--sd and --effect: recommend "
                                              "the sequential seed design reaching this power, family-wise"),
    effect: float | None = typer.Option(None, "--effect", help="real effect (points) the --power target is for"),
    gpu_budget: float | None = typer.Option(None, "--gpu-hours", help="GPU-hour budget: say whether the --power "
                                            "target is within it"),
    familywise: str = typer.Option("holm", "--familywise", help="family-wise procedure the --power design is "
                                   "simulated under: holm (default) | bonferroni"),
    sims: int = typer.Option(400, "--sims", min=50, help="simulated campaigns per design for --power"),
) -> None:
    """Expand a campaign into runs, check it (policies, seeds, recipes, resources, evaluation data) and print
    the accounting: runs, GPU-hours per sub-campaign and model, evaluation GPU-hours, the duration on the
    cluster, and every assumption the campaign declares (submits nothing)."""
    from orchestrator.plan_report import plan_report, run_rows as plan_run_rows
    from orchestrator.preflight import eval_data_dir
    from orchestrator.ranges import check_open_probability, check_points, check_positive
    from training.registry import get_backend

    fmt = "json" if as_json else fmt
    if fmt not in ("table", "json", "csv"):
        raise UserError(f"--format: got {fmt!r}; choose table, json or csv")
    _check_ray_address(ray_address)
    for problem in (check_points("--sd", sd), check_points("--margin", margin), check_points("--effect", effect),
                    check_positive("--gpu-hours", gpu_budget), check_open_probability("--power", target_power)):
        if problem:
            raise UserError(problem)
    if (target_power is None) != (effect is None) or (target_power is not None and prior is None and sd is None):
        raise UserError("--power and --effect go together, with --prior RECORDS or --sd S (the seed SD the simulation "
                        "needs), e.g. --prior ../shared/data/released_runs_171.csv --power 0.8 --effect 2.5")
    if gpu_budget is not None and target_power is None:
        raise UserError("--gpu-hours: give --power and --effect too (the budget is checked against the recommended "
                        "design)")
    if familywise not in ("holm", "bonferroni"):
        raise UserError(f"--familywise: got {familywise!r}; choose holm or bonferroni")
    spec, rs = _plan(campaign, overrides, data_root=workdir / "data" if workdir else None)
    eval_dir = data_dir or (eval_data_dir(spec, workdir.resolve()) if workdir else None)
    _preflight(spec, rs, eval_dir, local_head=not ray_address, ray_address=ray_address, workdir=workdir)
    if eval_dir is None and get_backend(spec.backend).needs_eval_data and fmt == "table":
        err.print("note: evaluation data not checked (pass --workdir or --data-dir to check it too)")
    acc = plan_report(spec, rs, gpus=gpus, with_runs=runs, prior=prior, sd=sd, margin=margin,
                      target_power=target_power, effect=effect, gpu_budget=gpu_budget, familywise=familywise,
                      sims=sims)
    n_gpus, span = acc["duration"]["gpus"], acc["duration"]["hours"]
    run_rows = acc.get("runs") or plan_run_rows(rs)
    if fmt == "json":
        typer.echo(json_dumps(acc, indent=2))
        return
    if fmt == "csv":
        import csv
        import sys

        w = csv.DictWriter(sys.stdout, fieldnames=list(run_rows[0]) if run_rows else ["run_id"])
        w.writeheader()
        w.writerows(run_rows)
        return
    where = f"{n_gpus} GPUs" if any(r.gpus for r in rs) else "2 CPU job slots"
    dur = ("cannot be scheduled (a run needs more GPUs than available)" if span is None
           else f"≈{span:,.1f} h ({span / 24:,.1f} days) on {where}")
    ev = ("evaluation GPU-hours not declared (compute.eval_gpu_hours_per_checkpoint)"
          if acc["eval_gpu_hours"] is None
          else f"evaluation ≈{acc['eval_gpu_hours']:,} GPU-hours for {acc['eval_checkpoints']} checkpoints"
          + ("" if acc["eval_sample_factor"] in (None, 1.0)
             else f" (sampled decoding: ×{acc['eval_sample_factor']:.2f} the tokens of one greedy pass)"))
    if not any(r.gpus for r in rs):  # a CPU campaign: its cost is CPU-hours, not "0.0 GPU-hours"
        from orchestrator.progress import format_duration

        run_h = sum(r.est_hours for r in rs)
        cpu_h = run_h * spec.compute.cpus_per_run
        dur = f"≈{format_duration(run_h * 3600 / 2)} on 2 CPU job slots"
        cost = (f"{cpu_h:,.1f} training CPU-hours" if cpu_h >= 1
                else f"{format_duration(cpu_h * 3600)} of training CPU")
        out.print(f"[bold]{spec.name}[/]: {acc['total_runs']} runs on CPU, ≈{cost} ({spec.compute.cpus_per_run} "
                  f"CPU per run, compute.hours_per_run); duration {dur}", highlight=False)
    else:
        out.print(f"[bold]{spec.name}[/]: {acc['total_runs']} runs, ≈{acc['gpu_hours']:,} training GPU-hours; "
                  f"{ev}; duration {dur}", highlight=False)
    for title, key in (("sub-campaign", "by_sub_campaign"), ("model", "by_model"),
                       ("record campaign", "by_campaign_label"),
                       ("policy", "by_policy"), ("seed", "by_seed"), ("regime", "by_regime")):
        t = Table(title=f"runs by {title}")
        t.add_column(title)
        t.add_column("runs", justify="right")
        gh = {"by_sub_campaign": acc["gpu_hours_by_sub_campaign"], "by_model": acc["gpu_hours_by_model"]}.get(key)
        if gh is not None:
            t.add_column("GPU-h", justify="right")
        for k, v in acc[key].items():
            t.add_row(str(k), str(v), *([f"{gh.get(k, 0):,}"] if gh is not None else []))
        out.print(t)
    if matrix:
        models = sorted({r.model for r in rs})
        t = Table(title="seeds by policy × model")
        t.add_column("policy")
        for m in models:
            t.add_column(m)
        for pol, by_m in acc["matrix"].items():
            t.add_row(pol, *[",".join(map(str, by_m.get(m, []))) or "—" for m in models])
        out.print(t)
    if runs:
        t = Table(title="runs")
        for c in ("run_id", "run_key", "sub_campaign", "gpus", "est_hours"):
            t.add_column(c, justify="right" if c in ("gpus", "est_hours") else "left")
        for r in run_rows:
            t.add_row(r["run_id"], r["run_key"], r["sub_campaign"], str(r["gpus"]), f"{r['est_hours']:.2f}")
        out.print(t)
    if acc["assumptions"]:
        t = Table(title="assumptions (from the campaign YAMLs)")
        for c in ("where", "key", "value", "basis", "note"):
            t.add_column(c)
        for a in acc["assumptions"]:
            t.add_row(a["where"], a["key"], "" if a["value"] is None else str(a["value"]), a["basis"], a["note"])
        out.print(t)
    if "power" in acc:
        from analysis.power import power_table

        out.print(power_table(acc["power"]))
    if "sequential_plan" in acc:
        from analysis.sequential.plan import plan_lines

        tab, lines = plan_lines(acc["sequential_plan"], acc["gpu_hours"], acc["total_runs"])
        out.print(tab)
        for line in lines:
            out.print(line, highlight=False)
    if acc["missing_references"]:
        err.print(f"warning: {len(acc['missing_references'])} runs lack their campaign-local reference, "
                  f"e.g. {acc['missing_references'][:3]}")
    for where, m in acc["expected_runs_mismatch"].items():
        err.print(f"warning: {where}: declares {m['expected']} runs, the overridden grid has {m['planned']}",
                  highlight=False)


def submit_cmd(
    workdir: WorkdirOpt,
    campaign: Annotated[str, typer.Argument(metavar="CAMPAIGN", help="campaign file or directory")],
    overrides: list[str] | None = typer.Argument(None, help="Hydra overrides"),
    ray_address: RayAddressOpt = None,
    ledger_url: LedgerUrlOpt = None,
    wait: bool = typer.Option(True, "--wait/--no-wait", help="drive the campaign to completion"),
    max_parallel: int | None = typer.Option(None, "--max-parallel", min=1, help="cap on concurrent jobs"),
    dry_run: bool = typer.Option(False, "--dry-run", help="print what submitting would do (new, changed with "
                                 "the fields that changed, unchanged, removed) without writing"),
    as_json: bool = typer.Option(False, "--json", help="print that summary as one JSON object (counts under "
                                 "new/changed/unchanged/removed, run ids, changed fields)"),
    doctor: bool = typer.Option(True, "--doctor/--no-doctor", help="on a cluster (--ray-address), first check "
                                "every node's versions, the shared work dir and GPUs per node (campaign doctor's "
                                "quick part, one small Ray job)"),
    data_dir: Path | None = typer.Option(None, "--data-dir", help="evaluation data directory (default: the "
                                            "campaign's evaluation.data_dir, relative to the work directory)"),
    keep_head: bool = typer.Option(False, "--keep-head", help="leave the local Ray head this command started "
                                   "running when the campaign finishes (`campaign head stop` stops it later)"),
) -> None:
    """Check a campaign before any compute, register it in the ledger (idempotent by run_key) and run it.

    A local Ray head this command started is stopped when the campaign finishes (--keep-head keeps it); a head
    that was already running is left as it was."""
    from orchestrator.campaign import submit, submit_preview, with_data_dir
    from orchestrator.preflight import eval_data_dir

    _check_ray_address(ray_address)
    spec, rs = _plan(campaign, overrides, data_root=workdir / "data")
    if data_dir is not None:
        spec, rs = with_data_dir(spec, rs, data_dir)
    from orchestrator.campaign import cluster_address

    target = cluster_address(workdir, ray_address)  # where the runs will go: given, remembered or local
    _preflight(spec, rs, eval_data_dir(spec, workdir.resolve()), local_head=not target,
               ray_address=target, workdir=workdir, runs_on_local_head=not target)
    summary = submit_preview(spec, rs, workdir, ledger_url)  # before anything is written: the old specs
    if dry_run:
        _print_summary(summary, dry_run=True, as_json=as_json)
        return
    if target and doctor:
        _cluster_checks(target, workdir, rs)
    sess = _session(workdir, ledger_url, ray_address, remember=True)
    diff, removed = submit(sess, spec, rs)
    summary.runs.update(new=diff.new, changed=diff.changed, unchanged=diff.unchanged, removed=removed,
                        reevaluate=diff.reevaluate)
    _print_summary(summary, dry_run=False, as_json=as_json)
    if not wait:
        return
    from orchestrator.executor.local_head import running_head

    started_here = target is None and running_head(workdir) is None
    try:
        _drive(sess, spec.name, max_parallel=max_parallel, matrix=not as_json)
    finally:
        _stop_own_head(workdir, started_here, keep_head)


def resume_cmd(
    workdir: WorkdirOpt,
    campaign: CampaignArg,
    ray_address: RayAddressOpt = None,
    ledger_url: LedgerUrlOpt = None,
    max_parallel: int | None = typer.Option(None, "--max-parallel", min=1),
    timeout: float | None = typer.Option(None, "--timeout", min=0.1, help="stop driving after this many seconds"),
    keep_head: bool = typer.Option(False, "--keep-head", help="leave the local Ray head this command started "
                                   "running when it finishes (`campaign head stop` stops it later)"),
) -> None:
    """Pick up a campaign after a crash: reattach to running jobs, resubmit lost ones, continue.

    A local Ray head this command started is stopped when it finishes, as `submit` does (--keep-head keeps
    it); a head that was already running is left as it was."""
    from orchestrator.campaign import cluster_address
    from orchestrator.executor.local_head import running_head

    campaign = _campaign_name(campaign)
    _existing_workdir(workdir, ledger_url, campaign)
    sess = _session(workdir, ledger_url, ray_address)
    _require_campaign(sess, campaign)
    started_here = cluster_address(workdir, ray_address) is None and running_head(workdir) is None
    try:
        _drive(sess, campaign, timeout_s=timeout, max_parallel=max_parallel)
    finally:
        _stop_own_head(workdir, started_here, keep_head)


def status_cmd(
    workdir: WorkdirOpt,
    campaign: str | None = typer.Argument(None, help="campaign name or spec file; default: all in the ledger"),
    ledger_url: LedgerUrlOpt = None,
    as_json: JsonOpt = False,
    fmt: str = typer.Option("table", "--format", metavar="FORMAT",
                            help="table (the matrix, for a terminal) | json (counts, runs, driver; stable keys)"),
) -> None:
    """Counts by state and a policies × seeds matrix per campaign (reads the ledger only)."""
    from orchestrator.ledger.states import RunState
    from orchestrator.progress import LEGEND, counts_line, driver_line, run_activity, status_matrix, status_report

    if fmt not in ("table", "json"):
        raise UserError(f"--format {fmt!r}: use table or json")
    as_json = as_json or fmt == "json"
    if campaign:
        campaign = _campaign_name(campaign)
    _existing_workdir(workdir, ledger_url, campaign)
    sess = _session(workdir, ledger_url)
    names = [campaign] if campaign else sess.ledger.campaigns()
    if campaign:
        _require_campaign(sess, campaign)
    if as_json:
        res = [status_report(sess, n) for n in names]
        typer.echo(json_dumps(res if not campaign else res[0], indent=2, default=str))
        return
    for n in names:
        st = sess.status(n)
        out.print(f"[bold]{n}[/]: {st['total']} runs  {counts_line(st['states'])}")
        out.print(status_matrix(sess, n))
        out.print(LEGEND, highlight=False, markup=False)
        out.print(driver_line(sess, n), highlight=False)
        from rich.text import Text

        for r in sess.ledger.runs(n, [RunState.training, RunState.evaluating]):  # what each active run does
            doing = run_activity(sess, r)
            if doing:
                out.print(Text.assemble("  ", ("now", "yellow"), f" {r.run_id}: {doing}"), highlight=False)

        for r in sess.ledger.runs(n, [RunState.failed]):  # the reason as written (no markup read in it)
            out.print(Text.assemble("  ", (RunState.failed.value, "red"),
                                    f" {r.run_id} ({r.stage}, {r.failure_class or 'error'}): {r.reason}"),
                      highlight=False)
        for r in sess.ledger.runs(n, [RunState.queued]):
            if r.reason.startswith("waiting:"):  # the scheduler cannot place it on the cluster (placement)
                out.print(Text.assemble("  ", ("waiting", "yellow"), f" {r.run_id}: {r.reason[9:]}"),
                          highlight=False)


def watch_cmd(
    workdir: WorkdirOpt,
    campaign: CampaignArg,
    ledger_url: LedgerUrlOpt = None,
    interval: float = typer.Option(2.0, "--interval", min=0.1),
    once: bool = typer.Option(False, "--once", help="render once and exit"),
) -> None:
    """Live status matrix (read-only; the orchestrator driving the campaign is `submit`/`resume`)."""
    from rich.live import Live

    from orchestrator.ledger.states import PENDING
    from orchestrator.progress import counts_line, status_matrix

    campaign = _campaign_name(campaign)

    _existing_workdir(workdir, ledger_url, campaign)
    sess = _session(workdir, ledger_url)
    _require_campaign(sess, campaign)
    if not out.is_terminal:  # a pipe or a log file: one plain line per change, no live redraw
        last = None
        while True:
            st = sess.status(campaign)["states"]
            line = f"{time.strftime('%H:%M:%S')} {campaign}: {counts_line(st)}"
            if line.split(" ", 1)[1] != last:
                typer.echo(line)
                last = line.split(" ", 1)[1]
            if once or not any(st.get(k) for k in PENDING):
                return
            time.sleep(interval)
    with Live(status_matrix(sess, campaign), console=out, refresh_per_second=1) as live:
        while not once:
            st = sess.status(campaign)["states"]
            if not any(st.get(k) for k in PENDING):
                break
            time.sleep(interval)
            live.update(status_matrix(sess, campaign))


def _select(sess, campaign: str, runs: list[str] | None):
    _require_campaign(sess, campaign)
    if not runs:
        return sess.ledger.runs(campaign)
    picked = []
    for ident in runs:
        found = sess.ledger.find(campaign, ident)
        if not found:
            raise UserError(f"run '{ident}' matches no run_key or run_id in campaign {campaign}")
        picked += found
    return picked


def cancel_cmd(
    workdir: WorkdirOpt,
    campaign: CampaignArg,
    runs: RunsArg = None,
    ray_address: RayAddressOpt = None,
    ledger_url: LedgerUrlOpt = None,
) -> None:
    """Cancel runs (stopping their jobs); they can be brought back with `campaign retry`."""
    campaign = _campaign_name(campaign)
    _existing_workdir(workdir, ledger_url, campaign)
    sess = _session(workdir, ledger_url, ray_address)
    rows = _select(sess, campaign, runs)
    with _cluster_context("nothing was cancelled"):
        n = sess.scheduler(campaign).cancel(rows)
    out.print(f"cancelled {n} run(s)")


def retry_cmd(
    workdir: WorkdirOpt,
    campaign: CampaignArg,
    runs: list[str] | None = typer.Argument(None, help="run ids/keys; default every failed/cancelled run"),
    ray_address: RayAddressOpt = None,
    ledger_url: LedgerUrlOpt = None,
    wait: bool = typer.Option(True, "--wait/--no-wait"),
) -> None:
    """Requeue failed or cancelled runs with a fresh retry budget (verified stages are skipped)."""
    campaign = _campaign_name(campaign)
    _existing_workdir(workdir, ledger_url, campaign)
    sess = _session(workdir, ledger_url, ray_address)
    rows = _select(sess, campaign, runs)
    n = sess.scheduler(campaign).retry(rows) if rows else 0
    out.print(f"requeued {n} run(s)")
    if wait and n:
        _drive(sess, campaign)


def logs_cmd(
    workdir: WorkdirOpt,
    campaign: CampaignArg,
    run: str = typer.Argument(..., help="run id or run_key"),
    ray_address: RayAddressOpt = None,
    ledger_url: LedgerUrlOpt = None,
    attempt: int | None = typer.Option(None, "--attempt", help="attempt number; default the latest"),
) -> None:
    """Attempts and events of a run from the ledger, and its job's log: from the cluster the campaign ran
    on, or from the stopped local head's log files. Never starts a Ray head."""
    campaign = _campaign_name(campaign)
    from orchestrator.executor.local_head import head_temp_dir, running_head

    _existing_workdir(workdir, ledger_url, campaign)
    sess = _session(workdir, ledger_url, ray_address)
    rows = _select(sess, campaign, [run])
    row = rows[0]
    atts = sess.ledger.attempts(campaign, row.run_key)
    for a in atts:
        out.print(f"attempt {a['attempt']} {a['stage']} {a['submission_id']}: {a['status']} "
                  f"{a['failure_class']} {a['reason']}", highlight=False)
    _print_training_metrics(workdir, row)
    chosen = [a for a in atts if attempt is None or a["attempt"] == attempt]
    if not chosen:
        raise UserError(f"run {row.run_id} has no attempt {attempt}")
    sub = chosen[-1]["submission_id"]
    if sess.ray_address is None and running_head(workdir) is None:  # the local head is gone: read its files
        tmp = head_temp_dir(workdir)
        logs = sorted(tmp.glob(f"session_*/logs/job-driver-{sub}.log")) if tmp else []
        if not logs:
            raise ClusterError(f"no log of job {sub}: the work directory's local Ray head is stopped and its log files "
                               f"are gone ({tmp or 'no temp dir'}); the ledger's attempts are shown above")
        typer.echo(logs[-1].read_text(errors="replace"))
        return
    with _cluster_context("the ledger's attempts are shown above"):
        typer.echo(sess.executor.logs(sub))


def demo_cmd(
    workdir: Path | None = typer.Option(None, "--workdir", help="default: a fresh temporary directory"),
    records: Path | None = typer.Option(None, "--records",
                                        help="only print the analysis tables of this records file"),
    campaign_file: Path | None = typer.Option(None, "--campaign", help="campaign file to run (default: "
                                              "campaigns/demo.yaml, or demo_verl.yaml with --backend verl)"),
    backend: str = typer.Option("local", "--backend", metavar="BACKEND", help="local (the CPU GRPO trainer, "
                                "about 3 min) | verl (verl's own trainer on CPU, 2 policies × 2 seeds, about "
                                "10-15 min)"),
    overrides: list[str] | None = typer.Argument(None, help="Hydra overrides of the demo campaign"),
    keep_ray: bool = typer.Option(False, "--keep-ray", help="leave the local Ray head running"),
    show_all: bool = typer.Option(False, "--all", help="print the status matrix and every table (by default "
                                  "one screen: the verdicts, flags and where the files are)"),
    timings: bool = typer.Option(False, "--timings", help="print where the demo's time went: base model build "
                                 "and warm-up, head start, train and evaluate stages, analysis, report"),
) -> None:
    """Run campaigns/demo.yaml (or demo_verl.yaml with --backend verl) end to end on CPU and print its answer in
    one screen: the verdicts, the flagged policies and where the records, report and MLflow store are (--all:
    every table)."""
    from orchestrator.demo import print_analysis, run_demo

    if records is not None:
        print_analysis(records, out=out, show_all=show_all)
        return
    if backend not in DEMO_CAMPAIGNS:
        raise UserError(f"--backend {backend!r}: choose one of {', '.join(DEMO_CAMPAIGNS)}")
    wd = workdir or Path(tempfile.mkdtemp(prefix="windtunnel-demo-"))
    run_demo(wd, campaign_file or DEMO_CAMPAIGNS[backend], overrides or [], out=out, err=err,
             keep_ray=keep_ray, show_all=show_all, timings=timings)


def register(app: typer.Typer) -> None:
    """Attach this area's commands to the main app."""
    command(app, "plan", plan_cmd)
    command(app, "submit", submit_cmd)
    command(app, "resume", resume_cmd)
    command(app, "status", status_cmd)
    command(app, "watch", watch_cmd)
    command(app, "cancel", cancel_cmd)
    command(app, "retry", retry_cmd)
    command(app, "logs", logs_cmd)
    command(app, "demo", demo_cmd)
    _register_data(app)


# the headline training metrics `campaign logs` shows, by the end of their name (a backend's prefix varies:
# `policy/kept_frac` locally, `windtunnel/kept_frac` in verl)
_HEADLINE = ("reward/mean", "critic/score/mean", "kept_frac", "weight_std", "grad_norm", "update_tokens")


def _print_training_metrics(workdir: Path, row) -> None:
    """The run's latest training step as its backend logged it (local rows or verl's), read while it trains."""
    from orchestrator.paths import run_dir
    from wtcommon.metrics import MetricsFileError, training_rows

    train = run_dir(workdir, row.spec) / "train"
    try:
        rows = training_rows(train)
    except MetricsFileError as exc:
        out.print(f"training metrics: unreadable: {exc}", highlight=False, markup=False)
        return
    if not rows:
        out.print(f"training metrics: none in {train}", highlight=False, markup=False)
        return
    last = rows[-1]
    shown = [f"{k} {v:.4g}" for k, v in last.items() if k != "step" and isinstance(v, (int, float))
             and not isinstance(v, bool) and any(k == h or k.endswith("/" + h) for h in _HEADLINE)]
    out.print(f"training metrics at step {last.get('step')}: " + (", ".join(shown) or f"{len(last) - 1} values"),
              highlight=False, markup=False)


def data_train_cmd(
    out_dir: OutDirOpt[Path],
    regimes: list[str] = typer.Option(["sub25_25pct_data_subset", "noise20_20pct_label_noise"], "--regime"),
    per_domain: int = typer.Option(5000, "--per-domain"),
    test_per_domain: int = typer.Option(200, "--test-per-domain"),
    seed: int = typer.Option(42, "--seed"),
    sources_dir: Path | None = typer.Option(None, "--sources",
                                            help="directory of <source>.jsonl files instead of downloading"),
    cache_dir: Path | None = typer.Option(None, "--cache-dir", help="datasets cache"),
) -> None:
    """Build the study's 15,000-prompt multidomain_3 corpus and its regime variants (content-hashed).

    --out FOLDER is the data root: the corpora go to FOLDER/multidomain_3/<regime>/."""
    from orchestrator.data import build_multidomain, build_variants, load_sources, parse_regime, read_sources_dir

    for r in regimes:
        parse_regime(r)  # CorpusError (exit 2) on a bad regime
    if sources_dir is not None:
        sources = read_sources_dir(sources_dir)  # CorpusError (exit 2) on a missing file
    else:
        try:
            sources = load_sources(cache_dir)
        except Exception as exc:  # the hub, the network, a cache: any of them, and the fix is the same
            raise UserError(f"cannot load the public sources ({type(exc).__name__}: {str(exc)[:200]}); "
                            "use --sources DIR with local jsonl files or a populated --cache-dir") from exc
    train, test = build_multidomain(sources, per_domain=per_domain, test_per_domain=test_per_domain, seed=seed)
    mans = build_variants(train, test, out_dir, "multidomain_3", regimes, seed)
    for name, m in mans.items():
        out.print(f"{name}: {m['train_rows']} train rows, sha256 {m['train_sha256'][:16]}…")


def _register_data(app: typer.Typer) -> None:
    """`campaign data train` — attached to an existing `data` group (the training area's) if any."""
    group = subgroup(app, "data", "Build training corpora and evaluation data.")
    command(group, "train", data_train_cmd)


os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
