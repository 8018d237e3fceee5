"""`sensitivity_report` (analysis/sensitivity.py) as long tables for csv, LaTeX and files: what
`campaign sensitivity --format csv|latex|json --table NAME` and `--out FOLDER` write.

Light at import (pandas is imported inside): the command line reads `SENSITIVITY_TABLES` for its help.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from analysis.table_formats import Table

SENSITIVITY_TABLES = ("rank_correlations", "leave_one_out", "seed_stability")


def sensitivity_tables(rep: dict) -> list[Table]:
    """The sensitivity report as three long tables (one row per scope x item; the scope columns say which
    group, `pooled` rows mix models and regimes), for csv/latex and --out."""
    import pandas as pd

    rows: dict[str, list[dict]] = {n: [] for n in SENSITIVITY_TABLES}
    for sc in [*rep["groups"], rep["pooled"]]:
        scope = {"scope": "pooled" if sc["scope"] == "all" else "group",
                 **{k: sc.get(k, "") for k in ("campaign", "model", "regime", "step")}}
        rows["rank_correlations"] += [{**scope, **r} for r in sc["aggregate_correlations"]]
        rows["leave_one_out"] += [{**scope, **r} for r in sc["leave_one_out"]]
        st = sc["seed_stability"]
        rows["seed_stability"] += [{**scope, "aggregate": st["aggregate"], "n_resamples": st["n_resamples"],
                                    **{k: v for k, v in r.items() if k not in scope}} for r in st["configs"]]
    titles = {"rank_correlations": "Rank correlation of configuration rankings between aggregates",
              "leave_one_out": "Leave-one-benchmark-out rank correlation with the full aggregate",
              "seed_stability": "Seed bootstrap of the configuration ranking"}
    from analysis.table_formats import Table

    out = []
    for n in SENSITIVITY_TABLES:
        data = pd.DataFrame(rows[n])
        disp = data.copy()
        for c in disp.columns:
            if disp[c].dtype.kind == "f":
                disp[c] = disp[c].map(lambda v: f"{v:.3f}" if pd.notna(v) else "")
        disp = disp.astype(str)
        out.append(Table(n, titles[n], data, disp,
                         note="per campaign/model/regime/step group first; scope = pooled rows mix every group"))
    return out
