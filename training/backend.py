"""One interface for every training backend: training a run and evaluating its checkpoints.

The orchestrator builds a `TrainRequest`, asks `registry.get_backend(name)` for a backend and gets back a
`TrainResult` whose checkpoints are verifiable (each has a `completed.json` written last). The
local backend trains tiny models on CPU; the verl backend launches `verl.trainer.main_ppo`; the noop
backend has no model. The evaluate stage builds an `EvalRequest` per checkpoint and asks the same backend
for its records: the real evaluator unless the backend has no model to evaluate.
"""

from __future__ import annotations

import abc
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from wtcommon.hashing import digest
from training.errors import TrainingConfigError, TrainingError
from wtcommon.config_fields import ConfigFieldError

if TYPE_CHECKING:
    import pandas as pd

    from evaluation.run_meta import RunMeta
    from evaluation.settings import EvaluationOptions
    from training.config import ModelConfig, RecipeConfig

__all__ = ["Checkpoint", "EvalRequest", "MetricsSink", "TrainRequest", "TrainResult", "TrainingBackend",
           "TrainingConfigError", "TrainingError"]  # the errors live in training.errors; imported from here too


@dataclass(frozen=True)
class Checkpoint:
    """A finished checkpoint: `path` is an HF-format directory (config, weights, tokenizer)."""

    step: int
    path: Path


class MetricsSink(Protocol):
    """Where a standalone training run (`campaign train`) streams its rows as they happen. The CLI passes
    MLflow's (`orchestrator.tracking.MlflowTrainingSink`); campaign runs pass none, the orchestrator ingests
    `metrics.jsonl` instead. Training never imports tracking: the arrow runs from the orchestrator down."""

    def start(self, req: TrainRequest) -> None:
        """Before the first row: the run exists (RUNNING) in the store."""

    def log(self, row: dict[str, Any]) -> None:
        """One metrics row (the dict written to metrics.jsonl)."""

    def finish(self, req: TrainRequest, result: TrainResult | None) -> None:
        """After the last row: `result` None means the run raised or was interrupted (FAILED, not RUNNING)."""


@dataclass
class TrainRequest:
    """Everything that determines one training run.

    `policy` is the policy YAML content (a mapping); `recipe` the recipe (`training.config.RecipeConfig`; a
    mapping given here is typed on construction); `model_path` an HF directory or a built-in name such as
    `builtin:tiny_qwen2`; `train_files` Parquet files in the study's schema (empty: the recipe's synthetic corpus).
    `rollout_token_budget` stops training after the step whose cumulative rollout tokens reach it (the local
    backend; `total_steps` stays the cap). The rest are backend options that do not change the weights: `model`
    the model file (`ModelConfig`, or a mapping typed on construction: nodes, GPUs; None: looked up from a
    `builtin:` name), `cache_dir` the shared cache of base models and synthetic corpora (None:
    `training.warmup.default_cache_root()`), `val_files` held-out prompts (empty: the synthetic corpus's or, for
    verl, the train files), `domains` the policy's domains when its YAML lists none, `mlflow_uri` /
    `mlflow_run_id` / `experiment` verl's own MLflow logger, `resume_mode` verl's `trainer.resume_mode`.
    """

    run_id: str
    run_key: str
    policy: dict[str, Any]
    seed: int
    out_dir: Path
    recipe: RecipeConfig
    model_path: str
    train_files: list[str] = field(default_factory=list)
    total_steps: int = 0
    save_freq: int = 0
    model: ModelConfig | None = None
    cache_dir: str | None = None
    val_files: list[str] = field(default_factory=list)
    domains: list[str] | None = None
    mlflow_uri: str | None = None
    mlflow_run_id: str | None = None
    experiment: str | None = None
    resume_mode: str = "auto"  # auto: resume this run's own dir
    rollout_token_budget: int | None = None  # stop after the step whose rollout tokens reach it (None: no budget)

    def __post_init__(self) -> None:
        from training.config import ModelConfig, RecipeConfig

        self.out_dir = Path(self.out_dir)
        try:  # a mapping (a test's, `campaign train`'s YAML) becomes the typed config
            self.recipe = RecipeConfig.of(self.recipe, f"run {self.run_id}: recipe")
            self.model = None if self.model is None else ModelConfig.of(self.model, f"run {self.run_id}: model")
        except ConfigFieldError as exc:  # deterministic: the stage reports it as a configuration error
            raise TrainingConfigError(str(exc)) from None
        if not isinstance(self.seed, int) or isinstance(self.seed, bool):
            raise TrainingConfigError(f"TrainRequest.seed must be an int, got {self.seed!r}")
        budget = self.rollout_token_budget
        if budget is not None and (isinstance(budget, bool) or not isinstance(budget, int) or budget < 1):
            raise TrainingConfigError(f"TrainRequest.rollout_token_budget must be an int >= 1 or None, got {budget!r}")
        if self.total_steps < 0 or self.save_freq < 0:
            raise TrainingConfigError("TrainRequest.total_steps and save_freq must be >= 0 "
                                      "(0 = take the recipe's value)")

    def weights_hash(self) -> str:
        """Short hash of what changes the trained weights (not out_dir, run_id or the backend options).

        Not `RunSpec.config_hash` (the whole resolved config, evaluation included, recorded per Record): a
        checkpoint's `completed.json` and a run's `result.json` store this one under their older key
        "config_hash", kept so that existing checkpoints still resume."""
        payload = {
            "policy": self.policy,
            "seed": self.seed,
            "recipe": self.recipe.raw,  # the YAML as given: typing the recipe changed no hash
            "model_path": self.model_path,
            "train_files": list(self.train_files),
            "total_steps": self.total_steps,
        }
        if self.rollout_token_budget is not None:  # absent when unset: existing runs keep their hash
            payload["rollout_token_budget"] = self.rollout_token_budget
        return digest(payload, spaced=True)


