"""The report's lead section for a sequential campaign, from its recorded looks (the exported
`sequential_looks.csv`): the repeated (adjusted) CIs and, for early efficacy stops, the bias-adjusted
estimate. It goes before the score tables because their fixed-n paired CIs are not adjusted for the looks.
"""

from __future__ import annotations

import json
import math
from typing import TYPE_CHECKING

import numpy as np

from analysis.sequential import SequentialError
from analysis.sequential.design import SequentialDesign
from analysis.sequential.estimates import stagewise_estimate

if TYPE_CHECKING:  # annotations only: pandas is imported where it is used, not at module import
    import pandas as pd



def _adjusted_after_stop(last: pd.DataFrame) -> dict:
    """Row index -> "estimate [lo, hi]" for the comparisons stopped for efficacy, from the recorded design
    (design_json), n, mean and the repeated CI (se = half width / critical value)."""
    out: dict = {}
    for i, r in last.iterrows():
        if str(r["decision"]) not in ("superior", "inferior") or any(
                not math.isfinite(float(r[c])) for c in ("mean", "rci_low", "rci_high")):
            continue
        try:
            doc = json.loads(r["design_json"])
            fields = {k: v for k, v in doc.items() if k in SequentialDesign.__dataclass_fields__}
            fields["looks"] = tuple(fields.get("looks", ()))
            design = SequentialDesign(**fields)
        except (TypeError, ValueError, SequentialError):
            continue
        k = int(r["look"])
        if int(r["n"]) != design.looks[k]:
            continue
        crit = float(design.stat_bounds(design.looks[:k + 1])[-1])
        se = (float(r["rci_high"]) - float(r["rci_low"])) / (2 * crit)
        if not se > 0:
            continue
        e, lo, hi = stagewise_estimate(design, k, np.array([float(r["mean"]) / se]), np.array([se * math.sqrt(r["n"])]))
        out[i] = f"{e[0]:+.3f} [{lo[0]:+.3f}, {hi[0]:+.3f}]"
    return out


def looks_section_html(looks: pd.DataFrame) -> str:
    """Lead section of a report for a sequential campaign: each comparison's last look, its
    repeated (adjusted) CI and decision, then the look-by-look history. It goes before the score
    tables because their fixed-n paired CIs are not adjusted for the interim looks."""
    import html

    import pandas as pd

    if looks.empty:
        return ""
    design = json.loads(looks["design_json"].iloc[-1]) if "design_json" in looks else {}
    margin = design.get("equivalence_margin")
    desc = (f"looks after {design.get('looks')} seeds, alpha {design.get('alpha')}, {design.get('spending')} spending"
            + (f", equivalence margin ±{margin}" if margin is not None else "")
            + (f", futility below conditional power {design.get('futility_cp')}" if design.get("futility_cp") else "")
            + (", family-wise control: Holm step-down over the group-sequential boundaries (alpha/m per comparison "
               "over the campaign's m comparisons, raised to alpha/(m - rejected) as comparisons are rejected)"
               if design.get("familywise") == "holm" else
               f", family-wise control: {design.get('familywise')} (alpha/m per comparison over the campaign's m "
               "comparisons)" if design.get("familywise") not in (None, "none") else
               ", per-comparison error control only (no family-wise adjustment across comparisons)")
            + (f", aggregate {design.get('aggregate')}" if design.get("aggregate") else "")
            + (f", design {design.get('name')!r}" if design.get("name") not in (None, "default") else ""))
    last = looks.sort_values("look").groupby("comparison", sort=True).tail(1)
    adj = _adjusted_after_stop(last)

    def ci(r: pd.Series) -> str:
        lo, hi = r["rci_low"], r["rci_high"]
        return "NaN" if pd.isna(lo) or pd.isna(hi) else f"[{lo:+.3f}, {hi:+.3f}]"

    def rows(df: pd.DataFrame, with_look: bool) -> str:
        out = []
        for i, r in df.iterrows():
            cells = ([str(int(r["look"]))] if with_look else []) + [
                html.escape(str(r["comparison"])), str(int(r["n"])),
                "NaN" if pd.isna(r["mean"]) else f"{r['mean']:+.3f}", ci(r), html.escape(str(r["decision"]))]
            if not with_look:
                cells.append(adj.get(i, "not stopped for efficacy"))
            out.append("<tr>" + "".join(f"<td>{c}</td>" for c in cells) + "</tr>")
        return "".join(out)

    head = "<th>comparison</th><th>seeds</th><th>mean Δ</th><th>repeated CI</th><th>decision</th>"
    return (
        "<h2 id='sequential'>Sequential seed design: adjusted intervals</h2>"
        f"<p>This campaign spent seeds in batches with interim looks ({html.escape(desc)}). "
        "<b>Use the repeated confidence intervals below: they keep their coverage over every look taken. "
        "The paired CIs in the tables further down are fixed-n intervals, not adjusted for the looks, "
        "and comparisons stopped early have fewer seeds there.</b></p>"
        f"<table><thead><tr>{head}<th>bias-adjusted Δ [95% CI] (median-unbiased, stage-wise ordering)</th></tr>"
        f"</thead><tbody>{rows(last, False)}</tbody></table>"
        "<p class='note'>A comparison stopped early for efficacy overstates its effect (the mean that crossed a "
        "boundary is selected to be large). The bias-adjusted estimate is the median-unbiased estimate under the "
        "stage-wise ordering, on the standardised scale delta/sigma (exact for paired t statistics, fixed-seed "
        "simulation), times the SD at the stop.</p>"
        "<details><summary>every interim look</summary>"
        f"<table><thead><tr><th>look</th>{head}</tr></thead>"
        f"<tbody>{rows(looks.sort_values(['look', 'comparison']), True)}"
        "</tbody></table></details>"
    )
