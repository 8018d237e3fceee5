"""Policy YAML loading and validation: `load_policy` reads a file or mapping, checks every key, name,
parameter and recipe conflict (a `PolicyConfigError` naming the file, policy and field), imports the policy's
plugins and builds the `DataPolicy`. The YAML itself is described in `policies.policy`.
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any
from collections.abc import Mapping, Sequence

from policies import actuators as _actuators  # noqa: F401  (importing registers the actuators)
from policies import controls
from policies import scorers as _scorers  # noqa: F401  (importing registers the scorers)
from policies.errors import PolicyConfigError
from policies.mechanisms import CURRICULUM_COMPOSES, MECHANISMS, REFUSED_WITH_MIXER
from policies.plugins import import_plugins
from policies.policy import DataPolicy
from policies.registry import Entry, lookup, validate_params
from wtcommon.files import load_yaml_mapping

TOP_KEYS = {
    "name", "description", "mechanism", "scorer", "actuator", "loss_norm", "recompute_advantages",
    "norm_adv_by_std", "warmup_step", "control", "domains", "search_space", "plugins", "curriculum",
    "dynamic_sampling",
}


def _read(source: str | Path | Mapping[str, Any]) -> tuple[dict[str, Any], str]:
    if isinstance(source, Mapping):
        return copy.deepcopy(dict(source)), "<mapping>"
    path = Path(source)
    if not path.is_file():
        raise PolicyConfigError(f"{path}: policy file not found")
    return load_yaml_mapping(path, what="policy file", error=PolicyConfigError), str(path)


def _block(cfg: dict, key: str, policy: str) -> tuple[str | None, dict]:
    blk = cfg.get(key)
    if blk is None:
        return None, {}
    if not isinstance(blk, Mapping) or "name" not in blk or set(blk) - {"name", "params"}:
        raise PolicyConfigError(f"policy {policy!r}: {key}: expected {{name: ..., params: {{...}}}}, got {blk!r}")
    params = blk.get("params") or {}
    if not isinstance(params, Mapping):
        raise PolicyConfigError(f"policy {policy!r}: {key}.params: expected a mapping, got {params!r}")
    return blk["name"], dict(params)


def _check_search_space(space: Any, policy: str, entries: dict[str, Entry | None]) -> None:
    if space is None:
        return
    if not isinstance(space, Mapping):
        raise PolicyConfigError(f"policy {policy!r}: search_space: expected a mapping of 'scorer.P' / 'actuator.P' to "
                                "ranges")
    for key, spec in space.items():
        where = f"policy {policy!r}: search_space.{key}"
        part, _, pname = str(key).partition(".")
        entry = entries.get(part)
        if entry is None or pname not in entry.params:
            known = [f"{k}.{p}" for k, e in entries.items() if e for p in e.params]
            raise PolicyConfigError(f"{where}: no such parameter; known: {known}")
        param = entry.params[pname]
        if not isinstance(spec, Mapping) or set(spec) - {"low", "high", "log", "choices", "step"}:
            raise PolicyConfigError(f"{where}: expected {{low, high[, log, step]}} or {{choices: [...]}}, got {spec!r}")
        if "choices" in spec:
            for c in spec["choices"]:
                param.check(c, f"{where}.choices")
            continue
        if "low" not in spec or "high" not in spec:
            raise PolicyConfigError(f"{where}: needs low and high (or choices)")
        lo, hi = spec["low"], spec["high"]
        numbers = isinstance(lo, (int, float)) and isinstance(hi, (int, float))
        if param.type not in (int, float) or not numbers or lo > hi:
            raise PolicyConfigError(f"{where}: low/high must be numbers with low <= high for a numeric parameter")
        if param.type is int and not (isinstance(lo, int) and isinstance(hi, int)):
            raise PolicyConfigError(f"{where}: {pname} is an integer parameter; low/high must be integers")
        if not param.contains_range(lo, hi):
            raise PolicyConfigError(f"{where}: [{lo}, {hi}] leaves the allowed range {param.allowed()}")
        if spec.get("log") and lo <= 0:
            raise PolicyConfigError(f"{where}: log scale needs low > 0")


def _check_curriculum(name: str | None, params: dict, mech: str, actuator: str | None, where: str) -> None:
    """A `curriculum:` block: required for mechanism curriculum, allowed beside select/reweight/mix (not with a
    mixer in `REFUSED_WITH_MIXER`, nor on the baseline), its name registered and its parameters accepted by the
    rule's own checks (`check_curriculum`: everything that needs no pool; the trainer's `build_curriculum` checks
    the rest, e.g. hardest_k's pass rates)."""
    if name is None:
        if mech == "curriculum":
            raise PolicyConfigError(f"{where}: curriculum: required for mechanism curriculum "
                                    "({name: <rule>, params: {...}}; `campaign policies list` names the rules)")
        return
    if mech not in CURRICULUM_COMPOSES:
        raise PolicyConfigError(f"{where}: curriculum: mechanism {mech!r} takes no curriculum; allowed with "
                                f"{list(CURRICULUM_COMPOSES)}")
    if mech == "mix" and name in REFUSED_WITH_MIXER:
        raise PolicyConfigError(f"{where}: curriculum.name: {name!r} cannot be combined with the mixer "
                                f"{actuator!r}: {REFUSED_WITH_MIXER[name]}")
    from policies.curricula.registry import check_curriculum

    try:
        check_curriculum(name, params)
    except PolicyConfigError as exc:
        raise PolicyConfigError(f"{where}: curriculum: {exc}") from None


