"""One self-contained HTML report about the user's campaign.

Order: the findings first — the flags (lead sections), the verdict table, the forest plots — then the
detail, each section collapsible: the other figures, within-group sensitivity (pooled views labelled
pooled), missing scores, the other tables, the evidence. A table with nothing to say at this n (every value
undefined) is one line, not a table of NaN. A section appears only when its data exists, so a
small campaign (the CPU demo) gets no empty paper sections. Figures are embedded as base64 SVG data
URIs (text stays text) and there is no external URL, so the file can be mailed or archived as is;
`figures_dir` also writes each figure as SVG, PDF and PNG (200 dpi). Other areas add sections through
`lead_sections` (right after the title, before any score comparison) and `extra_sections` (at the end).
"""

from __future__ import annotations

import base64
import html
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from analysis.aggregates import missing_report, run_table, score_matrix
from analysis.figure_data import within_group_correlations
from analysis.figure_style import FORMATS, Figure, render
from analysis.figures import build_figures, write_figures
from analysis.memorization_section import DEFAULT_THRESHOLD, ProbeRates, memorization_section_html
from analysis.intervention import (Tolerances, final_scores, flag_policies, flags_banner_html,
                                   intervention_section_html, run_summary)
from analysis.budget import budget_view
from analysis.frontier_report import frontier_section_html
from analysis.rollout_compute import rollout_figure, rollout_section_html, rollout_table, run_budget
from analysis.comparisons import SMALL_N_NOTE, PairedResult, paired_comparisons
from analysis.records import read_records
from analysis.schema import DEFAULT_AA_PAIR, GROUP_KEYS, references
from analysis.table_formats import Table, html_table
from analysis.tables import build_tables
from evaluation.suite import Suite, load_suite
from wtcommon.atomic import atomic_write_text

FIGURE_RESAMPLES = 2000  # the figures' bootstrap cap (each figure resamples every run); captions say when it applies

_CSS = """
body{font-family:system-ui,-apple-system,Segoe UI,sans-serif;margin:2em auto;max-width:1200px;color:#222}
table{border-collapse:collapse;font-size:12px;margin:0.5em 0 1.5em}
th,td{border:1px solid #ccc;padding:2px 6px;text-align:left;white-space:nowrap}th{background:#f3f3f3}
td.num,th.num{text-align:right;font-variant-numeric:tabular-nums}
.scroll{overflow-x:auto;max-width:100%}
.note{color:#555;font-size:12px}img{max-width:100%;border:1px solid #eee}figure{margin:0 0 1.5em}
h2{border-bottom:1px solid #ddd;padding-bottom:2px}
details{margin:0.3em 0 1em}details>summary{cursor:pointer;font-weight:600;font-size:1.15em;padding:0.2em 0}
.empty{color:#555;font-size:13px;margin:0.2em 0}
"""

# Marks <body data-figures-rendered="yes"> once every <img> decoded (read by the rendering test).
_SCRIPT = """
window.addEventListener('load', function () {
  var imgs = Array.prototype.slice.call(document.images);
  var ok = imgs.length > 0 && imgs.every(function (i) { return i.complete && i.naturalWidth > 0; });
  document.body.setAttribute('data-figures-rendered', ok ? 'yes' : 'no');
  document.body.setAttribute('data-figures-count', String(imgs.length));
});
"""


def _img(svg: bytes, alt: str) -> str:
    return f'<img alt="{html.escape(alt)}" src="data:image/svg+xml;base64,{base64.b64encode(svg).decode()}">'


def _says_nothing(t: Any) -> bool:
    """A table whose every number is missing (e.g. rank correlations at 2 configurations): one line instead."""
    nums = t.data.select_dtypes("number")
    return bool(len(t.data)) and nums.shape[1] > 0 and bool(nums.isna().all().all())


def _details(title: str, body: str, anchor: str = "", open_: bool = False) -> str:
    """A collapsible section: the detail below the findings stays one click away."""
    ident = f' id="{anchor}"' if anchor else ""
    return f"<details{ident}{' open' if open_ else ''}><summary>{html.escape(title)}</summary>{body}</details>"


