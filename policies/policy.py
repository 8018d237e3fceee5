"""`DataPolicy`: mechanism + scorer + actuator + options, built by name from a YAML block.

YAML (one file per configuration in `campaigns/policy/`, a plain mapping so it is also a Hydra
config-group member):

    name: gfpo
    mechanism: select                # none | select | reweight | mix
    scorer:   {name: reward_difficulty, params: {}}      # omitted for none and mix
    actuator: {name: gfpo, params: {k: 3}}                # omitted for none
    loss_norm: all_tokens            # select only; all_tokens (study, P6) | kept_tokens
    recompute_advantages: false      # select only; GRPO advantages on the kept subset (P5)
    norm_adv_by_std: true            # used by recompute_advantages, as verl's GRPO
    warmup_step: 0                   # inactive while step < warmup_step
    control: null                    # {name: matched_random, structure: auto}
                                     # | {name: matched_update_tokens, mode: scale}
    domains: [math, logic, science]  # mix only; or passed to load_policy
    search_space: {actuator.k: {low: 1, high: 4}}       # optional, for tuning
"""

from __future__ import annotations

import copy
import importlib
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from collections.abc import Mapping, Sequence

import torch
from torch import Tensor

from policies import actuators as _actuators  # noqa: F401  (registers actuators)
from policies import controls, scorers as _scorers  # importing registers the scorers
from policies import signals
from policies.actuators.base import Selector
from policies.actuators.mix import DomainStats, Mixer
from policies.batch import StepBatch
from policies.errors import PolicyConfigError
from policies.registry import Entry, lookup, validate_params
from wtcommon.files import load_yaml_mapping

MECHANISMS = ("none", "select", "reweight", "mix")
TOP_KEYS = {
    "name", "description", "mechanism", "scorer", "actuator", "loss_norm", "recompute_advantages",
    "norm_adv_by_std", "warmup_step", "control", "domains", "search_space", "plugins",
}


def _import_plugins(cfg: Mapping[str, Any], where: str) -> None:
    """Import the modules a policy YAML names under `plugins:` so their @register_* classes exist.

    This is how a researcher's own scorer/actuator reaches every process that trains (a Ray job, a verl
    worker): the YAML carries the import, not a hand-edited entry point."""
    mods = cfg.get("plugins", [])
    if isinstance(mods, str):
        mods = [mods]
    if not isinstance(mods, list) or not all(isinstance(m, str) and m for m in mods):
        raise PolicyConfigError(f"{where}: plugins: expected a list of importable module names, got {mods!r}")
    for mod in mods:
        try:
            importlib.import_module(mod)
        except Exception as e:  # an import failure must be loud, never a silent fallback
            raise PolicyConfigError(
                f"{where}: plugins: cannot import {mod!r} ({type(e).__name__}: {e}); "
                "make it importable (installed package or on PYTHONPATH)") from e


@dataclass
class PolicyResult:
    """What one step's policy does. `weights` (B, L) float32 multiply the per-token policy-gradient loss
    (None = leave the loss alone); `advantages` (B, L) replace the host's when the policy recomputes them."""

    weights: Tensor | None
    advantages: Tensor | None
    diagnostics: dict[str, float] = field(default_factory=dict)


def _weight_stats(w_seq: Tensor | None, w_tok: Tensor | None, batch: StepBatch) -> dict[str, float]:
    """Weight mean/std/max over valid tokens, from per-sequence weights in O(B) when possible."""
    length = signals.response_length(batch)
    n_tok = float(length.sum())
    if w_tok is not None:
        # token weights are zero outside the mask and >= 0: reduce without boolean indexing
        if n_tok > 0:
            mean = float(w_tok.sum(-1).double().sum()) / n_tok
            sq = float(torch.linalg.vector_norm(w_tok).double() ** 2) / n_tok
            std, mx = math.sqrt(max(sq - mean**2, 0.0)), float(w_tok.max())
        else:
            mean = std = mx = math.nan
        update = float(torch.count_nonzero(w_tok))
    else:
        w = w_seq if w_seq is not None else batch.valid.float()
        has = length > 0
        if n_tok > 0:
            mean = float((w * length).sum() / n_tok)
            var = float((w * w * length).sum() / n_tok) - mean**2
            std, mx = math.sqrt(max(var, 0.0)), float(w[has].max())
        else:
            mean = std = mx = math.nan
        update = float((length * (w > 0).float()).sum())
    return {"update_tokens": update, "valid_tokens": n_tok, "weight_mean": mean, "weight_std": std, "weight_max": mx}


