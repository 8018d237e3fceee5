"""The memorization probe's files: one JSON (settings, definitions, per-benchmark rates with intervals, the most
recalled items) and two CSVs (per benchmark, per item), each written atomically: complete or absent."""

from __future__ import annotations

import csv
import io
import json
import math
from pathlib import Path
from typing import Any

from evaluation.intervals import METHOD
from evaluation.memorization import DEFINITIONS, BenchmarkRecall, ProbeResult, ProbeSettings
from wtcommon.atomic import atomic_write_text

JSON_NAME, CSV_NAME, ITEMS_NAME = "memorization.json", "memorization.csv", "memorization_items.csv"
# a campaign's probes: results/<campaign>/memorization/<model>/ (orchestrator/base_probe.py writes, the report reads)
MEMORIZATION_DIR = "memorization"
ITEM_COLUMNS = ("benchmark", "item_id", "grader", "skipped", "n_prefix_tokens", "n_rest_tokens", "exact", "rouge_l",
                "answer", "gold", "prefix", "reference", "continuation")


def _num(x: float) -> float | None:
    return None if isinstance(x, float) and math.isnan(x) else x


def benchmark_row(s: BenchmarkRecall) -> dict[str, Any]:
    """The flat per-benchmark record (the CSV's row, the JSON's entry without its items)."""
    row: dict[str, Any] = {"benchmark": s.benchmark, "n_items": s.n_items, "n_probed": s.n_probed,
                           "n_skipped": sum(s.skipped.values())}
    for what in ("exact", "near", "answer"):
        lo, hi = s.intervals[what]
        row.update({what: getattr(s, what), f"{what}_rate": _num(s.rate(what)), f"{what}_ci_low": _num(lo),
                    f"{what}_ci_high": _num(hi)})
    row["mean_rouge_l"] = _num(s.mean_rouge_l)
    return row


def _csv(rows: list[dict[str, Any]], columns: list[str] | tuple[str, ...]) -> str:
    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=list(columns), extrasaction="ignore", lineterminator="\n")
    w.writeheader()
    w.writerows(rows)
    return buf.getvalue()


def write_paper_report(out_dir: Path, result: ProbeResult) -> list[Path]:
    """The paper protocol's three files: per benchmark and ratio (JSON, CSV) and per item and ratio (CSV: the
    problem, the prefix shown, the target, the full completion and the clipped prediction, so a third party can
    re-score it)."""
    from evaluation.memorization_paper import DEFINITIONS as PAPER_DEFINITIONS
    from evaluation.memorization_paper_probe import ITEM_COLUMNS as PAPER_COLUMNS
    from evaluation.memorization_paper_probe import summarise, summary_row

    summaries = summarise(result.rows)
    rows = [summary_row(s) for s in summaries]
    body = {"meta": result.meta, "definitions": {**PAPER_DEFINITIONS, "interval": METHOD + ", over probed items"},
            "benchmarks": [{**r, "skipped": s.skipped} for r, s in zip(rows, summaries, strict=True)]}
    return _write(out_dir, body, rows, result.rows, PAPER_COLUMNS)


def _write(out_dir: Path, body: dict[str, Any], rows: list[dict[str, Any]], items: list[dict[str, Any]],
           item_columns: tuple[str, ...]) -> list[Path]:
    paths = [out_dir / JSON_NAME, out_dir / CSV_NAME, out_dir / ITEMS_NAME]
    out_dir.mkdir(parents=True, exist_ok=True)
    atomic_write_text(paths[0], json.dumps(body, indent=1, ensure_ascii=False, default=str) + "\n")
    atomic_write_text(paths[1], _csv(rows, list(rows[0]) if rows else ["benchmark"]))
    atomic_write_text(paths[2], _csv(items, item_columns))
    return paths


def write_report(out_dir: Path, result: ProbeResult, summaries: list[BenchmarkRecall],
                 settings: ProbeSettings) -> list[Path]:
    """The three files into `out_dir` (created when missing); returns their paths."""
    rows = [benchmark_row(s) for s in summaries]
    body = {"meta": {**result.meta, "near": settings.near}, "definitions": DEFINITIONS,
            "benchmarks": [{**r, "skipped": s.skipped, "most_recalled": s.top} for r, s in zip(rows, summaries,
                                                                                            strict=True)]}
    return _write(out_dir, body, rows, result.rows, ITEM_COLUMNS)


__all__ = ["CSV_NAME", "ITEMS_NAME", "JSON_NAME", "MEMORIZATION_DIR", "benchmark_row", "write_paper_report",
           "write_report"]
