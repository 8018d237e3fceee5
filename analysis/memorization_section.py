"""The report's memorization section: each benchmark's base-model recall rate beside each policy's Δ, and which
comparisons' gains may be memory (analysis/memory_sensitivity.py).

The rates come from the probe's files (`campaign audit memorization`, or a campaign's own probe under
`results/<campaign>/memorization/<model>/memorization.json` when its spec says `evaluation: {memorization:
true}`). A model with no probe file gets no rates: the section says so, it never shows a 0.
"""

from __future__ import annotations

import html
import json
import math
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from analysis.memory_sensitivity import CLEAN, MemorizationRatesError, memory_sensitive
from analysis.table_formats import html_table
from evaluation.memorization_report import JSON_NAME, MEMORIZATION_DIR

DEFAULT_THRESHOLD = 0.5


@dataclass(frozen=True)
class BenchmarkRate:
    """One benchmark's near-verbatim recall rate of the base model, its Clopper-Pearson interval and its n."""

    rate: float
    lo: float
    hi: float
    n_probed: int


@dataclass(frozen=True)
class ProbeRates:
    """A probe file's rates by benchmark, and what was probed (model path, prefix, interval method)."""

    path: Path
    rates: dict[str, BenchmarkRate]
    prefix: float
    near: float
    method: str
    protocol: str = "windtunnel"

    def plain(self) -> dict[str, float]:
        return {b: r.rate for b, r in self.rates.items()}

    def recall(self) -> str:
        """What the rate counts, in words."""
        if self.protocol == "paper":
            return (f"exact match as arXiv 2507.10532 counts it (rouge_score ROUGE-L rounded to 4 digits = 1) from "
                    f"the first {self.prefix:.0%} of the problem's characters")
        return (f"near-verbatim (ROUGE-L ≥ {self.near:g} of the true rest) from the first part of the problem "
                "(arXiv 2507.10532)")


PAPER_HEADLINE_RATIO = 0.6  # Table 2's headline column (Qwen2.5-Math-7B: 54.6% EM on MATH-500)


def _read_paper(path: Path, body: dict) -> ProbeRates:
    """A paper-protocol probe: the EM rate at 60% (or the largest ratio below 1 probed) per benchmark."""
    entries = [b for b in body["benchmarks"] if float(b["ratio"]) < 1]
    ratios = {float(b["ratio"]) for b in entries}
    ratio = PAPER_HEADLINE_RATIO if PAPER_HEADLINE_RATIO in ratios else max(ratios)
    rates = {b["benchmark"]: BenchmarkRate(float(b["exact_rate"]), float(b["exact_ci_low"]),
                                           float(b["exact_ci_high"]), int(b["n_probed"]))
             for b in entries if float(b["ratio"]) == ratio and b.get("exact_rate") is not None}
    return ProbeRates(Path(path), rates, ratio, 1.0, str(body["definitions"]["interval"]), "paper")


def read_probe(path: Path) -> ProbeRates:
    """The `near` rates of a probe's memorization.json (MemorizationRatesError names a file that is not one)."""
    try:
        body = json.loads(Path(path).read_text())
        if body["meta"].get("protocol") == "paper":
            return _read_paper(path, body)
        rates = {b["benchmark"]: BenchmarkRate(float(b["near_rate"]), float(b["near_ci_low"]),
                                               float(b["near_ci_high"]), int(b["n_probed"]))
                 for b in body["benchmarks"] if b.get("near_rate") is not None}
        meta = body["meta"]
        return ProbeRates(Path(path), rates, float(meta["prefix"]), float(meta["near"]),
                          str(body["definitions"]["interval"]))
    except (OSError, json.JSONDecodeError, KeyError, TypeError, ValueError) as e:
        raise MemorizationRatesError(f"{path}: not a memorization report ({type(e).__name__}: {e}); write one with "
                                     "`campaign audit memorization --out DIR`") from e


def probes_beside(records: Path) -> dict[str, Path]:
    """model -> probe file, from the `memorization/<model>/` folders beside a campaign's records file."""
    root = Path(records).parent / MEMORIZATION_DIR
    return {p.parent.name: p for p in sorted(root.glob(f"*/{JSON_NAME}"))} if root.is_dir() else {}