def _policy_name(cfg: dict[str, Any], origin: str) -> str:
    """The policy's name: its `name:` (text), else the file's stem; written back into cfg."""
    raw_name = cfg.get("name")
    if raw_name is not None and not isinstance(raw_name, str):  # `name: [1, 2]` or `name: 7` is no name
        raise PolicyConfigError(f"{origin}: name: got {raw_name!r}; give the policy's name as text (e.g. name: gfpo)")
    policy = str(raw_name or (Path(origin).stem if origin != "<mapping>" else ""))
    if not policy:
        raise PolicyConfigError(f"{origin}: name: missing (give the policy a name)")
    cfg["name"] = policy
    return policy


def _entries(mech: str, sname: str | None, aname: str | None, policy: str,
             where: str) -> tuple[Entry | None, Entry | None]:
    """(scorer, actuator) registry entries the mechanism requires, their kinds and granularities checked."""
    s_entry = a_entry = None
    if mech == "curriculum":
        if sname or aname:
            raise PolicyConfigError(f"{where}: mechanism curriculum takes no scorer/actuator (a curriculum acts "
                                    "before rollout; to add a selector, write mechanism: select with a curriculum "
                                    "block)")
    elif mech == "none":
        if sname or aname:
            raise PolicyConfigError(f"{where}: mechanism none takes no scorer/actuator")
    else:
        if aname is None:
            raise PolicyConfigError(f"{where}: actuator: required for mechanism {mech!r}")
        a_entry = lookup("actuator", aname, policy)
        if a_entry.cls.mechanism != mech:
            raise PolicyConfigError(f"{where}: actuator.name: {aname!r} is a {a_entry.cls.mechanism} actuator, not "
                                    f"{mech}")
        if mech == "mix":
            if sname is not None:
                raise PolicyConfigError(f"{where}: scorer: mixers declare their own statistics; remove the scorer "
                                        "block")
        else:
            if sname is None:
                raise PolicyConfigError(f"{where}: scorer: required for mechanism {mech!r}")
            s_entry = lookup("scorer", sname, policy)
            if s_entry.cls.granularity not in a_entry.cls.accepts_granularity:
                raise PolicyConfigError(
                    f"{where}: scorer.name: {sname!r} gives {s_entry.cls.granularity}-level scores; actuator "
                    f"{aname!r} takes {list(a_entry.cls.accepts_granularity)}")
    return s_entry, a_entry


