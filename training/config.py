"""Model configs and recipes: their typed forms (`ModelConfig`, `RecipeConfig`) and loading them by name
(`campaigns/recipe/<name>.yaml`, `campaigns/model/<name>.yaml`) or path.

The typed forms live here, in `training`, because training reads them and the orchestrator (above it) builds
them into every `RunSpec`. Each keeps the YAML mapping it was built from (`raw`): that mapping, not the typed
fields, is what run keys hash and spec JSON stores, so typing them changed no key.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any, TypeVar

from campaigns import config_root
from training.errors import TrainingError
from wtcommon.config_fields import (ConfigFieldError, MappingConfig, mapping_of, opt_bool, opt_int, opt_mapping,
                                    opt_number, opt_str)
from wtcommon.files import load_yaml_mapping


@dataclass(frozen=True)
class ModelConfig(MappingConfig):
    """A model file (`campaigns/model/<name>.yaml`, or a campaign's `model_defs` entry): where its weights are
    and the resources one run of it holds (`gpus_per_node` GPUs on each of `nnodes` nodes).

    `path` is an HF directory or hub id or `builtin:<name>` (None: the run uses `builtin:<model name>`);
    `gpus_per_node` None means the campaign's `compute` block decides; `architecture` the tiny model's
    constructor arguments (local backend). A bare `gpus` key is ambiguous and refused by the grid."""

    path: str | None = None
    nnodes: int = 1
    gpus_per_node: int | None = None
    architecture: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def from_mapping(cls, raw: Any, where: str = "model config") -> ModelConfig:
        """The typed config of a model file's mapping; `ConfigFieldError` names `where` and the bad key."""
        m = mapping_of(raw, where)
        return cls(raw=m, path=opt_str(m, "path", where), nnodes=opt_int(m, "nnodes", where, minimum=1) or 1,
                   gpus_per_node=opt_int(m, "gpus_per_node", where, minimum=0),
                   architecture=opt_mapping(m, "architecture", where) or {})

    @classmethod
    def of(cls, cfg: ModelConfig | Mapping[str, Any], where: str = "model config") -> ModelConfig:
        """`cfg` itself when typed, else the typed config of the mapping."""
        return cfg if isinstance(cfg, ModelConfig) else cls.from_mapping(cfg, where)


# the reader of each field type a section declares (annotations are strings: `from __future__ import annotations`)
_READERS: dict[str, Any] = {"int": opt_int, "int | None": opt_int, "float": opt_number, "str": opt_str,
                            "bool": opt_bool}

S = TypeVar("S", bound=MappingConfig)


def _section(cls: type[S], raw: Any, where: str, name: str) -> S:
    """The typed section `cls` read from `raw`: each field by its declared type, the field's declared default when
    absent or null (each default is stated once, on the field); a bad value names `where` and `<name>.<key>`."""
    m = mapping_of(raw, where)
    values = {}
    for f in fields(cls):
        if f.name != "raw":
            val = _READERS[str(f.type)](m, f.name, where, section=name)
            values[f.name] = f.default if val is None else val
    return cls(raw=m, **values)


@dataclass(frozen=True)
class RolloutSection(MappingConfig):
    """A recipe's `rollout:` section (local backend): samples per prompt and how they are drawn. `raw` is the
    section's mapping; the defaults are the local trainer's (a changed default silently changes training)."""

    n: int = 8
    max_new_tokens: int = 20
    temperature: float = 1.0
    top_p: float = 1.0
    top_k: int = 0

    @classmethod
    def from_mapping(cls, raw: Any, where: str = "recipe") -> RolloutSection:
        """The typed section; `ConfigFieldError` names `where` and the key as `rollout.<key>`."""
        return _section(cls, raw, where, "rollout")

    @property
    def n_given(self) -> bool:
        """Whether the recipe sets `rollout.n` (a verl recipe sets its override instead)."""
        return self.raw.get("n") is not None


@dataclass(frozen=True)
class ActorSection(MappingConfig):
    """A recipe's `actor:` section (local backend): prompts per step, the GRPO loss and the optimiser. `raw`
    is the section's mapping; the defaults are the local trainer's."""

    prompts_per_step: int = 12
    clip_ratio: float = 0.2
    loss_agg_mode: str = "token-mean"
    policy_loss: str = "vanilla"
    use_kl_loss: bool = True
    kl_loss_coef: float = 0.001
    kl_loss_type: str = "low_var_kl"
    norm_adv_by_std_in_grpo: bool = True
    lr: float = 1e-4
    weight_decay: float = 0.01
    grad_clip: float = 1.0

    @classmethod
    def from_mapping(cls, raw: Any, where: str = "recipe") -> ActorSection:
        """The typed section; `ConfigFieldError` names `where` and the key as `actor.<key>`."""
        return _section(cls, raw, where, "actor")


@dataclass(frozen=True)
class TrainerSection(MappingConfig):
    """A recipe's `trainer:` section (local backend): steps, checkpoint and evaluation cadence, threads. `raw`
    is the section's mapping; the defaults are the local trainer's. `total_steps`/`save_freq` 0 mean "not
    set" (the request's, or for `save_freq` the last step, decide) and `eval_freq` None means `save_freq`."""

    total_steps: int = 0
    save_freq: int = 0
    eval_freq: int | None = None
    num_threads: int = 1
    val_samples: int = 4
    val_before_train: bool = True

    @classmethod
    def from_mapping(cls, raw: Any, where: str = "recipe") -> TrainerSection:
        """The typed section; `ConfigFieldError` names `where` and the key as `trainer.<key>`."""
        return _section(cls, raw, where, "trainer")


@dataclass(frozen=True)
class RecipeConfig(MappingConfig):
    """A recipe (`campaigns/recipe/<name>.yaml`): how a backend trains. The sections (`data`, `rollout`,
    `actor`, `trainer`, `warmup`) are the local backend's, `overrides`/`env`/`project_name` verl's Hydra
    overrides, environment and MLflow project, `sleep_s`/`eval_sleep_s`/`fail`/`simulate` the noop
    backend's knobs; `backend` the backend the recipe is written for and `model` its default model (for
    `campaign train`). `data`, `overrides` and `simulate` are None when absent (a verl run without train
    files needs `data:`; a noop recipe without `simulate:` scores NaN). `rollout`, `actor` and `trainer` are
    typed sections (each keeps its own mapping in `raw`); `warmup` stays a mapping because it is hashed into
    the base model's cache key as given."""

    name: str | None = None
    backend: str | None = None
    model: str | None = None
    data: dict[str, Any] | None = None
    rollout: RolloutSection = field(default_factory=RolloutSection)
    actor: ActorSection = field(default_factory=ActorSection)
    trainer: TrainerSection = field(default_factory=TrainerSection)
    warmup: dict[str, Any] = field(default_factory=dict)
    overrides: dict[str, Any] | None = None
    env: dict[str, Any] = field(default_factory=dict)
    project_name: str | None = None
    sleep_s: float = 0.0
    eval_sleep_s: float = 0.0
    fail: str | bool | None = None
    simulate: dict[str, Any] | None = None

    @classmethod
    def from_mapping(cls, raw: Any, where: str = "recipe") -> RecipeConfig:
        """The typed config of a recipe's mapping; `ConfigFieldError` names `where` and the bad key."""
        m = mapping_of(raw, where)
        fail = m.get("fail")
        if fail is not None and not isinstance(fail, (str, bool)):
            raise ConfigFieldError(f"{where}: key 'fail': got {fail!r}; give true, false or 'config'")
        return cls(
            raw=m, name=opt_str(m, "name", where), backend=opt_str(m, "backend", where),
            model=opt_str(m, "model", where), data=opt_mapping(m, "data", where),
            rollout=RolloutSection.from_mapping(opt_mapping(m, "rollout", where) or {}, where),
            actor=ActorSection.from_mapping(opt_mapping(m, "actor", where) or {}, where),
            trainer=TrainerSection.from_mapping(opt_mapping(m, "trainer", where) or {}, where),
            warmup=opt_mapping(m, "warmup", where) or {},
            overrides=opt_mapping(m, "overrides", where), env=opt_mapping(m, "env", where) or {},
            project_name=opt_str(m, "project_name", where), sleep_s=opt_number(m, "sleep_s", where) or 0.0,
            eval_sleep_s=opt_number(m, "eval_sleep_s", where) or 0.0, fail=fail,
            simulate=opt_mapping(m, "simulate", where),
        )

    @classmethod
    def of(cls, cfg: RecipeConfig | Mapping[str, Any], where: str = "recipe") -> RecipeConfig:
        """`cfg` itself when typed, else the typed config of the mapping."""
        return cfg if isinstance(cfg, RecipeConfig) else cls.from_mapping(cfg, where)

    @property
    def label(self) -> str:
        """The recipe's name for messages ('?' when it declares none)."""
        return self.name or "?"

    def rollout_n(self) -> int | None:
        """Samples per prompt: `rollout.n` (local backend) or verl's `actor_rollout_ref.rollout.n` override;
        None when neither is an integer."""
        if self.rollout.n_given:
            return self.rollout.n
        n = (self.overrides or {}).get("actor_rollout_ref.rollout.n")
        return int(n) if isinstance(n, int) and not isinstance(n, bool) else None


def load_recipe(name_or_path: str | Path) -> dict[str, Any]:
    """A recipe's YAML mapping by name (`campaigns/recipe/<name>.yaml`) or by path (`RecipeConfig.of` types it)."""
    p = Path(name_or_path)
    if not p.suffix:
        p = config_root() / "recipe" / f"{name_or_path}.yaml"
    return load_yaml_mapping(p, what="recipe file", error=TrainingError)


def load_model_config(name_or_path: str | Path) -> dict[str, Any]:
    """A model config's YAML mapping by name (`campaigns/model/<name>.yaml`) or by path (`ModelConfig.of` types
    it)."""
    p = Path(name_or_path)
    if not p.suffix:
        p = config_root() / "model" / f"{name_or_path}.yaml"
    return load_yaml_mapping(p, what="model config file", error=TrainingError)
