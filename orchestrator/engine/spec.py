"""Campaign specs: compose `campaigns/` with Hydra, validate into a typed `CampaignSpec`.

A campaign is a Hydra primary config (`campaigns/demo.yaml`, or a directory such as
`campaigns/paper/` whose `campaign.yaml` pulls in one file per sub-campaign through its
defaults list). Composing with the Hydra compose API means every key can be overridden on the
command line (`campaign plan campaigns/paper seeds=[1,2,3]`). Validation is strict (unknown keys
are errors, see STUDY P15) and every error names the file, the key and the fix. The checked field
types the models are built from (safe names, seeds, policy entries, step counts) are in
`orchestrator.engine.spec_fields`.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from analysis.schema import DEFAULT_AA_PAIR, DEFAULT_REFERENCE  # one default each (campaigns and analysis)
from orchestrator.engine.ranges import SEED_LIMIT, check_backoff
from orchestrator.engine.spec_fields import (SAFE_NAME, ModelNames, PolicyName, PolicyNames, RecipeName, Seeds,
                                             StepCount, check_name)
from wtcommon.errors import UserError

if TYPE_CHECKING:
    from evaluation.settings import EvaluationOptions


def shipped_config_root() -> Path:
    """The `campaigns/` tree shipped with Windtunnel (models, recipes, policies, suites, demo campaigns)."""
    from campaigns import config_root

    return config_root()


def shipped_campaigns() -> list[str]:
    """Names of the campaigns shipped in the config tree (`demo`, `paper`, ...)."""
    root = shipped_config_root()
    names = [p.stem for p in root.glob("*.yaml")] + [p.parent.name for p in root.glob("*/campaign.yaml")]
    return sorted(names)


def _shipped_campaign(name: str) -> Path | None:
    root = shipped_config_root()
    for cand in (root / f"{name}.yaml", root / name / "campaign.yaml"):
        if cand.exists():
            return cand
    return None


class SpecError(UserError):
    """A campaign spec is malformed; the message names the file, the key and the fix."""


class _Strict(BaseModel):
    # a NaN or infinite number is never a valid spec value (hours_per_run: inf planned forever)
    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)


HOURS_MAX = 8760.0  # wall hours of one run: at most a year (a larger value is a unit mistake)
ATTEMPTS_MAX = 100


class Assumption(_Strict):
    """A number or choice the campaign rests on, with its basis: `published` (a source states it), `measured`
    (we measured it) or `inferred` (nobody states it; we chose it). `campaign plan` lists them."""

    key: str
    value: Any = None
    basis: Literal["published", "measured", "inferred"] = "inferred"
    note: str = ""


class ModelCompute(_Strict):
    """Resources of one run of a model: GPUs it holds and the wall hours it takes."""

    gpus: int = Field(ge=0, strict=True)
    hours: float = Field(gt=0, le=HOURS_MAX)


class ComputeSpec(_Strict):
    """Cluster shape and per-model costs used for admission and the GPU-hour estimate."""

    # integers are strict (1e9 or "8" is refused, not coerced); hours finite and at most HOURS_MAX
    gpus_per_run: int = Field(default=8, ge=0, strict=True)
    hours_per_run: float = Field(default=7.7, gt=0, le=HOURS_MAX)
    models: dict[str, ModelCompute] = Field(default_factory=dict)
    nodes: int = Field(default=1, ge=1, strict=True)
    gpus_per_node: int = Field(default=8, ge=0, strict=True)
    cpus_per_run: int = Field(default=1, ge=1, strict=True)
    # declared CPUs per node; default: this machine's for a local head
    cpus_per_node: int | None = Field(default=None, ge=1, strict=True)
    eval_gpu_hours_per_checkpoint: float | None = Field(default=None, ge=0, le=HOURS_MAX)  # None: not declared
    hours_at_steps: StepCount = 300  # `hours` are per this many steps; scaled linearly

    def for_model(self, model: str) -> ModelCompute:
        return self.models.get(model, ModelCompute(gpus=self.gpus_per_run, hours=self.hours_per_run))


ROLLOUT_TOKENS_MAX = 10**15  # a larger budget is a unit mistake (the paper's 7B runs spend ~1e9 each)


class BudgetSpec(_Strict):
    """`budget: {rollout_tokens: N}`: every run trains until it has generated N rollout tokens (it stops after the
    step that reaches N, so it overshoots by less than one step), with `steps` as the cap. Policies then compare
    at equal generation compute, not at equal steps (a curriculum that rolls out less would hide its saving).
    Enters each run's key when set (a budgeted run trains a different amount); unset, keys are unchanged."""

    rollout_tokens: int = Field(ge=1, le=ROLLOUT_TOKENS_MAX, strict=True)


