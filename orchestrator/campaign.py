"""Driving a campaign: open a session on a work directory, register the campaign in the ledger, run the scheduler
loop until nothing is pending (taking a sequential design's interim looks between batches) and collect its records.

Why a module of its own: `campaign submit|resume|retry` and `campaign demo` drive a campaign the same way. The
commands parse arguments and print; this module does the work and raises `CampaignError` (the message and the
command's exit code) where a command must stop, so the demo needs no callbacks into the command line.
"""

from __future__ import annotations

import dataclasses
import json
import os
import signal
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from orchestrator.engine.executor import ClusterUnreachable
from orchestrator.cluster.cluster_record import load_cluster, save_cluster
from orchestrator.engine.executor.ray_jobs import ClusterAuthError
from orchestrator.engine.ledger import LeaseLost, UpsertDiff, open_ledger
from orchestrator.engine.ledger.base import RunRow
from orchestrator.engine.ledger.states import RunState
from orchestrator.engine.plugins import add_project_path, plugin_names, plugin_paths
from orchestrator.progress import counts_line
from orchestrator.session import RecordsMissing, Session
from orchestrator.submit_summary import SubmitSummary, field_changes, summarise
from orchestrator.engine.workdir import Workdir
from wtcommon.errors import WindtunnelError

if TYPE_CHECKING:
    import pandas as pd

    from orchestrator.engine.grid import RunSpec
    from orchestrator.engine.scheduler.loop import Scheduler
    from orchestrator.engine.spec import CampaignSpec


class CampaignError(WindtunnelError, RuntimeError):
    """A campaign command cannot go on; the message says why and what to do. `exit_code` is the command's:
    2 bad input, 3 cluster unreachable (no run was marked failed), 4 this orchestrator lost its driver lease to
    another (it stopped without writing), 1 runs ended failed."""

    def __init__(self, message: str, exit_code: int = 2):
        super().__init__(message)
        self.exit_code = exit_code


def cluster_address(workdir: Path, ray_address: str | None = None) -> str | None:
    """`ray_address`, else the cluster `submit` recorded in `<workdir>/cluster.json` (its token file becomes
    RAY_AUTH_TOKEN_PATH unless the environment has one), else None: the work directory's own local head.
    Raises RayAddressError on a malformed address (bad input, found before anything is written)."""
    if ray_address is not None:
        from orchestrator.cluster.ray_address import parse_ray_address

        parse_ray_address(ray_address)
    if not ray_address:
        rec = load_cluster(workdir)
        if rec is not None:
            ray_address = rec["address"]
            if rec.get("token_path") and not os.environ.get("RAY_AUTH_TOKEN_PATH"):
                os.environ["RAY_AUTH_TOKEN_PATH"] = rec["token_path"]
    return ray_address


def open_session(workdir: Path, ledger_url: str | None = None, ray_address: str | None = None, *,
                 remember: bool = False) -> Session:
    """A session on the work directory. The cluster is `ray_address`, else the one `submit` recorded in
    `<workdir>/cluster.json` (with its token file), else the work directory's own local head; `remember`
    records the given address for later commands. Raises LedgerError on a ledger that cannot be opened and
    RayAddressError on a malformed address, before the ledger is touched."""
    ray_address = cluster_address(workdir, ray_address)
    sess = Session(workdir=workdir, ledger_url=ledger_url, ray_address=ray_address)
    sess.ledger  # noqa: B018 - open it now: a bad URL is an input error (exit 2), not a traceback later
    if ray_address and remember:
        save_cluster(workdir, ray_address, os.environ.get("RAY_AUTH_TOKEN_PATH"))
    return sess


def make_private(workdir: Path) -> None:
    """The work directory's databases are readable by this user only (they hold every run's paths and reasons)."""
    for p in Workdir(workdir).private_files:
        if p.exists() and p.stat().st_uid == os.getuid():
            os.chmod(p, 0o600)


def with_data_dir(spec: CampaignSpec, runs: list[RunSpec], data_dir: Path) -> tuple[CampaignSpec, list[RunSpec]]:
    """The spec and runs with `evaluation.data_dir` set to an absolute `data_dir` (`--data-dir`)."""
    from evaluation.settings import EvaluationOptions

    ev = {**spec.evaluation, "data_dir": str(Path(data_dir).expanduser().resolve())}
    opts = EvaluationOptions.from_mapping(ev, f"{spec.source}: evaluation")
    return spec.model_copy(update={"evaluation": ev}), [dataclasses.replace(r, evaluation=opts) for r in runs]


