"""Adaptive seed allocation for a campaign with `seeds: {design: sequential, ...}`.

Why: twelve seeds for every comparison, decided or not, is the campaign's largest cost. A
sequential campaign is planned with its first batch of seeds only; each time the scheduler has
nothing left to run, `advance` takes the next group-sequential look (analysis.sequential.looks) over
the recorded runs, writes it to the ledger database (table `sequential_looks`), and adds the
next batch of seeds for the comparisons still open and their references only. Decided
comparisons stop receiving seeds.

Every step is derived from the ledger, so a crash anywhere is recovered by calling `advance`
again: look k is taken only once (its rows are written in one transaction), on the seeds
pool[:looks[k]] only (extra seeds never leak into an earlier look), and the batch that look k
asks for is (re)added before look k+1 is taken.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pandas as pd

from orchestrator.engine.grid import RunSpec, expand
from orchestrator.engine.ledger.states import PENDING, RunState
from orchestrator.engine.spec import CampaignSpec
from wtcommon.errors import WindtunnelError

if TYPE_CHECKING:
    from analysis.sequential.design import SequentialDesign
    from orchestrator.engine.ledger.base import RunRow
    from orchestrator.session import Session

_CELL = ("campaign", "model", "regime")  # a record's comparison group (campaign = the run's group)


class AdaptiveError(WindtunnelError, RuntimeError):
    """The campaign cannot take its next look yet; the message says why and what to do."""


@dataclass
class Advance:
    """What one call did: the look taken (None when none), its decisions, the run ids added."""

    look: int | None = None
    decisions: pd.DataFrame = field(default_factory=pd.DataFrame)
    added: list[str] = field(default_factory=list)
    finished: bool = False
    note: str = ""


def aggregate_of(spec: CampaignSpec) -> str:
    """The aggregate the looks test: `seeds.aggregate`, else the suite's first (DB-12 for db12)."""
    from evaluation.suite import load_suite

    suite = load_suite(spec.suite)
    agg = (spec.seed_design or {}).get("aggregate") or suite.aggregate_names[0]
    if agg not in suite.aggregate_names:
        raise AdaptiveError(f"{spec.source}: key 'seeds.aggregate': {agg!r} is not an aggregate of suite "
                            f"{suite.name!r}; use one of {suite.aggregate_names}")
    return agg


def _open_after(looks: pd.DataFrame, k: int) -> set[tuple[str, str, str, str]] | None:
    """(campaign, model, regime, policy) of comparisons still open after look k (None before look 0)."""
    if k < 0:
        return None
    rows = [json.loads(j) for j in looks.loc[looks["look"] == k, "row_json"]]
    return {(r["campaign"], r["model"], r["regime"], r["policy"]) for r in rows if r.get("needs_seeds")}


def _with_references(open_: set[tuple[str, str, str, str]], mechanism: dict[tuple[str, str, str, str], str],
                     baselines: dict[str, str]) -> set[tuple[str, str, str, str]]:
    """The open (campaign, model, regime, policy) cells plus each one's campaign-local reference."""
    refs = {(c, m, r, baselines[mechanism[(c, m, r, p)]]) for c, m, r, p in open_
            if mechanism.get((c, m, r, p)) in baselines}
    return set(open_) | refs


def _wanted_runs(spec: CampaignSpec, open_: set[tuple[str, str, str, str]], seeds: list[int],
                 data_root: Path) -> list[RunSpec]:
    """Runs of the open policies and of their references for `seeds` (the next batch)."""
    pool = expand(spec.model_copy(update={"seeds": spec.seed_pool()}), data_root=data_root)
    mech = {(r.group, r.model, r.regime, r.policy.name): r.policy.mechanism for r in pool}
    want = _with_references(open_, mech, spec.baselines)
    return [r for r in pool if r.seed in seeds and (r.group, r.model, r.regime, r.policy.name) in want]


def _add_runs(sess: Session, spec: CampaignSpec, runs: list[RunSpec]) -> list[str]:
    """Append runs to the campaign's ledger rows (existing rows keep their order and state)."""
    existing = sess.ledger.runs(spec.name)
    have = {r.run_key for r in existing}
    new = [r for r in runs if r.run_key not in have]
    if not new:
        return []
    rows = [r.spec.ledger_row() for r in existing] + [r.ledger_row() for r in new]
    stored = sess.ledger.campaign_spec(spec.name) or spec.model_dump_json()
    sess.ledger.upsert_campaign(spec.name, stored, rows)
    return [r.run_id for r in new]