class DataSpec(_Strict):
    """Which training corpus the recipes read; regimes derive variants from it (training.corpus)."""

    corpus: Literal["multidomain_3", "synthetic"] = "multidomain_3"
    seed: int = Field(default=42, ge=0, lt=SEED_LIMIT, strict=True)
    root: str | None = None  # where built corpora live; default <workdir>/data


class GroupSpec(_Strict):
    """One block of the grid: models × policies × seeds under one record campaign label."""

    campaign: str  # the record `campaign` column (e.g. main, mixer, crossfamily)
    models: ModelNames = Field(min_length=1)
    policies: PolicyNames = Field(min_length=1)
    seeds: Seeds | None = None
    steps: StepCount | None = None
    save_freq: StepCount | None = None
    regime: str = ""
    recipe: RecipeName | None = None
    recipe_by_model: dict[str, RecipeName] = Field(default_factory=dict)
    recipe_by_mechanism: dict[str, RecipeName] = Field(default_factory=dict)
    note: str = ""

    @field_validator("campaign")
    @classmethod
    def _label_safe(cls, v: str) -> str:
        return check_name(v, "campaign label")


class SubCampaignSpec(_Strict):
    description: str = ""
    expected_runs: int | None = Field(default=None, ge=0, strict=True)
    groups: list[GroupSpec] = Field(min_length=1)
    assumptions: list[Assumption] = Field(default_factory=list)


class RetrySpec(_Strict):
    """Retries of a failed stage: waits grow from backoff_s and are capped at backoff_max_s (>= backoff_s)."""

    max_attempts: int = Field(default=3, ge=1, le=ATTEMPTS_MAX, strict=True)
    backoff_s: float = Field(default=5.0, ge=0)
    backoff_max_s: float = Field(default=300.0, ge=0)

    @model_validator(mode="after")
    def _ordered(self) -> RetrySpec:
        problem = check_backoff(self.backoff_s, self.backoff_max_s)
        if problem:
            raise ValueError(problem)
        return self


