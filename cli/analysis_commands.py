"""`campaign tables|compare|sensitivity|report`: the analysis layer on a records file.

Heavy imports (pandas, scipy, matplotlib) happen inside the commands so `campaign --help` stays
fast. Malformed records exit 2 with one line per problem (file, row, column) and write nothing.
"""

from __future__ import annotations

import math
import sys
from pathlib import Path
from typing import Annotated

import typer

from cli.console import err
from cli.groups import command
from cli.memorization_options import MaxMemorizationOpt, MemorizationOpt, load_probes, restrict
from cli.options import FormatOpt, JsonOpt, OutDirOpt, OutFileOpt
from analysis.sensitivity_tables import SENSITIVITY_TABLES
from orchestrator.ranges import check_open_probability, check_points, check_seed
from wtcommon.jsonsafe import dumps as _json_dumps
from wtcommon.errors import UserError


RecordsArg = Annotated[Path, typer.Argument(metavar="RECORDS",
                                            help="RECORDS: long .parquet/.csv or the wide released CSV")]
SuiteOpt = Annotated[str, typer.Option("--suite", metavar="SUITE",
                                       help="suite name (campaigns/suite/<name>.yaml) or path")]
CampaignOpt = Annotated[str | None, typer.Option("--campaign", metavar="NAME", help="only this campaign")]
ModelOpt = Annotated[str | None, typer.Option("--model", metavar="NAME", help="only this model")]
# One resample default for every command. 10,000 keeps the bootstrap's Monte-Carlo error of a 95% bound
# below ~0.005 of the interval width; `sensitivity` at 10,000 takes ~2 s of CPU on the released records.
RESAMPLES = 10_000
ResamplesOpt = Annotated[int, typer.Option("--resamples", min=100, max=1_000_000, metavar="N",
                                           help="bootstrap resamples (default 10,000 in every command)")]
WideOpt = Annotated[bool, typer.Option("--wide", metavar="",
                                       help="every column; by default terminal tables keep the key "
                                       "columns so that they fit the terminal (120 characters when not a terminal)")]
MixedOpt = Annotated[bool, typer.Option("--allow-mixed-evaluations", metavar="", help=(
    "compare records scored under different evaluation settings (eval_hash) in one group; refused by default"))]
MixedGradersOpt = Annotated[bool, typer.Option("--allow-mixed-graders", metavar="", help=(
    "compare records of one group in which a benchmark was scored under two grader versions; refused by default "
    "(`campaign eval --regrade` re-scores the older runs)"))]
ForceOpt = Annotated[bool, typer.Option("--force", metavar="", help="replace existing output files of --out")]
EXT = {"md": "md", "latex": "tex", "csv": "csv", "json": "json"}


def _check(*problems: str | None) -> None:
    """Exit 2 on the first problem a range validator (`orchestrator.ranges`) found; before anything is read."""
    for p in problems:
        if p is not None:
            raise UserError(p)


def _format(fmt: str, as_json: bool) -> str:
    """The output format: --json is an alias of --format json; anything unknown is exit 2."""
    from analysis.table_formats import FORMATS

    if fmt not in FORMATS:
        raise UserError(f"--format {fmt!r}: use one of {', '.join(FORMATS)}")
    if as_json and fmt not in ("md", "json"):
        raise UserError(f"--json and --format {fmt}: --json means --format json; pass only one of them")
    return "json" if as_json else fmt


def _out_file(out: Path | None, inputs: list[Path | None], force: bool) -> None:
    """--out of a single-output command: a file; a folder is refused with the fix."""
    if out is None:
        return
    if out.is_dir():
        raise UserError(f"--out {out}: is a folder; this command writes one file, e.g. --out {out / 'compare.md'}")
    _check_out(out, inputs, force)


def _out_dir(out: Path | None, inputs: list[Path | None], names: list[str], ext: str, force: bool) -> None:
    """--out of a multi-table command: a folder (one <table>.<ext> each); a file is refused with the fix."""
    if out is None:
        return
    if out.exists() and not out.is_dir():
        raise UserError(f"--out {out}: is a file; --out takes a folder here (one <table>.{ext} per table), "
                        f"e.g. --out {out.parent / out.stem}")
    for n in names:
        _check_out(out / f"{n}.{ext}", inputs, force)