def advance(sess: Session, campaign: str) -> Advance:
    """Take the campaign's next interim look if it is due, and add the seeds it asks for.

    Returns Advance(finished=True) when the campaign is not sequential, every comparison is
    decided, or the last look is taken. Raises AdaptiveError while runs are still pending or
    failed (retry or cancel them first: a look on missing seeds would be a different design).
    """
    from orchestrator.looks import read_looks, record_look

    spec = _stored_spec(sess, campaign)
    design = spec.sequential_design()
    if design is None:
        return Advance(finished=True, note="fixed seeds")
    _check_settled(sess.ledger.runs(campaign))
    looks = read_looks(sess.ledger, campaign)
    k = int(looks["look"].max()) + 1 if not looks.empty else 0
    pool = spec.seed_pool()
    data_root = sess.workdir / "data"
    prev_open = _open_after(looks, k - 1)
    if prev_open is not None:  # the batch look k-1 asked for must be in the ledger (crash recovery)
        done = _recover_batch(sess, spec, design, pool, k, prev_open, data_root)
        if done is not None:
            return done
    if k >= len(design.looks):
        return Advance(finished=True, note="last look taken")

    runs = _look_runs(sess, campaign, spec, pool[:design.looks[k]], prev_open)
    design = _design_of_record(design, spec, looks)
    decisions = _decide(runs, design, spec, looks, k, prev_open)
    if decisions.empty:
        raise AdaptiveError(f"campaign {campaign!r}: no comparison has both a policy and its reference recorded")
    record_look(sess.ledger, campaign, decisions, design)
    export_looks(sess, campaign)
    now_open = {(r.campaign, r.model, r.regime, r.policy) for r in decisions.itertuples() if r.needs_seeds}
    if not now_open or k + 1 >= len(design.looks):
        return Advance(look=k, decisions=decisions, finished=True,
                       note="last look taken" if now_open else f"every comparison decided at look {k}")
    batch = pool[design.looks[k]:design.looks[k + 1]]
    added = _add_runs(sess, spec, _wanted_runs(spec, now_open, batch, data_root))
    return Advance(look=k, decisions=decisions, added=added, note=f"seeds {batch} for the open comparisons")


def _stored_spec(sess: Session, campaign: str) -> CampaignSpec:
    """The campaign's spec as the ledger stores it (the looks follow the submitted design)."""
    spec_json = sess.ledger.campaign_spec(campaign)
    if spec_json is None:
        raise AdaptiveError(f"campaign {campaign!r} is not in the ledger {sess.ledger.url}; submit it first")
    return CampaignSpec.model_validate_json(spec_json)


def _check_settled(rows: list[RunRow]) -> None:
    """AdaptiveError while a run is pending or failed: a look on missing seeds would be another design."""
    pending = [r.run_id for r in rows if r.state in PENDING]
    if pending:
        raise AdaptiveError(f"{len(pending)} run(s) still pending (e.g. {pending[0]}); `campaign resume` first")
    failed = [r.run_id for r in rows if r.state == RunState.failed]
    if failed:
        raise AdaptiveError(f"{len(failed)} run(s) failed (e.g. {failed[0]}); `campaign retry` or `campaign cancel` "
                            "them before the next look")


def _recover_batch(sess: Session, spec: CampaignSpec, design: SequentialDesign, pool: list[int], k: int,
                   prev_open: set[tuple[str, str, str, str]], data_root: Path) -> Advance | None:
    """After look k-1: the campaign's end when it decided everything or was the last look, else the batch it
    asked for (re)added when missing; None when that batch is all in the ledger and look k is due."""
    if not prev_open:
        return Advance(finished=True, note=f"every comparison decided by look {k - 1}")
    if k >= len(design.looks):
        return Advance(finished=True, note="last look taken")
    added = _add_runs(sess, spec,
                      _wanted_runs(spec, prev_open, pool[design.looks[k - 1]:design.looks[k]], data_root))
    if added:
        return Advance(added=added, note=f"seeds {pool[design.looks[k - 1]:design.looks[k]]} for look {k}")
    return None


