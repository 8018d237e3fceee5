"""`campaign tables|compare|sensitivity|report`: the analysis layer on a records file.

Heavy imports (pandas, scipy, matplotlib) happen inside the commands so `campaign --help` stays
fast. Malformed records exit 2 with one line per problem (file, row, column) and write nothing.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from cli.console import err
from cli.groups import command
from cli import compare_commands, report_commands
from cli.compare_commands import compare  # noqa: F401  (the analysis commands, one import away)
from cli.report_commands import report  # noqa: F401
from cli.analysis_inputs import (
    RecordsArg, SuiteOpt, CampaignOpt, ModelOpt, RESAMPLES, ResamplesOpt, WideOpt, MixedOpt, MixedGradersOpt,
    ForceOpt, EXT, VsOpt, apply_vs, check_inputs, check_out_dir, check_out_file, clean_value, emit, json_rows,
    load_records, output_format, parse_reference_map, read_items, require_pairs, write_tables)
from cli.memorization_options import MaxMemorizationOpt, MemorizationOpt, load_probes, restrict
from cli.options import FormatOpt, JsonOpt, OutDirOpt, OutFileOpt
from analysis.sensitivity_tables import SENSITIVITY_TABLES
from orchestrator.engine.ranges import check_open_probability, check_points
from cli.jsonsafe import dumps as _json_dumps
from wtcommon.errors import UserError


AllOpt = Annotated[bool, typer.Option("--all", metavar="", help="print every table (same as --table all); by "
                                      "default a terminal gets the verdict counts and the list of tables")]


def tables(
    records: RecordsArg,
    table: Annotated[str | None, typer.Option(
        "--table", metavar="NAME", help="table name, NAME,NAME or 'all' (default: all for --out, --format "
                                        "latex|json; an index of the tables on a terminal)")] = None,
    fmt: FormatOpt = "md",
    suite: SuiteOpt = "db12",
    metric: Annotated[str | None, typer.Option("--aggregate", metavar="METRIC",
                                                  help="metric of the paired table")] = None,
    out: OutDirOpt[Path | None] = None,
    resamples: ResamplesOpt = RESAMPLES,
    margin: Annotated[float, typer.Option("--margin", metavar="POINTS",
                                          help="equivalence margin of the verdict table (points)")] = 1.0,
    items: Annotated[Path | None, typer.Option(
        "--items", metavar="FOLDER", help="folder with the runs' *.items.jsonl.gz item logs: the paired table "
                                          "gets the seed + item two-way clustered CI")] = None,
    force: ForceOpt = False,
    as_json: JsonOpt = False,
    show_all: AllOpt = False,
    wide: WideOpt = False,
    allow_mixed: MixedOpt = False,
    allow_mixed_graders: MixedGradersOpt = False,
    vs: VsOpt = None,
) -> None:
    """Print the study's tables regenerated from RECORDS (Markdown, CSV, LaTeX or JSON).

    On a terminal (Markdown, no --table) the verdict counts and an index of the tables; --table NAME or --all
    prints them, each fitted to the terminal's width (120 when piped) naming the columns it leaves out (--wide:
    every column).
    CSV holds one table: on stdout pass --table NAME, or --out FOLDER for one file per table.
    --out FOLDER gets one <table>.<md|csv|tex|json> per table (--force replaces them); a file there exits 2."""
    from analysis.tables import TABLE_NAMES

    fmt = output_format(fmt, as_json)
    check_inputs(check_points("--margin", margin))
    index_only = table is None and not show_all and fmt == "md" and out is None
    table = "all" if table is None or show_all else table
    names = list(TABLE_NAMES) if table == "all" else [t.strip() for t in table.split(",")]
    bad = [n for n in names if n not in TABLE_NAMES]
    if bad:
        raise UserError(f"--table {', '.join(bad)}: unknown; choose from all, {', '.join(TABLE_NAMES)}")
    if fmt == "csv" and out is None and len(names) > 1:
        raise UserError(f"--format csv prints one table on stdout ({len(names)} asked): pass --table NAME (one of "
                        f"{', '.join(TABLE_NAMES)}), or --out FOLDER for one <table>.csv per table")
    check_out_dir(out, [records, items], names, EXT[fmt], force)
    s, df = load_records(records, suite, mixed_evaluations=allow_mixed,
                  mixed_graders=allow_mixed_graders)
    df = apply_vs(df, vs)
    item_df = read_items(items)
    if metric is not None and metric not in s.aggregate_names + list(s.domains) + s.benchmark_ids:
        raise UserError(f"--aggregate {metric!r}: not an aggregate, domain or benchmark of suite {s.name!r} "
                        f"(aggregates: {', '.join(s.aggregate_names)})")
    import warnings

    from analysis.comparisons import paired_comparisons
    from analysis.table_formats import render_tables
    from analysis.tables import build_tables

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        paired = paired_comparisons(df, s, n_resamples=resamples, items=item_df,
                                    allow_mixed_graders=allow_mixed_graders)
        if set(names) & {"paired", "verdicts", "random_effects"}:
            require_pairs(paired, records)
        built = build_tables(df, s, names, metric=metric, n_resamples=resamples, paired=paired, margin=margin)
    if out is not None:
        write_tables(built, fmt, out)
        return
    if index_only:
        emit(_tables_index(built, records), None)
        return
    if fmt == "md" and not wide:
        emit(_fitted(built), None)
        return
    emit(render_tables(built, fmt), None)


def _fitted(built: list) -> str:
    """Markdown tables fitted to the terminal, then one line naming the columns each left out."""
    from analysis.table_formats import _wrap, fit_table
    from wtcommon.terminal import terminal_width

    width = terminal_width()  # the terminal's; 120 when not a terminal
    parts, dropped = [], []
    for t in built:
        text, hidden = fit_table(t, width)
        parts.append(text)
        if hidden:
            dropped.append(f"{t.name}: {', '.join(hidden)}")
    if dropped:
        parts.append(_wrap(f"columns left out to fit {width} characters (--wide prints every column; "
                           f"--format csv|json every number): {'; '.join(dropped)}", width) + "\n")
    return "\n".join(parts)


def _tables_index(built: list, records: Path) -> str:
    """One screen: the verdict counts (the answer) and one line per table, with how to print them."""
    from analysis.table_formats import _wrap
    from wtcommon.terminal import terminal_width

    width = terminal_width()
    lines = []
    for t in built:
        if t.name == "verdicts":
            lines += [_wrap(f"verdicts: {t.lead}", width), ""]
    lines.append(f"{len(built)} tables of {records}:")
    name_w = max(len(t.name) for t in built)
    for t in built:
        rows = f"{len(t.display)} rows" if not t.display.empty else "empty"
        lines.append(f"  {t.name:<{name_w}}  {rows:>8}  {t.title}"[:width])
    lines.append(_wrap(f"print them: --table NAME[,NAME] or --all (fitted to {width} characters; --wide "
                       "for every column); --out FOLDER writes one file per table (--format md|csv|latex|json)",
                       width))
    return "\n".join(lines) + "\n"


def sensitivity(
    records: RecordsArg,
    campaign: CampaignOpt = None,
    model: ModelOpt = None,
    aggregate: Annotated[str | None, typer.Option("--aggregate", metavar="AGGREGATE",
                                                     help="aggregate for seed-resampling ranks")] = None,
    resamples: ResamplesOpt = RESAMPLES,
    as_json: JsonOpt = False,
    suite: SuiteOpt = "db12",
    fmt: FormatOpt = "md",
    table: Annotated[str | None, typer.Option(
        "--table", metavar="NAME", help=f"only this table: {', '.join(SENSITIVITY_TABLES)} (csv on stdout needs "
                                        "one)")] = None,
    out: OutDirOpt[Path | None] = None,
    force: ForceOpt = False,
    allow_mixed: MixedOpt = False,
    allow_mixed_graders: MixedGradersOpt = False,
) -> None:
    """Ranking sensitivity: aggregate-vs-aggregate rank correlations, leave-one-benchmark-out, seed bootstrap.

    Three tables (rank_correlations, leave_one_out, seed_stability), each per group and pooled; CSV holds one
    table: on stdout pass --table NAME, or --out FOLDER for one file per table.
    --out FOLDER gets one <table>.<md|csv|tex|json> per table (--force replaces them); a file there exits 2."""
    fmt = output_format(fmt, as_json)
    if table is not None and table not in SENSITIVITY_TABLES:
        raise UserError(f"--table {table!r}: unknown; choose from {', '.join(SENSITIVITY_TABLES)}")
    names = [table] if table else list(SENSITIVITY_TABLES)
    if fmt == "csv" and out is None and len(names) > 1:
        raise UserError(f"--format csv prints one table on stdout: pass --table NAME (one of "
                        f"{', '.join(SENSITIVITY_TABLES)}), "
                        "or --out FOLDER for one <table>.csv per table")
    check_out_dir(out, [records], names, EXT[fmt], force)
    s, df = load_records(records, suite, campaign, model, mixed_evaluations=allow_mixed,
                  mixed_graders=allow_mixed_graders)
    if aggregate is not None and aggregate not in s.aggregate_names:
        raise UserError(f"--aggregate {aggregate!r}: suite {s.name!r} declares {', '.join(s.aggregate_names)}")
    import pandas as pd

    from analysis.aggregates import run_table
    from analysis.sensitivity import sensitivity_report
    from analysis.sensitivity_tables import sensitivity_tables
    from analysis.table_formats import _md, render_tables

    rep = sensitivity_report(run_table(df, s), s, stability_aggregate=aggregate, n_resamples=resamples)
    if fmt == "json" and out is None and table is None:
        emit(_json_dumps(rep, indent=1, default=clean_value) + "\n", None)
        return
    if fmt != "md" or out is not None or table is not None:
        built = [t for t in sensitivity_tables(rep) if t.name in names]
        if out is not None:
            write_tables(built, fmt, out)
        else:
            emit(render_tables(built, fmt), None)
        return
    scopes = [rep["pooled"]] + rep["groups"]
    for sc in scopes:
        name = ("all configurations (pooled)" if sc["scope"] == "all" else
                "/".join(str(sc[k]) for k in ("campaign", "model", "regime", "step") if sc.get(k) not in ("", None)))
        typer.echo(f"## {name} ({sc['n_configs']} configurations)\n")
        typer.echo(_md(pd.DataFrame(sc["aggregate_correlations"]).round(3)) + "\n")
        lobo = pd.DataFrame(sc["leave_one_out"])
        if not lobo.empty:
            worst = lobo.sort_values("spearman").groupby("aggregate", sort=False).head(1)
            typer.echo("leave-one-benchmark-out, lowest Spearman per aggregate:\n")
            typer.echo(_md(worst.round(3)) + "\n")
        st = sc["seed_stability"]
        typer.echo(f"seed bootstrap ({st['aggregate']}, {st['n_resamples']} resamples), "
                   f"mean Kendall tau with the full ranking: {st['mean_kendall_tau']}\n")
        cfg = pd.DataFrame(st["configs"])
        if not cfg.empty:
            show = [c for c in ("campaign", "model", "regime", "policy", "n_seeds", "mean", "rank", "mean_rank",
                                "rank_lo", "rank_hi", "p_top1") if c in cfg]
            typer.echo(_md(cfg[show].round(3)) + "\n")


def verdicts(
    records: RecordsArg,
    margin: Annotated[float, typer.Option("--margin", metavar="POINTS",
                                          help="equivalence margin ±M (points); also the effect "
                                          "the seeds-to-decide column is powered for")] = 1.0,
    aggregate: Annotated[str | None, typer.Option("--aggregate", metavar="AGGREGATE",
                                                  help="default: the suite's first aggregate")] = None,
    campaign: CampaignOpt = None,
    model: ModelOpt = None,
    alpha: Annotated[float, typer.Option("--alpha", metavar="P",
                                         help="family-wise error rate of each family (Holm)")] = 0.05,
    reference_map: Annotated[list[str] | None, typer.Option(
        "--reference-map", metavar="POLICY=REFERENCE", help="overrides baseline/static (repeatable)")] = None,
    as_json: JsonOpt = False,
    suite: SuiteOpt = "db12",
    fmt: FormatOpt = "md",
    out: OutFileOpt[Path | None] = None,
    force: ForceOpt = False,
    resamples: ResamplesOpt = RESAMPLES,
    allow_mixed: MixedOpt = False,
    allow_mixed_graders: MixedGradersOpt = False,
    max_memorization: MaxMemorizationOpt = None,
    memorization: MemorizationOpt = None,
    vs: VsOpt = None,
) -> None:
    """One verdict per method-vs-reference comparison: better / worse / equivalent within ±M / undecided.

    --max-memorization RATE judges the aggregate on the benchmarks the base model recalls at under RATE only (the
    restriction is stated first). --out FILE gets what stdout would (--force replaces it; a folder exits 2)."""
    fmt = output_format(fmt, as_json)
    refs = parse_reference_map(reference_map)
    check_inputs(check_points("--margin", margin), check_open_probability("--alpha", alpha))
    check_out_file(out, [records], force)
    s, df = load_records(records, suite, campaign, model, mixed_evaluations=allow_mixed,
                  mixed_graders=allow_mixed_graders)
    df = apply_vs(df, vs)
    if aggregate is not None and aggregate not in s.aggregate_names:
        raise UserError(f"--aggregate {aggregate!r}: suite {s.name!r} declares {', '.join(s.aggregate_names)}")
    restriction = None
    if max_memorization is not None:
        probes = load_probes(memorization, records, df, required=True) or {}
        s, restriction = restrict(s, aggregate or s.aggregate_names[0], probes, max_memorization,
                                  sorted(df["model"].astype(str).unique()))
        aggregate = restriction.aggregate
    import warnings

    from analysis.comparisons import SMALL_N_NOTE, paired_comparisons
    from analysis.table_formats import render_table
    from analysis.budget import machine_columns
    from analysis.tables import verdicts_table
    from analysis.verdicts import verdict_counts

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        res = paired_comparisons(df, s, reference_map=refs, aggregates=[aggregate] if aggregate else None,
                                 n_resamples=resamples, allow_mixed_graders=allow_mixed_graders)
    require_pairs(res, records)
    t = verdicts_table(res.table, aggregate or s.aggregate_names[0], margin, alpha)
    if fmt == "json":
        emit(_json_dumps({"suite": s.name, "aggregate": aggregate or s.aggregate_names[0], "margin": margin,
                          "alpha": alpha, "method": t.note, "small_n": SMALL_N_NOTE,
                          "counts": verdict_counts(t.data), "verdicts": json_rows(machine_columns(t.data)),
                          "dropped": res.dropped,
                          "memorization": None if restriction is None else restriction.as_dict()},
                         indent=1) + "\n", out)
        return
    text = render_table(t, fmt)
    if restriction is not None:
        text = f"{restriction.statement()}\n\n{text}"
    emit(text, out)
    for msg in res.dropped:
        err.print(f"warning: {msg}", markup=False, soft_wrap=True)


def register(app: typer.Typer) -> None:
    """Attach this area's commands to the main app."""
    command(app, "tables", tables)
    compare_commands.register(app)
    command(app, "sensitivity", sensitivity)
    report_commands.register(app)
    command(app, "verdicts", verdicts)
