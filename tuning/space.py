"""A policy's search space (the `search_space:` block of its YAML) and the params an Optuna trial takes from it.

Trial 0 is the YAML's own setting (`default_params`), so "how much tuning moved it" is measured inside the
same budget; `grid_size` tells the runner when a small discrete space can be covered by the budget.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

from tuning.request import TuneError


def search_space(policy_cfg: Mapping[str, Any], policy: str) -> dict[str, dict[str, Any]]:
    """The YAML's `search_space:` block ('scorer.P' / 'actuator.P' -> {low, high[, log, step]} | {choices})."""
    space = policy_cfg.get("search_space")
    if not space:
        raise TuneError(f"policy {policy!r}: no search_space block in its YAML; add e.g. "
                        "`search_space: {actuator.k: {low: 1, high: 4}}` or tune another policy")
    from policies import load_policy

    load_policy(dict(policy_cfg), domains=policy_cfg.get("domains"))  # strict validation, incl. the space
    out = {}
    for k, v in space.items():
        spec = dict(v)
        if "choices" not in spec:
            cur = _current(policy_cfg, str(k))
            ints = isinstance(spec["low"], int) and isinstance(spec["high"], int) and not isinstance(cur, float)
            spec["_kind"] = "int" if ints else "float"
        out[str(k)] = spec
    return out


def _current(policy_cfg: Mapping[str, Any], key: str) -> Any:
    part, _, name = key.partition(".")
    return ((policy_cfg.get(part) or {}).get("params") or {}).get(name)


def default_params(policy_cfg: Mapping[str, Any], space: Mapping[str, Mapping[str, Any]]) -> dict[str, Any]:
    """The YAML's own values for the tuned keys (trial 0), clipped into the space when set."""
    out = {}
    for key, spec in space.items():
        v = _current(policy_cfg, key)
        if v is None:
            continue
        if "choices" in spec:
            if v in spec["choices"]:
                out[key] = v
        elif spec["low"] <= v <= spec["high"]:
            out[key] = v
    return out


def suggest(trial: Any, space: Mapping[str, Mapping[str, Any]]) -> dict[str, Any]:
    """Ask an Optuna trial for every key of the space (int/float ranges, log scale, choices)."""
    out = {}
    for key, spec in space.items():
        if "choices" in spec:
            out[key] = trial.suggest_categorical(key, list(spec["choices"]))
        elif spec.get("_kind") == "int":
            out[key] = trial.suggest_int(key, spec["low"], spec["high"], step=int(spec.get("step", 1)),
                                         log=bool(spec.get("log", False)))
        else:
            kw: dict[str, Any] = {"log": bool(spec.get("log", False))}
            if spec.get("step") is not None and not kw["log"]:
                kw["step"] = float(spec["step"])
            out[key] = trial.suggest_float(key, float(spec["low"]), float(spec["high"]), **kw)
    return out


def apply_params(policy_cfg: Mapping[str, Any], params: Mapping[str, Any]) -> dict[str, Any]:
    """A copy of the policy config with scorer/actuator params replaced by `params`."""
    cfg = copy.deepcopy(dict(policy_cfg))
    for key, v in params.items():
        part, _, name = key.partition(".")
        blk = cfg.setdefault(part, {})
        blk.setdefault("params", {})[name] = v.item() if hasattr(v, "item") else v
    return cfg


def grid_size(space: Mapping[str, Mapping[str, Any]]) -> int | None:
    """Number of distinct parameter sets of an all-discrete space (int ranges, choices); None if any is continuous."""
    n = 1
    for spec in space.values():
        if "choices" in spec:
            n *= len(spec["choices"])
        elif spec.get("_kind") == "int":
            n *= len(range(int(spec["low"]), int(spec["high"]) + 1, int(spec.get("step", 1))))
        else:
            return None
    return n
