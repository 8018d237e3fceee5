"""Grid expansion: a `CampaignSpec` becomes the list of `RunSpec`s, each with its `run_key`.

`run_key` is a short sha256 of the canonical JSON of everything that changes what is trained
(model, resolved recipe, policy with its params, seed, corpus identity, steps, regime), so the
same cell in two campaigns, or after an edit to an unrelated key, keeps its key, while any
change to what is trained gives a new one (STUDY L19: resolved config hashes per run).
"""

from __future__ import annotations

import copy
import json
from collections.abc import Mapping
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from types import SimpleNamespace
from typing import TYPE_CHECKING, Any

from evaluation.settings import EvaluationOptions
from policies import mechanism_of
from training.config import ModelConfig, RecipeConfig
from wtcommon.config_fields import ConfigFieldError, MappingConfig
from wtcommon.files import load_yaml_mapping
from wtcommon.hashing import canonical_json, digest

if TYPE_CHECKING:
    from orchestrator.engine.spec import CampaignSpec

# orchestrator.engine.spec (pydantic, its models built at import: most of a stage process's start-up) and
# training.corpus are imported where a campaign is expanded, not here: a stage process reads its RunSpec from
# JSON and needs neither (orchestrator.engine.start_latency; tests/test_stage_imports.py keeps it so)


@dataclass(frozen=True)
class PolicyRef:
    """A run's policy: its name, its YAML's content (`cfg`) and its mechanism, resolved once by `expand`.

    Stored in a run spec as the three keys `policy` (the name), `mechanism` and `policy_cfg` (run keys hash
    that JSON, so its shape never changes)."""

    name: str
    mechanism: str
    cfg: dict[str, Any] = field(default_factory=dict)

    @property
    def config(self) -> dict[str, Any]:
        """The mapping `policies.load_policy` takes and run keys hash: the YAML with its name first (the YAML's
        own `name`, when it has one, wins, as it always did)."""
        return {"name": self.name, **self.cfg}

    def with_cfg(self, cfg: dict[str, Any]) -> PolicyRef:
        """The same policy with another configuration (a tuning trial's parameters)."""
        return replace(self, cfg=cfg)


# where RunSpec.to_dict puts the policy's three stored keys (the JSON run keys hash and ledgers hold)
_POLICY_KEYS = ("policy", "mechanism", "policy_cfg")


