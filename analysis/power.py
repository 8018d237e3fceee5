"""Power at plan time: the effect each planned comparison can detect with 80% power.

For each comparison of a campaign grid (policy vs its campaign-local reference, same group, model
and regime) with n planned seed pairs, the minimum detectable effect of the two-sided paired t test
(alpha 0.05, power 0.8, statsmodels TTestPower) is MDE = d_z(n) * sigma, sigma the SD of paired
differences. sigma comes from:

* prior records (`--prior RECORDS`): the pooled SD of paired differences of the aggregate over
  every method-vs-reference comparison of the same model, s^2 = sum (n_i - 1) s_i^2 / sum (n_i - 1)
  with df = sum (n_i - 1) (all models pooled when the model has no prior comparison, and said so);
  its 95% chi-square CI gives the MDE interval (exact under normal seed noise);
* or a stated SD (`--sd`), taken as known (no interval).

A comparison whose MDE exceeds the margin of interest is flagged: with its planned seeds it cannot
reliably detect an effect of that size; `seeds_for_margin` says how many it would need.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import numpy as np
import pandas as pd

from analysis.paired_stats import mde, sd_interval, seeds_needed
from wtcommon.errors import UserError


def prior_sd(paired: pd.DataFrame, metric: str) -> dict[str, tuple[float, int]]:
    """paired: `paired_comparisons(...).table` of the prior records -> model -> (pooled SD, df), plus
    "*" for every model pooled. Uses the floored SD (sd_used) and effect rows only."""
    e = paired[(paired["metric"] == metric) & (paired["kind"] == "effect")]
    e = e[np.isfinite(e["sd_used"].astype(float)) & (e["n"] >= 2)]
    out: dict[str, tuple[float, int]] = {}
    for key, g in list(e.groupby("model", sort=True)) + [("*", e)]:
        df = int((g["n"] - 1).sum())
        if df > 0:
            out[str(key)] = (float(np.sqrt(((g["n"] - 1) * g["sd_used"].astype(float) ** 2).sum() / df)), df)
    return out


def plan_power(runs: Iterable[Any], *, margin: float, sd: float | None = None,
               prior: dict[str, tuple[float, int]] | None = None, alpha: float = 0.05, power: float = 0.8
               ) -> list[dict[str, Any]]:
    """runs: objects with group, model, regime, policy (its name), reference, seed (`RunSpec.flat()`).
    One row per comparison: n seed pairs, sigma and its source, MDE at 80% power with its interval,
    whether it can detect ±margin, and the seeds it would need for the margin."""
    if sd is None and prior is None:
        raise ValueError("power: give a stated SD (--sd) or prior records (--prior)")
    seeds: dict[tuple, set[int]] = {}
    refs: dict[tuple, str] = {}
    for r in runs:
        cell = (r.group, r.model, r.regime)
        seeds.setdefault(cell + (r.policy,), set()).add(int(r.seed))
        if r.reference and r.reference != r.policy:
            refs[cell + (r.policy,)] = r.reference
    rows = []
    for key in sorted(refs):
        cell, pol, ref = key[:3], key[3], refs[key]
        n = len(seeds.get(key, set()) & seeds.get(cell + (ref,), set()))
        if sd is not None:
            s, df, source = float(sd), None, "stated SD (taken as known)"
        elif prior is not None and cell[1] in prior:
            (s, df), source = prior[cell[1]], f"prior records, {cell[1]}"
        elif prior is not None and "*" in prior:
            (s, df), source = prior["*"], "prior records, all models pooled (no prior comparison for this model)"
        else:
            s, df, source = float("nan"), None, "no prior comparison"
        m = float(mde(n, np.array([s]), alpha, power)[0]) if n >= 2 else float("nan")
        lo = hi = float("nan")
        if df is not None and n >= 2:
            s_lo, s_hi = sd_interval(np.array([s]), df + 1)
            lo, hi = float(mde(n, s_lo, alpha, power)[0]), float(mde(n, s_hi, alpha, power)[0])
        need = float(seeds_needed(margin, np.array([s]), alpha, power)[0])
        rows.append({"campaign": cell[0], "model": cell[1], "regime": cell[2], "policy": pol, "reference": ref,
                     "n_pairs": n, "sd": s, "sd_df": df, "sd_source": source, "mde": m, "mde_lo": lo, "mde_hi": hi,
                     "margin": margin, "detects_margin": bool(m <= margin) if m == m else False,
                     "seeds_for_margin": None if need != need else int(need)})
    return rows


def power_section(runs: Iterable[Any], *, margin: float, sd: float | None = None, prior_path: str | None = None,
                  suite: str = "db12", aggregate: str | None = None) -> dict[str, Any]:
    """What `campaign plan --prior/--sd` adds to its accounting (JSON-ready); ValueError / RecordsError on bad input."""
    prior = None
    metric = aggregate
    if prior_path is not None:
        import warnings

        from analysis.comparisons import paired_comparisons
        from analysis.records import read_records
        from evaluation.suite import load_suite

        s = load_suite(suite)
        metric = aggregate or s.aggregate_names[0]
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            paired = paired_comparisons(read_records(prior_path, s), s, aggregates=[metric], n_resamples=100)
        prior = prior_sd(paired.table, metric)
        if not prior:
            raise UserError(f"--prior {prior_path}: no method-vs-reference comparison with >= 2 seeds to estimate "
                             "the SD from")
    rows = [{k: (None if isinstance(v, float) and v != v else v) for k, v in r.items()}  # JSON: NaN -> null
            for r in plan_power(runs, margin=margin, sd=sd, prior=prior)]
    return {"metric": metric, "margin": margin, "alpha": 0.05, "power": 0.8,
            "method": "two-sided paired t (statsmodels TTestPower); MDE interval from the chi-square 95% CI of the "
                      "prior SD (pooled over the model's comparisons)",
            "cannot_detect_margin": sum(not r["detects_margin"] for r in rows), "comparisons": rows}


def power_table(doc: dict[str, Any]):
    """Rich table of `power_section`'s comparisons for `campaign plan`."""
    from rich.table import Table

    t = Table(title=f"power at plan time: effect detectable with 80% power (alpha 0.05), margin ±{doc['margin']:g}"
                    f" ({doc['cannot_detect_margin']} of {len(doc['comparisons'])} cannot detect it)")
    for c in ("comparison", "seed pairs", "SD (source)", "MDE [95% CI]", "detects ±margin", "seeds for margin"):
        t.add_column(c)
    def f(v: float | None) -> str:
        return "NaN" if v is None or v != v else f"{v:.2f}"

    for r in doc["comparisons"]:
        ci = "" if r["mde_lo"] is None else f" [{f(r['mde_lo'])}, {f(r['mde_hi'])}]"
        t.add_row(f"{r['campaign']}/{r['model']}/{r['regime']}:{r['policy']} vs {r['reference']}", str(r["n_pairs"]),
                  f"{f(r['sd'])} ({r['sd_source']})", f"{f(r['mde'])}{ci}",
                  "yes" if r["detects_margin"] else "NO", "" if r["seeds_for_margin"] is None
                  else str(r["seeds_for_margin"]))
    return t
