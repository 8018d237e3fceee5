"""`campaign seeds-look`: one group-sequential look over a campaign's records, by hand."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Optional

import typer
from rich.console import Console
from rich.table import Table

out = Console()
err = Console(stderr=True)


def _fail(msg: str, code: int = 2) -> None:
    err.print(f"[red]error:[/red] {msg}", highlight=False)
    raise typer.Exit(code)


def _fmt(v: object) -> str:
    if isinstance(v, float):
        return "NaN" if math.isnan(v) else f"{v:+.4f}"
    return str(v)


def register(app: typer.Typer) -> None:
    """Attach `seeds-look` to the main app."""

    @app.command("seeds-look")
    def seeds_look_cmd(
        campaign: str = typer.Argument(..., help="campaign name (as in the ledger and results/<campaign>/)"),
        look: int = typer.Option(..., "--look", help="0-based look index (after the first batch: 0)"),
        workdir: Path = typer.Option(..., "--workdir", help="work directory (records and ledger)"),
        records: Optional[Path] = typer.Option(None, "--records", help="default <workdir>/results/<campaign>/records.parquet"),
        max_seeds: int = typer.Option(12, "--max", help="maximum seeds per comparison"),
        batch: int = typer.Option(3, "--batch", help="seeds added between looks"),
        margin: Optional[float] = typer.Option(None, "--margin", help="equivalence margin in aggregate points"),
        futility: Optional[float] = typer.Option(None, "--futility-cp", help="stop when conditional power < this"),
        spending: str = typer.Option("obf", "--spending", help="obf | pocock"),
        aggregate: Optional[str] = typer.Option(None, "--aggregate", help="default: the suite's first aggregate"),
        suite: str = typer.Option("db12", "--suite"),
        ledger_url: Optional[str] = typer.Option(None, "--ledger-url"),
        as_json: bool = typer.Option(False, "--json"),
    ) -> None:
        """Test every comparison at this look; record it in the ledger DB; list who needs the next batch."""
        from analysis.aggregates import run_table
        from analysis.records import RecordsError, read_records
        from analysis.sequential import SequentialDesign, SequentialError, look_at_runs, next_batch_seeds, record_look
        from evaluation.suite import SuiteError, load_suite
        from orchestrator.tuning import ledger_url as _url

        try:
            s = load_suite(suite)
            design = SequentialDesign.from_mapping({"max": max_seeds, "batch": batch, "design": "sequential",
                                                    "equivalence_margin": margin, "futility_cp": futility,
                                                    "spending": spending}, where="seeds-look")
            path = records or workdir / "results" / campaign / "records.parquet"
            runs = run_table(read_records(path, suite=s), s)
            dec = look_at_runs(runs, design, look, aggregate or s.aggregate_names[0])
        except (SequentialError, RecordsError, SuiteError, FileNotFoundError) as exc:
            _fail(str(exc))
        if dec.empty:
            _fail(f"{path}: no comparison with both a policy and its reference; nothing to look at")
        n = record_look(_url(workdir, ledger_url), campaign, dec, design)
        nxt = next_batch_seeds(dec, design, look)
        if as_json:
            out.print_json(json.dumps({"decisions": dec.to_dict("records"), "recorded": n,
                                       "next_batch": {"/".join(k): v for k, v in nxt.items()}}, default=str))
            return
        t = Table(title=f"look {look} ({design.looks[look]} seeds planned of {design.max_seeds})")
        for c in ("comparison", "n", "mean", "repeated CI", "decision"):
            t.add_column(c)
        for r in dec.itertuples():
            ci = f"[{r.rci_low:+.3f}, {r.rci_high:+.3f}]" if r.decision != "error" else r.error
            t.add_row(f"{r.campaign}/{r.model}/{r.regime}:{r.policy}-{r.reference}", str(r.n),
                      _fmt(getattr(r, "mean", math.nan)), ci, r.decision)
        out.print(t)
        out.print(f"recorded {n} decisions in the ledger database (table sequential_looks)")
        for k, v in nxt.items():
            out.print(f"next batch for {'/'.join(k)}: seeds {v} (open comparisons and their reference)")