def grpo_advantages(batch: StepBatch, keep: Tensor, by_std: bool = True, eps: float = 1e-6) -> Tensor:
    """(B, L) GRPO outcome advantages recomputed over the kept members of each group only, with verl's
    conventions (`compute_grpo_outcome_advantage`): unbiased std, a group of one gets mean 0 / std 1,
    (r - mean) / (std + eps); dropped and padding rows get 0."""
    g = batch.group
    n_g = batch.n_groups
    k = keep & batch.valid
    r = batch.rewards.double()
    cnt = torch.bincount(g[k], minlength=n_g).double()
    s1 = torch.zeros(n_g, dtype=torch.float64, device=g.device).index_add_(0, g[k], r[k])
    s2 = torch.zeros(n_g, dtype=torch.float64, device=g.device).index_add_(0, g[k], r[k] ** 2)
    mean = s1 / cnt.clamp_min(1)
    var = (s2 - cnt * mean**2) / (cnt - 1).clamp_min(1)
    std = var.clamp_min(0).sqrt()
    single = cnt <= 1
    mean = torch.where(single, torch.zeros_like(mean), mean)
    std = torch.where(single, torch.ones_like(std), std)
    a = r - mean[g]
    if by_std:
        a = a / (std[g] + eps)
    a = torch.where(k, a, torch.zeros_like(a)).float()
    return a[:, None] * batch.mask


