"""What one local GRPO run is built from: its step counts, prompt pools, data policy and curriculum, models, optimizer
and verl's loss functions, held in one `LocalRun` with the state its steps advance.

Why a module of its own: the set-up is done once per run, in an order the run's determinism depends on (torch is
seeded before any model is loaded), and is as long as the step loop; `training.local` keeps the loop. Every random
stream is `step_seed(run seed, step, stream)`: 0 torch, 1 the mixer's sampler, 2 a step's rollouts, 3 the held-out
sampling, 4 the curriculum.
"""

from __future__ import annotations

import copy
import os
import time
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch

from training import local_checkpoints as lc
from training import resume_state as rs
from training import warmup
from training.backend import Checkpoint, TrainingConfigError, TrainingError, TrainRequest
from training.config import ModelConfig, RecipeConfig, load_model_config
from training.prompt_choice import check_domain_pools
from training.prompt_pool import PromptPool, ShuffledOrder


def step_seed(seed: int, step: int, stream: int) -> int:
    """Independent, reproducible 63-bit seeds per (run seed, step, stream)."""
    return int(np.random.SeedSequence([seed, step, stream]).generate_state(1, np.uint64)[0] >> np.uint64(1))


def step_counts(req: TrainRequest) -> tuple[int, int]:
    """(total steps, save frequency) from the request, else the recipe; refused before any work when no step."""
    trainer_cfg = req.recipe.trainer
    total_steps = int(req.total_steps or trainer_cfg.total_steps)
    save_freq = int(req.save_freq or trainer_cfg.save_freq) or total_steps
    if total_steps < 1:
        raise TrainingConfigError("total_steps must be >= 1 (set it in the request or recipe trainer.total_steps)")
    return total_steps, save_freq


@dataclass
class VerlLoss:
    """verl's GRPO functions the loop calls (`verl.trainer.ppo.core_algos`) and the actor config they read."""

    grpo_advantage: Callable[..., Any]  # compute_grpo_outcome_advantage
    policy_loss: Callable[..., Any]  # the registered policy loss (`vanilla`: clipped PG with rollout_is_weights)
    kl_penalty: Callable[..., Any]
    agg_loss: Callable[..., Any]
    cfg: Any  # verl's FSDPActorConfig


@dataclass
class LocalRun:
    """One run's set-up and the state its steps advance (the compute account, the checkpoints saved): what the
    loop would otherwise carry as forty locals."""

    req: TrainRequest
    out: Path
    config_hash: str
    total_steps: int
    save_freq: int
    pool: PromptPool
    heldout: PromptPool
    policy: Any  # the data policy (policies.DataPolicy), None for stock GRPO
    curriculum: Any  # the policy's curriculum, or None
    sampler: Any  # a mixer's DomainSampler, None without a mixer
    order: ShuffledOrder | None  # the shuffled order, None when a mixer draws the prompts
    model_dir: Path
    model: Any
    tokenizer: Any
    ref_model: Any  # the base model, frozen: the KL penalty's reference, also on resume
    optim: torch.optim.Optimizer
    loss: VerlLoss
    checkpoints: list[Checkpoint] = field(default_factory=list)
    compute: dict[str, Any] = field(default_factory=dict)

    @property
    def n(self) -> int:
        """Rollouts per prompt."""
        return self.req.recipe.rollout.n

    @property
    def mixing(self) -> bool:
        """Whether a mixer draws the step's prompts (`mechanism: mix`)."""
        return self.policy is not None and self.policy.mechanism == "mix"

    @property
    def kl_coef(self) -> float:
        """The KL loss coefficient, 0 without a KL loss (then no reference log-probs are computed)."""
        actor = self.req.recipe.actor
        return actor.kl_loss_coef if actor.use_kl_loss else 0.0

    @property
    def eval_freq(self) -> int:
        """Steps between held-out evaluations: the recipe's, else the save frequency."""
        freq = self.req.recipe.trainer.eval_freq
        return self.save_freq if freq is None else freq

    @property
    def val_seed(self) -> int:
        """The same sampling draws at every evaluation of this run."""
        return step_seed(self.req.seed, 0, 3)

    @property
    def budget(self) -> int | None:
        """The rollout-token budget the run stops at, if any."""
        return self.req.rollout_token_budget

    @property
    def metrics_path(self) -> Path:
        return self.out / "metrics.jsonl"

    @property
    def ckpt_meta(self) -> dict[str, Any]:
        """The run metadata every checkpoint's `completed.json` carries."""
        req = self.req
        return {"run_id": req.run_id, "run_key": req.run_key, "config_hash": self.config_hash, "seed": req.seed}

    def trainer_state(self, step: int) -> Callable[[Path], None]:
        """The writer of the resumable state at `step` (optimizer, prompt order or mixer, curriculum, compute)."""
        extra: dict[str, Any] = {"compute": dict(self.compute)}
        if self.mixing:
            extra["sampler"] = self.sampler.state_dict()
            extra["policy"] = self.policy.state_dict()
        else:
            extra["order"] = rs.order_state(self.order)
        return lambda d: rs.save_trainer_state(d, step=step, optim=self.optim, extra=extra, curriculum=self.curriculum)

    def restore(self, resume: Checkpoint) -> list[dict[str, Any]]:
        """Continue from `resume`'s trainer state; the metrics rows up to it (read before the file is rewritten)."""
        meta = rs.load_trainer_state(resume.path, self.optim, self.curriculum)
        if self.mixing:
            self.sampler.load_state_dict(meta["sampler"])
            self.policy.load_state_dict(meta["policy"])
        else:
            rs.load_order_state(self.order, meta["order"])
        self.compute.update(meta["compute"])
        kept = lc.kept_rows(self.metrics_path, resume.step)
        self.checkpoints = lc.saved_checkpoints(self.out)
        return kept