@dataclass(frozen=True)
class RunSpec:
    """One grid cell: everything a stage needs to train, evaluate and record one run.

    `model_cfg`, `recipe_cfg` and `evaluation` are typed (`ModelConfig`, `RecipeConfig`, `EvaluationOptions`);
    each keeps the mapping it was built from, which is what `to_dict` stores and run keys hash. A mapping given
    for one of them (`from_dict`, `replace(run, evaluation={...})`) is typed on construction."""

    run_key: str
    run_id: str  # <campaign>/<model>/<policy>[@<regime>]/s<seed>
    campaign: str  # top-level campaign (ledger)
    sub_campaign: str
    group: str  # record `campaign` column
    model: str
    policy: PolicyRef
    reference: str  # campaign-local reference policy for paired comparison
    seed: int
    steps: int
    save_freq: int
    regime: str
    recipe_name: str
    backend: str
    suite: str
    gpus: int
    est_hours: float
    model_cfg: ModelConfig = field(default_factory=ModelConfig)
    recipe_cfg: RecipeConfig = field(default_factory=RecipeConfig)
    data: dict[str, Any] = field(default_factory=dict)
    evaluation: EvaluationOptions = field(default_factory=EvaluationOptions)
    # the campaign's `budget.rollout_tokens`: train until this many rollout tokens are spent (None: `steps` steps).
    # Stored only when set, so specs without a budget keep their stored JSON and config hash byte for byte.
    rollout_token_budget: int | None = None

    def __post_init__(self) -> None:
        where = f"run {self.run_id}"
        for name, typ in (("model_cfg", ModelConfig), ("recipe_cfg", RecipeConfig), ("evaluation", EvaluationOptions)):
            val = getattr(self, name)
            if not isinstance(val, typ):
                object.__setattr__(self, name, typ.of(val, f"{where}: {name}"))

    @property
    def nnodes(self) -> int:
        """Nodes one training run spans (the model's `nnodes`, default 1)."""
        return self.model_cfg.nnodes

    @property
    def gpus_per_node(self) -> int:
        """GPUs the run holds on each of its nodes: `gpus` (the run's total) over `nnodes`."""
        return self.gpus // self.nnodes

    @property
    def eval_key(self) -> str:
        """The evaluation settings this run is scored with (`evaluation.settings.evaluation_key`): not part of
        `run_key` (a changed gate re-evaluates, it does not retrain)."""
        from evaluation.settings import evaluation_key

        return evaluation_key(self.suite, self.evaluation)

    @property
    def config_hash(self) -> str:
        """Hash of the full resolved config (incl. evaluation options), recorded per Record."""
        return digest(self.to_dict())

    def to_dict(self) -> dict[str, Any]:
        """The stored form: every field, the policy as its three keys in their old places (`policy` the name,
        then `mechanism`; `policy_cfg` after `recipe_cfg`)."""
        out: dict[str, Any] = {}
        for f in fields(self):
            k, v = f.name, getattr(self, f.name)
            if k == "rollout_token_budget" and v is None:
                continue
            if k == "policy":
                out.update(policy=v.name, mechanism=v.mechanism)
                cfg = copy.deepcopy(v.cfg)
            else:
                out[k] = v.to_dict() if isinstance(v, MappingConfig) else copy.deepcopy(v)
            if k == "recipe_cfg":
                out["policy_cfg"] = cfg
        return out

    def to_json(self) -> str:
        return canonical_json(self.to_dict())

    def flat(self) -> SimpleNamespace:
        """The stored form as attributes (`policy` the name): what `analysis/` reads of a planned run, since it
        cannot import this type (analysis.power.plan_power, analysis.sequential.plan.campaign_comparisons)."""
        return SimpleNamespace(**self.to_dict())

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> RunSpec:
        rest = {k: v for k, v in d.items() if k not in _POLICY_KEYS}
        return cls(policy=PolicyRef(d["policy"], d["mechanism"], dict(d.get("policy_cfg") or {})), **rest)

    @classmethod
    def from_json(cls, text: str) -> RunSpec:
        """The spec `to_json` wrote (a ledger row's `spec_json`, a run dir's `spec.json`)."""
        return cls.from_dict(json.loads(text))

    def ledger_row(self) -> dict[str, Any]:
        """The row `Ledger.upsert_campaign` stores for this run (its key, id, GPUs and spec JSON)."""
        return {"run_key": self.run_key, "run_id": self.run_id, "gpus": self.gpus, "spec_json": self.to_json()}


class _Resolver:
    """Loads model/recipe/policy YAMLs by name from the config root, once each."""

    def __init__(self, spec: CampaignSpec):
        self.spec = spec
        self.root = Path(spec.config_root)
        self._cache: dict[tuple[str, str], dict[str, Any]] = {}

    def _load(self, group: str, name: str, key: str) -> dict[str, Any]:
        from orchestrator.engine.spec import SpecError, check_name, shipped_config_root

        ck = (group, name)
        if ck not in self._cache:
            try:
                check_name(name, group)  # names become paths: never outside the config tree
            except ValueError as exc:
                raise SpecError(f"{self.spec.file_for(key)}: key '{key}': {exc}") from None
            path = self.root / group / f"{name}.yaml"
            shipped = shipped_config_root() / group / f"{name}.yaml"
            if path.exists():
                self._cache[ck] = load_yaml_mapping(path, what=f"{group} file", error=SpecError)
            elif shipped.exists():  # a user's campaign outside the repo reuses the shipped models/recipes/policies
                self._cache[ck] = load_yaml_mapping(shipped, what=f"{group} file", error=SpecError)
            elif group == "model" and name in self.spec.model_defs:
                self._cache[ck] = dict(self.spec.model_defs[name])
            else:
                folder = self.root / group
                avail = sorted(p.stem for p in folder.glob("*.yaml")) if folder.is_dir() else []
                extra = f" or model_defs ({sorted(self.spec.model_defs)})" if group == "model" else ""
                raise SpecError(
                    f"{self.spec.file_for(key)}: key '{key}': {group} '{name}' not found at {path}; "
                    f"use one of {avail}{extra}"
                )
        return self._cache[ck]

    def model(self, name: str, key: str) -> ModelConfig:
        return _typed(ModelConfig, self._load("model", name, key), self.model_file(name))

    def model_file(self, name: str) -> str:
        """Where a model's definition came from (for messages)."""
        from orchestrator.engine.spec import shipped_config_root

        for path in (self.root / "model" / f"{name}.yaml", shipped_config_root() / "model" / f"{name}.yaml"):
            if path.exists():
                return str(path)
        return f"{self.spec.source}: model_defs.{name}"

    def recipe_file(self, name: str) -> str:
        """Where a recipe came from (for messages)."""
        from orchestrator.engine.spec import shipped_config_root

        for path in (self.root / "recipe" / f"{name}.yaml", shipped_config_root() / "recipe" / f"{name}.yaml"):
            if path.exists():
                return str(path)
        return str(self.root / "recipe" / f"{name}.yaml")

    def recipe(self, name: str, key: str) -> RecipeConfig:
        return _typed(RecipeConfig, self._load("recipe", name, key), self.recipe_file(name))

    def policy(self, entry: Any, key: str) -> tuple[str, tuple[dict[str, Any], str]]:
        """(name, (config, mechanism)) of a `policies:` entry: a name, a YAML path or an inline variant."""
        from orchestrator.engine.policy_resolve import resolve_policy

        name, cfg, mech = resolve_policy(entry, self.spec, key)
        return name, (cfg, mech)