def submit_preview(spec: CampaignSpec, runs: list[RunSpec], workdir: Path, ledger_url: str | None) -> SubmitSummary:
    """What submitting would do to the ledger (new / changed with the fields that changed / unchanged / to
    re-evaluate, with the evaluation fields that changed / no longer in the spec), without writing (nor creating)
    it; `submit` prints the same summary, computed before it writes."""
    from orchestrator.session import to_reevaluate

    wd = Workdir(workdir, ledger_url)
    rows: list[RunRow] = []
    if wd.has_ledger():
        led = open_ledger(wd)
        try:
            rows = led.runs(spec.name)
        finally:
            led.close()
    current = [(r.run_id, r.run_key, r.spec.to_dict()) for r in rows]  # current generation
    summary = summarise(spec.name, current, [(r.run_id, r.run_key, r.to_dict()) for r in runs])
    if spec.seed_design is not None:  # a sequential design's later batches are the seed pool's, not "removed"
        pool = set(spec.seed_pool())
        summary.runs["removed"] = [rid for rid, _, sj in current
                                   if rid in summary.runs["removed"] and sj["seed"] not in pool]
    recorded, failed = to_reevaluate(rows, runs, Path(workdir).resolve())
    old = {r.run_key: r.spec.to_dict() for r in rows}
    for r in recorded + failed:
        summary.runs["reevaluate"].append(r.run_id)
        summary.changes[r.run_id] = [c for c in field_changes(old[r.run_key], r.to_dict())
                                     if c[0].startswith("evaluation.")]
    return summary


def submit(sess: Session, spec: CampaignSpec, runs: list[RunSpec], *,
           campaign: str | None = None) -> tuple[UpsertDiff, list[str]]:
    """Register the campaign (idempotent by run_key) as `campaign`, default `spec.name` (the tuner's
    `<campaign>.tune.<policy>@<suite>`): the ledger's diff, and the run ids no longer in the spec (a sequential
    design's later batches are not "removed": they are the seed pool's, added by its looks)."""
    diff = sess.submit(spec, runs, campaign)
    make_private(sess.workdir)
    removed = diff.removed
    if spec.seed_design is not None:
        later = {r.run_id for r in sess.ledger.runs(campaign or spec.name) if r.spec.seed in spec.seed_pool()}
        removed = [rid for rid in removed if rid not in later]
    return diff, removed


def ship_plugins(sess: Session, campaign: str) -> None:
    """Make the campaign's plugin modules importable here and ship them to its jobs (runtime_env py_modules)."""
    spec_json = sess.ledger.campaign_spec(campaign)
    add_project_path(json.loads(spec_json).get("config_root") if spec_json else None)
    names = plugin_names(r.spec.policy.cfg for r in sess.ledger.runs(campaign))
    if not names:
        return
    try:
        paths = plugin_paths(names, sess.workdir / "plugins")
    except ValueError as exc:  # a plugin module that cannot be found: the message says where to put it
        raise CampaignError(str(exc)) from None
    sess.executor.py_modules = paths


def drive(sess: Session, campaign: str, *, console: Console, timeout_s: float | None = None, quiet: bool = False,
          max_parallel: int | None = None, poll_s: float | None = None,
          events: Path | None = None, on_tick: Callable[[dict[str, int]], None] | None = None,
          conclude: bool = True, drain_on_sigterm: bool = False) -> dict[str, int]:
    """Run the scheduler loop with a Rich progress bar on `console` until the campaign has nothing pending, then
    ingest it into MLflow and collect its records: the counts by state. The records file is also rebuilt
    (atomically) each time a run is recorded, so it can be analysed while the campaign runs. Each run's state
    changes go to `console`, or appended to the file `events` when given (a terminal then shows the bar only).

    `on_tick(counts)` is called after every scheduler poll (the tuner reads intermediate checkpoints there and
    may raise to stop: the exception leaves `drive` with nothing collected). `conclude=False` leaves the
    campaign's MLflow parent run without verdicts: a tuning campaign's trials on a validation suite are not
    claims about the test suite. `drain_on_sigterm`: a SIGTERM (a Slurm allocation's end) drains the in-flight
    stages as infra failures and raises `Drained` (exit 5) instead of killing the driver mid-write."""
    cfg = sess.default_config(campaign)
    if max_parallel:
        cfg.max_parallel = max_parallel
    if poll_s is not None:
        cfg.poll_s = poll_s
    total = len([r for r in sess.ledger.runs(campaign) if r.state != RunState.cancelled])
    try:
        ship_plugins(sess, campaign)
        with Progress(TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(),
                      TextColumn("{task.fields[states]}"), TimeElapsedColumn(), console=console,
                      disable=quiet) as prog:
            task = prog.add_task(campaign, total=total, states="")

            def tick(counts: dict[str, int]) -> None:
                done = counts.get(RunState.recorded, 0) + counts.get(RunState.failed, 0)
                prog.update(task, completed=done, states=counts_line(counts))
                if on_tick is not None:
                    on_tick(counts)

            def change(row: RunRow, what: str) -> None:
                if row.state == RunState.recorded:  # records grow as runs finish: compare works mid-campaign
                    try:
                        sess.collect_records(campaign)
                    except RecordsMissing:
                        pass  # reopened by the scheduler; collected again when it is recorded
                if events is not None:
                    with open(events, "a") as f:
                        f.write(f"{time.strftime('%Y-%m-%dT%H:%M:%S')} {row.run_id}: {what}\n")
                elif not quiet:
                    prog.console.print(f"  {row.run_id}: {what}", highlight=False)

            sched = sess.scheduler(campaign, cfg, on_change=change)
            with stop_on_sigterm(sched, drain_on_sigterm):
                counts = sched.run(timeout_s=timeout_s, on_tick=tick)
    except ClusterAuthError as exc:  # the cluster answered: a token to fix, not an outage
        raise CampaignError(str(exc)) from None
    except LeaseLost as exc:  # stopped or stalled past its lease, and another orchestrator drives it now
        raise CampaignError(str(exc), 4) from None
    except ClusterUnreachable as exc:
        raise CampaignError(f"{exc}; no run was marked failed — fix the address or start the cluster, then "
                            "`campaign resume`", 3) from None
    sess.ingest(campaign)
    try:
        records = sess.collect_records(campaign)
    except RecordsMissing as exc:
        raise CampaignError(f"{exc}; `campaign resume {campaign} --workdir {sess.workdir}` re-runs their record "
                            "stage") from None
    if records is not None:
        probe_base_models(sess, campaign, console)
    try:  # the campaign's MLflow parent run: its verdicts and records, once nothing is pending
        if conclude:
            sess.conclude(campaign, records)
    except LeaseLost as exc:
        raise CampaignError(str(exc), 4) from None
    except Exception as exc:  # tracking is a view of the ledger: a failure here never fails the campaign
        console.print(f"warning: MLflow campaign run not updated: {type(exc).__name__}: {exc}", markup=False,
                      highlight=False)
    make_private(sess.workdir)
    return counts