def _emit(text: str, out: Path | None) -> None:
    """Print, or write the whole text atomically to --out (nothing half-written)."""
    if out is None:
        typer.echo(text, nl=not text.endswith("\n"))
        return
    from wtcommon.atomic import atomic_write_text

    if not out.parent.exists():
        out.parent.mkdir(parents=True)
    atomic_write_text(out, text)
    err.print(f"wrote {out}", markup=False)


def _write_tables(built: list, fmt: str, out: Path) -> None:
    from wtcommon.atomic import atomic_write_text
    from analysis.table_formats import render_table

    out.mkdir(parents=True, exist_ok=True)
    for t in built:
        atomic_write_text(out / f"{t.name}.{EXT[fmt]}", render_table(t, fmt))
    err.print(f"wrote {len(built)} tables to {out}", markup=False)


def _load(records: Path, suite: str, campaign: str | None = None, model: str | None = None, *,
          mixed_evaluations: bool = False, mixed_graders: bool = False):
    """Suite + validated records, filtered; every user error becomes exit 2 with a located message. Records of
    one comparison group scored under two evaluation settings are refused unless `mixed_evaluations`, under two
    grader versions unless `mixed_graders` (then the settings must agree among runs of the same graders)."""
    from analysis.record_checks import check_one_evaluation, check_one_grader
    from analysis.records import read_records
    from evaluation.suite import load_suite

    s = load_suite(suite)  # SuiteError, RecordsError: exit 2 (cli/errors.py)
    df = read_records(records, s)
    partial = _partial_note(records)
    if partial:
        err.print(partial, markup=False, highlight=False, soft_wrap=True)
    for col, val in (("campaign", campaign), ("model", model)):
        if val is not None and not (df[col] == val).any():
            raise UserError(f"{records}: no records with {col} {val!r}; present: {', '.join(sorted(df[col].unique()))}")
        if val is not None:
            df = df[df[col] == val]
    if not mixed_graders:
        check_one_grader(df, str(records))
    if not mixed_evaluations:
        check_one_evaluation(df, str(records), by_graders=mixed_graders)
    return s, df


def _partial_note(records: Path) -> str | None:
    """One line when RECORDS were collected while their campaign still ran: how many runs are still missing."""
    from analysis.records import records_completeness

    c = records_completeness(records)
    if c is None or c[0] >= c[1]:
        return None
    return (f"partial records: {c[0]} of {c[1]} runs recorded so far, {c[1] - c[0]} still missing (the campaign is "
            "running, or runs failed); the analysis uses the recorded runs")


def _clean(v):
    """JSON-safe scalar: NaN/inf -> null, numpy -> Python."""
    if hasattr(v, "item"):
        v = v.item()
    if isinstance(v, float) and not math.isfinite(v):
        return None
    return v


_COUNTS = {"n", "seeds_needed", "seeds_needed_lo", "seeds_needed_hi", "step", "seed", "seeds_to_decide",
           "seeds_to_decide_lo", "seeds_to_decide_hi"}


def _rows(df) -> list[dict]:
    """DataFrame rows as JSON-safe dicts; count columns as integers (null when missing)."""
    out = []
    for r in df.to_dict(orient="records"):
        row = {k: _clean(v) for k, v in r.items()}
        for k in _COUNTS & row.keys():
            if isinstance(row[k], float):
                row[k] = int(row[k])
        out.append(row)
    return out