def _table_html(t: Any, heading: str = "h2") -> str:
    if _says_nothing(t):
        return (f'<p class="empty" id="{t.name}"><b>{html.escape(t.title)}</b>: nothing to say at this n (every '
                f"value is undefined: too few configurations or seeds per group)</p>")
    lead = f"<p><b>{html.escape(t.lead)}</b></p>" if t.lead else ""
    return (f'<{heading} id="{t.name}">{html.escape(t.title)}</{heading}>{lead}{html_table(t.display)}'
            f'<p class="note">{html.escape(t.note)}</p>')


def _plural(n: int, word: str) -> str:
    return f"{n:,} {word}{'' if n == 1 else 's'}"


@dataclass
class _Analysed:
    """What every report section is drawn from: one analysis pass over the records."""

    suite: Suite
    recs: pd.DataFrame
    runs: pd.DataFrame
    paired: PairedResult
    tables: list[Table]
    by_name: dict[str, Table]
    config_means: pd.DataFrame
    missing: pd.DataFrame
    sens: pd.DataFrame | None
    figs: list[Figure]
    rendered: dict[str, dict[str, bytes]]


def _analyse(recs: pd.DataFrame, s: Suite, *, n_resamples: int, margin: float, items: pd.DataFrame | None,
             training_runs: Sequence[Mapping[str, Any]] | None, aa_pair: tuple[str, str],
             allow_mixed_graders: bool, all_formats: bool) -> _Analysed:
    """Comparisons, tables and rendered figures (every format when figures are also written to files). Runs
    trained to a rollout-token budget are seen at it (analysis.budget), as `compare` and `verdicts` see them."""
    recs = budget_view(recs)
    runs = run_table(recs, s)
    paired = paired_comparisons(recs, s, runs=runs, n_resamples=n_resamples, items=items, aa_pair=aa_pair,
                                allow_mixed_graders=allow_mixed_graders)
    tables = [t for t in build_tables(recs, s, paired=paired, runs=runs, margin=margin) if not t.display.empty]
    by_name = {t.name: t for t in tables}
    config_means = runs.groupby(list(GROUP_KEYS) + ["policy"], sort=True)[s.aggregate_names].mean()
    missing = missing_report(score_matrix(recs, s), s)
    sens = by_name["aggregation_sensitivity"].data if "aggregation_sensitivity" in by_name else None
    figs = build_figures(paired.table, runs, s, margin=margin, n_resamples=min(n_resamples, FIGURE_RESAMPLES),
                         sensitivity=sens, training_runs=training_runs, requested_resamples=n_resamples)
    rendered = {f.name: render(f, FORMATS if all_formats else ("svg",)) for f in figs}
    return _Analysed(s, recs, runs, paired, tables, by_name, config_means, missing, sens, figs, rendered)


def _title_html(title: str, a: _Analysed) -> str:
    """The heading and the one-line scope: runs, configurations, campaigns, suite, records."""
    return (f"<h1>{html.escape(title)}</h1>"
            f'<p class="note">{_plural(a.runs.shape[0], "run")} x steps, '
            f'{_plural(a.config_means.shape[0], "configuration")}, '
            f'{_plural(a.runs["campaign"].nunique(), "campaign")}; '
            f'suite {html.escape(a.suite.name)} v{html.escape(a.suite.version)}; {_plural(len(a.recs), "record")}. '
            f'SD = sample SD (n-1). Paired comparisons match seeds within a campaign.</p>')