def _option(cfg: dict[str, Any], key: str, default: Any, ok: tuple | type, where: str) -> Any:
    """cfg[key] (or default), which must be one of `ok` (a tuple) or an instance of it (a type; bool is no int)."""
    v = cfg.get(key, default)
    if isinstance(ok, tuple):
        if v not in ok:
            raise PolicyConfigError(f"{where}: {key}: got {v!r}; allowed: {list(ok)}")
    elif not isinstance(v, ok) or (ok is int and isinstance(v, bool)):
        raise PolicyConfigError(f"{where}: {key}: got {v!r}; expected {ok.__name__}")
    return v


def _check_options(cfg: dict[str, Any], mech: str, where: str) -> None:
    """Fill in and check the training options (warmup, loss normalisation, advantages) and the control block."""
    cfg["warmup_step"] = _option(cfg, "warmup_step", 0, int, where)
    if cfg["warmup_step"] < 0:
        raise PolicyConfigError(f"{where}: warmup_step: got {cfg['warmup_step']}; must be >= 0")
    cfg["loss_norm"] = _option(cfg, "loss_norm", "all_tokens", ("all_tokens", "kept_tokens"), where)
    cfg["recompute_advantages"] = _option(cfg, "recompute_advantages", False, bool, where)
    cfg["norm_adv_by_std"] = _option(cfg, "norm_adv_by_std", True, bool, where)
    if mech != "select" and (cfg["loss_norm"] != "all_tokens" or cfg["recompute_advantages"]):
        raise PolicyConfigError(f"{where}: loss_norm / recompute_advantages apply to selection only (mechanism {mech})")
    ctl = cfg.get("control")
    if ctl is not None:
        if mech != "select":
            raise PolicyConfigError(f"{where}: control: controls wrap a selector; mechanism is {mech}")
        if not isinstance(ctl, Mapping) or ctl.get("name") not in controls.CONTROLS:
            raise PolicyConfigError(f"{where}: control.name: got {ctl!r}; allowed: {sorted(controls.CONTROLS)}")
        schema = controls.CONTROLS[ctl["name"]]
        for k, v in ctl.items():
            if k == "name":
                continue
            if k not in schema or v not in schema[k]:
                raise PolicyConfigError(f"{where}: control.{k}: got {v!r}; allowed keys/values: {schema}")
        cfg["control"] = dict(ctl)


def _check_dynamic_sampling(cfg: dict[str, Any], mech: str, where: str) -> None:
    """A `dynamic_sampling:` block (policies/dynamic_sampling.py): its parameters with defaults filled; it draws
    its rounds from the policy's prompt order or curriculum, so not beside a mixer (whose domain counts fix each
    batch) nor with mechanism none (stock GRPO: write mechanism curriculum with curriculum {name: uniform})."""
    if "dynamic_sampling" not in cfg:
        return
    from policies.dynamic_sampling import check_dynamic_sampling

    if mech in ("none", "mix"):
        raise PolicyConfigError(f"{where}: dynamic_sampling: not with mechanism {mech}; use it with select, reweight "
                                "or curriculum (for plain GRPO + dynamic sampling: mechanism: curriculum, "
                                "curriculum: {name: uniform})")
    cfg["dynamic_sampling"] = check_dynamic_sampling(cfg["dynamic_sampling"], where)


def _domains(cfg: dict[str, Any], domains: Sequence[str] | None, mech: str, ap: dict[str, Any],
             where: str) -> list[str]:
    """The domain list (the argument over the YAML's); a mixer needs one, without duplicates, with K * floor <= 1."""
    doms = list(domains) if domains else list(cfg.get("domains") or [])
    if mech == "mix":
        if not doms:
            raise PolicyConfigError(f"{where}: domains: a mixer needs the domain list (YAML `domains:` or "
                                    "load_policy(domains=...))")
        if len(set(doms)) != len(doms):
            raise PolicyConfigError(f"{where}: domains: duplicates in {doms}")
        floor = ap.get("floor", 0.0)
        if len(doms) * floor > 1.0 + 1e-12:
            raise PolicyConfigError(f"{where}: actuator.params.floor: K * floor = {len(doms)} * {floor} > 1; lower the "
                                    "floor")
    return doms


