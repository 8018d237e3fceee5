"""`campaign compare`: the seed-paired comparison of every policy with its campaign-local reference, sized to
the terminal (one screen on a terminal, every table in a file or pipe)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated

import typer

from cli.console import err
from cli.groups import command
from cli.options import FormatOpt, JsonOpt, OutFileOpt
from orchestrator.engine.ranges import check_points, check_score, check_seed
from cli.jsonsafe import dumps as _json_dumps
from wtcommon.errors import UserError
from cli.analysis_inputs import (
    RecordsArg, SuiteOpt, CampaignOpt, ModelOpt, RESAMPLES, ResamplesOpt, WideOpt, MixedOpt, MixedGradersOpt,
    ForceOpt, VsOpt, apply_vs, check_inputs, check_out_file, emit, json_rows, load_records, output_format,
    parse_reference_map, read_items, require_pairs, warn_dropped)


def group_label(data, idx) -> str:
    """The heading of one campaign/model/regime/step group of a paired table ("demo / tiny / rl / at the budget
    (6,000 rollout tokens)"): every view of the table names the group the same way, --wide included."""
    from analysis.budget import step_label
    from analysis.schema import GROUP_KEYS

    first = data.loc[idx[0]]
    shown = {k: str(first[k]) for k in GROUP_KEYS}
    below = data.loc[idx, "below_budget"] if "below_budget" in data.columns else ""
    shown["step"] = step_label(first["step"], first.get("rollout_token_budget"), below)
    return " / ".join(v for v in shown.values() if v not in ("", "nan", "None"))


def _narrow_paired(pt, width: int, *, lead: bool = True, note: bool = True, items: bool = False) -> str:
    """A paired table for a terminal: one sub-table per campaign/model/regime/step group with the key
    columns that fit `width` characters; the left-out columns are named (--wide prints them). `lead`/`note`:
    whether this table prints the small-n lead and the footnote (a command prints each once); `items`: the
    seed + item CI is a key column (item logs were read)."""
    import textwrap

    from analysis.schema import GROUP_KEYS
    from analysis.table_formats import _md, fit_columns

    from analysis.tables import STOPPED

    key = ["policy", "vs", "watch", "n", "Δ mean", "t 95% CI", STOPPED, *(["seed + item 95% CI"] if items else []),
           "p Holm", "range / bootstrap CI (coverage)", "P(d>0) seeds", "sd", "p (t)"]

    def wrap(text: str) -> str:
        return "\n".join(textwrap.wrap(text, width, break_long_words=False, break_on_hyphens=False))

    data = pt.data
    groups = list(data.groupby(list(GROUP_KEYS), sort=False, dropna=False).groups.items())

    def label_of(idx) -> str:
        return group_label(data, idx)

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


def _breakdown_md(item_df, df, s, res, width: int) -> str | None:
    """The outcome breakdown from the item logs (Δ share of wrong / parse failure / truncated), markdown."""
    import pandas as pd

    from analysis.aggregates import run_table
    from analysis.items import BREAKDOWN, comparison_breakdown
    from analysis.table_formats import _md, _wrap

    bd = comparison_breakdown(item_df, run_table(df, s), res.table)
    if bd.empty:
        return None
    show = pd.DataFrame({"comparison": bd["policy"] + " vs " + bd["reference"],
                         **{f"Δ {c.replace('_', ' ')}": bd[f"{c}_delta"].round(2) for c in BREAKDOWN}})
    return ("## Outcome breakdown from the item logs (Δ share of all items, points, method − reference)"
            "\n\n" + _md(show.astype(str)) + "\n\n" + _wrap(
                "_wrong = parsed answer graded wrong; parse failure = no answer extracted; truncated = "
                "hit the generation limit (any status)_", width) + "\n")


def _add_watch(t, df, runs_dir: Path) -> None:
    """The reward watch of each comparison's policy runs, as a `watch` column of `t` (flags also on stderr)."""
    from analysis.intervention import flag_policies, run_summary, runs_from_dir
    from analysis.reward_watch import watch_column

    flags = flag_policies(run_summary(runs_from_dir(df, runs_dir)))
    t["watch"] = watch_column(t, flags)
    for r in flags[flags["watch"] != ""].itertuples():
        err.print(f"flagged {r.policy} ({r.campaign}/{r.model}): {r.watch}: {r.watch_reason}", markup=False,
                  soft_wrap=True)


def _tables_text(t, s, aggs: list[str], *, detail: bool, fmt: str, wide: bool, width: int, item_df, df,
                 res) -> str:
    """Every table of the comparison (one per aggregate, then per domain with --detail) in `fmt`, narrowed to
    `width` unless `wide`, then the outcome breakdown when item logs were given."""
    from analysis.schema import GROUP_KEYS
    from analysis.table_formats import render_table
    from analysis.tables import paired_table

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
                key = [*GROUP_KEYS, "policy", "vs", "n", "Δ mean", "t 95% CI", "p Holm",
                       "range / bootstrap CI (coverage)", "P(d>0) seeds"]
                pt.display = pt.display[[c for c in pt.display.columns if c in key]]
            if len(pt.data) and pt.data.groupby(list(GROUP_KEYS), dropna=False).ngroups == 1:
                pt.title += f": {group_label(pt.data, pt.data.index)}"  # the narrow view's heading, kept
            parts.append(render_table(pt, fmt))
    if item_df is not None and fmt == "md":
        bd = _breakdown_md(item_df, df, s, res, width)
        if bd is not None:
            parts.append(bd)
    return "\n".join(parts)


ShowAllOpt = Annotated[bool, typer.Option("--all", metavar="", help="on a terminal, every table even when they "
                                                                 "take more than one screen")]
RunsDirOpt = Annotated[Path | None, typer.Option(
    "--runs-dir", metavar="FOLDER", help="the work dir's runs/ folder: each comparison gets the reward watch of "
                                         "its policy's runs (`reward-suspect`) beside it")]
DetailOpt = Annotated[bool, typer.Option("--detail", metavar="", help="also per-domain and per-benchmark rows")]
AtOpt = Annotated[str | None, typer.Option(
    "--at", metavar="budget|tokens-to-target", help="budget: pair at the rollout-token budget (what a budgeted "
    "campaign's records get by default; exit 2 without one); tokens-to-target: the rollout tokens each policy "
    "needs to reach its reference's final score, paired by seed")]
TargetOpt = Annotated[float | None, typer.Option(
    "--target", metavar="POINTS", help="with --at tokens-to-target: a score to reach instead of the reference's "
                                       "final score")]


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
    detail: DetailOpt = False,
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
    show_all: ShowAllOpt = False,
    runs_dir: RunsDirOpt = None,
    at: AtOpt = None,
    target: TargetOpt = None,
    vs: VsOpt = None,
) -> None:
    """Seed-paired comparison of every policy with its campaign-local reference.

    md prints one table per aggregate, grouped by campaign/model/regime/step, as wide as the terminal (120 when
    piped; --wide: all columns); on a terminal, output longer than one screen is cut to the first aggregate's
    comparisons with the smallest Holm p (--all: every table; piped or --out: always every table); csv is the
    comparisons table with every column (one row per comparison and metric).
    --out FILE gets what stdout would, every table (--force replaces it; a folder exits 2)."""
    fmt = output_format(fmt, as_json)
    refs = parse_reference_map(reference_map)
    check_inputs(check_points("--margin", margin), check_points("--effect", effect), check_seed("--seed", seed))
    check_out_file(out, [records, items], force)
    s, df = load_records(records, suite, campaign, model, mixed_evaluations=allow_mixed,
                         mixed_graders=allow_mixed_graders)
    df = apply_vs(df, vs)
    _check_aggregate(aggregate, s)
    if _at(at, target, df, records) == "tokens-to-target":
        _check_tokens_to_target_options(fmt, refs, df, items=items, runs_dir=runs_dir, margin=margin)
        return emit(tokens_to_target_text(df, s, aggregate or s.aggregate_names[0], target, refs, fmt, records), out)
    import warnings

    from analysis.comparisons import paired_comparisons
    from analysis.items import no_items_note
    from wtcommon.terminal import terminal_width

    width = terminal_width()  # the terminal's; 120 when not a terminal
    item_df = read_items(items)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        res = paired_comparisons(df, s, reference_map=refs, margin=margin, effect=effect, n_resamples=resamples,
                                 seed=seed, items=item_df, allow_mixed_graders=allow_mixed_graders)
    require_pairs(res, records)
    t = res.table
    if runs_dir is not None:  # the reward watch, beside each comparison (analysis/reward_watch.py)
        _add_watch(t, df, runs_dir)
    if item_df is None:
        t["item_note"] = no_items_note(records)
    aggs = [aggregate] if aggregate else s.aggregate_names
    t = t[t["metric"].isin(aggs) | (detail & t["metric_type"].isin(["domain", "benchmark"]))]
    if fmt in ("json", "csv"):
        return emit(_machine_text(t, fmt, {"suite": s.name, "aggregates": aggs, "margin": margin, "effect": effect,
                                           "n_resamples": resamples, "seed": seed}, res.dropped), out)
    text = _tables_text(t, s, aggs, detail=detail, fmt=fmt, wide=wide, width=width, item_df=item_df, df=df,
                        res=res)
    if fmt == "md" and out is None and not show_all and sys.stdout.isatty() and text.count("\n") >= SCREEN_LINES:
        text = _compare_screen(t, aggs[0], width, text.count("\n") + 1, more=aggs[1:])
    emit(text, out)
    warn_dropped(res.dropped)