def _require_pairs(res, records: Path) -> None:
    """Exit 2 with the reasons (which reference is missing at which step, which scores are NaN) when no
    method-vs-reference pair could be formed: nothing to compare is a user error, not a traceback."""
    t = res.table
    ok = t["kind"].eq("effect") & t["mean_diff"].astype(float).notna() if len(t) else None
    if ok is not None and bool(ok.any()):
        return
    why = "; ".join(res.dropped[:8]) + (f"; ... {len(res.dropped) - 8} more" if len(res.dropped) > 8 else "")
    raise UserError(f"{records}: no method-vs-reference pair could be formed (a policy and its reference, "
                    f"select/reweight -> "
                    f"baseline, mix -> static, at the same campaign/model/regime/step and seed with finite scores)"
                    + (f": {why}" if why else ": the records hold no policy whose reference is present")
                    + "; add the reference's runs or pass --reference-map POLICY=REFERENCE")


def _read_items(items: Path | None):
    """The item-level layer of `--items DIR` (None without it); malformed item logs exit 2 naming line/field."""
    if items is None:
        return None
    from analysis.items import read_items_dir

    return read_items_dir(items)


def _check_out(out: Path, inputs: list[Path | None], force: bool, what: str = "--out") -> None:
    """--out never equals an input and never replaces an existing file unless --force."""
    target = out.resolve()
    for p in inputs:
        if p is not None and Path(p).exists() and Path(p).resolve() == target:
            raise UserError(f"{what} {out}: is an input of this command ({p}); write the output to another path")
    if out.is_dir():
        raise UserError(f"{what} {out}: is a directory; give a file path such as {out / 'report.html'}")
    if out.exists() and not force:
        raise UserError(f"{what} {out}: exists; pass --force to replace it, or choose another path")
    if not out.parent.is_dir() and out.parent.exists():
        raise UserError(f"{what} {out}: {out.parent} is not a folder; choose another path")


def _parse_map(items: list[str] | None) -> dict[str, str]:
    out: dict[str, str] = {}
    for it in items or []:
        pol, sep, ref = it.partition("=")
        if not sep or not pol.strip() or not ref.strip():
            raise UserError(f"--reference-map {it!r}: expected POLICY=REFERENCE, e.g. --reference-map "
                            f"reward_gap=static")
        out[pol.strip()] = ref.strip()
    return out


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
) -> None:
    """Print the study's tables regenerated from RECORDS (Markdown, CSV, LaTeX or JSON).

    On a terminal (Markdown, no --table) the verdict counts and an index of the tables; --table NAME or --all
    prints them, each fitted to the terminal's width (120 when piped) naming the columns it leaves out (--wide:
    every column).
    CSV holds one table: on stdout pass --table NAME, or --out FOLDER for one file per table.
    --out FOLDER gets one <table>.<md|csv|tex|json> per table (--force replaces them); a file there exits 2."""
    from analysis.tables import TABLE_NAMES

    fmt = _format(fmt, as_json)
    _check(check_points("--margin", margin))
    index_only = table is None and not show_all and fmt == "md" and out is None
    table = "all" if table is None or show_all else table
    names = list(TABLE_NAMES) if table == "all" else [t.strip() for t in table.split(",")]
    bad = [n for n in names if n not in TABLE_NAMES]
    if bad:
        raise UserError(f"--table {', '.join(bad)}: unknown; choose from all, {', '.join(TABLE_NAMES)}")
    if fmt == "csv" and out is None and len(names) > 1:
        raise UserError(f"--format csv prints one table on stdout ({len(names)} asked): pass --table NAME (one of "
                        f"{', '.join(TABLE_NAMES)}), or --out FOLDER for one <table>.csv per table")
    _out_dir(out, [records, items], names, EXT[fmt], force)
    s, df = _load(records, suite, mixed_evaluations=allow_mixed,
                  mixed_graders=allow_mixed_graders)
    item_df = _read_items(items)
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
            _require_pairs(paired, records)
        built = build_tables(df, s, names, metric=metric, n_resamples=resamples, paired=paired, margin=margin)
    if out is not None:
        _write_tables(built, fmt, out)
        return
    if index_only:
        _emit(_tables_index(built, records), None)
        return
    if fmt == "md" and not wide:
        _emit(_fitted(built), None)
        return
    _emit(render_tables(built, fmt), None)


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