@contextmanager
def stop_on_sigterm(sched: Scheduler, enabled: bool) -> Iterator[None]:
    """While driving, SIGTERM sets the scheduler's stop event (it drains at its next step) instead of ending the
    process; the previous handler is put back after."""
    if not enabled or threading.current_thread() is not threading.main_thread():
        yield
        return
    sched.stop = threading.Event()
    sched.stop_reason = "SIGTERM: the allocation is ending (time limit, preemption or scancel)"
    stop = sched.stop
    previous = signal.signal(signal.SIGTERM, lambda *_: stop.set())
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def probe_base_models(sess: Session, campaign: str, console: Console) -> None:
    """`evaluation: {memorization: true}`: probe the campaign's base models once its records are in
    (orchestrator/base_probe.py); a probe that fails is a warning, never a failed campaign."""
    from orchestrator.base_probe import campaign_specs, probe_campaign, requested

    specs = campaign_specs(sess.ledger, campaign)
    if not requested(specs):
        return
    for o in probe_campaign(specs, sess.workdir):
        if o.error:
            console.print(f"warning: memorization probe of {o.model} not written: {o.error}", markup=False,
                          highlight=False)
        else:
            console.print(f"memorization probe of {o.model}{' (cached)' if o.cached else ''}: {o.files[0]}",
                          markup=False, highlight=False)


def drive_campaign(sess: Session, campaign: str, *, out: Console, err: Console, timeout_s: float | None = None,
                   max_parallel: int | None = None, drain_on_sigterm: bool = False) -> dict[str, int]:
    """`drive` until nothing is pending (its progress on `err`); for a sequential seed design, then take the
    interim look, record it (its table on `out`) and drive the next batch, until every comparison is decided
    or the last look is taken."""
    from orchestrator.adaptive import AdaptiveError, advance  # pandas: not for commands that only open a session

    counts = drive(sess, campaign, console=err, timeout_s=timeout_s, max_parallel=max_parallel,
                   drain_on_sigterm=drain_on_sigterm)
    while not counts.get(RunState.failed):
        try:
            step = advance(sess, campaign)
        except AdaptiveError as exc:
            err.print(f"[yellow]sequential seeds:[/yellow] {exc}", highlight=False)
            break
        if step.look is not None:
            out.print(look_table(step.decisions, step.look))
        if step.note and (step.finished or step.added):
            out.print(f"sequential seeds: {step.note}" + (f" ({len(step.added)} runs added)" if step.added else ""),
                      highlight=False)
        if not step.added:
            break
        counts = drive(sess, campaign, console=err, timeout_s=timeout_s, max_parallel=max_parallel,
                       drain_on_sigterm=drain_on_sigterm)
    return counts


def look_table(decisions: pd.DataFrame, look: int) -> Table:
    """One interim look: comparison, seeds, mean paired difference, repeated CI, decision."""
    from orchestrator.adaptive import looks_summary

    t = Table(title=f"interim look {look} (repeated CIs: simultaneous coverage over all looks)")
    for c in ("comparison", "seeds", "mean", "repeated CI", "decision"):
        t.add_column(c)
    for r in looks_summary(decisions):
        t.add_row(r["comparison"], str(r["n"]), f"{r['mean']:+.3f}", f"[{r['rci_low']:+.3f}, {r['rci_high']:+.3f}]",
                  r["decision"])
    return t