def build_run(req: TrainRequest, out: Path, config_hash: str, resume: Checkpoint | None, total_steps: int,
              save_freq: int) -> LocalRun:
    """Set a run up, in this order: determinism (fixed threads, deterministic kernels, torch seeded), pools, the
    policy (validated before the expensive parts), models, the prompt source, verl's loss, the optimizer."""
    recipe = req.recipe  # typed (training.config): a mistyped field was refused when the request was built
    torch.set_num_threads(recipe.trainer.num_threads)
    torch.use_deterministic_algorithms(True)
    torch.manual_seed(step_seed(req.seed, 0, 0))

    cache_root = Path(req.cache_dir or warmup.default_cache_root())
    train_files, pool, heldout = _pools(req, cache_root)
    policy = _load_policy(req, pool.domain_names, recipe.rollout.n)
    from transformers.utils import logging as hf_logging

    # "Loading weights" / "Writing model shards" bars per model load and save (the base model's build and warm-up
    # included): the step bar says the progress
    hf_logging.disable_progress_bar()
    t_build, c_build = time.time(), time.process_time()
    model_dir = _resolve_model(req, recipe, cache_root)  # a cold cache builds and warms the base model up here
    build = {"build_s": time.time() - t_build, "build_cpu_s": time.process_time() - c_build}
    verl_fns, actor_config_cls = _import_verl()
    tokenizer, model, ref_model = _load_models(model_dir, resume)
    curriculum, sampler, order = _prompt_source(req, pool, policy, train_files, cache_root)

    actor_cfg = recipe.actor
    loss_cfg = actor_config_cls(
        strategy="fsdp",
        rollout_n=recipe.rollout.n,
        ppo_mini_batch_size=actor_cfg.prompts_per_step,
        ppo_micro_batch_size_per_gpu=actor_cfg.prompts_per_step * recipe.rollout.n,
        clip_ratio=actor_cfg.clip_ratio,
        loss_agg_mode=actor_cfg.loss_agg_mode,
    )
    advantage_fn, get_policy_loss_fn, kl_penalty, agg_loss = verl_fns
    loss = VerlLoss(advantage_fn, get_policy_loss_fn(actor_cfg.policy_loss), kl_penalty, agg_loss, loss_cfg)
    optim = torch.optim.AdamW(model.parameters(), lr=actor_cfg.lr, weight_decay=actor_cfg.weight_decay,
                              betas=(0.9, 0.999))
    compute: dict[str, Any] = {"wall_s": 0.0, "gpu_s": 0.0, "rollout_tokens": 0, "update_tokens": 0.0,
                               "prompts_rolled_out": 0, "steps": 0}
    if req.rollout_token_budget is not None:  # the analysis states the budget the runs compared at
        compute["rollout_token_budget"] = req.rollout_token_budget
    compute.update(build)  # the base model's build (once per cache, in whichever run finds it cold): not training
    return LocalRun(req, out, config_hash, total_steps, save_freq, pool, heldout, policy, curriculum, sampler, order,
                    model_dir, model, tokenizer, ref_model, optim, loss, compute=compute)


def _pools(req: TrainRequest, cache_root: Path) -> tuple[list[str], PromptPool, PromptPool]:
    """(train files, training pool, held-out pool): the request's files, else the recipe's synthetic corpus."""
    data_cfg = req.recipe.data or {}
    domains = list(data_cfg.get("domains", ["math", "logic", "science"]))
    need_corpus = not req.train_files or not req.val_files
    corpus = warmup.synthetic_corpus(data_cfg, cache_root) if need_corpus else {}
    train_files = list(req.train_files) or [str(corpus["train"])]
    val_files = list(req.val_files or [str(corpus["test"])])
    return train_files, PromptPool(train_files, domains), PromptPool(val_files, domains)