def _machine_text(t, fmt: str, head: dict, dropped: list[str]) -> str:
    """The comparisons as CSV (every column, per-seed cells joined with ';') or JSON (lists as lists)."""
    from analysis.budget import machine_columns
    from analysis.comparisons import SMALL_N_NOTE
    from analysis.table_formats import clean_csv

    if fmt == "csv":
        return clean_csv(machine_columns(t, sep=";"))
    return _json_dumps({**head, "sd": "sample (n-1)", "family": "campaign/model/regime/step x metric",
                        "small_n": SMALL_N_NOTE, "comparisons": json_rows(machine_columns(t)), "dropped": dropped},
                       indent=1) + "\n"


def _check_aggregate(aggregate: str | None, s) -> None:
    if aggregate is not None and aggregate not in s.aggregate_names:
        raise UserError(f"--aggregate {aggregate!r}: suite {s.name!r} declares {', '.join(s.aggregate_names)}")


AT_CHOICES = ("budget", "tokens-to-target")


def _at(at: str | None, target: float | None, df, records: Path) -> str | None:
    """The checked `--at` (and `--target`): exit 2 for an unknown choice, a target without tokens-to-target, or
    an equal-compute question of records that carry no rollout-token budget."""
    from analysis.budget import budgeted

    if at is not None and at not in AT_CHOICES:
        raise UserError(f"--at {at!r}: choose one of {', '.join(AT_CHOICES)}")
    if target is not None and at != "tokens-to-target":
        raise UserError("--target: only with --at tokens-to-target (the score each run's curve must reach)")
    check_inputs(check_score("--target", target))
    if at is not None and not budgeted(df).any():
        raise UserError(f"--at {at}: {records} holds no run trained to a rollout-token budget (no "
                        "rollout_token_budget column); set `budget: {rollout_tokens: N}` in the campaign, and "
                        "`evaluation: {all_checkpoints: true}` for tokens to target")
    return at