class CampaignSpec(_Strict):
    """A validated campaign. Flat campaigns (models/policies at top level) get one sub-campaign."""

    name: str
    suite: str = "db12"
    seeds: Seeds = Field(default_factory=lambda: [1, 2, 3], min_length=1)
    steps: StepCount = 300
    save_freq: StepCount | None = None
    recipe: RecipeName | None = None
    models: ModelNames = Field(default_factory=list)
    policies: PolicyNames = Field(default_factory=list)
    regime: str = ""
    backend: Literal["local", "verl", "noop"] = "verl"  # noop: no model, same job path (tests)
    baselines: dict[str, str] = Field(default_factory=lambda: dict(DEFAULT_REFERENCE))
    aa_pair: tuple[PolicyName, PolicyName] = DEFAULT_AA_PAIR  # (method, reference) of the A/A noise-floor rows
    data: DataSpec = Field(default_factory=DataSpec)
    compute: ComputeSpec = Field(default_factory=ComputeSpec)
    budget: BudgetSpec | None = None  # rollout-token budget per run (BudgetSpec); None: train `steps` steps
    retries: RetrySpec = Field(default_factory=RetrySpec)
    # evaluator options (limit, data_dir, backend) as written: stored and hashed so; `evaluation_options` types them
    evaluation: dict[str, Any] = Field(default_factory=dict)
    # models defined inline, as written (the grid types each as a `training.config.ModelConfig`)
    model_defs: dict[str, dict[str, Any]] = Field(default_factory=dict)
    sub_campaigns: dict[str, SubCampaignSpec] = Field(default_factory=dict)
    expected_runs: int | None = Field(default=None, ge=0, strict=True)
    assumptions: list[Assumption] = Field(default_factory=list)
    # Filled in by the loader, not by users:
    seed_design: dict[str, Any] | None = None  # a `seeds: {design: sequential, ...}` block; seeds = its first batch
    source: str = ""
    config_root: str = ""
    overrides: list[str] = Field(default_factory=list)

    @field_validator("name", "suite")
    @classmethod
    def _name_safe(cls, v: str, info: Any) -> str:
        return check_name(v, "campaign name" if info.field_name == "name" else "suite")

    @field_validator("evaluation")
    @classmethod
    def _evaluation_valid(cls, v: dict[str, Any]) -> dict[str, Any]:
        from evaluation.settings import check_evaluation_options  # imported when used: it loads the graders

        check_evaluation_options(v)
        return v

    @field_validator("baselines")
    @classmethod
    def _baselines_known(cls, v: dict[str, str]) -> dict[str, str]:
        bad = sorted(set(v) - set(DEFAULT_REFERENCE))
        if bad:
            raise ValueError(f"unknown mechanism(s) {bad}; keys are {', '.join(DEFAULT_REFERENCE)}")
        return {**DEFAULT_REFERENCE, **v}

    @field_validator("seed_design")
    @classmethod
    def _seed_design_valid(cls, v: dict[str, Any] | None) -> dict[str, Any] | None:
        if v is not None:
            _sequential(v)
        return v

    @property
    def evaluation_options(self) -> EvaluationOptions:
        """The `evaluation:` block, typed (validated when the spec was built)."""
        from evaluation.settings import EvaluationOptions

        return EvaluationOptions.from_mapping(self.evaluation, f"{self.source}: evaluation")

    def sequential_design(self) -> Any:
        """The `analysis.sequential.design.SequentialDesign` of a sequential `seeds:` block, else None."""
        return _sequential(self.seed_design) if self.seed_design is not None else None

    def seed_pool(self) -> list[int]:
        """Every seed the campaign may use, in the order batches add them (1..max when sequential)."""
        d = self.sequential_design()
        return list(range(1, d.max_seeds + 1)) if d is not None else list(self.seeds)

    def file_for(self, key: str) -> str:
        """The file a key of this spec came from (sub_campaigns.<x>... → <dir>/<x>.yaml when it exists)."""
        parts = key.split(".")
        if len(parts) >= 2 and parts[0] == "sub_campaigns":
            cand = Path(self.source).parent / f"{parts[1]}.yaml"
            if cand.exists():
                return str(cand)
        return self.source

    def resolved_sub_campaigns(self) -> dict[str, SubCampaignSpec]:
        """Sub-campaigns, with a flat campaign's top-level grid as the single sub-campaign `main`."""
        if self.sub_campaigns:
            return dict(self.sub_campaigns)
        group = GroupSpec(campaign=self.name, models=self.models, policies=self.policies, regime=self.regime)
        return {"main": SubCampaignSpec(groups=[group], expected_runs=self.expected_runs)}


def _sequential(raw: dict[str, Any]) -> Any:
    """Parse a sequential seeds block; SequentialError (a ValueError) names the key."""
    from analysis.sequential.design import SequentialDesign

    return SequentialDesign.from_mapping(raw, where="seeds")


def _seeds_block(data: dict[str, Any], source: Path) -> None:
    """`seeds: {max: 12, batch: 3, design: sequential, ...}`: keep the block as `seed_design` and plan
    the first batch (seeds 1..looks[0]); `campaign submit/resume` add later batches after each interim
    look (orchestrator.adaptive). A list is unchanged."""
    raw = data.get("seeds")
    if not isinstance(raw, dict):
        return
    from analysis.sequential import SequentialError

    try:
        design = _sequential(raw)
    except SequentialError as exc:
        raise SpecError(f"{source}: key 'seeds': {exc}") from None
    data["seed_design"] = dict(raw)
    data["seeds"] = list(range(1, design.looks[0] + 1))


