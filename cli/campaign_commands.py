"""`campaign plan|submit|status|watch|resume|cancel|retry|logs|demo` and `campaign data train`.

The commands parse arguments and print; driving a campaign is `orchestrator.campaign`, what `status` shows of
its progress is `orchestrator.progress`. Heavy imports (Ray, MLflow, pandas, Hydra) happen inside the commands
so `campaign --help` is fast.
Exit codes: 2 bad input (spec, records, unknown campaign/run), 3 cluster unreachable (no run is
marked failed), 1 runs ended failed.
"""

from __future__ import annotations

import importlib.util

import os
import tempfile
import time
from pathlib import Path
from typing import Annotated

import typer

from cli.campaign_checks import check_plan_options, check_ray_address, cluster_checks, plan_campaign, preflight
from cli.campaign_session import (campaign_name, cluster_context, drive, existing_workdir, require_campaign,
                                  select_runs, session, stop_own_head)
from cli.console import err, out
from cli.groups import command, subgroup
from cli.options import CampaignArg, JsonOpt, LedgerUrlOpt, OutDirOpt, RayAddressOpt, RunsArg, WorkdirOpt
from cli.plan_output import print_plan, print_plan_csv
from wtcommon.errors import ClusterError, UserError
from cli.jsonsafe import dumps as json_dumps  # strict JSON: NaN/Infinity are null
from cli.writable import out_dir_callback


from campaigns import config_root

DEMO_CAMPAIGN = config_root() / "demo.yaml"
DEMO_CAMPAIGNS = {"local": DEMO_CAMPAIGN, "verl": config_root() / "demo_verl.yaml",
                  "verl-vllm": config_root() / "demo_verl_vllm.yaml"}


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
                                           "directory's campaign would read, and time the plan from the "
                                           "campaign's runs finished there"),
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
    from training.registry import get_backend

    fmt = check_plan_options(fmt, as_json, ray_address, sd=sd, margin=margin, effect=effect, gpu_budget=gpu_budget,
                             target_power=target_power, prior=prior, familywise=familywise)
    spec, rs = plan_campaign(campaign, overrides, data_root=workdir / "data" if workdir else None)
    eval_dir = data_dir or (eval_data_dir(spec, workdir.resolve()) if workdir else None)
    preflight(spec, rs, eval_dir, local_head=not ray_address, ray_address=ray_address, workdir=workdir)
    if eval_dir is None and get_backend(spec.backend).needs_eval_data and fmt == "table":
        err.print("note: evaluation data not checked (pass --workdir or --data-dir to check it too)")
    acc = plan_report(spec, rs, gpus=gpus, with_runs=runs, prior=prior, sd=sd, margin=margin,
                      target_power=target_power, effect=effect, gpu_budget=gpu_budget, familywise=familywise,
                      sims=sims, workdir=workdir)
    run_rows = acc.runs or plan_run_rows(rs)
    if fmt == "json":
        typer.echo(json_dumps(acc.to_dict(), indent=2))
        return
    if fmt == "csv":
        print_plan_csv(run_rows)
        return
    print_plan(spec, rs, acc, run_rows, matrix=matrix, runs=runs)


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
    drain: bool = typer.Option(False, "--drain-on-sigterm", help="on SIGTERM (a Slurm allocation's end), stop "
                               "the in-flight stages' jobs and record them as infra failures, then exit 5; "
                               "`campaign resume` runs them again (what `campaign slurm` jobs use)"),
) -> None:
    """Check a campaign before any compute, register it in the ledger (idempotent by run_key) and run it.

    A local Ray head this command started is stopped when the campaign finishes (--keep-head keeps it); a head
    that was already running is left as it was."""
    from orchestrator.campaign import submit, submit_preview, with_data_dir
    from orchestrator.preflight import eval_data_dir

    check_ray_address(ray_address)
    spec, rs = plan_campaign(campaign, overrides, data_root=workdir / "data")
    if data_dir is not None:
        spec, rs = with_data_dir(spec, rs, data_dir)
    from orchestrator.campaign import cluster_address

    target = cluster_address(workdir, ray_address)  # where the runs will go: given, remembered or local
    preflight(spec, rs, eval_data_dir(spec, workdir.resolve()), local_head=not target,
               ray_address=target, workdir=workdir, runs_on_local_head=not target)
    summary = submit_preview(spec, rs, workdir, ledger_url)  # before anything is written: the old specs
    if dry_run:
        _print_summary(summary, dry_run=True, as_json=as_json)
        return
    if target and doctor:
        cluster_checks(target, workdir, rs)
    sess = session(workdir, ledger_url, ray_address, remember=True)
    diff, removed = submit(sess, spec, rs)
    summary.runs.update(new=diff.new, changed=diff.changed, unchanged=diff.unchanged, removed=removed,
                        reevaluate=diff.reevaluate)
    _print_summary(summary, dry_run=False, as_json=as_json)
    if not wait:
        return
    from orchestrator.cluster.local_head import running_head

    started_here = target is None and running_head(workdir) is None
    try:
        drive(sess, spec.name, max_parallel=max_parallel, matrix=not as_json, drain_on_sigterm=drain)
    finally:
        stop_own_head(workdir, started_here, keep_head)