def _check_tokens_to_target_options(fmt: str, refs: dict[str, str], df, *, items: Path | None,
                                    runs_dir: Path | None, margin: float | None) -> None:
    """--at tokens-to-target answers in md, csv or json, pairs by the references the records hold, and takes no
    option it would ignore (issue 59: --format latex printed JSON, an unknown --reference-map entry was dropped,
    --items, --runs-dir and --margin were ignored without a word)."""
    if fmt not in ("md", "csv", "json"):
        raise UserError(f"--format {fmt}: --at tokens-to-target prints md, csv or json")
    for name, given in (("--items", items), ("--runs-dir", runs_dir), ("--margin", margin)):
        if given is not None:
            raise UserError(f"{name}: not with --at tokens-to-target (its intervals come from the seeds' crossing "
                            f"points); drop {name}, or compare without --at")
    policies = set(df["policy"].astype(str))
    unknown = sorted({p for pair in refs.items() for p in pair} - policies)
    if unknown:
        raise UserError(f"--reference-map: {', '.join(unknown)} not in the records (policies: "
                        f"{', '.join(sorted(policies))})")


def tokens_to_target_text(df, s, metric: str, target: float | None, refs: dict[str, str], fmt: str,
                          records: Path | None = None) -> str:
    """The tokens-to-target table: one row per policy vs its reference in one screen (md), every column in csv /
    json, the method stated once."""
    import warnings

    from analysis.table_formats import _md, _wrap
    from analysis.frontier_report import frontier_display
    from analysis.tokens_to_target import METHOD_NOTE, tokens_to_target_table

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        t, dropped = tokens_to_target_table(df, s, metric, target=target, reference_map=refs)  # NoTokenCurves: 2
    if not len(t):  # nothing paired: an answer of nothing is a user error, as in every other compare path
        why = "; ".join(dropped[:8])
        raise UserError(f"{records or 'the records'}: no policy could be paired with its reference at a seed both "
                        f"ran" + (f": {why}" if why else ": the records hold no policy whose reference is present")
                        + "; add the reference's runs or pass --reference-map POLICY=REFERENCE")
    if fmt == "csv":
        from analysis.table_formats import clean_csv

        return clean_csv(t.assign(tokens_per_seed=[";".join(":".join("" if x is None else f"{x:g}" for x in row)
                                                             for row in v) for v in t["tokens_per_seed"]]))
    if fmt != "md":
        return _json_dumps({"suite": s.name, "metric": metric, "target": target, "method": METHOD_NOTE,
                            "tokens_to_target": json_rows(t), "dropped": dropped}, indent=1) + "\n"
    return f"## Rollout tokens to target ({metric})\n\n{_md(frontier_display(t))}\n\n" + _wrap(
        f"_{METHOD_NOTE}_", 120) + "".join(f"\n\nwarning: {m}" for m in dropped) + "\n"


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


def register(app: typer.Typer) -> None:
    """Attach `campaign compare` to the main app (cli/analysis_commands.py registers it among the analysis
    commands, in their order)."""
    command(app, "compare", compare)