def resolve_campaign_path(campaign: str | Path) -> tuple[Path, str]:
    """(config root, Hydra config name) for a campaign file or directory.

    The config root is the directory that holds the `model/ recipe/ policy/ suite/` groups: the
    nearest ancestor that has a `policy` or `recipe` directory, else the file's parent.
    """
    path = Path(campaign).expanduser().resolve()
    if path.is_dir():
        primary = path / "campaign.yaml"
        if not primary.exists():
            raise SpecError(f"{path}: a campaign directory needs a campaign.yaml (the primary config)")
    elif path.suffix in (".yaml", ".yml") and path.exists():
        primary = path
    elif path.with_suffix(".yaml").exists():
        primary = path.with_suffix(".yaml")
    elif SAFE_NAME.fullmatch(str(campaign)) and (shipped := _shipped_campaign(str(campaign))) is not None:
        primary = shipped  # a shipped campaign by name: `campaign plan demo`
    else:
        raise SpecError(f"{campaign}: no such campaign file or directory; pass e.g. campaigns/demo.yaml "
                        f"or a shipped campaign's name ({', '.join(shipped_campaigns())})")
    root = primary.parent
    for cand in (primary.parent, *primary.parent.parents):
        if (cand / "policy").is_dir() or (cand / "recipe").is_dir():
            root = cand
            break
    name = primary.relative_to(root).with_suffix("").as_posix()
    return root, name


def _compose(root: Path, name: str, overrides: list[str]) -> dict[str, Any]:
    from hydra import compose, initialize_config_dir
    from hydra.core.global_hydra import GlobalHydra
    from omegaconf import OmegaConf

    GlobalHydra.instance().clear()
    try:
        with initialize_config_dir(config_dir=str(root), version_base=None, job_name="campaign"):
            cfg = compose(config_name=name, overrides=list(overrides))
        data: Any = OmegaConf.to_container(cfg, resolve=True)  # a mapping with YAML's keys, checked below
    except Exception as exc:  # Hydra raises several unrelated types for bad overrides/configs
        msg = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise SpecError(f"{root / name}.yaml: cannot compose with overrides {list(overrides)}: {msg}"
                        + _override_hint(msg)) from None
    finally:
        GlobalHydra.instance().clear()
    if not isinstance(data, dict):
        raise SpecError(f"{root / name}.yaml: the campaign must be a mapping")
    return data


def _file_for_key(root: Path, name: str, loc: tuple[Any, ...]) -> Path:
    """The file a failing key most likely came from (sub-campaign files for sub_campaigns.<x>)."""
    primary = root / f"{name}.yaml"
    if len(loc) >= 2 and loc[0] == "sub_campaigns":
        cand = primary.parent / f"{loc[1]}.yaml"
        if cand.exists():
            return cand
    return primary


def _fields_at(loc: tuple[Any, ...]) -> list[str]:
    """Field names of the model a validation error location points into (for did-you-mean hints)."""
    model: Any = CampaignSpec
    for part in loc[:-1]:
        field = getattr(model, "model_fields", {}).get(part) if isinstance(part, str) else None
        if field is None:
            continue
        ann = field.annotation
        args = [a for a in getattr(ann, "__args__", ()) if isinstance(a, type) and issubclass(a, BaseModel)]
        if isinstance(ann, type) and issubclass(ann, BaseModel):
            model = ann
        elif args:
            model = args[-1]
    return [k for k in getattr(model, "model_fields", {}) if k not in LOADER_KEYS]


# what a campaign's mapping blocks look like, for the message when one is given as something else
_BLOCK_EXAMPLES = {"budget": "{rollout_tokens: 1000000}", "compute": "{gpus_per_run: 1, hours_per_run: 2.0}",
                   "retries": "{max_attempts: 3, backoff_s: 30}", "data": "{corpus: synthetic}",
                   "baselines": "{select: baseline, mix: static}"}


