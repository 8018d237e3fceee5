"""One self-contained HTML report about the user's campaign.

Order: the verdict table, then within-group sensitivity (pooled views labelled pooled), then the
figures (analysis.figures), then the other tables. A section appears only when its data exists, so a
small campaign (the CPU demo) gets no empty paper sections. Figures are embedded as base64 SVG data
URIs (text stays text) and there is no external URL, so the file can be mailed or archived as is;
`figures_dir` also writes each figure as SVG, PDF and PNG (200 dpi). Other areas add sections through
`lead_sections` (right after the title, before any score comparison) and `extra_sections` (at the end).
"""

from __future__ import annotations

import base64
import html
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pandas as pd

from analysis.aggregates import missing_report, run_table, score_matrix
from analysis.figures import FORMATS, build_figures, render, within_group_correlations, write_figures
from analysis.intervention import (Tolerances, final_scores, flag_policies, flags_banner_html,
                                   intervention_section_html, run_summary)
from analysis.paired import SMALL_N_NOTE, paired_comparisons
from analysis.records import read_records
from analysis.schema import GROUP_KEYS
from analysis.tables import build_tables
from evaluation.suite import Suite, load_suite
from wtcommon.atomic import atomic_write_text

_CSS = """
body{font-family:system-ui,-apple-system,Segoe UI,sans-serif;margin:2em auto;max-width:1200px;color:#222}
table{border-collapse:collapse;font-size:12px;margin:0.5em 0 1.5em}
th,td{border:1px solid #ccc;padding:2px 6px;text-align:right}th{background:#f3f3f3}
td:first-child,th:first-child{text-align:left}
.note{color:#555;font-size:12px}img{max-width:100%;border:1px solid #eee}figure{margin:0 0 1.5em}
h2{border-bottom:1px solid #ddd;padding-bottom:2px}
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


def _table_html(t: Any) -> str:
    lead = f"<p><b>{html.escape(t.lead)}</b></p>" if t.lead else ""
    return (f'<h2 id="{t.name}">{html.escape(t.title)}</h2>{lead}{t.display.to_html(index=False, escape=True)}'
            f'<p class="note">{html.escape(t.note)}</p>')


def build_report(records: pd.DataFrame | str | Path, out_path: str | Path, *, suite: Suite | str = "db12",
                 extra_sections: Sequence[tuple[str, str]] = (), lead_sections: Sequence[str] = (),
                 n_resamples: int = 10_000, title: str = "Windtunnel analysis report", margin: float = 1.0,
                 items: pd.DataFrame | None = None, figures_dir: str | Path | None = None,
                 training_runs: Sequence[Mapping[str, Any]] | None = None) -> Path:
    """Write the report atomically to out_path and return it.

    records: long Records (DataFrame) or a path read with `read_records`. extra_sections:
    (title, HTML body) pairs appended verbatim after the analysis sections; lead_sections: HTML
    blocks inserted verbatim after the title, before any score comparison (callers escape).
    The first table is the verdict table (one verdict per comparison at ±margin points). items: the
    item-level layer (analysis.items) for the seed + item CI beside the seed-only one. figures_dir:
    also write every figure there as <name>.svg/.pdf/.png. training_runs: runs with `metrics_path`
    (`analysis.intervention.runs_from_dir`) for the training curves.
    """
    s = load_suite(suite) if isinstance(suite, str) else suite
    recs = read_records(records, s) if isinstance(records, (str, Path)) else records
    runs = run_table(recs, s)
    paired = paired_comparisons(recs, s, runs=runs, n_resamples=n_resamples, items=items)
    tables = [t for t in build_tables(recs, s, paired=paired, runs=runs, margin=margin) if not t.display.empty]
    by_name = {t.name: t for t in tables}
    config_means = runs.groupby(list(GROUP_KEYS) + ["policy"], sort=True)[s.aggregate_names].mean()
    missing = missing_report(score_matrix(recs, s), s)
    sens = by_name["aggregation_sensitivity"].data if "aggregation_sensitivity" in by_name else None
    figs = build_figures(paired.table, runs, s, margin=margin, n_resamples=min(n_resamples, 2000),
                         sensitivity=sens, training_runs=training_runs)
    rendered = {f.name: render(f, FORMATS if figures_dir is not None else ("svg",)) for f in figs}

    parts = [f"<h1>{html.escape(title)}</h1>",
             f'<p class="note">{runs.shape[0]} runs x steps, {config_means.shape[0]} configurations, '
             f'{runs["campaign"].nunique()} campaigns; suite {html.escape(s.name)} v{html.escape(s.version)}; '
             f'{len(recs)} records. SD = sample SD (n-1). Paired comparisons match seeds within a campaign.</p>',
             f'<p><b>{html.escape(SMALL_N_NOTE)}</b></p>',
             *lead_sections]
    if "verdicts" in by_name:  # the report's first table: one verdict per claim
        t = by_name["verdicts"]
        parts.append(f'<h2 id="{t.name}">{html.escape(t.title)}</h2><p><b>{html.escape(t.lead)}</b></p>'
                     + t.display.to_html(index=False, escape=True) + f'<p class="note">{html.escape(t.note)}</p>')
    within = within_group_correlations(sens) if sens is not None else pd.DataFrame()
    sens_tables = [by_name[n] for n in ("aggregation_sensitivity", "leave_one_out") if n in by_name]
    if len(within) or sens_tables:
        parts.append('<h2 id="within_group_sensitivity">Within-group sensitivity</h2><p class="note">Rankings '
                     'compared inside each campaign/model/regime/step group first; pooled rows (all configurations, '
                     'mixing model sizes) come last and are labelled pooled.</p>')
        if len(within):
            show = within.assign(median_spearman=within["median_spearman"].map(lambda v: f"{v:.3f}"))
            parts.append("<h3>Median within-group Spearman ρ between aggregates</h3>"
                         + show.to_html(index=False, escape=True))
        parts += [_table_html(t).replace("<h2", "<h3").replace("</h2>", "</h3>") for t in sens_tables]
    if len(missing):
        parts.append("<h2>Missing scores</h2><p class='note'>These make the listed aggregates NaN for the run "
                     "(never averaged around).</p>" + missing.to_html(index=False, escape=True))
    if paired.dropped:
        parts.append("<h2>Dropped from paired comparisons</h2><ul>"
                     + "".join(f"<li>{html.escape(m)}</li>" for m in paired.dropped) + "</ul>")
    for f in figs:
        parts.append(f'<h2 id="fig-{f.name}">{html.escape(f.title)}</h2><figure>'
                     + _img(rendered[f.name]["svg"], f.title)
                     + f'<figcaption class="note">{html.escape(f.caption)}</figcaption></figure>')
    shown = {"verdicts", "aggregation_sensitivity", "leave_one_out"}
    parts += [_table_html(t) for t in tables if t.name not in shown]
    if items is not None:  # sampled decoding: seed / item / sample variance split per benchmark
        from analysis.sampling_noise import variance_split_html

        parts.append(variance_split_html(items, runs, s))
    for sec_title, sec_html in extra_sections:
        parts.append(f"<h2>{html.escape(sec_title)}</h2>{sec_html}")
    doc = (f"<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'><title>{html.escape(title)}</title>"
           f"<style>{_CSS}</style><script>{_SCRIPT}</script></head><body>{''.join(parts)}</body></html>")
    out = Path(out_path)
    atomic_write_text(out, doc)
    if figures_dir is not None:
        write_figures(rendered, figures_dir)
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
    path = build_report(records, out_path, suite=s, n_resamples=n_resamples,
                        lead_sections=[flags_banner_html(summary, tol), *lead_sections],
                        extra_sections=[*extra_sections, (title, f"<div id='intervention'>{body}</div>")],
                        training_runs=runs, **report_kw)
    return path, flag_policies(summary, tol)