def _narrow_paired(pt, width: int, *, lead: bool = True, note: bool = True, items: bool = False) -> str:
    """A paired table for a terminal: one sub-table per campaign/model/regime/step group with the key
    columns that fit `width` characters; the left-out columns are named (--wide prints them). `lead`/`note`:
    whether this table prints the small-n lead and the footnote (a command prints each once); `items`: the
    seed + item CI is a key column (item logs were read)."""
    import textwrap

    from analysis.schema import GROUP_KEYS
    from analysis.table_formats import _md, fit_columns

    key = ["policy", "vs", "watch", "n", "Δ mean", "t 95% CI", *(["seed + item 95% CI"] if items else []), "p Holm",
           "range / bootstrap CI (coverage)", "P(d>0) seeds", "sd", "p (t)"]

    def wrap(text: str) -> str:
        return "\n".join(textwrap.wrap(text, width, break_long_words=False, break_on_hyphens=False))

    data = pt.data
    groups = list(data.groupby(list(GROUP_KEYS), sort=False, dropna=False).groups.items())

    def label_of(idx) -> str:
        first = data.loc[idx[0]]
        return " / ".join(str(first[k]) for k in GROUP_KEYS if str(first[k]) not in ("", "nan", "None"))

    one = len(groups) == 1  # one group: named in the title, no sub-heading
    parts = [f"## {pt.title}" + (f": {label_of(groups[0][1])}" if one else "") + "\n"]
    if pt.lead and lead:
        parts.append(wrap(pt.lead) + "\n")
    left_out: list[str] = []
    for _, idx in groups:
        shown, hidden = fit_columns(pt.display.loc[idx], key, width)
        left_out += [c for c in hidden if c not in left_out and c not in GROUP_KEYS]
        parts.append(("" if one else f"### {label_of(idx)}\n\n") + f"{_md(shown)}\n")
    if pt.note and note:
        parts.append(wrap(pt.note))
    if left_out and note:
        parts.append(wrap(f"columns left out (in some or all groups) to fit {width} characters: {', '.join(left_out)} "
                          "(--wide prints "
                          "every column; --format csv|json holds every number)"))
    return "\n".join(parts)


