"""Interim looks over a campaign's run records (ledger-agnostic, pure functions).

`look_at_runs` tests every (configuration vs reference) comparison of a campaign at one look;
`next_batch_seeds` says which groups get the next batch. The rows a look stores carry the full
design, and `check_design` keeps looks immutable (orchestrator/looks.py stores them in the ledger).
`LOOK_COLUMNS` / `read_looks_file` are the `sequential_looks.csv` exported next to the records,
which `campaign report` reads.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING

import numpy as np

from analysis.schema import DEFAULT_REFERENCE
from analysis.sequential import SequentialError
from analysis.sequential.decisions import interim_decision
from analysis.sequential.design import SequentialDesign
from analysis.sequential.estimates import stagewise_estimate

if TYPE_CHECKING:  # annotations only: pandas is imported where it is used, not at module import
    from pathlib import Path

    import pandas as pd



def look_at_runs(runs: pd.DataFrame, design: SequentialDesign, look: int, aggregate: str,
                 references: Mapping[str, str] | None = None, rejected_before: int = 0) -> pd.DataFrame:
    """One interim look over a campaign: every (configuration vs reference) comparison tested.

    runs: `analysis.aggregates.run_table` rows (one per run x step; the last step of each run is
    used). references: mechanism -> reference policy (default: select/reweight -> baseline,
    mix -> static). The family is every comparison of the campaign present in `runs` (or the design's
    family_size); rejected_before: how many of the family were rejected at earlier looks (the Holm step-down
    of `analysis.sequential.family` starts from the level they freed). Returns one row per comparison:
    identity, n, mean, sd, stat, critical, repeated CI, equivalence RCI, decision, the level it was tested
    at (`alpha_comparison`) and `needs_seeds` (True while undecided) so a scheduler knows which
    configurations get the next batch.
    """
    import pandas as pd

    from analysis.sequential.family import familywise_look

    refs = dict(references or DEFAULT_REFERENCE)  # curricula too: paired with baseline
    if not 0 <= look < len(design.looks):
        raise SequentialError(f"look: {look} is outside 0..{len(design.looks) - 1} for looks {list(design.looks)}")
    if aggregate not in runs.columns:
        raise SequentialError(f"aggregate {aggregate!r} is not a column of the runs table; known: "
                              f"{[c for c in runs.columns if c[:1].isupper()]}")
    last = runs.sort_values("step").groupby(["campaign", "model", "regime", "policy", "seed"], sort=False).tail(1)
    ident: dict[str, dict] = {}
    diffs_of: dict[str, np.ndarray] = {}
    for gkey, g in last.groupby(["campaign", "model", "regime"], sort=True):
        by_pol = {p: d.set_index("seed")[aggregate].astype(float) for p, d in g.groupby("policy")}
        mech_of = g.groupby("policy")["mechanism"].first().to_dict()
        for pol, mech in sorted(mech_of.items()):
            ref = refs.get(mech)
            if ref is None or ref == pol or ref not in by_pol:
                continue
            a, b = by_pol[pol], by_pol[ref]
            seeds = sorted(a.index.intersection(b.index))
            name = "/".join(map(str, gkey)) + f":{pol}-{ref}"
            ident[name] = {**dict(zip(("campaign", "model", "regime"), gkey, strict=True)), "policy": pol,
                           "reference": ref}
            diffs_of[name] = (a.loc[seeds] - b.loc[seeds]).to_numpy()
    rows: dict[str, dict] = {}
    valid: dict[str, np.ndarray] = {}
    plain = replace(design, familywise="none", family_size=None)
    for name, diffs in diffs_of.items():  # a comparison the look cannot test is an error row, not a crash
        try:
            interim_decision({name: diffs}, look, plain)
            valid[name] = diffs
        except SequentialError as exc:
            rows[name] = {**ident[name], "look": look, "n": int(np.isfinite(diffs).sum()), "decision": "error",
                          "error": str(exc), "needs_seeds": True}
    decisions, level = familywise_look(valid, look, design, max(len(diffs_of), 1), rejected_before) if valid \
        else ({}, {})
    for name, d in decisions.items():
        tested = replace(plain, alpha=level[name])
        mue = mue_lo = mue_hi = math.nan
        if d.decision in ("superior", "inferior") and np.isfinite(d.stat) and d.n == design.looks[look]:
            e, e_lo, e_hi = stagewise_estimate(tested, look, np.array([d.stat]), np.array([d.sd]))
            mue, mue_lo, mue_hi = float(e[0]), float(e_lo[0]), float(e_hi[0])
        rows[name] = {**ident[name], "mue": mue, "mue_low": mue_lo, "mue_high": mue_hi,
                      "look": look, "n": d.n, "n_dropped": d.n_dropped, "mean": d.mean, "sd": d.sd, "stat": d.stat,
                      "critical": d.critical, "rci_low": d.rci_low, "rci_high": d.rci_high, "eq_low": d.eq_low,
                      "eq_high": d.eq_high, "decision": d.decision, "error": "", "needs_seeds": not d.stopped,
                      "alpha_comparison": level[name]}
    return pd.DataFrame([rows[k] for k in diffs_of])


def rejected_at_earlier_looks(looks: pd.DataFrame, look: int, design_name: str = "default") -> int:
    """How many comparisons recorded looks (`read_looks` rows) rejected (superior/inferior) before `look`,
    under `design_name`: the alpha they freed is the Holm step-down's starting point at `look`."""
    if looks.empty:
        return 0
    names = looks["design_json"].map(lambda j: json.loads(j or "{}").get("name", "default"))
    sel = looks[(names == design_name) & (looks["look"] < look) & looks["decision"].isin(["superior", "inferior"])]
    return int(sel["comparison"].nunique())