class DataPolicy:
    """A validated, ready-to-apply data policy (see the module docstring for the YAML)."""

    def __init__(self, config: dict[str, Any], *, seed: int, domains: Sequence[str] | None, rollout_n: int | None,
                 scorer_entry: Entry | None, scorer_params: dict, actuator_entry: Entry | None, actuator_params: dict):
        self.config = config
        self.name: str = config["name"]
        self.mechanism: str = config["mechanism"]
        self.seed = seed
        self.domains = list(domains) if domains else []
        self.rollout_n = rollout_n
        self.warmup_step: int = config.get("warmup_step", 0)
        self.loss_norm: str = config.get("loss_norm", "all_tokens")
        self.recompute_advantages: bool = config.get("recompute_advantages", False)
        self.norm_adv_by_std: bool = config.get("norm_adv_by_std", True)
        self.control: dict | None = config.get("control")
        self.scorer = scorer_entry.cls(**scorer_params) if scorer_entry else None
        self.actuator = actuator_entry.cls(**actuator_params) if actuator_entry else None
        self.stats: DomainStats | None = None
        self._props: Tensor | None = None
        if isinstance(self.actuator, Mixer):
            self.stats = DomainStats(len(self.domains), self.actuator.params["window"],
                                     self.actuator.params["window_unit"],
                                     needs_abs_adv=self.actuator.params.get("signal") == "mean_abs_advantage")
            self._props = torch.full((len(self.domains),), 1.0 / len(self.domains))

    def __repr__(self) -> str:
        return f"DataPolicy(name={self.name!r}, mechanism={self.mechanism!r})"

    @property
    def reads(self) -> tuple[str, ...]:
        """Batch fields the policy needs (the verl hook fetches only these)."""
        base = ("response_mask", "rewards")
        extra = self.scorer.reads if self.scorer else ()
        if self.mechanism == "mix":
            extra = ("advantages", "domain")
        return tuple(dict.fromkeys(base + tuple(extra) + (("group",) if self.mechanism == "select" else ())))

    @property
    def passes(self) -> float:
        """(B, L) memory passes one step needs, declared for the benchmark. One pass = one read + one write
        of a (B, L) float32 tensor into existing memory. A fresh (B, L) output (the weights, recomputed
        advantages) counts one more pass: the OS zeroes new pages before we write them (measured: a fresh
        `mask * w` costs two preallocated passes)."""
        if self.mechanism == "none":
            return 0.5  # the response-length reduction for diagnostics (one read)
        if self.mechanism == "mix":
            return 0.5 + (3.0 if self.stats is not None and self.stats.needs_abs_adv else 0.0)
        p = 0.5  # response length (one read of the mask)
        token_level = self.scorer is not None and self.scorer.granularity == "token"
        # sequence weights: write mask * w into a fresh tensor (1 + 1 fresh); token weights: the scorer's
        # fresh exp output is reused in place (+1 fresh) and the stats are four reductions (sum, norm, max,
        # count: 2)
        p += 3.0 if token_level else 2.0
        p += self.scorer.passes if self.scorer else 0
        p += self.actuator.passes if self.actuator else 0
        uses_abs_adv = isinstance(self.scorer, _scorers.AdvantageMagnitude)
        informative = self.actuator is not None and self.actuator.params.get("normalize") == "informative_tokens"
        if informative and not uses_abs_adv:
            p += 3.0  # mean |advantage| to find the informative rows
        if self.recompute_advantages:
            p += 2.0  # fresh (B, L) advantages: mask * a
        return p

    # ---- selection / reweighting ---------------------------------------------------------------
    def apply(self, batch: StepBatch, step: int) -> PolicyResult:
        """The policy's action on one step's batch (after advantages, before the actor update)."""
        inactive = self.mechanism in ("none", "mix") or step < self.warmup_step
        if inactive:
            diag = _weight_stats(None, None, batch)
            diag.update(kept_frac=1.0, active=0.0)
            if self._props is not None:
                diag.update({f"target_prop_{d}": float(p) for d, p in zip(self.domains, self._props, strict=True)})
            return PolicyResult(None, None, diag)
        # an active select/reweight policy has both (validated by parse_policy)
        assert self.scorer is not None and self.actuator is not None
        scores = self.scorer.score(batch)
        valid = batch.valid
        n_valid = max(int(valid.sum()), 1)
        advantages = None
        w_tok = None
        if isinstance(self.actuator, Selector):
            keep = self.actuator.select(scores, batch)
            selector_keep = keep
            w_seq = keep.float()
            ctl = self.control
            if ctl is not None:
                gen = controls.control_generator(self.seed, step, self.name)
                if ctl["name"] == "matched_random":
                    structure = ctl.get("structure", "auto")
                    if structure == "auto":
                        structure = self.actuator.matched_structure
                    keep = controls.matched_random(keep, batch, structure, gen)
                    w_seq = keep.float()
                else:
                    w_seq = controls.matched_update_tokens(keep, batch, ctl.get("mode", "scale"), gen)
                    keep = w_seq > 0
            if self.loss_norm == "kept_tokens":
                length = signals.response_length(batch)
                kept_tok = float((length * w_seq).sum())
                if kept_tok > 0:
                    w_seq = w_seq * (float(length.sum()) / kept_tok)
            if self.recompute_advantages:
                advantages = grpo_advantages(batch, keep, self.norm_adv_by_std)
            kept_frac = float((keep & valid).sum()) / n_valid
            extra = {"selector_kept_frac": float((selector_keep & valid).sum()) / n_valid}
        else:
            w = self.actuator.weigh(scores, batch)
            if w.dim() == 2:
                w_tok, w_seq = w, None  # already zero outside the mask (Reweighter.raw contract)
            else:
                w_seq = torch.where(valid, w, torch.zeros_like(w))
            kept_frac = 1.0
            extra = {}
        if w_tok is not None:
            weights = w_tok
        else:
            assert w_seq is not None  # every branch above sets one of the two
            weights = batch.mask * w_seq[:, None]
        diag = _weight_stats(w_seq if w_tok is None else None, w_tok, batch)
        diag.update(kept_frac=kept_frac, active=1.0, **extra)
        return PolicyResult(weights.to(torch.float32), advantages, diag)

    # ---- mixing --------------------------------------------------------------------------------
    def observe(self, batch: StepBatch, step: int) -> dict[str, float]:
        """Feed one step's signals to a mixer; recompute proportions on schedule. Returns diagnostics
        (per-domain window reward and the new target proportions)."""
        if self.stats is None:
            return {}
        # stats exist only for a mixer, which starts from uniform proportions (__init__)
        assert self.actuator is not None and self._props is not None
        self.stats.update(batch)
        upd = self.actuator.params["update_step"]
        if step >= self.warmup_step and (step - self.warmup_step) % upd == 0:
            self._props = self.actuator.mix(self.stats)
        m = self.stats.mean("reward")
        out = {f"domain_reward_{d}": float(v) for d, v in zip(self.domains, m, strict=True)}
        out.update({f"target_prop_{d}": float(p) for d, p in zip(self.domains, self._props, strict=True)})
        return out

    def proportions(self, step: int | None = None) -> Tensor:
        """(D,) current target sampling proportions (uniform before the first update; uniform for non-mixers)."""
        if self._props is None:
            d = max(len(self.domains), 1)
            return torch.full((d,), 1.0 / d)
        return self._props.clone()

    def state_dict(self) -> dict:
        """Mixer state as plain lists (JSON-serialisable)."""
        return {"props": None if self._props is None else self._props.tolist(),
                "stats": self.stats.state_dict() if self.stats else None}

    def load_state_dict(self, state: dict) -> None:
        self._props = None if state["props"] is None else torch.as_tensor(state["props"], dtype=torch.float32)
        if self.stats is not None and state.get("stats") is not None:
            self.stats.load_state_dict(state["stats"])


