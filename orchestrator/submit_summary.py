"""What `campaign submit` (and `submit --dry-run`) does to the ledger, said plainly: how many runs are new,
changed, unchanged or no longer in the spec, and for each changed run the fields that changed (old → new).

Why: `{"new": 0, "changed": 2}` does not tell a user that `fraction` went from 0.5 to 0.3, nor that the second
generation supersedes the first. `submit` and `--dry-run` print the same summary (built before the ledger is
written, from the runs it holds); `--json` gives the same facts to machines, keeping the count keys.
A category is one entry of `CATEGORIES` plus a list in `SubmitSummary.runs`: adding one (e.g. runs to
re-evaluate) needs no change to the rendering."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

# (key, label) in the order printed; the key is also the JSON count key
CATEGORIES: list[tuple[str, str]] = [("new", "new"), ("changed", "changed (the old run is superseded)"),
                                     ("unchanged", "unchanged"),
                                     ("reevaluate", "to re-evaluate (evaluation settings changed; checkpoints kept)"),
                                     ("removed", "no longer in the spec")]
# fields of a run spec that identify or derive from it rather than configure it
_DERIVED = {"run_key", "run_id", "order", "config_hash", "est_hours"}  # est_hours follows steps and compute
SHOW_RUNS = 10  # changed runs listed with their fields; the rest are counted (all in --json)


@dataclass
class SubmitSummary:
    campaign: str
    runs: dict[str, list[str]] = field(default_factory=lambda: {k: [] for k, _ in CATEGORIES})
    changes: dict[str, list[tuple[str, Any, Any]]] = field(default_factory=dict)  # run_id -> (field, old, new)

    def counts(self) -> dict[str, int]:
        return {k: len(v) for k, v in self.runs.items()}

    def as_json(self) -> dict[str, Any]:
        """The counts under their category keys (as `--dry-run` printed them before), the run ids, and for each
        changed run its changed fields."""
        return {**self.counts(), "campaign": self.campaign, "run_ids": {k: v for k, v in self.runs.items() if v},
                "changes": {rid: [{"field": f, "old": o, "new": n} for f, o, n in ch]
                            for rid, ch in self.changes.items()}}

    def lines(self, *, dry_run: bool) -> list[str]:
        """The human summary: one count line, then each changed run's fields (SHOW_RUNS at most)."""
        counts = self.counts()
        head = ", ".join(f"{counts[k]} {label}" for k, label in CATEGORIES if counts.get(k) or k == "new")
        out = [f"{self.campaign}: {head}" + (" (dry run: nothing written)" if dry_run else "")]
        for rid in self.runs.get("changed", [])[:SHOW_RUNS]:
            ch = self.changes.get(rid, [])
            what = "; ".join(f"{f} {_short(o)} → {_short(n)}" for f, o, n in ch) or "its configuration hash"
            out.append(f"  changed {rid}: {what}")
        if len(self.runs.get("changed", [])) > SHOW_RUNS:
            out.append(f"  … {len(self.runs['changed']) - SHOW_RUNS} more changed runs (--json lists every one)")
        for rid in self.runs.get("reevaluate", [])[:SHOW_RUNS]:
            ch = self.changes.get(rid, [])
            what = "; ".join(f"{f} {_short(o)} → {_short(n)}" for f, o, n in ch) or "the suite, its graders or data"
            out.append(f"  re-evaluate {rid}: {what}")
        for rid in self.runs.get("removed", [])[:3]:
            out.append(f"  no longer in the spec: {rid}")
        return out


def _short(v: Any) -> str:
    if isinstance(v, float):
        v = float(f"{v:.12g}")  # 0.30000000000000004 -> 0.3
    s = v if isinstance(v, str) else json.dumps(v, sort_keys=True, default=str)
    return s if len(s) <= 60 else s[:57] + "…"


def _flat(d: Any, prefix: str = "") -> dict[str, Any]:
    if isinstance(d, dict):
        out: dict[str, Any] = {}
        for k, v in d.items():
            out.update(_flat(v, f"{prefix}{k}."))
        return out
    return {prefix[:-1]: d}


def field_changes(old: dict[str, Any], new: dict[str, Any]) -> list[tuple[str, Any, Any]]:
    """(dotted field, old, new) for every configuring field that differs between two run specs; a field
    present on one side only is shown against `None`."""
    a = {k: v for k, v in _flat(old).items() if k.split(".")[0] not in _DERIVED}
    b = {k: v for k, v in _flat(new).items() if k.split(".")[0] not in _DERIVED}
    return [(k, a.get(k), b.get(k)) for k in sorted(a.keys() | b.keys()) if a.get(k) != b.get(k)]


def summarise(campaign: str, current: list[tuple[str, str, dict[str, Any]]],
              runs: list[tuple[str, str, dict[str, Any]]], removed: list[str] | None = None) -> SubmitSummary:
    """`current`: (run_id, run_key, spec dict) of the ledger's current generation; `runs`: (run_id, run_key,
    spec dict) of the spec being submitted; `removed`: run ids no longer in the spec (default: those of
    `current` not in `runs`)."""
    have = {rid: (key, sj) for rid, key, sj in current}
    s = SubmitSummary(campaign)
    for rid, key, spec in runs:
        if rid not in have:
            s.runs["new"].append(rid)
        elif have[rid][0] == key:
            s.runs["unchanged"].append(rid)
        else:
            s.runs["changed"].append(rid)
            s.changes[rid] = field_changes(have[rid][1], spec)
    ids = {rid for rid, _, _ in runs}
    s.runs["removed"] = list(removed) if removed is not None else [rid for rid in have if rid not in ids]
    return s
