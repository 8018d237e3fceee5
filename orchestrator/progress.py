"""What `campaign status` shows of a campaign's progress: the states of its runs (counts and a policies × seeds
matrix), whether anything is driving it, and when it will end.

Why: a ledger that shows `planned=8` cannot tell a user whether an orchestrator is still working or died
minutes ago. The per-run leases an orchestrator renews while it drives say so; the durations of finished
attempts give an estimate of the time left.
"""

from __future__ import annotations

import statistics
import time
from typing import TYPE_CHECKING, Any
from collections.abc import Iterable

from rich.table import Table

from orchestrator.engine.ledger.base import Attempt, RunRow
from orchestrator.engine.ledger.states import PENDING, AttemptStatus, RunState

if TYPE_CHECKING:
    from orchestrator.session import Session

LEGEND = "legend: · planned  q queued  T training  t trained  E evaluating  ✓ recorded  ✗ failed  c cancelled"


def driver_status(rows: Iterable[RunRow], now: float | None = None,
                  driver: tuple[str, float] | None = None) -> dict[str, Any]:
    """{'state': 'driving'|'idle'|'done', 'owner', 'lease_left_s'}: `driving` when a live orchestrator holds
    the campaign's driver lease (`driver` = (holder, expires)) or a lease on an active run, `idle` when runs
    are pending but nobody holds one (resume it), `done` when nothing is pending."""
    now = time.time() if now is None else now
    rows = list(rows)
    active = [r for r in rows if r.state in PENDING]
    if not active:
        return {"state": "done", "owner": "", "lease_left_s": None}
    if driver and driver[0] and driver[1] > now:
        return {"state": "driving", "owner": driver[0], "lease_left_s": round(driver[1] - now, 1)}
    live = [r for r in active if r.lease_owner and r.lease_expires > now]
    if live:
        best = max(live, key=lambda r: r.lease_expires)
        return {"state": "driving", "owner": best.lease_owner, "lease_left_s": round(best.lease_expires - now, 1)}
    return {"state": "idle", "owner": "", "lease_left_s": None}


def eta_seconds(rows: Iterable[RunRow], attempts: Iterable[Attempt], parallel: int) -> float | None:
    """Seconds until every active run is recorded, from the median duration of succeeded attempts per stage
    and `parallel` concurrent jobs; None until one attempt of each stage a remaining run needs has finished."""
    done: dict[str, list[float]] = {"train": [], "evaluate": []}
    for a in attempts:
        if a.status == AttemptStatus.succeeded and a.duration_s is not None and a.stage in done:
            done[a.stage].append(a.duration_s)
    need = 0.0
    for r in rows:
        if r.state not in PENDING:
            continue
        stages = ["evaluate"] if r.state in (RunState.trained, RunState.evaluating) else ["train", "evaluate"]
        for st in stages:
            if not done[st]:
                return None
            need += statistics.median(done[st])
    return need / max(1, parallel)


def format_duration(seconds: float | None) -> str:
    if seconds is None:
        return "unknown (no finished attempt yet)"
    m, s = divmod(int(round(seconds)), 60)
    h, m = divmod(m, 60)
    return f"{h}h{m:02d}m" if h else f"{m}m{s:02d}s"


def counts_line(counts: dict[str, int]) -> str:
    """`queued=2  training=1 …`: the non-zero counts by state, in the state machine's order."""
    return "  ".join(f"{k}={counts[k]}" for k in RunState if counts.get(k))


def status_matrix(sess: Session, campaign: str) -> Table:
    """Policies × seeds per (group, model, regime): one glyph per run's state."""
    S = RunState
    glyph: dict[str, str] = {S.planned: "·", S.queued: "q", S.training: "[yellow]T[/]", S.trained: "t",
                             S.evaluating: "[yellow]E[/]", S.recorded: "[green]✓[/]", S.failed: "[red]✗[/]",
                             S.cancelled: "[dim]c[/]"}
    rows = [r for r in sess.ledger.runs(campaign) if not (r.state == S.cancelled and "superseded" in r.reason)]
    seeds = sorted({r.spec.seed for r in rows})
    t = Table(title=f"{campaign}: states by policy × seed", show_lines=False)
    t.add_column("group / model / regime")
    t.add_column("policy")
    for s in seeds:
        t.add_column(f"s{s}", justify="center")
    cells: dict[tuple, dict[int, str]] = {}
    for r in rows:
        sp = r.spec
        key = (f"{sp.group}/{sp.model}{'/' + sp.regime if sp.regime else ''}", sp.policy.name)
        cells.setdefault(key, {})[sp.seed] = glyph.get(r.state, r.state)
    for (grp, pol), by_seed in cells.items():
        t.add_row(grp, pol, *[by_seed.get(s, "") for s in seeds])
    return t