def resume_cmd(
    workdir: WorkdirOpt,
    campaign: CampaignArg,
    ray_address: RayAddressOpt = None,
    ledger_url: LedgerUrlOpt = None,
    max_parallel: int | None = typer.Option(None, "--max-parallel", min=1),
    timeout: float | None = typer.Option(None, "--timeout", min=0.1, help="stop driving after this many seconds"),
    keep_head: bool = typer.Option(False, "--keep-head", help="leave the local Ray head this command started "
                                   "running when it finishes (`campaign head stop` stops it later)"),
    drain: bool = typer.Option(False, "--drain-on-sigterm", help="on SIGTERM (a Slurm allocation's end), stop "
                               "the in-flight stages' jobs and record them as infra failures, then exit 5; "
                               "`campaign resume` runs them again (what `campaign slurm` jobs use)"),
) -> None:
    """Pick up a campaign after a crash: reattach to running jobs, resubmit lost ones, continue.

    A local Ray head this command started is stopped when it finishes, as `submit` does (--keep-head keeps
    it); a head that was already running is left as it was."""
    from orchestrator.campaign import cluster_address
    from orchestrator.cluster.local_head import running_head

    campaign = campaign_name(campaign)
    existing_workdir(workdir, ledger_url, campaign)
    sess = session(workdir, ledger_url, ray_address)
    require_campaign(sess, campaign)
    started_here = cluster_address(workdir, ray_address) is None and running_head(workdir) is None
    try:
        drive(sess, campaign, timeout_s=timeout, max_parallel=max_parallel, drain_on_sigterm=drain)
    finally:
        stop_own_head(workdir, started_here, keep_head)


def status_cmd(
    workdir: WorkdirOpt,
    campaign: str | None = typer.Argument(None, help="campaign name or spec file; default: all in the ledger"),
    ledger_url: LedgerUrlOpt = None,
    as_json: JsonOpt = False,
    fmt: str = typer.Option("table", "--format", metavar="FORMAT",
                            help="table (the matrix, for a terminal) | json (counts, runs, driver; stable keys)"),
) -> None:
    """Counts by state and a policies × seeds matrix per campaign (reads the ledger only)."""
    from orchestrator.engine.ledger.states import RunState
    from orchestrator.progress import LEGEND, counts_line, driver_line, run_activity, status_matrix, status_report

    if fmt not in ("table", "json"):
        raise UserError(f"--format {fmt!r}: use table or json")
    as_json = as_json or fmt == "json"
    if campaign:
        campaign = campaign_name(campaign)
    existing_workdir(workdir, ledger_url, campaign)
    sess = session(workdir, ledger_url)
    names = [campaign] if campaign else sess.ledger.campaigns()
    if campaign:
        require_campaign(sess, campaign)
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

        from orchestrator.cluster.slurm import allocation_lines

        for line in allocation_lines(workdir):  # `campaign slurm`'s allocations of this work dir
            typer.echo(line)

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

    from orchestrator.engine.ledger.states import PENDING
    from orchestrator.progress import counts_line, status_matrix

    campaign = campaign_name(campaign)

    existing_workdir(workdir, ledger_url, campaign)
    sess = session(workdir, ledger_url)
    require_campaign(sess, campaign)
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