def next_batch_seeds(decisions: pd.DataFrame, design: SequentialDesign, look: int,
                     seeds: Sequence[int] | None = None) -> dict[tuple[str, str, str], list[int]]:
    """Seeds to add at the next look: (campaign, model, regime) -> seeds, for every policy that is
    still open *and* its reference (shared by every comparison of the group). `seeds`: the
    campaign's full seed list in order (default 1..max)."""
    if look + 1 >= len(design.looks):
        return {}
    order = list(seeds) if seeds is not None else list(range(1, design.max_seeds + 1))
    batch = order[design.looks[look]:design.looks[look + 1]]
    out: dict[tuple[str, str, str], list[int]] = {}
    open_ = decisions[decisions["needs_seeds"]] if len(decisions) else decisions
    for r in open_.itertuples():
        out.setdefault((r.campaign, r.model, r.regime), [])
    return {k: batch for k in out}


def _design_doc(design: SequentialDesign, aggregate: str | None, name: str) -> dict:
    return {**dataclasses_asdict(design), "aggregate": aggregate, "name": name}


def _design_diff(stored: dict, new: dict) -> list[str]:
    """Fields on which two designs differ; a key the stored row lacks (written by an older version)
    takes its default, and an aggregate missing on either side is not compared."""
    defaults = {**dataclasses_asdict(SequentialDesign()), "aggregate": None, "name": "default",
                "familywise": "none"}  # versions that stored no familywise had none
    out = []
    for k in sorted(set(stored) | set(new)):
        a, b = stored.get(k, defaults.get(k)), new.get(k, defaults.get(k))
        if k == "aggregate" and (a is None or b is None):
            continue
        if (list(a) if isinstance(a, (list, tuple)) else a) != (list(b) if isinstance(b, (list, tuple)) else b):
            out.append(k)
    return out


def _same_design(stored: dict, new: dict) -> bool:
    return not _design_diff(stored, new)


def look_rows(decisions: pd.DataFrame, design: SequentialDesign, *, aggregate: str | None = None,
              design_name: str = "default") -> list[dict]:
    """The rows a look stores (ledger table `sequential_looks`): one per comparison, with the design
    (every field, the aggregate tested and the design's name) on every row. A design other than
    "default" keeps its rows apart (comparison key suffixed " [name]")."""

    dj = json.dumps(_design_doc(design, aggregate, design_name), sort_keys=True)
    suffix = "" if design_name == "default" else f" [{design_name}]"
    return [{"look": int(r["look"]), "n": int(r["n"]), "decision": str(r["decision"]),
             "comparison": f"{r['campaign']}/{r['model']}/{r['regime']}:{r['policy']}-{r['reference']}{suffix}",
             "mean": _finite_or_none(r.get("mean")), "rci_low": _finite_or_none(r.get("rci_low")),
             "rci_high": _finite_or_none(r.get("rci_high")), "design_json": dj,
             "row_json": json.dumps({k: (None if isinstance(v, float) and not math.isfinite(v) else v)
                                     for k, v in r.items()}, default=str)}
            for r in decisions.to_dict("records")]


def check_design(campaign: str, design: SequentialDesign, *, aggregate: str | None = None,
                 design_name: str = "default") -> Callable[[list[dict]], None]:
    """A check over a campaign's stored look rows: looks are immutable, so a look under a name whose
    earlier looks used a different design (another margin, spending, alpha, aggregate, ...) raises
    SequentialError; a new design needs a new `design_name`. The same design again is fine (idempotent)."""

    doc = _design_doc(design, aggregate, design_name)

    def check(stored_rows: list[dict]) -> None:
        for row in stored_rows:
            stored = json.loads(row.get("design_json") or "{}")
            if stored.get("name", "default") == design_name and not _same_design(stored, doc):
                diff = _design_diff(stored, doc)
                raise SequentialError(
                    f"campaign {campaign!r}: look {row['look']} was taken under design {design_name!r} with "
                    f"{ {k: stored.get(k) for k in diff} }; this look asks for { {k: doc.get(k) for k in diff} }. "
                    "Looks are immutable: keep the design, or declare a new named design "
                    "(seeds-look --design-name NEW) whose looks are recorded apart")

    return check


def looks_frame(rows: list[dict]) -> pd.DataFrame:
    """Stored look rows as a frame (empty when none)."""
    import pandas as pd

    return pd.DataFrame(rows)


def _finite_or_none(v: object) -> float | None:
    return float(v) if isinstance(v, (int, float)) and math.isfinite(float(v)) else None


def dataclasses_asdict(design: SequentialDesign) -> dict:
    from dataclasses import asdict

    return asdict(design)


# ---------------------------------------------------------------- the exported looks file the report reads

LOOK_COLUMNS = ("campaign", "look", "comparison", "n", "decision", "mean", "rci_low", "rci_high", "design_json")


def read_looks_file(path: str | Path) -> pd.DataFrame:
    """A `sequential_looks.csv` written next to a campaign's records; SequentialError names the file and column."""
    from pathlib import Path

    import pandas as pd

    p = Path(path)
    try:
        df = pd.read_csv(p)
    except (OSError, ValueError) as exc:
        raise SequentialError(f"{p}: cannot read the looks file ({exc}); rerun `campaign resume` to rewrite "
                              "it") from None
    missing = [c for c in LOOK_COLUMNS if c not in df.columns]
    if missing:
        raise SequentialError(f"{p}: missing column(s) {missing}; expected {list(LOOK_COLUMNS)}")
    return df