def _check_recipe(aname: str | None, ap: dict[str, Any], rollout_n: int | None, where: str) -> None:
    """Cross-checks of actuator parameters with each other and with the rollout group size."""
    if rollout_n is not None:
        if aname == "gfpo" and ap["k"] >= rollout_n:
            raise PolicyConfigError(
                f"{where}: actuator.params.k: k = {ap['k']} >= rollout.n = {rollout_n} keeps every rollout (plain "
                "GRPO); "
                f"use k < {rollout_n}")
    if aname in ("threshold_band",) and ap["low"] > ap["high"]:
        raise PolicyConfigError(f"{where}: actuator.params.low: {ap['low']} > high {ap['high']}")
    if aname == "difficulty_band" and ap["low_q"] > ap["high_q"]:
        raise PolicyConfigError(f"{where}: actuator.params.low_q: {ap['low_q']} > high_q {ap['high_q']}")


def load_policy(
    source: str | Path | Mapping[str, Any],
    *,
    seed: int = 0,
    domains: Sequence[str] | None = None,
    rollout_n: int | None = None,
) -> DataPolicy:
    """Validate a policy YAML (path) or mapping and build the `DataPolicy`.

    Strict: unknown keys, unknown scorer/actuator names, unknown or out-of-range parameters, a scorer whose
    granularity the actuator cannot take, and recipe conflicts (gfpo k >= rollout_n, K * floor > 1) raise
    `PolicyConfigError` naming the file/policy and the field."""
    try:
        return _load_policy(source, seed=seed, domains=domains, rollout_n=rollout_n)
    except PolicyConfigError as exc:
        origin = str(source) if isinstance(source, (str, Path)) else "<mapping>"
        if origin != "<mapping>" and origin not in str(exc):  # registry errors name the policy, not its file
            raise PolicyConfigError(f"{origin}: {exc}") from exc
        raise


def _load_policy(
    source: str | Path | Mapping[str, Any],
    *,
    seed: int,
    domains: Sequence[str] | None,
    rollout_n: int | None,
) -> DataPolicy:
    """`load_policy` without the file prefix on registry errors: read, check each part in order, build."""
    cfg, origin = _read(source)
    policy = _policy_name(cfg, origin)
    where = f"{origin}: policy {policy!r}"
    unknown = sorted(set(cfg) - TOP_KEYS)
    if unknown:
        raise PolicyConfigError(f"{where}: unknown key(s) {unknown}; allowed: {sorted(TOP_KEYS)}")
    import_plugins(cfg, where)
    mech = cfg.get("mechanism")
    if mech not in MECHANISMS:
        raise PolicyConfigError(f"{where}: mechanism: got {mech!r}; allowed: {list(MECHANISMS)}")
    sname, sparams = _block(cfg, "scorer", policy)
    aname, aparams = _block(cfg, "actuator", policy)
    cname, cparams = _block(cfg, "curriculum", policy)
    _check_curriculum(cname, cparams, mech, aname, where)
    s_entry, a_entry = _entries(mech, sname, aname, policy, where)
    sp = validate_params(s_entry, sparams, policy) if s_entry else {}
    ap = validate_params(a_entry, aparams, policy) if a_entry else {}
    _check_options(cfg, mech, where)
    _check_dynamic_sampling(cfg, mech, where)
    doms = _domains(cfg, domains, mech, ap, where)
    _check_recipe(aname, ap, rollout_n, where)
    _check_search_space(cfg.get("search_space"), policy, {"scorer": s_entry, "actuator": a_entry})
    if s_entry:
        cfg["scorer"] = {"name": sname, "params": sp}
    if a_entry:
        cfg["actuator"] = {"name": aname, "params": ap}
    if cname is not None:
        cfg["curriculum"] = {"name": cname, "params": cparams}
    return DataPolicy(cfg, seed=seed, domains=doms, rollout_n=rollout_n, scorer_entry=s_entry, scorer_params=sp,
                      actuator_entry=a_entry, actuator_params=ap)