def _typed(typ: Any, raw: dict[str, Any], where: str) -> Any:
    """`typ.from_mapping(raw)`, a bad field reported as a `SpecError` naming the file."""
    from orchestrator.engine.spec import SpecError

    try:
        return typ.from_mapping(raw, where)
    except ConfigFieldError as exc:
        raise SpecError(str(exc)) from None


def run_gpus(spec: CampaignSpec, model: str, mcfg: ModelConfig | Mapping[str, Any], where: str) -> int:
    """The GPUs one run of `model` holds in total: `gpus_per_node × nnodes` (the model's one meaning of its
    resources).

    The model file declares `gpus_per_node` and `nnodes`; `compute.models.<m>.gpus` (the plan's total per run)
    must agree with it when both are given; a model given neither takes `compute.gpus_per_run`. A model file
    with a bare `gpus` key is refused: the paper's two 14B files used it once per node and once in total."""
    from orchestrator.engine.spec import SpecError

    raw = mcfg.raw if isinstance(mcfg, ModelConfig) else mcfg
    if "gpus" in raw:  # a refused key: its presence is the error
        raise SpecError(f"{where}: key 'gpus': ambiguous (GPUs per node or in total?); write `gpus_per_node: N` "
                        "(GPUs on each node) and `nnodes: M` (nodes per run) instead")
    typed = mcfg if isinstance(mcfg, ModelConfig) else _typed(ModelConfig, dict(mcfg), where)
    nnodes, per_node = typed.nnodes, typed.gpus_per_node
    declared = spec.compute.models.get(model)
    if per_node is None:
        total = declared.gpus if declared else spec.compute.gpus_per_run
        if total % nnodes:
            raise SpecError(f"{spec.source}: key 'compute.models.{model}.gpus': {total} GPUs do not split over "
                            f"nnodes: {nnodes} ({where}); give a multiple of {nnodes}")
        return int(total)
    total = per_node * nnodes
    if declared is not None and declared.gpus != total:
        raise SpecError(f"{spec.source}: key 'compute.models.{model}.gpus': {declared.gpus}, but {where} declares "
                        f"gpus_per_node: {per_node} × nnodes: {nnodes} = {total}; make them agree (the run's total "
                        "is gpus_per_node × nnodes)")
    return int(total)


def policy_mechanism(policy: str, config_root: Path | None = None) -> str:
    """A policy's mechanism from its YAML: `policy` as a path to a YAML file, else
    `<config_root>/policy/<policy>.yaml`, else the shipped tree's; 'unknown' when no YAML names it.

    The policy's YAML is the one source of its mechanism (records, the default reference); the study's
    table `analysis.schema.POLICY_MECHANISM` is only for importing records that carry no mechanism."""
    from orchestrator.engine.spec import SpecError, check_name, shipped_config_root

    p = Path(policy)
    if p.suffix in (".yaml", ".yml"):
        candidates = [p]
    else:
        try:
            check_name(policy, "policy")
        except ValueError:
            return "unknown"
        roots = [Path(config_root)] if config_root is not None else []
        candidates = [r / "policy" / f"{policy}.yaml" for r in [*roots, shipped_config_root()]]
    for c in candidates:
        if c.is_file():
            mech = mechanism_of(load_yaml_mapping(c, what="policy file", error=SpecError), p.stem)
            return "unknown" if mech is None else mech.value
    return "unknown"


