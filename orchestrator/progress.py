"""What `campaign status` says beyond the states: is anything driving the campaign, and when will it end.

Why: a ledger that shows `planned=8` cannot tell a user whether an orchestrator is still working or died
minutes ago. The per-run leases an orchestrator renews while it drives say so; the durations of finished
attempts give an estimate of the time left.
"""

from __future__ import annotations

import statistics
import time
from typing import Any
from collections.abc import Iterable

from orchestrator.ledger.base import RunRow
from orchestrator.ledger.states import PENDING, AttemptStatus, RunState


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


def eta_seconds(rows: Iterable[RunRow], attempts: Iterable[dict[str, Any]], parallel: int) -> float | None:
    """Seconds until every active run is recorded, from the median duration of succeeded attempts per stage
    and `parallel` concurrent jobs; None until one attempt of each stage a remaining run needs has finished."""
    done: dict[str, list[float]] = {"train": [], "evaluate": []}
    for a in attempts:
        if (a.get("status") == AttemptStatus.succeeded and a.get("ended_at") is not None
                and a.get("started_at") is not None and a["stage"] in done):
            done[a["stage"]].append(float(a["ended_at"]) - float(a["started_at"]))
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
