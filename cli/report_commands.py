"""`campaign report`: one self-contained HTML report of a records file, optionally attached to each campaign's
MLflow parent run."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from cli.console import err
from cli.groups import command
from cli.options import OutFileOpt
from orchestrator.engine.ranges import check_points
from wtcommon.errors import UserError
from cli.memorization_options import MemorizationOpt, load_probes
from cli.analysis_inputs import (
    RecordsArg, SuiteOpt, RESAMPLES, ResamplesOpt, MixedOpt, MixedGradersOpt, check_inputs, check_out,
    VsOpt, apply_vs, load_records, partial_note, read_items, require_pairs)


def report(
    records: RecordsArg,
    out: OutFileOpt[Path],
    suite: SuiteOpt = "db12",
    margin: Annotated[float, typer.Option("--margin", metavar="POINTS",
                                          help="equivalence margin of the verdict table (points)")] = 1.0,
    force: Annotated[bool, typer.Option("--force", metavar="", help="replace an existing --out file")] = False,
    items: Annotated[Path | None, typer.Option(
        "--items", metavar="FOLDER",
        help="folder with the runs' *.items.jsonl.gz item logs: the paired table gets the seed + item CI")] = None,
    resamples: ResamplesOpt = RESAMPLES,
    runs_dir: Annotated[Path | None, typer.Option(
        "--runs-dir", metavar="FOLDER",
        help="the runs' folder (<workdir>/runs): adds each run's intervention evidence and compute; "
                           "flagged policies are listed before any score comparison")] = None,
    looks: Annotated[Path | None, typer.Option(
        "--looks", metavar="FILE",
        help="interim looks of a sequential campaign (default: sequential_looks.csv next to the "
                        "records, when present): their adjusted intervals are shown first")] = None,
    figures: Annotated[Path | None, typer.Option(
        "--figures", metavar="FOLDER",
        help="also write every figure into this folder as <name>.svg, .pdf and .png (200 dpi)")] = None,
    allow_mixed: MixedOpt = False,
    allow_mixed_graders: MixedGradersOpt = False,
    memorization: MemorizationOpt = None,
    workdir: Annotated[Path | None, typer.Option(
        "--workdir", metavar="DIR",
        help="also attach the report to the MLflow parent run of each of its campaigns in this work directory "
             "(the one `submit` ran in)")] = None,
    ledger_url: Annotated[str | None, typer.Option(
        "--ledger-url", metavar="URL",
        help="with --workdir: the ledger's SQLAlchemy URL, if not the work dir's")] = None,
    vs: VsOpt = None,
) -> None:
    """Write one self-contained HTML report (verdicts, within-group sensitivity, figures, tables) to --out FILE
    (--force replaces it; a folder exits 2)."""
    if workdir is not None:
        _require_ledger(workdir, ledger_url)
    check_inputs(check_points("--margin", margin))
    check_out(out, [records, looks], force)
    _check_figures(figures, force)
    s, df = load_records(records, suite, mixed_evaluations=allow_mixed, mixed_graders=allow_mixed_graders)
    df = apply_vs(df, vs)
    import warnings

    from analysis.comparisons import paired_comparisons as _pc

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        require_pairs(_pc(df, s, n_resamples=100), records)
    item_df = read_items(items)
    probes = load_probes(memorization, records, df)
    from analysis.report import build_report

    lead = _lead_sections(records, looks)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if runs_dir is None:
            path = build_report(df, out, suite=s, n_resamples=resamples, lead_sections=lead, margin=margin,
                                items=item_df, figures_dir=figures, allow_mixed_graders=allow_mixed_graders,
                                memorization=probes)
        else:
            from analysis.intervention import runs_from_dir
            from analysis.report import build_report_with_evidence

            path, flags = build_report_with_evidence(df, out, suite=s, runs=runs_from_dir(df, runs_dir),
                                                     n_resamples=resamples, lead_sections=lead,
                                                     margin=margin, items=item_df, figures_dir=figures,
                                                     allow_mixed_graders=allow_mixed_graders, memorization=probes)
            for r in flags[flags["flag"] != ""].itertuples():
                err.print(f"flagged {r.policy} ({r.campaign}/{r.model}): {r.flag}: {r.reason}", markup=False)
            for r in flags[flags["watch"] != ""].itertuples():
                err.print(f"flagged {r.policy} ({r.campaign}/{r.model}): {r.watch}: {r.watch_reason}", markup=False)
    err.print(f"wrote {path}" + (f" and its figures (svg, pdf, png) in {figures}" if figures is not None else ""),
              markup=False)
    if workdir is not None:
        _attach_report(path, sorted(df["campaign"].astype(str).unique()), workdir, ledger_url)


def _check_figures(figures: Path | None, force: bool) -> None:
    """--figures is a folder, and one already holding figures is replaced only with --force."""
    if figures is None:
        return
    if figures.exists() and not figures.is_dir():
        raise UserError(f"--figures {figures}: is a file; --figures takes a folder (one <figure>.svg/.pdf/.png each)")
    if figures.is_dir() and any(figures.glob("*.svg")) and not force:
        raise UserError(f"--figures {figures}: already holds figures; pass --force to replace them, or choose "
                        f"another folder")


def _lead_sections(records: Path, looks: Path | None) -> list[str]:
    """What goes before any score comparison: a sequential campaign's interim looks (--looks, or the
    sequential_looks.csv next to the records), else the partial-records note when the campaign still runs."""
    from analysis.sequential.looks import read_looks_file
    from analysis.sequential.report import looks_section_html

    looks_path = looks or (Path(records).parent / "sequential_looks.csv")
    if looks is not None or looks_path.is_file():
        return [looks_section_html(read_looks_file(looks_path))]  # SequentialError: exit 2
    partial = partial_note(records)
    if partial:
        import html

        return [f'<p class="partial"><b>{html.escape(partial)}</b></p>']
    return []


def _require_ledger(workdir: Path, ledger_url: str | None) -> None:
    """--workdir names a work directory with a ledger (checked before the report is built)."""
    from orchestrator.engine.workdir import Workdir

    Workdir(workdir, ledger_url).require_ledger(shown=workdir)


def _attach_report(report: Path, campaigns: list[str], workdir: Path, ledger_url: str | None) -> None:
    """The report as an artifact of each campaign's MLflow parent run (issue 27): MLflow opens a campaign on its
    verdicts and its report. A campaign of the records that this work dir's ledger does not hold is named, not
    invented."""
    from orchestrator.campaign import open_session

    sess = open_session(workdir, ledger_url)
    known = set(sess.ledger.campaigns())
    for name in campaigns:
        if name not in known:
            err.print(f"note: campaign {name!r} is not in {workdir}'s ledger: the report is not attached to it",
                      markup=False)
            continue
        run_id = sess.tracker(name).attach_report(report)
        err.print(f"attached {report.name} to MLflow run {run_id} ({name} · campaign)", markup=False)


def register(app: typer.Typer) -> None:
    """Attach `campaign report` to the main app (cli/analysis_commands.py registers it among the analysis
    commands, in their order)."""
    command(app, "report", report)