def read_probes(paths: Mapping[str, Path]) -> dict[str, ProbeRates]:
    return {model: read_probe(p) for model, p in paths.items()}


def _pct(x: float) -> str:
    return "—" if math.isnan(x) else f"{100 * x:.0f}%"


def _final_effects(table: pd.DataFrame, model: str) -> pd.DataFrame:
    """The model's benchmark-level method effects at each comparison's last step."""
    t = table[(table["model"].astype(str) == model) & (table["kind"] == "effect")
              & (table["metric_type"] == "benchmark")]
    if t.empty:
        return t
    last = t.groupby(["campaign", "regime", "policy", "reference"])["step"].transform("max")
    return t[t["step"] == last]


def _rates_table(eff: pd.DataFrame, probe: ProbeRates, order: list[str]) -> pd.DataFrame:
    rows = []
    cols = sorted({(str(p), str(r)) for p, r in zip(eff["policy"], eff["reference"], strict=True)})
    for bid in order:
        rate = probe.rates.get(bid)
        row: dict[str, object] = {
            "benchmark": bid,
            "recall (near)" if probe.protocol != "paper" else f"EM at {probe.prefix:.0%} (paper)":
                "not probed" if rate is None else f"{_pct(rate.rate)} [{_pct(rate.lo)}, {_pct(rate.hi)}]",
            "n probed": "" if rate is None else str(rate.n_probed)}
        for p, r in cols:
            hit = eff[(eff["metric"] == bid) & (eff["policy"].astype(str) == p) & (eff["reference"].astype(str) == r)]
            row[f"Δ {p} − {r}"] = "" if hit.empty else f"{float(hit['mean_diff'].iloc[0]):+.2f}"
        rows.append(row)
    return pd.DataFrame(rows)


def memorization_section_html(table: pd.DataFrame, probes: Mapping[str, ProbeRates], benchmark_order: list[str],
                              *, threshold: float = DEFAULT_THRESHOLD) -> str:
    """The section's body: per model, the rates beside the Δ (points, last step) and the memory-sensitive flags;
    `table` is `paired_comparisons(...).table`."""
    models = sorted(set(table["model"].astype(str))) if len(table) else []
    first = next(iter(probes.values())) if probes else None
    parts = [f'<p class="note">Recall: share of items the base model completes {html.escape(first.recall())}; '
             f'interval: {html.escape(first.method)}. Δ: the paired '
             f'mean difference in points at each comparison\'s last step. A comparison is flagged memory-sensitive '
             f'when its gain sits on benchmarks recalled at ≥ {threshold:g} while {CLEAN} shows none (its paired '
             f't-interval\'s lower bound ≤ 0): a reason to look, not proof.</p>'] if first is not None else []
    for model in models:
        probe = probes.get(model)
        if probe is None:
            parts.append(f"<h3>{html.escape(model)}</h3><p class='note'>No memorization probe for this model: rates "
                         "missing (not zero). Run `campaign audit memorization --model DIR --out "
                         "results/&lt;campaign&gt;/memorization/&lt;model&gt;` or set "
                         "<code>evaluation: {memorization: true}</code>.</p>")
            continue
        eff = _final_effects(table, model)
        order = [b for b in benchmark_order if b in probe.rates or b in set(eff["metric"])]
        parts.append(f"<h3>{html.escape(model)}</h3><p class='note'>probe: {html.escape(str(probe.path))}, prefix "
                     f"{probe.prefix:g}</p>" + html_table(_rates_table(eff, probe, order)))
        if eff.empty:
            continue
        flags = memory_sensitive(eff, probe.plain(), threshold=threshold)
        show = flags[[c for c in ("campaign", "regime", "step", "policy", "reference") if c in flags.columns]].copy()
        show["memory-sensitive"] = [("—" if v is None or (isinstance(v, float) and math.isnan(v))
                                     else ("yes" if v else "no")) for v in flags["memory_sensitive"]]
        show["why"] = flags["reason"]
        parts.append(html_table(show))
    return "".join(parts)


__all__ = ["DEFAULT_THRESHOLD", "BenchmarkRate", "ProbeRates", "memorization_section_html", "probes_beside",
           "read_probe", "read_probes"]
