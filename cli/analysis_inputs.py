"""What the analysis commands share: their option types, and reading, checking and writing their inputs and
outputs (records loaded and filtered, --out refused over an input or an existing file, JSON-safe rows)."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Annotated

import typer

from cli.console import err
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


def check_inputs(*problems: str | None) -> None:
    """Exit 2 on the first problem a range validator (`orchestrator.engine.ranges`) found; before anything is read."""
    for p in problems:
        if p is not None:
            raise UserError(p)


def output_format(fmt: str, as_json: bool) -> str:
    """The output format: --json is an alias of --format json; anything unknown is exit 2."""
    from analysis.table_formats import FORMATS

    if fmt not in FORMATS:
        raise UserError(f"--format {fmt!r}: use one of {', '.join(FORMATS)}")
    if as_json and fmt not in ("md", "json"):
        raise UserError(f"--json and --format {fmt}: --json means --format json; pass only one of them")
    return "json" if as_json else fmt


def check_out_file(out: Path | None, inputs: list[Path | None], force: bool) -> None:
    """--out of a single-output command: a file; a folder is refused with the fix."""
    if out is None:
        return
    if out.is_dir():
        raise UserError(f"--out {out}: is a folder; this command writes one file, e.g. --out {out / 'compare.md'}")
    check_out(out, inputs, force)


def check_out_dir(out: Path | None, inputs: list[Path | None], names: list[str], ext: str, force: bool) -> None:
    """--out of a multi-table command: a folder (one <table>.<ext> each); a file is refused with the fix."""
    if out is None:
        return
    if out.exists() and not out.is_dir():
        raise UserError(f"--out {out}: is a file; --out takes a folder here (one <table>.{ext} per table), "
                        f"e.g. --out {out.parent / out.stem}")
    for n in names:
        check_out(out / f"{n}.{ext}", inputs, force)


def emit(text: str, out: Path | None) -> None:
    """Print, or write the whole text atomically to --out (nothing half-written)."""
    if out is None:
        typer.echo(text, nl=not text.endswith("\n"))
        return
    from wtcommon.atomic import atomic_write_text

    if not out.parent.exists():
        out.parent.mkdir(parents=True)
    atomic_write_text(out, text)
    err.print(f"wrote {out}", markup=False)


def write_tables(built: list, fmt: str, out: Path) -> None:
    from wtcommon.atomic import atomic_write_text
    from analysis.table_formats import render_table

    out.mkdir(parents=True, exist_ok=True)
    for t in built:
        atomic_write_text(out / f"{t.name}.{EXT[fmt]}", render_table(t, fmt))
    err.print(f"wrote {len(built)} tables to {out}", markup=False)


def load_records(records: Path, suite: str, campaign: str | None = None, model: str | None = None, *,
          mixed_evaluations: bool = False, mixed_graders: bool = False):
    """Suite + validated records, filtered; every user error becomes exit 2 with a located message. Records of
    one comparison group scored under two evaluation settings are refused unless `mixed_evaluations`, under two
    grader versions unless `mixed_graders` (then the settings must agree among runs of the same graders)."""
    from analysis.record_checks import check_one_evaluation, check_one_grader
    from analysis.records import read_records
    from evaluation.suite import load_suite

    s = load_suite(suite)  # SuiteError, RecordsError: exit 2 (cli/errors.py)
    df = read_records(records, s)
    partial = partial_note(records)
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


def partial_note(records: Path) -> str | None:
    """One line when RECORDS were collected while their campaign still ran: how many runs are still missing."""
    from analysis.records import records_completeness

    c = records_completeness(records)
    if c is None or c[0] >= c[1]:
        return None
    return (f"partial records: {c[0]} of {c[1]} runs recorded so far, {c[1] - c[0]} still missing (the campaign is "
            "running, or runs failed); the analysis uses the recorded runs")


def clean_value(v):
    """JSON-safe scalar: NaN/inf -> null, numpy -> Python."""
    if hasattr(v, "item"):
        v = v.item()
    if isinstance(v, float) and not math.isfinite(v):
        return None
    return v


COUNT_COLUMNS = {"n", "seeds_needed", "seeds_needed_lo", "seeds_needed_hi", "step", "seed", "seeds_to_decide",
           "seeds_to_decide_lo", "seeds_to_decide_hi"}


def json_rows(df) -> list[dict]:
    """DataFrame rows as JSON-safe dicts; count columns as integers (null when missing)."""
    out = []
    for r in df.to_dict(orient="records"):
        row = {k: clean_value(v) for k, v in r.items()}
        for k in COUNT_COLUMNS & row.keys():
            if isinstance(row[k], float):
                row[k] = int(row[k])
        out.append(row)
    return out


def require_pairs(res, records: Path) -> None:
    """Exit 2 with the reasons (which reference is missing at which step, which scores are NaN) when no
    method-vs-reference pair could be formed: nothing to compare is a user error, not a traceback."""
    t = res.table
    ok = t["kind"].eq("effect") & t["mean_diff"].astype(float).notna() if len(t) else None
    if ok is not None and bool(ok.any()):
        return
    why = "; ".join(res.dropped[:8]) + (f"; ... {len(res.dropped) - 8} more" if len(res.dropped) > 8 else "")
    refs = ", ".join(f"{m} -> {r}" for m, r in res.references.items())
    raise UserError(f"{records}: no method-vs-reference pair could be formed (a policy and its reference, "
                    f"{refs}, at the same campaign/model/regime/step and seed with finite scores)"
                    + (f": {why}" if why else ": the records hold no policy whose reference is present")
                    + "; add the reference's runs or pass --reference-map POLICY=REFERENCE")


def read_items(items: Path | None):
    """The item-level layer of `--items DIR` (None without it); malformed item logs exit 2 naming line/field."""
    if items is None:
        return None
    from analysis.items import read_items_dir

    return read_items_dir(items)


def check_out(out: Path, inputs: list[Path | None], force: bool, what: str = "--out") -> None:
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


VsOpt = Annotated[list[str] | None, typer.Option(
    "--vs", metavar="A:B", help="also compare policy A with policy B (e.g. two methods), beside each policy's own "
    "reference and in the same Holm family (repeatable)")]


def apply_vs(df, vs: list[str] | None):
    """`df` with the `--vs A:B` pairs on its attrs (analysis.schema.PAIRS_ATTR), which every comparison builder
    reads; exit 2 for a malformed pair, an unknown policy or a pair no campaign/model/regime/step group holds."""
    from analysis.schema import GROUP_KEYS, PAIRS_ATTR

    pairs: list[tuple[str, str]] = []
    known = set(df["policy"].astype(str))
    for it in vs or []:
        a, sep, b = (x.strip() for x in it.partition(":"))
        if not sep or not a or not b or a == b:
            raise UserError(f"--vs {it!r}: expected METHOD:REFERENCE, two different policies, e.g. --vs "
                            "midband:dynamic_sampling")
        unknown = [x for x in (a, b) if x not in known]
        if unknown:
            raise UserError(f"--vs {it!r}: no runs of {unknown} in these records; policies: {sorted(known)}")
        together = df[df["policy"].isin([a, b])].groupby(list(GROUP_KEYS))["policy"].nunique()
        if not (together == 2).any():
            raise UserError(f"--vs {it!r}: no campaign/model/regime/step holds runs of both; nothing to pair")
        pairs.append((a, b))
    if pairs:
        df.attrs[PAIRS_ATTR] = pairs
    return df


def parse_reference_map(items: list[str] | None) -> dict[str, str]:
    out: dict[str, str] = {}
    for it in items or []:
        pol, sep, ref = it.partition("=")
        if not sep or not pol.strip() or not ref.strip():
            raise UserError(f"--reference-map {it!r}: expected POLICY=REFERENCE, e.g. --reference-map "
                            f"reward_gap=static")
        out[pol.strip()] = ref.strip()
    return out


def warn_dropped(dropped: list[str]) -> None:
    """One stderr warning per comparison left out (unpaired runs, a missing reference)."""
    for msg in dropped:
        err.print(f"warning: {msg}", markup=False, soft_wrap=True)