def _mapping_fix(loc: tuple[Any, ...], value: Any, *, with_keys: bool) -> str:
    """'expected a mapping ... e.g. `budget: {rollout_tokens: 1000000}`': the expected shape with an example, in
    YAML (never the model class's name, which is ours, not the user's); `with_keys`: the block's own keys."""
    keys = _fields_at((*loc, "")) if with_keys else []
    name = next((str(p) for p in reversed(loc) if isinstance(p, str)), "value")
    example = _BLOCK_EXAMPLES.get(name) or ("{" + ", ".join(f"{k}: ..." for k in keys[:2]) + "}" if keys
                                            else "{key: value}")
    shape = f"a mapping (keys: {', '.join(keys)})" if keys else "a mapping"
    return f"expected {shape}, got {value!r} ({type(value).__name__}); e.g. `{name}: {example}`"


def _override_hint(msg: str) -> str:
    """' — did you mean `seeds`?' for a Hydra "Could not override 'seed'" naming a near top-level key."""
    import difflib

    m = re.search(r"override '([^']+)'", msg)
    if not m:
        return ""
    key = m.group(1).split(".")[0]
    close = difflib.get_close_matches(key, [k for k in CampaignSpec.model_fields if k not in LOADER_KEYS], n=1)
    hint = f" — did you mean `{close[0]}`?" if close and close[0] != key else ""
    return hint + f" (a key the campaign does not set yet is added with `+{m.group(1)}=...`)"


LOADER_KEYS = {"seed_design", "source", "config_root", "overrides"}


def load_campaign(campaign: str | Path, overrides: list[str] | tuple[str, ...] = ()) -> CampaignSpec:
    """Compose and validate a campaign; raise `SpecError` naming file, key and fix."""
    root, name = resolve_campaign_path(campaign)
    data = _compose(root, name, list(overrides))
    data.pop("defaults", None)
    data.setdefault("name", Path(name).parts[0])
    if "seed_design" in data:
        raise SpecError(f"{root / name}.yaml: key 'seed_design': set by the loader; write seeds: {{design: sequential, "
                        f"...}} instead")
    _seeds_block(data, root / f"{name}.yaml")
    try:
        spec = CampaignSpec.model_validate(
            {**data, "source": str(root / f"{name}.yaml"), "config_root": str(root), "overrides": list(overrides)}
        )
    except ValidationError as exc:
        problems = []
        for err in exc.errors():
            loc = tuple(err["loc"])
            key = ".".join(str(p) for p in loc)
            if err["type"] in ("model_type", "dict_type"):
                fix = _mapping_fix(loc, err.get("input"), with_keys=err["type"] == "model_type")
            elif err["type"] == "extra_forbidden":
                import difflib

                close = difflib.get_close_matches(str(loc[-1]), _fields_at(loc), n=1)
                fix = (f"unknown key; did you mean '{close[0]}'?" if close
                       else "remove it (unknown key) or fix its spelling")
            else:  # pydantic's words, without the names of our classes
                fix = re.sub(r",? or (?:an )?instance of \w+", "", str(err["msg"]).removeprefix("Value error, "))
            problems.append(f"{_file_for_key(root, name, loc)}: key '{key}': {fix}")
        raise SpecError("; ".join(problems)) from None
    if not spec.sub_campaigns and (not spec.models or not spec.policies):
        raise SpecError(f"{spec.source}: key 'models'/'policies': a flat campaign needs both lists (or sub_campaigns)")
    if spec.seed_design is not None:  # the design owns every group's seeds: a group list would bypass the looks
        for sub, sc in spec.sub_campaigns.items():
            for i, g in enumerate(sc.groups):
                if g.seeds is not None:
                    key = f"sub_campaigns.{sub}.groups.{i}.seeds"
                    raise SpecError(f"{spec.file_for(key)}: key '{key}': a sequential seeds design sets every group's "
                                    "seeds; remove this list or give the campaign a fixed seeds list")
    return spec