def cancel_cmd(
    workdir: WorkdirOpt,
    campaign: CampaignArg,
    runs: RunsArg = None,
    ray_address: RayAddressOpt = None,
    ledger_url: LedgerUrlOpt = None,
) -> None:
    """Cancel runs (stopping their jobs); they can be brought back with `campaign retry`."""
    campaign = campaign_name(campaign)
    existing_workdir(workdir, ledger_url, campaign)
    sess = session(workdir, ledger_url, ray_address)
    rows = select_runs(sess, campaign, runs)
    with cluster_context("nothing was cancelled"):
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
    campaign = campaign_name(campaign)
    existing_workdir(workdir, ledger_url, campaign)
    sess = session(workdir, ledger_url, ray_address)
    rows = select_runs(sess, campaign, runs)
    n = sess.scheduler(campaign).retry(rows) if rows else 0
    out.print(f"requeued {n} run(s)")
    if wait and n:
        drive(sess, campaign)


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
    campaign = campaign_name(campaign)
    from orchestrator.cluster.local_head import head_temp_dir, running_head
    from orchestrator.cluster.ray_temp import job_log
    from orchestrator.engine.workdir import Workdir

    existing_workdir(workdir, ledger_url, campaign)
    sess = session(workdir, ledger_url, ray_address)
    rows = select_runs(sess, campaign, [run])
    row = rows[0]
    atts = sess.ledger.attempts(campaign, row.run_key)
    for a in atts:
        out.print(f"attempt {a.attempt} {a.stage} {a.submission_id}: {a.status} "
                  f"{a.failure_class} {a.reason}", highlight=False)
    _print_training_metrics(workdir, row)
    chosen = [a for a in atts if attempt is None or a.attempt == attempt]
    if not chosen:
        raise UserError(f"run {row.run_id} has no attempt {attempt}")
    sub = chosen[-1].submission_id
    if sess.ray_address is None and running_head(workdir) is None:  # the local head is gone: read its files
        tmp = head_temp_dir(workdir)
        kept = Workdir(workdir).job_logs
        log = job_log(tmp, kept, sub)
        if log is None:
            raise ClusterError(f"no log of job {sub}: the work directory's local Ray head is stopped and its log files "
                               f"are gone ({tmp or 'no temp dir'}, nor in {kept}); the ledger's attempts are shown "
                               "above")
        typer.echo(log.read_text(errors="replace"))
        return
    with cluster_context("the ledger's attempts are shown above"):
        typer.echo(sess.executor.logs(sub))


def demo_cmd(
    workdir: Path | None = typer.Option(None, "--workdir", help="default: a fresh temporary directory"),
    records: Path | None = typer.Option(None, "--records",
                                        help="only print the analysis tables of this records file"),
    campaign_file: Path | None = typer.Option(None, "--campaign", help="campaign file to run (default: "
                                              "campaigns/demo.yaml, or demo_verl.yaml with --backend verl)"),
    backend: str = typer.Option("local", "--backend", metavar="BACKEND", help="local (the CPU GRPO trainer, "
                                "about 3 min) | verl (verl's own trainer on CPU, 2 policies × 2 seeds, about "
                                "10-15 min) | verl-vllm (verl's own vLLM rollout and the vLLM evaluator, on vLLM's "
                                "CPU build: run it from .venv-vllm, `make venv-vllm`; about 6-8 min)"),
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
    if backend == "verl-vllm" and importlib.util.find_spec("vllm") is None:
        raise UserError("--backend verl-vllm needs vLLM, which this environment does not have: `make venv-vllm` "
                        "builds the environment with vLLM's CPU build; run `.venv-vllm/bin/campaign demo --backend "
                        "verl-vllm` (on a GPU machine: `pip install -e '.[gpu]'`)")
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
    from orchestrator.engine.paths import run_dir
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
    per_domain: int = typer.Option(5000, "--per-domain", min=1, max=1_000_000,
                                   help="training prompts per domain (1 to 1,000,000)"),
    test_per_domain: int = typer.Option(200, "--test-per-domain", min=1, max=100_000,
                                        help="held-out prompts per domain (1 to 100,000)"),
    seed: int = typer.Option(42, "--seed", min=0, max=2**32 - 1, help="split and sampling seed"),
    sources_dir: Path | None = typer.Option(None, "--sources",
                                            help="directory of <source>.jsonl files instead of downloading"),
    cache_dir: Path | None = typer.Option(None, "--cache-dir", help="datasets cache",
                                          callback=out_dir_callback),
) -> None:
    """Build the study's 15,000-prompt multidomain_3 corpus and its regime variants (content-hashed).

    --out FOLDER is the data root: the corpora go to FOLDER/multidomain_3/<regime>/."""
    from training.corpus import build_multidomain, build_variants, load_sources, parse_regime, read_sources_dir

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
