"""What a campaign's records say, in the shapes its MLflow runs carry: each cell's per-step scores
(benchmarks, domains, aggregates such as DB-12) and the campaign's verdict table.

Why apart from tracking: these run the analysis code (records, aggregates, paired comparisons, verdicts);
tracking only logs what they return.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any


def eval_metric_rows(records_path: str | Path, suite: str) -> list[dict[str, Any]]:
    """Per checkpoint step: `eval/<benchmark>`, `domain/<domain>` and `agg/<aggregate>` (DB-12 …) from a
    run's records, through the analysis code that computes them for reports (NaN stays missing)."""
    from analysis.aggregates import run_table
    from analysis.records import read_records
    from evaluation.suite import load_suite

    s = load_suite(suite)
    tab = run_table(read_records(records_path, suite=s), s)
    out = []
    for _, r in tab.iterrows():
        row: dict[str, Any] = {"step": int(r["step"])}
        row |= {f"eval/{b}": r[b] for b in s.benchmark_ids}
        row |= {f"domain/{d}": r[d] for d in s.domains}
        row |= {f"agg/{a}": r[a] for a in s.aggregate_names}
        out.append(row)
    return out


def verdict_summary(records: str | Path, suite: str, *, margin: float = 1.0, alpha: float = 0.05,
                    n_resamples: int = 1000) -> Any:
    """The campaign's verdict table (analysis.verdicts, the suite's first aggregate) from its records, or None
    when the records hold no method-vs-reference pair yet."""
    import warnings

    from analysis.comparisons import paired_comparisons
    from analysis.records import read_records
    from analysis.verdicts import verdict_table
    from evaluation.suite import load_suite

    s = load_suite(suite)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        res = paired_comparisons(read_records(records, suite=s), s, n_resamples=n_resamples)
        if res.table.empty:
            return None
        v = verdict_table(res.table, s.aggregate_names[0], margin, alpha)
    return None if v.empty else v