# ---- loading and validation --------------------------------------------------------------------
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
    cfg, origin = _read(source)
    raw_name = cfg.get("name")
    if raw_name is not None and not isinstance(raw_name, str):  # `name: [1, 2]` or `name: 7` is no name
        raise PolicyConfigError(f"{origin}: name: got {raw_name!r}; give the policy's name as text (e.g. name: gfpo)")
    policy = str(raw_name or (Path(origin).stem if origin != "<mapping>" else ""))
    if not policy:
        raise PolicyConfigError(f"{origin}: name: missing (give the policy a name)")
    cfg["name"] = policy
    where = f"{origin}: policy {policy!r}"
    unknown = sorted(set(cfg) - TOP_KEYS)
    if unknown:
        raise PolicyConfigError(f"{where}: unknown key(s) {unknown}; allowed: {sorted(TOP_KEYS)}")
    _import_plugins(cfg, where)
    mech = cfg.get("mechanism")
    if mech not in MECHANISMS:
        raise PolicyConfigError(f"{where}: mechanism: got {mech!r}; allowed: {list(MECHANISMS)}")
    sname, sparams = _block(cfg, "scorer", policy)
    aname, aparams = _block(cfg, "actuator", policy)
    s_entry = a_entry = None
    if mech == "none":
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
    sp = validate_params(s_entry, sparams, policy) if s_entry else {}
    ap = validate_params(a_entry, aparams, policy) if a_entry else {}
    # options
    def opt(key: str, default: Any, ok: tuple | type) -> Any:
        v = cfg.get(key, default)
        if isinstance(ok, tuple):
            if v not in ok:
                raise PolicyConfigError(f"{where}: {key}: got {v!r}; allowed: {list(ok)}")
        elif not isinstance(v, ok) or (ok is int and isinstance(v, bool)):
            raise PolicyConfigError(f"{where}: {key}: got {v!r}; expected {ok.__name__}")
        return v
    cfg["warmup_step"] = opt("warmup_step", 0, int)
    if cfg["warmup_step"] < 0:
        raise PolicyConfigError(f"{where}: warmup_step: got {cfg['warmup_step']}; must be >= 0")
    cfg["loss_norm"] = opt("loss_norm", "all_tokens", ("all_tokens", "kept_tokens"))
    cfg["recompute_advantages"] = opt("recompute_advantages", False, bool)
    cfg["norm_adv_by_std"] = opt("norm_adv_by_std", True, bool)
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
    # domains
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
    # recipe cross-checks
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
    _check_search_space(cfg.get("search_space"), policy, {"scorer": s_entry, "actuator": a_entry})
    if s_entry:
        cfg["scorer"] = {"name": sname, "params": sp}
    if a_entry:
        cfg["actuator"] = {"name": aname, "params": ap}
    return DataPolicy(cfg, seed=seed, domains=doms, rollout_n=rollout_n, scorer_entry=s_entry, scorer_params=sp,
                      actuator_entry=a_entry, actuator_params=ap)
