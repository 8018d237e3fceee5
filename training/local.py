"""The local GRPO backend: real GRPO on a tiny model on CPU, with verl's own advantage and loss math.

Why: verl cannot roll out on CPU (VERL.md §8), yet users and CI must run a real campaign without a
GPU. This loop does its own rollouts with HF `generate`, scores them with the evaluation graders
(`evaluation.reward.compute_score`, the same function verl calls), and reuses
`compute_grpo_outcome_advantage`, the registered `vanilla` policy loss with `rollout_is_weights`
and `token-mean` aggregation, and the `low_var_kl` penalty from `verl.trainer.ppo.core_algos`.
The data policy acts where it acts in the verl plugin: selection/reweighting after advantages
(its weights become `rollout_is_weights`), mixing through the `DomainSampler` before rollout, a
curriculum (`policies.curricula`) before rollout too: it proposes the step's prompt ids (within each
domain's count under a mixer, `training.prompt_choice`) and learns from their per-rollout correctness.

Resume: each checkpoint holds the trainer's state beside the weights (`training.resume_state`: optimizer,
prompt order, mixer and curriculum state); a run restarted on the same request continues from its last
verified checkpoint and trains exactly as the uninterrupted run (same prompts, same weights).

Determinism: every random draw comes from the run seed (data order, sampling, policy RNG), torch
runs with deterministic algorithms on a fixed thread count, so the same seed gives bit-identical
checkpoints and metrics (timing keys `time/*` excepted).
"""

from __future__ import annotations

import copy
import json
import os
import shutil
import time
import warnings
from contextlib import closing, contextmanager
from pathlib import Path
from typing import Any
from collections.abc import Callable, Iterator

import numpy as np
import torch

from training import local_checkpoints as lc
from training import resume_state as rs
from training import rollout as ro
from training import warmup
from training.prompt_pool import PromptPool, ShuffledOrder
from training.prompt_choice import PromptIdLog, check_domain_pools, curriculum_batch, zero_variance_share
from training.backend import (Checkpoint, MetricsSink, TrainingBackend, TrainingConfigError, TrainingError,
                              TrainRequest, TrainResult)
from training.registry import register_backend
from evaluation.exploit_watch import step_watch
from training.config import ModelConfig, RecipeConfig, load_model_config, load_recipe  # noqa: F401 - load_recipe: API

ProgressFn = Callable[[int, int, dict[str, Any]], None]


# --- configuration ----------------------------------------------------------------------------


def _step_seed(seed: int, step: int, stream: int) -> int:
    """Independent, reproducible 63-bit seeds per (run seed, step, stream)."""
    return int(np.random.SeedSequence([seed, step, stream]).generate_state(1, np.uint64)[0] >> np.uint64(1))


# --- data ---------------------------------------------------------------------------------------


