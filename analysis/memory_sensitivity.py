"""Which comparisons' gains may be memory: paired per-benchmark Δ read against the base model's memorization rates.

Why: RLVR on a model that already holds a benchmark can raise its score by recall (arXiv 2507.10532); the probe
(`campaign audit memorization`) gives a rate per benchmark, and a clean generated benchmark (clean_arith,
evaluation/clean_benchmark.py) gives a control no model can have memorised. A comparison whose gain sits on the
recalled benchmarks while the clean one shows none is flagged, to be read with care, not discarded.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from pathlib import Path

import pandas as pd

from wtcommon.errors import UserError

CLEAN = "clean_arith"
GROUP_KEYS = ("campaign", "model", "regime", "step", "policy", "reference")
NEED = ("metric", "mean_diff", "t_lo")


class MemorizationRatesError(UserError):
    """A memorization report or a Δ table cannot be read as the flag needs; names the file or column."""


def read_rates(path: Path, which: str = "near") -> dict[str, float]:
    """benchmark -> rate (`near`, `exact` or `answer`) from a probe's memorization.json."""
    try:
        body = json.loads(Path(path).read_text())
        return {b["benchmark"]: float(b[f"{which}_rate"]) for b in body["benchmarks"]
                if b.get(f"{which}_rate") is not None}
    except (OSError, json.JSONDecodeError, KeyError, TypeError) as e:
        raise MemorizationRatesError(f"{path}: not a memorization report ({type(e).__name__}: {e}); write one with "
                                     "`campaign audit memorization --out DIR`") from e


def _mean(xs: list[float]) -> float:
    return sum(xs) / len(xs) if xs else float("nan")


def _verdict(deltas: dict[str, tuple[float, float]], rates: Mapping[str, float], threshold: float,
             concentration: float, clean: str) -> dict[str, object]:
    high = sorted(b for b in deltas if b != clean and b in rates and rates[b] >= threshold)
    low = sorted(b for b in deltas if b != clean and b in rates and rates[b] < threshold)
    gain_high = _mean([deltas[b][0] for b in high])
    gain_low = _mean([deltas[b][0] for b in low])
    clean_d, clean_lo = deltas.get(clean, (float("nan"), float("nan")))
    row: dict[str, object] = {"high_recall": ",".join(high), "gain_high": gain_high, "gain_low": gain_low,
                              "clean_delta": clean_d, "clean_t_lo": clean_lo}
    if clean not in deltas:
        return {**row, "memory_sensitive": None, "reason": f"no {clean} Δ: no clean control, no verdict"}
    if not high:
        return {**row, "memory_sensitive": False, "reason": f"no benchmark with a rate >= {threshold:g}"}
    elsewhere = 0.0 if math.isnan(gain_low) else max(gain_low, 0.0)
    concentrated = gain_high > 0 and gain_high >= concentration * elsewhere
    clean_none = not clean_lo > 0
    reason = (f"gain {gain_high:+.2f} on {len(high)} recalled benchmark(s) vs {elsewhere:+.2f} elsewhere; "
              f"{clean} {clean_d:+.2f} (t lower bound {clean_lo:+.2f})")
    return {**row, "memory_sensitive": bool(concentrated and clean_none), "reason": reason}


def memory_sensitive(table: pd.DataFrame, rates: Mapping[str, float], *, threshold: float = 0.5,
                     concentration: float = 2.0, clean: str = CLEAN) -> pd.DataFrame:
    """One row per comparison of `table` (paired per-benchmark Δ rows, as `paired_comparisons(...).table`:
    `metric` = benchmark id, `mean_diff` = Δ in points, `t_lo` = the lower bound of its 95% t-interval, plus the
    comparison's keys among GROUP_KEYS), with `memory_sensitive` and the numbers it was decided on.

    The rule, for one comparison, over the benchmarks that have both a Δ and a rate (the clean one aside):
    H = those whose memorization rate is >= `threshold`, L = the rest; gain_H, gain_L = the mean Δ over each.
    It is memory-sensitive iff (1) H is not empty, (2) gain_H > 0 and gain_H >= `concentration` x max(gain_L, 0)
    (the gain is concentrated on the recalled benchmarks; with L empty, gain_H > 0 suffices), and (3) the clean
    benchmark shows no gain: the lower bound of its Δ's 95% t-interval is <= 0. Without a clean-benchmark Δ the
    verdict is None (no control, no claim); with H empty it is False. A flag is a reason to look, not proof."""
    missing = [c for c in NEED if c not in table.columns]
    if missing:
        raise MemorizationRatesError(f"Δ table: missing column(s) {missing}; pass paired_comparisons(...).table")
    if not 0.0 < threshold <= 1.0 or concentration < 1.0:
        raise MemorizationRatesError(f"threshold {threshold:g} must be in (0, 1] and concentration "
                                     f"{concentration:g} at least 1")
    keys = [k for k in GROUP_KEYS if k in table.columns]
    rows = []
    for ident, sub in (table.groupby(keys, sort=True, dropna=False) if keys else [((), table)]):
        ident = ident if isinstance(ident, tuple) else (ident,)
        deltas = {str(m): (float(d), float(lo)) for m, d, lo in zip(sub["metric"], sub["mean_diff"], sub["t_lo"],
                                                                    strict=True)}
        rows.append({**dict(zip(keys, ident, strict=True)),
                     **_verdict(deltas, rates, threshold, concentration, clean)})
    return pd.DataFrame(rows)


__all__ = ["CLEAN", "MemorizationRatesError", "memory_sensitive", "read_rates"]