def _findings_html(a: _Analysed, watch: pd.DataFrame | None) -> list[str]:
    """The findings: the verdict table (with the watch column), the small-n note, the forest plots, then the
    other figures (collapsible)."""
    parts = []
    if "verdicts" in a.by_name:
        t = a.by_name["verdicts"]
        if watch is not None:
            from analysis.reward_watch import watch_column

            t.display = t.display.assign(watch=watch_column(t.data, watch))
        parts.append(f'<h2 id="{t.name}">{html.escape(t.title)}</h2><p><b>{html.escape(t.lead)}</b></p>'
                     + html_table(t.display) + f'<p class="note">{html.escape(t.note)}</p>')
    else:  # said, not an empty table: a campaign whose policies have no reference runs compares nothing
        why = (f"{len(a.paired.dropped)} dropped, listed under 'Dropped from paired comparisons'"
               if a.paired.dropped else "the records hold no policy with a reference")
        parts.append(f'<h2 id="verdicts">Verdicts</h2><p><b>No paired comparison ({html.escape(why)}).</b></p>')
    parts.append(f'<p class="note">{html.escape(SMALL_N_NOTE)}</p>')
    forest = [f for f in a.figs if f.name.startswith("forest")]
    for f in forest + [f for f in a.figs if f not in forest]:
        fig_html = (f'<figure id="fig-{f.name}">' + _img(a.rendered[f.name]["svg"], f.title)
                    + f'<figcaption class="note">{html.escape(f.caption)}</figcaption></figure>')
        parts.append(f"<h2>{html.escape(f.title)}</h2>{fig_html}" if f in forest
                     else _details(f.title, fig_html, anchor=f"sec-{f.name}", open_=True))
    return parts


def _detail_html(a: _Analysed, items: pd.DataFrame | None) -> list[str]:
    """The detail, each section collapsible: within-group sensitivity, missing scores, dropped comparisons, the
    other tables and, with item logs, the variance split."""
    parts = []
    within = within_group_correlations(a.sens) if a.sens is not None else pd.DataFrame()
    sens_tables = [a.by_name[n] for n in ("aggregation_sensitivity", "leave_one_out") if n in a.by_name]
    if len(within) or sens_tables:
        body = ('<p class="note">Rankings compared inside each campaign/model/regime/step group first; pooled rows '
                '(all configurations, mixing model sizes) come last and are labelled pooled.</p>')
        if len(within) and within["median_spearman"].notna().any():
            show = within.assign(median_spearman=within["median_spearman"].map(lambda v: f"{v:.3f}"))
            body += "<h3>Median within-group Spearman ρ between aggregates</h3>" + html_table(show)
        body += "".join(_table_html(t, "h3") for t in sens_tables)
        parts.append(_details("Within-group sensitivity", body, anchor="within_group_sensitivity"))
    if len(a.missing):
        parts.append(_details("Missing scores", "<p class='note'>These make the listed aggregates NaN for the run "
                              "(never averaged around).</p>" + html_table(a.missing)))
    if a.paired.dropped:
        parts.append(_details("Dropped from paired comparisons", "<ul>" + "".join(
            f"<li>{html.escape(m)}</li>" for m in a.paired.dropped) + "</ul>"))
    shown = {"verdicts", "aggregation_sensitivity", "leave_one_out"}
    for t in a.tables:
        if t.name not in shown:
            parts.append(_details(t.title, _table_html(t, "h3"), anchor=f"sec-{t.name}")
                         if not _says_nothing(t) else _table_html(t))
    if items is not None:  # sampled decoding: seed / item / sample variance split per benchmark
        from analysis.sampling_noise import variance_split_html

        parts.append(variance_split_html(items, a.runs, a.suite))
    return parts