def planned_eta_seconds(rows: Iterable[RunRow], parallel: int) -> float | None:
    """Seconds left from the plan's estimate of each pending run (`est_hours`, training only), before any
    attempt has finished; None when the plan estimates nothing."""
    hours = [float(r.spec.est_hours or 0.0) for r in rows if r.state in PENDING]
    return sum(hours) * 3600 / max(1, parallel) if any(hours) else None


_EVAL_PHASE = "evaluating:"  # the evaluate stage's phases (orchestrator.engine.stages, evaluation.evaluator) start so


def run_activity(sess: Session, row: RunRow, now: float | None = None) -> str | None:
    """What an active run does now, in words: "training step 3 of 8", "building the base model (2m10s)",
    "waiting on the base model's lock", "evaluating: 40 of 192 generations"; None for an inactive run.
    Read from the run dir (training metrics, the stage's `phase.json`), never from the cluster."""
    from orchestrator.engine.paths import run_dir
    from wtcommon.metrics import MetricsFileError, training_rows
    from wtcommon.phase import read_phase

    if row.state not in (RunState.training, RunState.evaluating):
        return None
    spec = row.spec
    rd = run_dir(sess.workdir, spec)
    phase = read_phase(rd)
    now = time.time() if now is None else now
    since = f" ({format_duration(now - float(phase['since']))})" if phase and phase.get("since") else ""
    if row.state == RunState.training:
        try:
            steps = [r.get("step") for r in training_rows(rd / "train")]
        except (MetricsFileError, OSError):
            steps = []
        last = max((int(s) for s in steps if isinstance(s, (int, float))), default=None)
        if last is not None:
            return f"training step {last} of {spec.steps}"
        if phase and not phase["phase"].startswith(_EVAL_PHASE):
            return phase["phase"] + since
        return "training: job submitted, not started yet"
    if phase and phase["phase"].startswith(_EVAL_PHASE):
        return phase["phase"] + since
    return "evaluating: job submitted, not started yet"


def campaign_progress(sess: Session, campaign: str) -> dict[str, Any]:
    """{'driver': driver_status(...), 'eta_s': eta_seconds(...), 'eta_basis': 'attempts'|'plan'} of a campaign,
    from its ledger: the ETA from finished attempts, else (none finished yet) from the plan's estimates."""
    rows = sess.ledger.runs(campaign)
    parallel = sess.default_config(campaign).max_parallel
    eta, basis = eta_seconds(rows, sess.ledger.attempts(campaign), parallel), "attempts"
    if eta is None:
        eta, basis = planned_eta_seconds(rows, parallel), "plan"
    return {"driver": driver_status(rows, driver=sess.ledger.driver(campaign)), "eta_s": eta,
            "eta_basis": basis if eta is not None else None}


def driver_line(sess: Session, campaign: str) -> str:
    """One line under the matrix: who drives the campaign and its ETA, or what to run when nobody does."""
    p = campaign_progress(sess, campaign)
    d = p["driver"]
    if d["state"] == "done":
        return "nothing pending"
    if d["state"] == "idle":
        return (f"no orchestrator is driving this campaign (no live lease): run `campaign resume {campaign} "
                "--workdir ...` to continue")
    basis = " (from the plan's estimates until a run has finished)" if p["eta_basis"] == "plan" else ""
    return (f"driven by {d['owner']} (lease {d['lease_left_s']:.0f} s left, renewed while it runs); "
            f"ETA {format_duration(p['eta_s'])}{basis}")


def status_report(sess: Session, campaign: str) -> dict[str, Any]:
    """What `campaign status --format json` prints of one campaign (stable keys): its counts by state
    (`Session.status`), every run (id, key, state, stage, reason, attempts, compute, what it does now) and
    `campaign_progress` (driver, ETA)."""
    st = sess.status(campaign)
    st["runs"] = [{"run_id": r.run_id, "run_key": r.run_key, "state": r.state, "stage": r.stage, "reason": r.reason,
                   "attempts": r.attempts, "compute": r.compute, "doing": run_activity(sess, r)}
                  for r in sess.ledger.runs(campaign)]
    st.update(campaign_progress(sess, campaign))
    return st