def compare(
    records: RecordsArg,
    campaign: CampaignOpt = None,
    model: ModelOpt = None,
    aggregate: Annotated[str | None, typer.Option("--aggregate", metavar="AGGREGATE",
                                                     help="one aggregate (default: all)")] = None,
    margin: Annotated[float | None, typer.Option("--margin", metavar="POINTS",
                                                    help="TOST equivalence margin (points)")] = None,
    effect: Annotated[float, typer.Option("--effect", metavar="POINTS",
                                          help="effect (points) for the seeds-needed column")] = 1.0,
    detail: Annotated[bool, typer.Option("--detail", metavar="",
                                         help="also per-domain and per-benchmark rows")] = False,
    reference_map: Annotated[list[str] | None, typer.Option(
        "--reference-map", metavar="POLICY=REFERENCE", help="overrides baseline/static (repeatable)")] = None,
    resamples: ResamplesOpt = RESAMPLES,
    seed: Annotated[int, typer.Option("--seed", metavar="N", help="bootstrap/permutation generator seed")] = 0,
    as_json: JsonOpt = False,
    suite: SuiteOpt = "db12",
    items: Annotated[Path | None, typer.Option(
        "--items", metavar="FOLDER", help="folder with the runs' *.items.jsonl.gz item logs (beside their records): "
                                          "adds the seed + item two-way clustered CI")] = None,
    fmt: FormatOpt = "md",
    wide: WideOpt = False,
    out: OutFileOpt[Path | None] = None,
    force: ForceOpt = False,
    allow_mixed: MixedOpt = False,
    allow_mixed_graders: MixedGradersOpt = False,
    show_all: Annotated[bool, typer.Option("--all", metavar="", help="on a terminal, every table even when they "
                                                                   "take more than one screen")] = False,
    runs_dir: Annotated[Path | None, typer.Option(
        "--runs-dir", metavar="FOLDER", help="the work dir's runs/ folder: each comparison gets the reward watch of "
                                             "its policy's runs (`reward-suspect`) beside it")] = None,
) -> None:
    """Seed-paired comparison of every policy with its campaign-local reference.

    md prints one table per aggregate, grouped by campaign/model/regime/step, as wide as the terminal (120 when
    piped; --wide: all columns); on a terminal, output longer than one screen is cut to the first aggregate's
    comparisons with the smallest Holm p (--all: every table; piped or --out: always every table); csv is the
    comparisons table with every column (one row per comparison and metric).
    --out FILE gets what stdout would, every table (--force replaces it; a folder exits 2)."""
    fmt = _format(fmt, as_json)
    refs = _parse_map(reference_map)
    _check(check_points("--margin", margin), check_points("--effect", effect), check_seed("--seed", seed))
    _out_file(out, [records, items], force)
    s, df = _load(records, suite, campaign, model, mixed_evaluations=allow_mixed,
                  mixed_graders=allow_mixed_graders)
    if aggregate is not None and aggregate not in s.aggregate_names:
        raise UserError(f"--aggregate {aggregate!r}: suite {s.name!r} declares {', '.join(s.aggregate_names)}")
    import warnings

    from analysis.comparisons import SMALL_N_NOTE, paired_comparisons
    from analysis.items import no_items_note
    from analysis.table_formats import render_table
    from analysis.tables import paired_table
    from wtcommon.terminal import terminal_width

    width = terminal_width()  # the terminal's; 120 when not a terminal

    item_df = _read_items(items)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        res = paired_comparisons(df, s, reference_map=refs, margin=margin, effect=effect,
                                 n_resamples=resamples, seed=seed, items=item_df,
                                 allow_mixed_graders=allow_mixed_graders)
    _require_pairs(res, records)
    t = res.table
    if runs_dir is not None:  # the reward watch, beside each comparison (analysis/reward_watch.py)
        from analysis.intervention import flag_policies, run_summary, runs_from_dir
        from analysis.reward_watch import watch_column

        flags = flag_policies(run_summary(runs_from_dir(df, runs_dir)))
        t["watch"] = watch_column(t, flags)
        for r in flags[flags["watch"] != ""].itertuples():
            err.print(f"flagged {r.policy} ({r.campaign}/{r.model}): {r.watch}: {r.watch_reason}", markup=False,
                      soft_wrap=True)
    if item_df is None:
        t["item_note"] = no_items_note(records)
    aggs = [aggregate] if aggregate else s.aggregate_names
    keep = t["metric"].isin(aggs) | (detail & t["metric_type"].isin(["domain", "benchmark"]))
    t = t[keep]
    if fmt == "json":
        _emit(_json_dumps({
            "suite": s.name, "aggregates": aggs, "margin": margin, "effect": effect, "n_resamples": resamples,
            "seed": seed, "sd": "sample (n-1)", "family": "campaign/model/regime/step x metric",
            "small_n": SMALL_N_NOTE,
            "comparisons": _rows(t), "dropped": res.dropped}, indent=1) + "\n", out)
        return
    if fmt == "csv":
        _emit(t.to_csv(index=False), out)
        return
    parts = []
    shown = aggs + (list(s.domains) if detail else [])
    for i, m in enumerate(shown):
        pt = paired_table(t, m)
        if fmt == "md" and not wide:
            if i == len(shown) - 1 and len(shown) > 1:  # the footnote once, for every metric
                pt.note = pt.note.replace(f"{m}: ", "every metric: ", 1)
            parts.append(_narrow_paired(pt, width, lead=i == 0, note=i == len(shown) - 1,
                                        items=item_df is not None))
        else:
            if fmt == "latex" and not wide:
                from analysis.schema import GROUP_KEYS

                key = [*GROUP_KEYS, "policy", "vs", "n", "Δ mean", "t 95% CI", "p Holm",
                       "range / bootstrap CI (coverage)", "P(d>0) seeds"]
                pt.display = pt.display[[c for c in pt.display.columns if c in key]]
            parts.append(render_table(pt, fmt))
    if item_df is not None and fmt == "md":
        import pandas as pd

        from analysis.aggregates import run_table
        from analysis.items import BREAKDOWN, comparison_breakdown
        from analysis.table_formats import _md

        bd = comparison_breakdown(item_df, run_table(df, s), res.table)
        if not bd.empty:
            show = pd.DataFrame({"comparison": bd["policy"] + " vs " + bd["reference"],
                                 **{f"Δ {c.replace('_', ' ')}": bd[f"{c}_delta"].round(2) for c in BREAKDOWN}})
            from analysis.table_formats import _wrap

            parts.append("## Outcome breakdown from the item logs (Δ share of all items, points, method − reference)"
                         "\n\n" + _md(show.astype(str)) + "\n\n" + _wrap(
                             "_wrong = parsed answer graded wrong; parse failure = no answer extracted; truncated = "
                             "hit the generation limit (any status)_", width) + "\n")
    text = "\n".join(parts)
    if fmt == "md" and out is None and not show_all and sys.stdout.isatty() and text.count("\n") >= SCREEN_LINES:
        text = _compare_screen(t, aggs[0], width, text.count("\n") + 1, more=aggs[1:])
    _emit(text, out)
    for msg in res.dropped:
        err.print(f"warning: {msg}", markup=False, soft_wrap=True)