def build_report(records: pd.DataFrame | str | Path, out_path: str | Path, *, suite: Suite | str = "db12",
                 extra_sections: Sequence[tuple[str, str]] = (), lead_sections: Sequence[str] = (),
                 n_resamples: int = 10_000, title: str = "Windtunnel analysis report", margin: float = 1.0,
                 items: pd.DataFrame | None = None, figures_dir: str | Path | None = None,
                 training_runs: Sequence[Mapping[str, Any]] | None = None,
                 aa_pair: tuple[str, str] = DEFAULT_AA_PAIR, allow_mixed_graders: bool = False,
                 watch: pd.DataFrame | None = None, memorization: Mapping[str, ProbeRates] | None = None,
                 memorization_threshold: float = DEFAULT_THRESHOLD) -> Path:
    """Write the report atomically to out_path and return it.

    records: long Records (DataFrame) or a path read with `read_records`. extra_sections:
    (title, HTML body) pairs appended verbatim after the analysis sections; lead_sections: HTML
    blocks inserted verbatim after the title, before any score comparison (callers escape).
    The first table is the verdict table (one verdict per comparison at ±margin points). items: the
    item-level layer (analysis.items) for the seed + item CI beside the seed-only one. figures_dir:
    also write every figure there as <name>.svg/.pdf/.png. training_runs: runs with `metrics_path`
    (`analysis.intervention.runs_from_dir`) for the training curves. aa_pair: the campaign's A/A pair.
    allow_mixed_graders: compare records scored under two grader versions (refused by default). watch: the
    `flag_policies` frame whose `watch` flags (`reward-suspect`) go in a column beside each verdict.
    memorization: model -> its base model's probe rates (analysis/memorization_section.py): the section of each
    benchmark's recall rate beside each policy's Δ, with the memory-sensitive flags at `memorization_threshold`.
    """
    s = load_suite(suite) if isinstance(suite, str) else suite
    recs = read_records(records, s) if isinstance(records, (str, Path)) else records
    a = _analyse(recs, s, n_resamples=n_resamples, margin=margin, items=items, training_runs=training_runs,
                 aa_pair=aa_pair, allow_mixed_graders=allow_mixed_graders, all_formats=figures_dir is not None)
    parts = [_title_html(title, a), *lead_sections, *_findings_html(a, watch)]
    if memorization is not None:
        body = memorization_section_html(a.paired.table, memorization, s.benchmark_ids,
                                         threshold=memorization_threshold)
        parts.append(_details("Base-model memorization beside each Δ", f"<div id='memorization'>{body}</div>",
                              anchor="sec-memorization", open_=True))
    parts += _detail_html(a, items)
    frontier = frontier_section_html(recs, s, s.aggregate_names[0])  # every checkpoint, not the budget view
    if frontier is not None:
        parts.append(_details(f"Rollout tokens to target ({s.aggregate_names[0]})", frontier,
                              anchor="sec-tokens-to-target", open_=True))
    parts += [_details(sec_title, sec_html) for sec_title, sec_html in extra_sections]
    doc = (f"<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'><title>{html.escape(title)}</title>"
           f"<style>{_CSS}</style><script>{_SCRIPT}</script></head><body>{''.join(parts)}</body></html>")
    out = Path(out_path)
    atomic_write_text(out, doc)
    if figures_dir is not None:
        write_figures(a.rendered, figures_dir)
    return out


def build_report_with_evidence(records: pd.DataFrame, out_path: str | Path, *, suite: Any,
                               runs: Sequence[Mapping[str, Any]], n_resamples: int = 10_000,
                               tol: Tolerances = Tolerances(), lead_sections: Sequence[str] = (),
                               extra_sections: Sequence[tuple[str, str]] = (),
                               **report_kw: Any) -> tuple[Path, pd.DataFrame]:
    """`build_report` plus the intervention evidence: the flag list right after the
    title (before every score comparison, issue 7) and the evidence/compute section at the end. The
    runs' metrics also give the training curves; report_kw (margin, items, figures_dir) go to build_report.

    Returns (report path, flag_policies frame).
    """
    s = load_suite(suite) if isinstance(suite, str) else suite
    summary = run_summary(runs)
    scores = final_scores(records, s)
    title, body = intervention_section_html(summary, scores, s.aggregate_names[0], tol)
    rollout = rollout_table(summary, scores, s.aggregate_names[0], references(records))
    sections = [(title, f"<div id='intervention'>{body}</div>")]
    if len(rollout) and rollout["rollout_tokens"].notna().any():  # the trainers recorded rollout tokens
        fig = rollout_figure(rollout, s.aggregate_names[0])
        svg = render(fig, ("svg",))["svg"] if fig is not None else None
        sections.append((f"{s.aggregate_names[0]} against rollout tokens", "<div id='rollout-tokens'>"
                         + rollout_section_html(rollout, svg, run_budget(summary), s.aggregate_names[0]) + "</div>"))
    flags = flag_policies(summary, tol)
    path = build_report(records, out_path, suite=s, n_resamples=n_resamples,
                        lead_sections=[flags_banner_html(summary, tol), *lead_sections],
                        extra_sections=[*extra_sections, *sections],
                        training_runs=runs, watch=flags, **report_kw)
    return path, flags