def expand(spec: CampaignSpec, *, data_root: Path | None = None) -> list[RunSpec]:
    """All RunSpecs of a campaign, in seed-major order (seed, sub-campaign, group, model, policy).

    Raises `SpecError` for unknown names, duplicate cells, or (without command-line overrides,
    which may legitimately change the grid) a run count that differs from a declared
    `expected_runs`; with overrides the mismatch is reported by `accounting`.
    """
    from training.corpus import CorpusError, corpus_identity
    from orchestrator.engine.spec import SpecError

    res = _Resolver(spec)
    evaluation = spec.evaluation_options
    runs: list[RunSpec] = []
    seen: dict[str, str] = {}
    for sub_name, sub in spec.resolved_sub_campaigns().items():
        n_sub = 0
        for gi, g in enumerate(sub.groups):
            gkey = f"sub_campaigns.{sub_name}.groups.{gi}" if spec.sub_campaigns else ""
            seeds = g.seeds if g.seeds is not None else spec.seeds
            steps = g.steps or spec.steps
            save_freq = g.save_freq or spec.save_freq or steps
            pols = dict(res.policy(p, f"{gkey}.policies" if gkey else "policies") for p in g.policies)
            for model in g.models:
                mcfg = res.model(model, f"{gkey}.models" if gkey else "models")
                mcomp = spec.compute.for_model(model)
                gpus = run_gpus(spec, model, mcfg, res.model_file(model))
                for pol, (pcfg, mech) in pols.items():
                    recipe = g.recipe_by_mechanism.get(mech) or g.recipe_by_model.get(model) or g.recipe or spec.recipe
                    if not recipe:
                        raise SpecError(f"{spec.file_for(gkey)}: key '{gkey or 'recipe'}.recipe': no recipe for "
                                        f"{model}/{pol}; set recipe")
                    rcfg = res.recipe(recipe, f"{gkey}.recipe" if gkey else "recipe")
                    ref = pol if mech == "none" else spec.baselines.get(mech, "")
                    for seed in seeds:
                        try:
                            data = corpus_identity(spec.data, g.regime, data_root)
                        except CorpusError as exc:
                            raise SpecError(f"{spec.file_for(gkey)}: key '{gkey}.regime': {exc}") from None
                        pref = PolicyRef(pol, mech, pcfg)
                        key_obj = {  # the mappings as the YAML gave them: typing them changed no key
                            "model": mcfg.raw, "recipe": rcfg.raw, "policy": pref.config, "seed": seed,
                            "data": data, "steps": steps, "save_freq": save_freq, "regime": g.regime,
                        }
                        if spec.budget is not None:  # unset: the key of every run without a budget is unchanged
                            key_obj["rollout_token_budget"] = spec.budget.rollout_tokens
                        run_key = digest(key_obj)
                        run_id = f"{g.campaign}/{model}/{pol}{'@' + g.regime if g.regime else ''}/s{seed}"
                        where = f"{sub_name}/{g.campaign}"
                        if run_key in seen:
                            raise SpecError(
                                f"{spec.file_for(gkey)}: key '{gkey or 'policies'}': run {run_id} is listed twice "
                                f"({seen[run_key]} and {where}); remove one"
                            )
                        seen[run_key] = where
                        runs.append(RunSpec(
                            run_key=run_key, run_id=run_id, campaign=spec.name, sub_campaign=sub_name,
                            group=g.campaign, model=model, policy=pref, reference=ref,
                            seed=seed, steps=steps, save_freq=save_freq, regime=g.regime, recipe_name=recipe,
                            backend=spec.backend, suite=spec.suite, gpus=gpus,
                            est_hours=mcomp.hours * steps / spec.compute.hours_at_steps,
                            model_cfg=mcfg, recipe_cfg=rcfg, data=data,
                            evaluation=evaluation,
                            rollout_token_budget=spec.budget.rollout_tokens if spec.budget is not None else None,
                        ))
                        n_sub += 1
        if sub.expected_runs is not None and n_sub != sub.expected_runs and not spec.overrides:
            raise SpecError(
                f"{spec.file_for('sub_campaigns.' + sub_name)}: key 'sub_campaigns.{sub_name}.expected_runs': declares "
                f"{sub.expected_runs} "
                f"runs but the groups expand to {n_sub}; fix the groups or the count"
            )
    if spec.expected_runs is not None and len(runs) != spec.expected_runs and not spec.overrides:
        raise SpecError(
            f"{spec.source}: key 'expected_runs': declares {spec.expected_runs} runs but the campaign "
            f"expands to {len(runs)}; fix the sub-campaigns or the count"
        )
    runs.sort(key=lambda r: r.seed)  # stable: seed-major, spec order within a seed
    return runs