SCREEN_LINES = 40  # one terminal screen: longer answers are cut on a terminal (issue 27), never in a file or pipe
SCREEN_COMPARISONS = 15


def _compare_screen(t, metric: str, width: int, n_lines: int, more: list[str]) -> str:
    """One screen of `compare` on a terminal: the `metric` comparisons with the smallest Holm p (then largest |Δ|)
    in one table, the small-n note once, and how to see the rest."""
    from analysis.comparisons import SMALL_N_NOTE
    from analysis.table_formats import _md, _wrap, fit_columns
    from analysis.tables import paired_table

    pt = paired_table(t, metric)
    effects = pt.data["kind"].to_numpy() != "aa_noise_floor"
    order = pt.data.assign(_abs=pt.data["mean_diff"].abs())[effects].sort_values(["p_holm", "_abs"],
                                                                                 ascending=[True, False])
    top = order.index[:SCREEN_COMPARISONS]
    # the answer first, the group after it; what does not fit the terminal is named
    key = ["policy", "vs", "Δ mean", "t 95% CI", "p Holm", "n", "campaign", "model", "step", "regime",
           "range / bootstrap CI (coverage)", "P(d>0) seeds"]
    shown, hidden = fit_columns(pt.display.loc[top], key, width)
    hidden = [c for c in hidden if c in key]
    rest = int(effects.sum()) - len(top)
    lines = [f"## Paired comparisons ({metric}): the {len(top)} of {int(effects.sum())} with the smallest Holm p",
             "", _md(shown), "", _wrap(f"_{SMALL_N_NOTE}_", width), "",
             _wrap(f"_{rest} more comparisons" + (f" and the other aggregates ({', '.join(more)})" if more else "")
                   + f": --all prints every table ({n_lines} lines), --out FILE writes them; `campaign verdicts` "
                   "gives each comparison its verdict"
                   + (f"; columns left out here: {', '.join(hidden)}" if hidden else "") + "_", width)]
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
    fmt = _format(fmt, as_json)
    if table is not None and table not in SENSITIVITY_TABLES:
        raise UserError(f"--table {table!r}: unknown; choose from {', '.join(SENSITIVITY_TABLES)}")
    names = [table] if table else list(SENSITIVITY_TABLES)
    if fmt == "csv" and out is None and len(names) > 1:
        raise UserError(f"--format csv prints one table on stdout: pass --table NAME (one of "
                        f"{', '.join(SENSITIVITY_TABLES)}), "
                        "or --out FOLDER for one <table>.csv per table")
    _out_dir(out, [records], names, EXT[fmt], force)
    s, df = _load(records, suite, campaign, model, mixed_evaluations=allow_mixed,
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
        _emit(_json_dumps(rep, indent=1, default=_clean) + "\n", None)
        return
    if fmt != "md" or out is not None or table is not None:
        built = [t for t in sensitivity_tables(rep) if t.name in names]
        if out is not None:
            _write_tables(built, fmt, out)
        else:
            _emit(render_tables(built, fmt), None)
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
) -> None:
    """Write one self-contained HTML report (verdicts, within-group sensitivity, figures, tables) to --out FILE
    (--force replaces it; a folder exits 2)."""
    if workdir is not None:
        _require_ledger(workdir, ledger_url)
    _check(check_points("--margin", margin))
    _check_out(out, [records, looks], force)
    if figures is not None:
        if figures.exists() and not figures.is_dir():
            raise UserError(f"--figures {figures}: is a file; --figures takes a folder (one <figure>.svg/.pdf/.png "
                            f"each)")
        if figures.is_dir() and any(figures.glob("*.svg")) and not force:
            raise UserError(f"--figures {figures}: already holds figures; pass --force to replace them, or choose "
                            f"another folder")
    s, df = _load(records, suite, mixed_evaluations=allow_mixed,
                  mixed_graders=allow_mixed_graders)
    import warnings

    from analysis.comparisons import paired_comparisons as _pc

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        _require_pairs(_pc(df, s, n_resamples=100), records)
    item_df = _read_items(items)
    probes = load_probes(memorization, records, df)
    from analysis.report import build_report
    from analysis.sequential.looks import read_looks_file
    from analysis.sequential.report import looks_section_html

    looks_path = looks or (Path(records).parent / "sequential_looks.csv")
    lead = []
    partial = _partial_note(records)
    if partial:
        import html

        lead.append(f'<p class="partial"><b>{html.escape(partial)}</b></p>')
    if looks is not None or looks_path.is_file():
        lead = [looks_section_html(read_looks_file(looks_path))]  # SequentialError: exit 2
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


