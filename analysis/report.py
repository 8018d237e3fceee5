"""One self-contained HTML report: tables, forest plot, domain trade-off, rank-correlation heat map.

Figures are embedded as base64 PNG data URIs and there is no external URL, so the file can be
mailed or archived as is. Other areas add sections through `lead_sections` (right after the title,
before any score comparison: warnings a reader must see first) and `extra_sections` (at the end).
"""

from __future__ import annotations

import base64
import html
from collections.abc import Sequence
from pathlib import Path

import pandas as pd

from analysis.aggregates import missing_report, run_table, score_matrix
from analysis.atomic import atomic_write_text
from analysis.paired import SMALL_N_NOTE, paired_comparisons
from analysis.plots import correlation_matrix, domain_tradeoff, forest_plot, rank_heatmap
from analysis.records import read_records
from analysis.schema import GROUP_KEYS
from analysis.sensitivity import rank_correlations
from analysis.tables import build_tables
from evaluation.suite import Suite, load_suite

_CSS = """
body{font-family:system-ui,-apple-system,Segoe UI,sans-serif;margin:2em auto;max-width:1200px;color:#222}
table{border-collapse:collapse;font-size:12px;margin:0.5em 0 1.5em}
th,td{border:1px solid #ccc;padding:2px 6px;text-align:right}th{background:#f3f3f3}
td:first-child,th:first-child{text-align:left}
.note{color:#555;font-size:12px}img{max-width:100%;border:1px solid #eee}
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


def _img(png: bytes, alt: str) -> str:
    return f'<img alt="{html.escape(alt)}" src="data:image/png;base64,{base64.b64encode(png).decode()}">'


def build_report(records: pd.DataFrame | str | Path, out_path: str | Path, *, suite: Suite | str = "db12",
                 extra_sections: Sequence[tuple[str, str]] = (), lead_sections: Sequence[str] = (),
                 n_resamples: int = 10_000, title: str = "Windtunnel analysis report", margin: float = 1.0,
                 items: pd.DataFrame | None = None) -> Path:
    """Write the report atomically to out_path and return it.

    records: long Records (DataFrame) or a path read with `read_records`. extra_sections:
    (title, HTML body) pairs appended verbatim after the analysis sections; lead_sections: HTML
    blocks inserted verbatim after the title, before any score comparison (callers escape).
    The first table is the verdict table (one verdict per comparison at ±margin points). items: the
    item-level layer (analysis.items) for the seed + item CI beside the seed-only one.
    """
    s = load_suite(suite) if isinstance(suite, str) else suite
    recs = read_records(records, s) if isinstance(records, (str, Path)) else records
    runs = run_table(recs, s)
    paired = paired_comparisons(recs, s, runs=runs, n_resamples=n_resamples, items=items)
    tables = build_tables(recs, s, paired=paired, runs=runs, margin=margin)
    first = [t for t in tables if t.name == "verdicts"]
    tables = [t for t in tables if t.name != "verdicts"]
    head = s.aggregate_names[0]
    aggs = s.aggregate_names
    config_means = runs.groupby(list(GROUP_KEYS) + ["policy"], sort=True)[aggs].mean()
    corr = correlation_matrix(rank_correlations(config_means), aggs)
    missing = missing_report(score_matrix(recs, s), s)

    parts = [f"<h1>{html.escape(title)}</h1>",
             f'<p class="note">{runs.shape[0]} runs x steps, {config_means.shape[0]} configurations, '
             f'{runs["campaign"].nunique()} campaigns; suite {html.escape(s.name)} v{html.escape(s.version)}; '
             f'{len(recs)} records. SD = sample SD (n-1). Paired comparisons match seeds within a campaign.</p>',
             f'<p><b>{html.escape(SMALL_N_NOTE)}</b></p>',
             *lead_sections]
    for t in first:  # the report's first table: one verdict per claim
        parts.append(f'<h2 id="{t.name}">{html.escape(t.title)}</h2><p><b>{html.escape(t.lead)}</b></p>'
                     + (t.display.to_html(index=False, escape=True) if not t.display.empty else "")
                     + f'<p class="note">{html.escape(t.note)}</p>')
    if len(missing):
        parts.append("<h2>Missing scores</h2><p class='note'>These make the listed aggregates NaN for the run "
                     "(never averaged around).</p>" + missing.to_html(index=False, escape=True))
    if paired.dropped:
        parts.append("<h2>Dropped from paired comparisons</h2><ul>"
                     + "".join(f"<li>{html.escape(m)}</li>" for m in paired.dropped) + "</ul>")
    parts.append(f"<h2>Forest plot: paired Δ {html.escape(head)} per campaign</h2>"
                 + _img(forest_plot(paired.table, head), f"forest plot of paired {head} differences"))
    parts.append("<h2>Domain trade-off</h2>"
                 + _img(domain_tradeoff(paired.table, list(s.domains)), "per-domain paired differences"))
    parts.append("<h2>Rank correlation between aggregates</h2>"
                 + _img(rank_heatmap(corr, "Spearman rho between configuration rankings (all configurations pooled)"), "rank-correlation heat map"))
    for t in tables:
        body = t.display.to_html(index=False, escape=True) if not t.display.empty else ""
        lead = f"<p><b>{html.escape(t.lead)}</b></p>" if t.lead else ""
        parts.append(f'<h2 id="{t.name}">{html.escape(t.title)}</h2>{lead}{body}'
                     f'<p class="note">{html.escape(t.note)}</p>')
    for sec_title, sec_html in extra_sections:
        parts.append(f"<h2>{html.escape(sec_title)}</h2>{sec_html}")
    doc = (f"<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'><title>{html.escape(title)}</title>"
           f"<style>{_CSS}</style><script>{_SCRIPT}</script></head><body>{''.join(parts)}</body></html>")
    out = Path(out_path)
    atomic_write_text(out, doc)
    return out
