"""The studies read back from the ledger database, and a study's best params written as a named policy YAML.

The studies live in the ledger database (Optuna RDBStorage on the same SQLAlchemy URL), so
`campaign tune --report` and resumption need nothing but the ledger URL; their storage, names and the mark of
trial 0 are defined here, where the studies are read back, and the runner creates them with the same. Tuned
parameters are written as a new named policy YAML (`<policy>_tuned`) in the campaign's `policy/` folder, so a
follow-up campaign lists it under `policies:` like any other.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any, cast

import yaml

from tuning.request import TuneError
from tuning.space import apply_params

DEFAULT_ATTR = "is_default"


def study_name(campaign: str, policy: str) -> str:
    return f"{campaign}:{policy}"


def _storage(url: str):
    import optuna

    engine_kwargs = {"connect_args": {"timeout": 30}} if url.startswith("sqlite") else {}
    return optuna.storages.RDBStorage(url, engine_kwargs=engine_kwargs)


def report(url: str, campaign: str) -> dict[str, dict[str, Any]]:
    """Per policy: budget, trials by state, default and best validation score, best params."""
    import optuna

    out: dict[str, dict[str, Any]] = {}
    if url.startswith("sqlite:///") and not Path(url[len("sqlite:///"):]).is_file():
        return out  # no ledger database yet: no study (do not create one by reading)
    storage = _storage(url)
    for s in optuna.get_all_study_summaries(storage):
        if not s.study_name.startswith(f"{campaign}:"):
            continue
        study = optuna.load_study(study_name=s.study_name, storage=storage)
        policy = study.user_attrs.get("policy", s.study_name.split(":", 1)[1])
        states: dict[str, int] = {}
        for t in study.trials:
            states[t.state.name] = states.get(t.state.name, 0) + 1
        complete = [t for t in study.trials if t.state == optuna.trial.TrialState.COMPLETE and t.value is not None
                    and math.isfinite(t.value)]
        default = [t for t in complete if t.user_attrs.get(DEFAULT_ATTR)]
        # `complete` holds finite values only (filtered above), so the casts below are exact
        best = max(complete, key=lambda t: cast(float, t.value)) if complete else None
        out[policy] = {
            "study": s.study_name, "budget": study.user_attrs.get("budget"), "trials": len(study.trials),
            "states": states,
            "aggregate": study.user_attrs.get("aggregate"),
            "validation_suite": study.user_attrs.get("validation_suite"),
            "default_value": default[0].value if default else math.nan,
            "best_value": best.value if best else math.nan, "best_params": dict(best.params) if best else {},
            "best_trial": best.number if best else None,
            "moved_by": (cast(float, best.value) - cast(float, default[0].value)) if (best and default) else math.nan,
            "policy_cfg": study.user_attrs.get("policy_cfg", {}),
        }
    return out


def equal_budgets(rep: Mapping[str, Mapping[str, Any]]) -> bool:
    """True when every policy's study has the same number of finished trials (the comparison is fair)."""
    return len({r["trials"] for r in rep.values()}) <= 1


def write_tuned_policy(rep_entry: Mapping[str, Any], policy: str, out_dir: Path, name: str | None = None) -> Path:
    """Write `<out_dir>/<policy>_tuned.yaml` (validated, atomic); a campaign then lists it by name."""
    from wtcommon.atomic import atomic_write_text
    from policies import load_policy

    if not rep_entry.get("best_params"):
        raise TuneError(f"policy {policy!r}: no completed trial with a finite score; nothing to write")
    cfg = apply_params(rep_entry["policy_cfg"], rep_entry["best_params"])
    cfg.pop("search_space", None)
    new = name or f"{policy}_tuned"
    cfg["name"] = new
    cfg["description"] = (f"{policy} tuned on {rep_entry['validation_suite']}:{rep_entry['aggregate']} "
                          f"(study {rep_entry['study']}, trial {rep_entry['best_trial']} of {rep_entry['trials']})")
    load_policy(cfg, domains=cfg.get("domains"))
    header = (f"# Written by `campaign tune` from study {rep_entry['study']}: best of {rep_entry['trials']} trials,\n"
              f"# validation {rep_entry['aggregate']} paired vs reference {rep_entry['best_value']:+.4f} "
              f"(default {rep_entry['default_value']:+.4f}). Params: {dict(rep_entry['best_params'])}\n")
    path = Path(out_dir) / f"{new}.yaml"
    atomic_write_text(path, header + yaml.safe_dump(cfg, sort_keys=False))
    return path