def _look_runs(sess: Session, campaign: str, spec: CampaignSpec, seeds: list[int],
               prev_open: set[tuple[str, str, str, str]] | None) -> pd.DataFrame:
    """The run table a look sees: recorded runs of `seeds` only, and after look 0 only the comparisons
    still open and their references."""
    from analysis.aggregates import run_table
    from analysis.records import read_records
    from evaluation.suite import load_suite

    records = sess.collect_records(campaign)
    if records is None:
        raise AdaptiveError(f"campaign {campaign!r} has no recorded run to look at")
    suite = load_suite(spec.suite)
    runs = run_table(read_records(records, suite=suite), suite)
    runs = runs[runs["seed"].isin(seeds)]
    if prev_open is not None:
        cell = list(zip(runs["campaign"], runs["model"], runs["regime"], runs["policy"], strict=True))
        keep = _with_references(prev_open, dict(zip(cell, runs["mechanism"], strict=True)), spec.baselines)
        runs = runs[[c in keep for c in cell]]
    return runs


def _design_of_record(design: SequentialDesign, spec: CampaignSpec, looks: pd.DataFrame) -> SequentialDesign:
    """The design as its first look recorded it: a campaign whose looks began under an earlier default keeps
    that familywise procedure (looks are immutable)."""
    if not looks.empty and "familywise" not in (spec.seed_design or {}):
        first = json.loads(looks["design_json"].iloc[0] or "{}")
        design = replace(design, familywise=first.get("familywise", "none"))
    return design


def _decide(runs: pd.DataFrame, design: SequentialDesign, spec: CampaignSpec, looks: pd.DataFrame, k: int,
            prev_open: set[tuple[str, str, str, str]] | None) -> pd.DataFrame:
    """Look k's decisions over `runs`, for the comparisons still open (all of them at look 0)."""
    from analysis.sequential.looks import look_at_runs, rejected_at_earlier_looks

    tested = design
    if k > 0 and design.familywise != "none" and design.family_size is None:
        # later looks see only the open comparisons; the family (and each one's alpha) stays look 0's
        tested = replace(design, family_size=max(1, int((looks["look"] == 0).sum())))
    # Holm step-down (the default): the comparisons rejected at earlier looks freed their alpha for the rest
    decisions = look_at_runs(runs, tested, k, aggregate_of(spec), references=spec.baselines,
                             rejected_before=rejected_at_earlier_looks(looks, k))
    if prev_open is not None and not decisions.empty:  # a reference shared with a decided policy is not re-tested
        ident = list(zip(decisions["campaign"], decisions["model"], decisions["regime"], decisions["policy"],
                         strict=True))
        decisions = decisions[[i in prev_open for i in ident]].reset_index(drop=True)
    return decisions


def export_looks(sess: Session, campaign: str) -> Path | None:
    """Write every recorded look to `results/<campaign>/sequential_looks.csv` (atomic), next to the
    records, where `campaign report` finds it and shows the adjusted intervals first."""
    from wtcommon.atomic import atomic_write_text
    from analysis.sequential.looks import LOOK_COLUMNS
    from orchestrator.looks import read_looks

    looks = read_looks(sess.ledger, campaign)
    if looks.empty:
        return None
    from orchestrator.engine.paths import results_file

    path = results_file(sess.workdir, campaign, "sequential_looks.csv")
    atomic_write_text(path, looks[list(LOOK_COLUMNS)].to_csv(index=False))
    return path


def looks_summary(decisions: pd.DataFrame) -> list[dict[str, Any]]:
    """Plain rows for printing: comparison, n, mean, repeated CI, decision."""
    out = []
    for r in decisions.itertuples():
        out.append({"comparison": f"{r.campaign}/{r.model}/{r.regime}:{r.policy}-{r.reference}", "n": int(r.n),
                    "mean": float(getattr(r, "mean", float("nan"))),
                    "rci_low": float(getattr(r, "rci_low", float("nan"))),
                    "rci_high": float(getattr(r, "rci_high", float("nan"))), "decision": r.decision})
    return out
