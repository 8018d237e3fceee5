"""`campaign looks` (the interim looks a sequential campaign recorded) and `campaign seeds-look`
(one group-sequential look over any records, e.g. the released ones, by hand)."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Annotated

import typer
from rich.table import Table

from cli.console import out, signed as _fmt
from cli.groups import command
from cli.options import LedgerUrlOpt, WorkdirOpt
from wtcommon.errors import UserError


def looks_cmd(
    workdir: WorkdirOpt,
    campaign: Annotated[str, typer.Argument(metavar="CAMPAIGN", help="campaign name in the ledger")],
    ledger_url: LedgerUrlOpt = None,
    as_json: bool = typer.Option(False, "--json"),
) -> None:
    """Every interim look of a sequential campaign: seeds, mean, repeated (adjusted) CI, decision."""
    from orchestrator.looks import read_looks
    from orchestrator.engine.workdir import Workdir

    wd = Workdir(workdir, ledger_url)
    wd.require_ledger(workdir, campaign)
    looks = read_looks(wd.ledger_url, campaign)
    if looks.empty:
        raise UserError(f"campaign {campaign!r} has no recorded interim look (fixed seeds, or its first batch is "
                        f"not done)")
    if as_json:
        typer.echo(looks.drop(columns=["row_json"]).to_json(orient="records", indent=2))
        return
    t = Table(title=f"{campaign}: interim looks (repeated CIs keep coverage over all looks)")
    for c in ("look", "comparison", "seeds", "mean", "repeated CI", "decision"):
        t.add_column(c)
    for r in looks.itertuples():
        ci = "NaN" if r.rci_low is None or r.rci_high is None or math.isnan(r.rci_low) or math.isnan(r.rci_high) \
            else f"[{r.rci_low:+.3f}, {r.rci_high:+.3f}]"
        t.add_row(str(r.look), r.comparison, str(r.n), _fmt(r.mean), ci, r.decision)
    out.print(t)


def seeds_look_cmd(
    workdir: WorkdirOpt,
    campaign: Annotated[str, typer.Argument(metavar="CAMPAIGN",
                                            help="campaign name (as in the ledger and results/<campaign>/)")],
    look: Annotated[int, typer.Option("--look", metavar="N", help="0-based look index (after the first batch: 0)")],
    records: Path | None = typer.Option(None, "--records",
                                        help="default <workdir>/results/<campaign>/records.parquet"),
    max_seeds: int = typer.Option(12, "--max", help="maximum seeds per comparison"),
    batch: int = typer.Option(3, "--batch", help="seeds added between looks"),
    margin: float | None = typer.Option(None, "--margin", help="equivalence margin in aggregate points"),
    futility: float | None = typer.Option(None, "--futility-cp", help="stop when conditional power < this"),
    spending: str = typer.Option("obf", "--spending", help="obf | pocock"),
    familywise: str = typer.Option("holm", "--familywise", help="holm (default): step-down over the "
                                   "group-sequential boundaries of the campaign's m comparisons, alpha/m raised "
                                   "as comparisons are rejected (P(any false efficacy decision) <= alpha) | "
                                   "bonferroni: alpha/m each | none: alpha per comparison"),
    design_name: str = typer.Option("default", "--design-name", help="name of the design; a look under an "
                                    "existing name must use that name's design (looks are immutable)"),
    aggregate: str | None = typer.Option(None, "--aggregate", help="default: the suite's first aggregate"),
    suite: str = typer.Option("db12", "--suite"),
    ledger_url: LedgerUrlOpt = None,
    as_json: bool = typer.Option(False, "--json"),
) -> None:
    """Test every comparison at this look; record it in the ledger DB; list who needs the next batch."""
    from analysis.sequential.looks import next_batch_seeds
    from orchestrator.looks import look_at_records, record_look, runs_its_own_looks
    from orchestrator.engine.ranges import check_open_probability, check_points
    from orchestrator.engine.workdir import Workdir

    for problem in (check_points("--margin", margin), check_open_probability("--futility-cp", futility)):
        if problem:
            raise UserError(problem)
    wd = Workdir(workdir, ledger_url)
    if runs_its_own_looks(wd, campaign):
        raise UserError(f"campaign {campaign!r} runs a sequential seed design: `campaign submit/resume` take its looks "
                        f"and add its batches; see them with `campaign looks {campaign} --workdir {workdir}`")
    path = records or wd.records(campaign)
    dec, design, agg = look_at_records(path, suite, {"max": max_seeds, "batch": batch, "design": "sequential",
                                                     "equivalence_margin": margin, "futility_cp": futility,
                                                     "spending": spending, "familywise": familywise}, look, aggregate)
    if dec.empty:
        raise UserError(f"{path}: no comparison with both a policy and its reference; nothing to look at")
    n = record_look(wd.ledger_url, campaign, dec, design, aggregate=agg, design_name=design_name)
    nxt = next_batch_seeds(dec, design, look)
    if as_json:
        from cli.jsonsafe import dumps

        typer.echo(dumps({"decisions": dec.to_dict("records"), "recorded": n,
                          "next_batch": {"/".join(k): v for k, v in nxt.items()}}, default=str, indent=1))
        return
    t = Table(title=f"look {look} ({design.looks[look]} seeds planned of {design.max_seeds})")
    for c in ("comparison", "n", "mean", "repeated CI", "decision", "bias-adjusted Δ [95% CI]"):
        t.add_column(c)
    for r in dec.itertuples():
        ci = f"[{r.rci_low:+.3f}, {r.rci_high:+.3f}]" if r.decision != "error" else r.error
        mue = getattr(r, "mue", math.nan)
        adj = "" if not isinstance(mue, float) or math.isnan(mue) else \
            f"{mue:+.3f} [{r.mue_low:+.3f}, {r.mue_high:+.3f}]"
        t.add_row(f"{r.campaign}/{r.model}/{r.regime}:{r.policy}-{r.reference}", str(r.n),
                  _fmt(getattr(r, "mean", math.nan)), ci, r.decision, adj)
    out.print(t)
    out.print(f"recorded {n} decisions in the ledger database (table sequential_looks) under design "
              f"{design_name!r} (aggregate {agg}, familywise {design.familywise}); "
              "bias-adjusted Δ: median-unbiased estimate under the stage-wise ordering, for early efficacy stops")
    for k, v in nxt.items():
        out.print(f"next batch for {'/'.join(k)}: seeds {v} (open comparisons and their reference)")


def register(app: typer.Typer) -> None:
    """Attach `looks` and `seeds-look` to the main app."""
    command(app, "looks", looks_cmd)
    command(app, "seeds-look", seeds_look_cmd)