def _load_policy(req: TrainRequest, domains: list[str], n: int):
    """The data policy, or None for stock GRPO (`mechanism: none`)."""
    mech = (req.policy or {}).get("mechanism", "none")
    try:
        from policies import load_policy
    except ImportError as e:
        if mech == "none":
            return None
        raise TrainingError(f"policy {req.policy.get('name')!r} needs the policies package: {e}") from None
    return load_policy(dict(req.policy), seed=req.seed, domains=domains, rollout_n=n)


def _pass_rates(curriculum: str, req: TrainRequest, recipe: RecipeConfig, train_files: list[str],
                cache_root: Path) -> Any:
    """The base model's cached pass rate per pool prompt when the policy's curriculum needs it (hardest_k), else
    None; a missing pre-pass is a TrainingConfigError naming the `campaign data difficulty` command."""
    from policies.curricula.registry import curriculum_class

    if not curriculum_class(curriculum).needs_pass_rates:
        return None
    from training import difficulty

    # the synthetic corpus is the pre-pass's own default pool: name it as the command does (no --train-file)
    spec = difficulty.spec_for(req.model_path, recipe, train_files=train_files if req.train_files else [],
                               model_cfg=req.model)
    try:
        return difficulty.pass_rates_for(spec, cache_root)
    except difficulty.DifficultyMissing as exc:
        raise TrainingConfigError(str(exc)) from None


def _resolve_model(req: TrainRequest, recipe: RecipeConfig, cache_root: Path) -> Path:
    """The base model's HF directory: a `builtin:<model>` is built and warmed up in the shared cache."""
    mp = req.model_path
    if mp.startswith("builtin:"):
        model_cfg = req.model or ModelConfig.of(load_model_config(mp.split(":", 1)[1]), mp)
        return warmup.base_model(model_cfg, recipe, cache_root)
    p = Path(mp)
    if not (p / "config.json").exists():
        raise TrainingError(f"model_path {mp!r}: no config.json there; give an HF model directory or builtin:<model>")
    return p


def _import_verl() -> tuple[tuple[Callable[..., Any], ...], Any]:
    """((advantage, policy-loss lookup, KL penalty, loss aggregation), FSDPActorConfig), imported quietly.

    verl's import warns about every optional GPU engine it lacks and about having no accelerator; this CPU
    backend uses only its GRPO functions, so those lines are noise in a smoke test's output."""
    os.environ.setdefault("VERL_LOGGING_LEVEL", "ERROR")
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=r".* engine is not available", category=UserWarning)
        from verl.trainer.ppo.core_algos import (agg_loss, compute_grpo_outcome_advantage, get_policy_loss_fn,
                                                 kl_penalty)
        from verl.workers.config.actor import FSDPActorConfig
    return (compute_grpo_outcome_advantage, get_policy_loss_fn, kl_penalty, agg_loss), FSDPActorConfig


def _load_models(model_dir: Path, resume: Checkpoint | None) -> tuple[Any, Any, Any]:
    """(tokenizer, policy model, frozen reference): the reference is always the base model, the policy model the
    resume checkpoint's weights when there is one."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32, attn_implementation="eager")
    ref_model = copy.deepcopy(model).eval().requires_grad_(False)  # the base model, also on resume
    if resume is not None:
        model = AutoModelForCausalLM.from_pretrained(resume.path, dtype=torch.float32, attn_implementation="eager")
    return tokenizer, model, ref_model


def _prompt_source(req: TrainRequest, pool: PromptPool, policy: Any, train_files: list[str],
                   cache_root: Path) -> tuple[Any, Any, ShuffledOrder | None]:
    """(curriculum, mixer's sampler, shuffled order): what proposes each step's prompts, seeded on its own stream."""
    prompts_per_step = req.recipe.actor.prompts_per_step
    domains = pool.domain_names
    mixing = policy is not None and policy.mechanism == "mix"
    curriculum = None
    if policy is not None and policy.curriculum is not None:
        from policies.errors import PolicyConfigError

        try:
            curriculum = policy.build_curriculum(len(pool), prompts_per_step, seed=step_seed(req.seed, 0, 4),
                                                 domains=pool.domain,
                                                 pass_rates=_pass_rates(policy.curriculum["name"], req, req.recipe,
                                                                        train_files, cache_root))
        except PolicyConfigError as exc:  # deterministic (a pool smaller than the batch, a missing pre-pass)
            raise TrainingConfigError(f"policy {policy.name!r}: {exc}") from None
        if mixing:
            check_domain_pools(pool.domain, domains, prompts_per_step)
    if mixing:
        from policies import DomainSampler

        sampler = DomainSampler(pool.domain, prompts_per_step, seed=step_seed(req.seed, 0, 1), n_domains=len(domains),
                                names=domains)
        return curriculum, sampler, None
    return curriculum, None, ShuffledOrder(len(pool), prompts_per_step, req.seed)
