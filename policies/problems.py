"""Every problem of a policy YAML at once: what `campaign policies validate` lists.

Why: `load_policy` stops at the first problem (it must: a half-valid policy never runs), so fixing a file with
three mistakes took three rounds. Here the independent parts — top-level keys, mechanism, the scorer and actuator
blocks with each parameter, the options, the control, the search space — are checked one by one and every
problem is collected; the cross-field checks (granularity, domains, rollout.n) of `load_policy` run once the
parts are clean.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from functools import partial
from pathlib import Path
from typing import Any

from policies import controls
from policies.errors import PolicyConfigError
from policies.loader import TOP_KEYS, _block, _check_search_space, _read, load_policy
from policies.mechanisms import MECHANISMS
from policies.plugins import import_plugins
from policies.registry import Entry, lookup

OPTIONS: dict[str, tuple[Any, tuple | type]] = {  # option: (default, allowed values or type), as load_policy
    "warmup_step": (0, int), "loss_norm": ("all_tokens", ("all_tokens", "kept_tokens")),
    "recompute_advantages": (False, bool), "norm_adv_by_std": (True, bool),
}


def _collect(problems: list[str], check: Callable[[], Any]) -> Any:
    """Run one check; a PolicyConfigError becomes a listed problem (and None)."""
    try:
        return check()
    except PolicyConfigError as exc:
        problems.append(str(exc))
        return None


def _params(problems: list[str], entry: Entry, given: Mapping[str, Any], policy: str, where: str) -> None:
    unknown = sorted(set(given) - set(entry.params))
    if unknown:
        problems.append(f"{where}: {entry.kind}.params: unknown parameter(s) {unknown} for {entry.kind} "
                        f"{entry.name!r}; allowed: {sorted(entry.params)}")
    for pname, value in given.items():
        if pname in entry.params:
            _collect(problems, partial(entry.params[pname].check, value,
                                       f"{where}: {entry.kind}.params.{pname} ({entry.kind} {entry.name!r})"))


def _options(problems: list[str], cfg: Mapping[str, Any], where: str) -> None:
    for key, (default, ok) in OPTIONS.items():
        v = cfg.get(key, default)
        if isinstance(ok, tuple):
            if v not in ok:
                problems.append(f"{where}: {key}: got {v!r}; allowed: {list(ok)}")
        elif not isinstance(v, ok) or (ok is int and isinstance(v, bool)):
            problems.append(f"{where}: {key}: got {v!r}; expected {ok.__name__}")
        elif key == "warmup_step" and isinstance(v, int) and v < 0:
            problems.append(f"{where}: warmup_step: got {v}; must be >= 0")
    ctl = cfg.get("control")
    if ctl is not None:
        if not isinstance(ctl, Mapping) or ctl.get("name") not in controls.CONTROLS:
            problems.append(f"{where}: control.name: got {ctl!r}; allowed: {sorted(controls.CONTROLS)}")
        else:
            schema = controls.CONTROLS[ctl["name"]]
            for k, v in ctl.items():
                if k != "name" and (k not in schema or v not in schema[k]):
                    problems.append(f"{where}: control.{k}: got {v!r}; allowed keys/values: {schema}")


def policy_problems(source: str | Path, *, rollout_n: int | None = None) -> list[str]:
    """Every problem of the policy YAML `source` (empty: it loads). Each names the file, the policy and the field."""
    problems: list[str] = []
    read = _collect(problems, lambda: _read(source))
    if read is None:
        return problems
    cfg, origin = read
    raw = cfg.get("name")
    policy = raw if isinstance(raw, str) and raw else Path(origin).stem
    where = f"{origin}: policy {policy!r}"
    if raw is not None and not isinstance(raw, str):
        problems.append(f"{origin}: name: got {raw!r}; give the policy's name as text (e.g. name: gfpo)")
    unknown = sorted(set(cfg) - TOP_KEYS)
    if unknown:
        problems.append(f"{where}: unknown key(s) {unknown}; allowed: {sorted(TOP_KEYS)}")
    before = len(problems)
    _collect(problems, lambda: import_plugins(cfg, where))
    if len(problems) > before:
        return problems  # the scorer/actuator names below may come from the plugin: they cannot be judged
    mech = cfg.get("mechanism")
    if mech not in MECHANISMS:
        problems.append(f"{where}: mechanism: got {mech!r}; allowed: {list(MECHANISMS)}")
    entries: dict[str, Entry | None] = {}
    for part in ("scorer", "actuator"):
        blk = _collect(problems, partial(_block, cfg, part, policy))
        if blk is None or blk[0] is None:
            entries[part] = None
            continue
        name, params = blk
        entry = _collect(problems, partial(lookup, part, name, policy))
        entries[part] = entry
        if entry is not None:
            _params(problems, entry, params, policy, where)
    _options(problems, cfg, where)
    _collect(problems, lambda: _check_search_space(cfg.get("search_space"), policy, entries))
    problems = [p if str(origin) in p else f"{origin}: {p}" for p in problems]
    if not problems:  # the parts are clean: the cross-field checks (granularity, domains, rollout.n)
        _collect(problems, lambda: load_policy(source, rollout_n=rollout_n))
    return list(dict.fromkeys(problems))