def score_responses(pool: PromptPool, idx: np.ndarray, texts: list[str], n: int,
                    accuracy: list[float] | None = None) -> tuple[torch.Tensor, list[str]]:
    """Rewards from the evaluation graders (one grader for training and evaluation); `accuracy`, when given,
    receives each rollout's correctness (the grader's `acc`, what a curriculum reads, not the shaped score)."""
    from evaluation.reward import compute_score

    scores, statuses = [], []
    for row, text in enumerate(texts):
        i = int(idx[row // n])
        res = compute_score(pool.data_source[i], text, pool.ground_truth[i], pool.extra_info[i])
        scores.append(float(res["score"]))
        statuses.append(str(res.get("status", "ok")))
        if accuracy is not None:
            accuracy.append(float(bool(res["acc"])))
    return torch.tensor(scores, dtype=torch.float32), statuses


# --- the loop -----------------------------------------------------------------------------------


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
    mp = req.model_path
    if mp.startswith("builtin:"):
        model_cfg = req.model or ModelConfig.of(load_model_config(mp.split(":", 1)[1]), mp)
        return warmup.base_model(model_cfg, recipe, cache_root)
    p = Path(mp)
    if not (p / "config.json").exists():
        raise TrainingError(f"model_path {mp!r}: no config.json there; give an HF model directory or builtin:<model>")
    return p


@torch.no_grad()
def heldout_reward(model, tokenizer, pool: PromptPool, max_new_tokens: int, samples: int,
                   seed: int) -> dict[str, float]:
    """Mean reward per domain on the fixed held-out set: greedy (`val/reward_mean`, what evaluation
    measures) and, with `samples` > 0, the policy's expected reward at temperature 1
    (`val/sampled_reward_mean`, what GRPO optimises; less noisy on a small set)."""
    model.eval()
    idx = np.arange(len(pool))
    res: dict[str, float] = {}
    runs = [("val/reward_mean", 1, False)] + ([("val/sampled_reward_mean", samples, True)] if samples > 0 else [])
    for key, n, sample in runs:
        out = ro.generate(model, tokenizer, pool.messages, n=n, max_new_tokens=max_new_tokens, do_sample=sample,
                          seed=seed)
        scores, _ = score_responses(pool, idx, out.texts, n)
        dom = torch.from_numpy(pool.domain).repeat_interleave(n)
        res[key] = float(scores.mean())
        for d, name in enumerate(pool.domain_names):
            sel = dom == d
            res[f"{key}/{name}"] = float(scores[sel].mean()) if bool(sel.any()) else float("nan")
    return res


@contextmanager
def _failed_on_error(sink: MetricsSink | None, req: TrainRequest) -> Iterator[None]:
    """A training run that raises (or is interrupted) ends FAILED in its sink, not RUNNING forever."""
    try:
        yield
    except BaseException:
        if sink is not None:
            sink.finish(req, None)
        raise


def run_training(req: TrainRequest, progress: ProgressFn | None = None,
                 sink: MetricsSink | None = None) -> TrainResult:
    """Train `req` on CPU; idempotent (a verified finished run is returned as is, a partial one restarts).

    Sets torch to deterministic algorithms on the recipe's thread count for the run and restores the
    caller's settings afterwards (the orchestrator and tests call this in-process)."""
    prev = (torch.get_num_threads(), torch.are_deterministic_algorithms_enabled())
    try:
        return _run_training(req, progress, sink)
    finally:
        torch.set_num_threads(prev[0])
        torch.use_deterministic_algorithms(prev[1])


def _run_training(req: TrainRequest, progress: ProgressFn | None, sink: MetricsSink | None) -> TrainResult:
    t0 = time.time()
    recipe = req.recipe  # typed (training.config): a mistyped field was refused when the request was built
    data_cfg, roll_cfg = recipe.data or {}, recipe.rollout  # the sections are typed, with the trainer's defaults
    actor_cfg, trainer_cfg = recipe.actor, recipe.trainer
    total_steps = int(req.total_steps or trainer_cfg.total_steps)
    save_freq = int(req.save_freq or trainer_cfg.save_freq) or total_steps
    if total_steps < 1:
        raise TrainingConfigError("total_steps must be >= 1 (set it in the request or recipe trainer.total_steps)")
    out = Path(req.out_dir).resolve()
    config_hash = req.config_hash()
    done = lc.finished_result(out, config_hash)
    if done is not None:
        return done
    resume = lc.resume_point(out, config_hash)
    if resume is None:
        shutil.rmtree(out / "checkpoints", ignore_errors=True)
    out.mkdir(parents=True, exist_ok=True)

    # determinism: fixed threads, deterministic kernels, everything seeded from req.seed
    torch.set_num_threads(trainer_cfg.num_threads)
    torch.use_deterministic_algorithms(True)
    torch.manual_seed(_step_seed(req.seed, 0, 0))

    cache_root = Path(req.cache_dir or warmup.default_cache_root())
    domains = list(data_cfg.get("domains", ["math", "logic", "science"]))
    need_corpus = not req.train_files or not req.val_files
    corpus = warmup.synthetic_corpus(data_cfg, cache_root) if need_corpus else {}
    train_files = list(req.train_files) or [str(corpus["train"])]
    val_files = list(req.val_files or [str(corpus["test"])])
    pool, heldout = PromptPool(train_files, domains), PromptPool(val_files, domains)

    n = roll_cfg.n
    policy = _load_policy(req, domains, n)  # validate before the expensive parts
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from transformers.utils import logging as hf_logging

    # "Loading weights" / "Writing model shards" bars per model load and save (the base model's build and warm-up
    # included): the step bar says the progress
    hf_logging.disable_progress_bar()
    model_dir = _resolve_model(req, recipe, cache_root)

    # verl's import warns about every optional GPU engine it lacks and about having no accelerator; this CPU
    # backend uses only its GRPO functions, so those lines are noise in a smoke test's output
    os.environ.setdefault("VERL_LOGGING_LEVEL", "ERROR")
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=r".* engine is not available", category=UserWarning)
        from verl.trainer.ppo.core_algos import (agg_loss, compute_grpo_outcome_advantage, get_policy_loss_fn,
                                                 kl_penalty)
        from verl.workers.config.actor import FSDPActorConfig

    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32, attn_implementation="eager")
    ref_model = copy.deepcopy(model).eval().requires_grad_(False)  # the base model, also on resume
    if resume is not None:
        model = AutoModelForCausalLM.from_pretrained(resume.path, dtype=torch.float32, attn_implementation="eager")

    prompts_per_step = actor_cfg.prompts_per_step
    max_new = roll_cfg.max_new_tokens
    mixing = policy is not None and policy.mechanism == "mix"
    curriculum = None
    if policy is not None and policy.curriculum is not None:
        from policies.errors import PolicyConfigError

        try:
            curriculum = policy.build_curriculum(len(pool), prompts_per_step, seed=_step_seed(req.seed, 0, 4),
                                                 domains=pool.domain,
                                                 pass_rates=_pass_rates(policy.curriculum["name"], req, recipe,
                                                                       train_files, cache_root))
        except PolicyConfigError as exc:  # deterministic (a pool smaller than the batch, a missing pre-pass)
            raise TrainingConfigError(f"policy {policy.name!r}: {exc}") from None
        if mixing:
            check_domain_pools(pool.domain, domains, prompts_per_step)
    if mixing:
        from policies import DomainSampler

        sampler = DomainSampler(pool.domain, prompts_per_step, seed=_step_seed(req.seed, 0, 1), n_domains=len(domains),
                                names=domains)
    else:
        order = ShuffledOrder(len(pool), prompts_per_step, req.seed)

    loss_cfg = FSDPActorConfig(
        strategy="fsdp",
        rollout_n=n,
        ppo_mini_batch_size=prompts_per_step,
        ppo_micro_batch_size_per_gpu=prompts_per_step * n,
        clip_ratio=actor_cfg.clip_ratio,
        loss_agg_mode=actor_cfg.loss_agg_mode,
    )
    policy_loss_fn = get_policy_loss_fn(actor_cfg.policy_loss)
    kl_coef = actor_cfg.kl_loss_coef if actor_cfg.use_kl_loss else 0.0
    kl_type = actor_cfg.kl_loss_type
    optim = torch.optim.AdamW(
        model.parameters(),
        lr=actor_cfg.lr,
        weight_decay=actor_cfg.weight_decay,
        betas=(0.9, 0.999),
    )
    grad_clip = actor_cfg.grad_clip
    eval_freq = save_freq if trainer_cfg.eval_freq is None else trainer_cfg.eval_freq
    val_samples = trainer_cfg.val_samples
    val_seed = _step_seed(req.seed, 0, 3)  # the same sampling draws at every evaluation of this run
    ckpt_meta = {"run_id": req.run_id, "run_key": req.run_key, "config_hash": config_hash, "seed": req.seed}

    metrics_path = out / "metrics.jsonl"
    checkpoints: list[Checkpoint] = []
    compute = {"wall_s": 0.0, "gpu_s": 0.0, "rollout_tokens": 0, "update_tokens": 0.0, "prompts_rolled_out": 0,
               "steps": 0}
    budget = req.rollout_token_budget
    if budget is not None:  # the analysis states the budget the runs compared at
        compute["rollout_token_budget"] = budget

    def trainer_state(step: int) -> Callable[[Path], None]:
        extra: dict[str, Any] = {"compute": dict(compute)}
        if mixing:
            extra["sampler"] = sampler.state_dict()
            assert policy is not None  # mixing implies a policy
            extra["policy"] = policy.state_dict()
        else:
            extra["order"] = rs.order_state(order)
        return lambda d: rs.save_trainer_state(d, step=step, optim=optim, extra=extra, curriculum=curriculum)

    first_step, kept_rows = 1, []
    if resume is not None:
        meta = rs.load_trainer_state(resume.path, optim, curriculum)
        if mixing:
            assert policy is not None
            sampler.load_state_dict(meta["sampler"])
            policy.load_state_dict(meta["policy"])
        else:
            rs.load_order_state(order, meta["order"])
        compute.update(meta["compute"])
        first_step = resume.step + 1
        kept_rows = lc.kept_rows(metrics_path, resume.step)
        checkpoints = lc.saved_checkpoints(out)
    ids_log = PromptIdLog(out, resume_step=resume.step if resume is not None else None)
    if sink is not None:  # standalone `campaign train` (this process is the store's only writer): stream each step
        sink.start(req)
    with open(metrics_path, "w") as mf, closing(ids_log), _failed_on_error(sink, req):

        def emit(row: dict[str, Any]) -> None:
            mf.write(json.dumps(row, sort_keys=True) + "\n")
            mf.flush()
            if sink is not None:
                sink.log(row)

        for kept in kept_rows:  # a resumed run's file keeps the steps up to its checkpoint
            mf.write(json.dumps(kept, sort_keys=True) + "\n")
        mf.flush()
        if trainer_cfg.val_before_train and resume is None:
            emit({"step": 0, **heldout_reward(model, tokenizer, heldout, max_new, val_samples, val_seed)})

        for step in range(first_step, total_steps + 1):
            ts = time.time()
            row: dict[str, Any] = {"step": step}
            # 1. which prompts (mixers and curricula act here, before rollout)
            if mixing:
                assert policy is not None  # mixing implies a policy
                if curriculum is not None:  # the mixer's domain counts, the curriculum's prompts within each
                    idx = curriculum_batch(curriculum, step, sampler.counts(policy.proportions(step)), pool.domain)
                else:
                    idx = sampler.sample(policy.proportions(step))
                row.update({f"mix/{k}": float(v) for k, v in sampler.last_diagnostics.items()})
            elif curriculum is not None:
                idx = curriculum_batch(curriculum, step, None, pool.domain)
            else:
                idx = order.next()
            if curriculum is not None:
                row.update({f"curriculum/{k}": float(v) for k, v in curriculum.last_diagnostics.items()})
            ids_log.log(step, idx)
            # 2. rollout
            model.eval()
            roll = ro.generate(
                model,
                tokenizer,
                [pool.messages[i] for i in idx],
                n=n,
                max_new_tokens=max_new,
                temperature=roll_cfg.temperature,
                top_p=roll_cfg.top_p,
                top_k=roll_cfg.top_k,
                seed=_step_seed(req.seed, step, 2),
            )
            mask = roll.response_mask
            acc: list[float] = []
            rewards, statuses = score_responses(pool, idx, roll.texts, n, accuracy=acc)
            correct = np.asarray(acc, dtype=np.float64).reshape(len(idx), n)
            if curriculum is not None:  # the accuracy signal, per rollout (not the shaped score)
                curriculum.update(step, idx, correct)
            group = torch.arange(len(idx)).repeat_interleave(n)
            domain = torch.from_numpy(pool.domain[idx]).repeat_interleave(n)
            # 3. GRPO advantages (verl)
            last = (mask.sum(dim=1).long() - 1).clamp(min=0)
            token_rewards = torch.zeros_like(mask)
            token_rewards[torch.arange(mask.shape[0]), last] = rewards
            advantages, _ = compute_grpo_outcome_advantage(
                token_rewards, mask, index=group.numpy(),
                norm_adv_by_std_in_grpo=actor_cfg.norm_adv_by_std_in_grpo,
            )
            input_ids, attn = roll.input_ids, roll.attention_mask
            with torch.no_grad():
                old_lp = ro.response_log_probs(model, input_ids, attn, mask.shape[1])
                ref_lp = ro.response_log_probs(ref_model, input_ids, attn, mask.shape[1]) if kl_coef else None
            # 4. the data policy, after advantages (selection / reweighting -> rollout_is_weights)
            weights = None
            if policy is not None:
                from policies import StepBatch

                batch = StepBatch(advantages=advantages, rewards=rewards, response_mask=mask, group=group,
                                  old_log_probs=old_lp, domain=domain)
                res = policy.apply(batch, step=step)
                weights = res.weights
                if res.advantages is not None:
                    advantages = res.advantages
                row.update({f"policy/{k}": float(v) for k, v in res.diagnostics.items()})
                if mixing:
                    row.update({f"policy/{k}": float(v) for k, v in policy.observe(batch, step=step).items()})
            # 5. actor update: clipped PG with rollout_is_weights + KL to the reference (verl's functions)
            model.train()
            lp = ro.response_log_probs(model, input_ids, attn, mask.shape[1])
            pg_loss, pg_metrics = policy_loss_fn(
                old_log_prob=old_lp, log_prob=lp, advantages=advantages, response_mask=mask,
                loss_agg_mode=loss_cfg.loss_agg_mode, config=loss_cfg, rollout_is_weights=weights,
            )
            loss = pg_loss
            if kl_coef:
                assert ref_lp is not None  # computed above whenever kl_coef is set
                kl_mat = kl_penalty(lp, ref_lp, kl_type)  # type: ignore[arg-type]  # verl annotates legacy FloatTensor
                kl_loss = agg_loss(loss_mat=kl_mat, loss_mask=mask, loss_agg_mode=loss_cfg.loss_agg_mode)
                loss = loss + kl_coef * kl_loss
                row["actor/kl_loss"] = float(kl_loss.detach())
            optim.zero_grad(set_to_none=True)
            loss.backward()
            grad_norm = torch.nn.utils.clip_grad_norm_(model.parameters(), grad_clip)
            optim.step()
            # 6. metrics
            rollout_tokens = int(mask.sum())
            update_tokens = (float((mask * (weights > 0).float()).sum()) if weights is not None
                             else float(rollout_tokens))
            compute["rollout_tokens"] += rollout_tokens
            compute["update_tokens"] += update_tokens
            compute["prompts_rolled_out"] += len(idx)
            compute["steps"] = step
            row.update({
                "actor/pg_loss": float(pg_loss.detach()), "actor/grad_norm": float(grad_norm),
                **{k: float(v) for k, v in pg_metrics.items()},
                "reward/mean": float(rewards.mean()),
                "response/length_mean": float(mask.sum(dim=1).mean()),
                "response/truncation_rate": float(roll.truncated.float().mean()),
                "reward/no_answer_rate": float(np.mean([s == "no_answer" for s in statuses])),
                # a grader over its time budget scores 0 with status `timeout`: logged, never hidden in the reward
                "reward/timeout_rate": float(np.mean([s == "timeout" for s in statuses])),
                "tokens/rollout": rollout_tokens, "tokens/update": update_tokens,
                "tokens/rollout_cum": compute["rollout_tokens"], "data/prompts": len(idx),
                "data/zero_variance_frac": zero_variance_share(correct),
                # the exploit watch over the rollouts just scored (evaluation/exploit_watch.py)
                **step_watch(roll.texts, np.repeat(pool.grader[idx], n), rewards.numpy(),
                             mask.sum(dim=1).numpy(), roll.truncated.numpy()),
            })
            for d, name in enumerate(domains):
                sel = domain == d
                row[f"reward/mean/{name}"] = float(rewards[sel].mean()) if bool(sel.any()) else float("nan")
                row[f"data/realised_prop_{name}"] = float(sel.float().mean())
            stop = step == total_steps or (budget is not None and compute["rollout_tokens"] >= budget)
            if step % eval_freq == 0 or stop:
                row.update(heldout_reward(model, tokenizer, heldout, max_new, val_samples, val_seed))
            if step % save_freq == 0 or stop:
                checkpoints.append(lc.save_checkpoint(model, tokenizer, out, step, ckpt_meta, trainer_state(step)))
            row["time/step_s"] = time.time() - ts
            emit(row)
            if progress is not None:
                progress(step, total_steps, row)
            if stop:  # the budget is spent (or the step cap reached): stop within one step of it
                break

    compute["wall_s"] = time.time() - t0
    result = TrainResult(checkpoints, metrics_path, compute)
    lc.write_result(out, result, {"config_hash": config_hash, "run_id": req.run_id, "run_key": req.run_key,
                                  "base_model": str(model_dir)})
    if sink is not None:
        sink.finish(req, result)
    return result


@register_backend("local")
class LocalBackend(TrainingBackend):
    """CPU GRPO on tiny models (see the module docstring)."""

    runs_curricula = True
    runs_rollout_budget = True
    runs_difficulty_prepass = True


    def train(self, req: TrainRequest) -> TrainResult:
        return run_training(req)
