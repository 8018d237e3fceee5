"""Acting on a submitted campaign from the command line: the work dir's session, the campaign and runs a user
named, driving the campaign to its end and stopping the local Ray head a command started.

A work dir without a ledger, an unknown campaign or run and a refused token are bad input (exit 2); an
unreachable cluster exits 3 with what it means for the command. Heavy imports (Ray, MLflow) happen inside the
functions so `campaign --help` stays fast."""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

import typer

from cli.console import err, out
from wtcommon.errors import ClusterError, UserError

if TYPE_CHECKING:
    from orchestrator.engine.ledger.base import RunRow
    from orchestrator.session import Session


def session(workdir: Path, ledger_url: str | None = None, ray_address: str | None = None, *,
            remember: bool = False) -> Session:
    """`orchestrator.campaign.open_session`; a ledger that cannot be opened (LedgerError) is bad input (exit 2)."""
    from orchestrator.campaign import open_session

    return open_session(workdir, ledger_url, ray_address, remember=remember)


def existing_workdir(workdir: Path, ledger_url: str | None, campaign: str | None = None) -> None:
    """Commands that act on a submitted campaign never create a work directory (a mistyped --workdir
    would otherwise leave an empty ledger behind). The message names the campaign first: the user typed it."""
    from orchestrator.engine.workdir import Workdir

    Workdir(workdir, ledger_url).require_ledger(workdir, campaign)


@contextmanager
def cluster_context(what: str) -> Iterator[None]:
    """An unreachable cluster's error (exit 3) with what it means for this command added; a refused token
    (exit 2, the user's to fix) as it is."""
    from orchestrator.engine.executor import ClusterUnreachable
    from orchestrator.engine.executor.ray_jobs import ClusterAuthError

    try:
        yield
    except ClusterAuthError:
        raise
    except ClusterUnreachable as exc:
        raise ClusterError(f"{exc}; {what}") from exc


def campaign_name(arg: str) -> str:
    """A campaign name from the one argument convention: a ledger name, or the campaign file/directory
    `submit` was given (its `name`)."""
    if arg.endswith((".yaml", ".yml")) or os.sep in arg or Path(arg).is_dir():
        from orchestrator.engine.spec import load_campaign

        return load_campaign(arg).name
    return arg


def require_campaign(sess: Session, campaign: str) -> None:
    """A campaign the ledger does not hold is exit 2, naming the ones it does."""
    if sess.ledger.campaign_spec(campaign) is None:
        known = sess.ledger.campaigns()
        raise UserError(f"campaign '{campaign}' is not in the ledger {sess.ledger.url}; known: {known or 'none'}; "
                        f"run `campaign "
                        "submit` first")


def select_runs(sess: Session, campaign: str, runs: list[str] | None) -> list[RunRow]:
    """The campaign's runs a user named by run id/key or a prefix (every run when none is named)."""
    require_campaign(sess, campaign)
    if not runs:
        return sess.ledger.runs(campaign)
    picked = []
    for ident in runs:
        found = sess.ledger.find(campaign, ident)
        if not found:
            raise UserError(f"run '{ident}' matches no run_key or run_id in campaign {campaign}")
        picked += found
    return picked


def drive(sess: Session, campaign: str, *, timeout_s: float | None = None, max_parallel: int | None = None,
          matrix: bool = True, drain_on_sigterm: bool = False) -> None:
    """Drive the campaign to the end (progress on stderr), print its matrix (unless `matrix` is False: stdout
    then holds only what the caller printed, e.g. `submit --json`); exit 1 when runs ended failed."""
    from orchestrator.campaign import drive_campaign
    from orchestrator.engine.ledger.states import RunState
    from orchestrator.progress import status_matrix

    counts = drive_campaign(sess, campaign, out=out, err=err, timeout_s=timeout_s, max_parallel=max_parallel,
                            drain_on_sigterm=drain_on_sigterm)
    if matrix:
        out.print(status_matrix(sess, campaign))
        _next_steps(sess.wd.records(campaign), sess.workdir)
    if counts.get(RunState.failed):
        raise typer.Exit(1)


def _next_steps(records: Path, workdir: Path) -> None:
    """Where the records are and the commands that read them (issue 58: `submit` ended on its matrix alone)."""
    import shlex

    if not records.is_file():
        return
    from orchestrator.engine.paths import runs_root

    r, runs = shlex.quote(str(records)), shlex.quote(str(runs_root(workdir)))
    out.print(f"records: {records}", markup=False, soft_wrap=True)
    out.print(f"next: campaign compare {r} · campaign verdicts {r} · campaign report {r} --out report.html "
              f"--runs-dir {runs}", markup=False, soft_wrap=True)


def stop_own_head(workdir: Path, started_here: bool, keep_head: bool) -> None:
    """Stop the work dir's local Ray head when this command started it (`submit`, `resume`), unless --keep-head;
    a head that was running before the command is left alone."""
    from orchestrator.cluster.local_head import running_head, stop_head

    if started_here and not keep_head and running_head(workdir) is not None:
        pids = stop_head(workdir)
        err.print(f"stopped the local Ray head this command started ({len(pids)} processes; --keep-head keeps it)",
                  highlight=False)