@dataclass
class TrainResult:
    """Checkpoints in step order, the per-step metrics JSONL and the run's compute account."""

    checkpoints: list[Checkpoint]
    metrics_path: Path
    compute: dict[str, float]

    def to_json(self) -> dict[str, Any]:
        d = asdict(self)
        d["checkpoints"] = [{"step": c.step, "path": str(c.path)} for c in self.checkpoints]
        d["metrics_path"] = str(self.metrics_path)
        return d


@dataclass
class EvalRequest:
    """Everything that determines one checkpoint's evaluation, built by the evaluate stage from the run spec
    (as `TrainRequest` is by the train stage), so that a backend never sees the orchestrator's run types.

    `run_meta` is the run's labels every record row carries (run_id, seed, policy, step, ...); `recipe` the run's
    recipe; `options` the campaign's `evaluation:` block (evaluator backend, limit, max_gen_toks, gates; a
    mapping given for either is typed on construction); `out_dir` where the step's
    item log and records go; `run_dir` the run's directory.
    """

    checkpoint: Checkpoint
    suite: str
    run_meta: RunMeta
    recipe_name: str
    recipe: RecipeConfig
    options: EvaluationOptions
    data_dir: Path
    cache_dir: Path
    out_dir: Path
    run_dir: Path

    def __post_init__(self) -> None:
        from evaluation.run_meta import RunMeta, RunMetaError
        from evaluation.settings import EvaluationOptions
        from training.config import RecipeConfig

        try:
            if not isinstance(self.run_meta, RunMeta):  # a mapping of its fields (a test's labels)
                self.run_meta = RunMeta.from_mapping(self.run_meta)
            self.recipe = RecipeConfig.of(self.recipe, f"recipe {self.recipe_name}")
            self.options = EvaluationOptions.of(self.options)
        except (ConfigFieldError, RunMetaError) as exc:
            raise TrainingConfigError(str(exc)) from None


class TrainingBackend(abc.ABC):
    """A way to turn a `TrainRequest` into checkpoints, and a checkpoint into records."""

    name: str
    needs_train_files: bool = True  # False: the stage does not resolve the corpus for this backend
    needs_eval_data: bool = True  # False: evaluation reads no benchmark data, so preflight does not check it
    any_recipe: bool = False  # True: runs with a recipe written for any backend (preflight skips `backend:`)
    # True: the trainer rolls out the prompts a curriculum proposes / stops at a rollout-token budget; False:
    # preflight refuses it (a trainer that ignored them would train the baseline under the policy's name)
    runs_curricula: bool = False
    runs_dynamic_sampling: bool = False  # a policy's `dynamic_sampling:` rounds (local and verl)
    runs_rollout_budget: bool = False
    # True: the trainer reads the difficulty pre-pass a curriculum such as hardest_k needs (training.difficulty)
    runs_difficulty_prepass: bool = False
    multi_node: bool = False  # True: trains a run across `nnodes > 1` nodes (preflight refuses them otherwise)

    @abc.abstractmethod
    def train(self, req: TrainRequest) -> TrainResult:
        """Train (or return the already finished result of) `req`; raise `TrainingError` on failure."""

    def evaluate(self, req: EvalRequest) -> pd.DataFrame:
        """The checkpoint's records from the real evaluator, also written beside the step's item log
        (`evaluate_checkpoint` leaves writing records to its caller, so `evaluation` never imports `analysis`).

        A failed health gate raises `StageHealthGateError`, missing or malformed data `StageConfigError`: both
        are deterministic for this checkpoint, so neither is retried.
        """
        from analysis.records import write_records
        from evaluation.evaluator import EvaluationError, HealthGateError, evaluate_checkpoint
        from training.errors import StageConfigError, StageHealthGateError

        opts = req.options
        where = f"evaluation of {req.run_meta.run_id} step {req.checkpoint.step}"
        try:
            ev = evaluate_checkpoint(
                req.checkpoint.path, suite=req.suite, data_dir=req.data_dir, backend=opts.backend,
                run_meta=req.run_meta, out=req.out_dir, limit=opts.limit, cache_dir=req.cache_dir,
                max_gen_toks=opts.max_gen_toks, gates=opts.gates, progress=False, vllm_options=opts.vllm,
            )
        except HealthGateError as exc:  # deterministic for this checkpoint: no retry, reported in full
            raise StageHealthGateError(f"{where}: {exc}") from None
        except EvaluationError as exc:  # missing or malformed data is deterministic: no retry
            raise StageConfigError(f"{where}: {exc}") from None
        assert ev.records_path is not None  # `out` was given: records_path(req.out_dir)
        write_records(ev.records, ev.records_path)  # the step's records beside its item log
        return ev.records