def _require_ledger(workdir: Path, ledger_url: str | None) -> None:
    """--workdir names a work directory with a ledger (checked before the report is built)."""
    from orchestrator.workdir import Workdir

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
) -> None:
    """One verdict per method-vs-reference comparison: better / worse / equivalent within ±M / undecided.

    --max-memorization RATE judges the aggregate on the benchmarks the base model recalls at under RATE only (the
    restriction is stated first). --out FILE gets what stdout would (--force replaces it; a folder exits 2)."""
    fmt = _format(fmt, as_json)
    refs = _parse_map(reference_map)
    _check(check_points("--margin", margin), check_open_probability("--alpha", alpha))
    _out_file(out, [records], force)
    s, df = _load(records, suite, campaign, model, mixed_evaluations=allow_mixed,
                  mixed_graders=allow_mixed_graders)
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
    from analysis.tables import verdicts_table
    from analysis.verdicts import verdict_counts

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        res = paired_comparisons(df, s, reference_map=refs, aggregates=[aggregate] if aggregate else None,
                                 n_resamples=resamples, allow_mixed_graders=allow_mixed_graders)
    _require_pairs(res, records)
    t = verdicts_table(res.table, aggregate or s.aggregate_names[0], margin, alpha)
    if fmt == "json":
        _emit(_json_dumps({"suite": s.name, "aggregate": aggregate or s.aggregate_names[0], "margin": margin,
                          "alpha": alpha, "method": t.note, "small_n": SMALL_N_NOTE,
                          "counts": verdict_counts(t.data), "verdicts": _rows(t.data),
                          "dropped": res.dropped,
                          "memorization": None if restriction is None else restriction.as_dict()},
                         indent=1) + "\n", out)
        return
    text = render_table(t, fmt)
    if restriction is not None:
        text = f"{restriction.statement()}\n\n{text}"
    _emit(text, out)
    for msg in res.dropped:
        err.print(f"warning: {msg}", markup=False, soft_wrap=True)


def register(app: typer.Typer) -> None:
    """Attach this area's commands to the main app."""
    command(app, "tables", tables)
    command(app, "compare", compare)
    command(app, "sensitivity", sensitivity)
    command(app, "report", report)
    command(app, "verdicts", verdicts)
