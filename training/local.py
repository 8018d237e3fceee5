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

Layout: the run's set-up and state (`LocalRun`) are in `training.local_setup`, its checkpoints and resume
point in `training.local_checkpoints`, its prompt pools in `training.prompt_pool`; here are the grading, the
held-out reward and the step loop, one helper per phase (propose, rollout, advantages, policy, update, log).
"""

from __future__ import annotations

import json
import shutil
import time
from collections.abc import Callable, Iterator
from contextlib import closing, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO

import numpy as np
import torch

from evaluation.exploit_watch import step_watch
from training import local_checkpoints as lc
from training import rollout as ro
from training.backend import MetricsSink, TrainingBackend, TrainRequest, TrainResult
from training.config import load_model_config, load_recipe  # noqa: F401 - the trainer's API (tests, benchmarks)
from training.local_setup import LocalRun, build_run, step_counts, step_seed
from training.prompt_choice import PromptIdLog, curriculum_batch, zero_variance_share
from training.prompt_pool import PromptPool
from training.registry import register_backend

ProgressFn = Callable[[int, int, dict[str, Any]], None]


# --- grading ------------------------------------------------------------------------------------


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
    """A verified finished run's result as is; else set the run up (from its last resumable checkpoint, if any),
    train it step by step, and write `result.json`."""
    t0, c0 = time.time(), time.process_time()
    total_steps, save_freq = step_counts(req)
    out = Path(req.out_dir).resolve()
    config_hash = req.weights_hash()  # stored as "config_hash" (see weights_hash)
    done = lc.finished_result(out, config_hash)
    if done is not None:
        return done
    resume = lc.resume_point(out, config_hash)
    if resume is None:
        shutil.rmtree(out / "checkpoints", ignore_errors=True)
    out.mkdir(parents=True, exist_ok=True)
    run = build_run(req, out, config_hash, resume, total_steps, save_freq)
    build = {k: run.compute[k] for k in ("build_s", "build_cpu_s")}  # this launch's (a restore brings the saved)
    first_step, kept = (1, []) if resume is None else (resume.step + 1, run.restore(resume))
    ids_log = PromptIdLog(out, resume_step=resume.step if resume is not None else None)
    if sink is not None:  # standalone `campaign train` (this process is the store's only writer): stream each step
        sink.start(req)
    with open(run.metrics_path, "w") as mf, closing(ids_log), _failed_on_error(sink, req):
        _train(run, mf, ids_log, first_step, kept, resume is None, progress, sink)
    run.compute.update(build, wall_s=time.time() - t0, cpu_s=time.process_time() - c0)
    run.compute.update(train_wall_s=run.compute["wall_s"] - build["build_s"],
                       train_cpu_s=run.compute["cpu_s"] - build["build_cpu_s"])
    result = TrainResult(run.checkpoints, run.metrics_path, run.compute)
    lc.write_result(out, result, {"config_hash": config_hash, "run_id": req.run_id, "run_key": req.run_key,
                                  "base_model": str(run.model_dir)})
    if sink is not None:
        sink.finish(req, result)
    return result


def _train(run: LocalRun, mf: TextIO, ids_log: PromptIdLog, first_step: int, kept: list[dict[str, Any]],
           fresh: bool, progress: ProgressFn | None, sink: MetricsSink | None) -> None:
    """The metrics file (a resumed run's kept rows first, a fresh run's step-0 evaluation), then the steps until the
    step cap or the rollout-token budget."""

    def emit(row: dict[str, Any]) -> None:
        mf.write(json.dumps(row, sort_keys=True) + "\n")
        mf.flush()
        if sink is not None:
            sink.log(row)

    for row in kept:  # a resumed run's file keeps the steps up to its checkpoint
        mf.write(json.dumps(row, sort_keys=True) + "\n")
    mf.flush()
    if run.req.recipe.trainer.val_before_train and fresh:
        emit({"step": 0, **_heldout(run)})
    for step in range(first_step, run.total_steps + 1):
        row, stop = _step(run, step, ids_log)
        emit(row)
        if progress is not None:
            progress(step, run.total_steps, row)
        if stop:  # the budget is spent (or the step cap reached): stop within one step of it
            break


@dataclass
class _Rollouts:
    """One step's prompts, their rollouts and what the graders made of them (what the later phases read)."""

    idx: np.ndarray
    roll: ro.Rollout
    rewards: torch.Tensor
    statuses: list[str]
    correct: np.ndarray  # (prompts, n): each rollout's correctness
    group: torch.Tensor  # each rollout's prompt (GRPO's group)
    domain: torch.Tensor  # each rollout's domain id
    input_ids: torch.Tensor  # prompt + response, what every log-prob pass reads
    attn: torch.Tensor
    generated_tokens: int | None = None  # dynamic sampling: the rollout tokens of every round, kept or not
    drawn: np.ndarray | None = None  # dynamic sampling: every prompt rolled out this step, in round order

    @property
    def mask(self) -> torch.Tensor:
        return self.roll.response_mask


def _step(run: LocalRun, step: int, ids_log: PromptIdLog) -> tuple[dict[str, Any], bool]:
    """One GRPO step, phase by phase: propose, roll out and score, advantages, the data policy, the actor update,
    metrics, evaluation and checkpoint. Its metrics row and whether the run stops after it."""
    ts = time.time()
    row: dict[str, Any] = {"step": step}
    ds = run.policy.dynamic_sampling if run.policy is not None else None
    if ds:  # rounds of prompts until the batch holds informative groups (policies/dynamic_sampling.py)
        batch = _dynamic_rollouts(run, step, ds, row)
        ids_log.log(step, batch.drawn if batch.drawn is not None else batch.idx)
    else:
        idx = _propose(run, step, row)
        ids_log.log(step, idx)
        batch = _rollout(run, step, idx)
    advantages, old_lp, ref_lp = _advantages(run, batch)
    advantages, weights = _apply_policy(run, batch, advantages, old_lp, step, row)
    actor = _update(run, batch, advantages, old_lp, ref_lp, weights, row)
    _log_step(run, batch, step, weights, actor, row)
    budget = run.budget
    stop = step == run.total_steps or (budget is not None and run.compute["rollout_tokens"] >= budget)
    if step % run.eval_freq == 0 or stop:
        row.update(_heldout(run))
    if step % run.save_freq == 0 or stop:
        run.checkpoints.append(lc.save_checkpoint(run.model, run.tokenizer, run.out, step, run.ckpt_meta,
                                                  run.trainer_state(step)))
    row["time/step_s"] = time.time() - ts
    return row, stop


def _propose(run: LocalRun, step: int, row: dict[str, Any]) -> np.ndarray:
    """The step's prompt ids, before rollout (where mixers and curricula act): a mixer's domain counts with a
    curriculum's prompts within each, a mixer's or a curriculum's alone, else the shuffled order's next batch."""
    curriculum, domain = run.curriculum, run.pool.domain
    if run.mixing:
        if curriculum is not None:
            idx = curriculum_batch(curriculum, step, run.sampler.counts(run.policy.proportions(step)), domain)
        else:
            idx = run.sampler.sample(run.policy.proportions(step))
        row.update({f"mix/{k}": float(v) for k, v in run.sampler.last_diagnostics.items()})
    elif curriculum is not None:
        idx = curriculum_batch(curriculum, step, None, domain)
    else:
        assert run.order is not None  # no mixer: the shuffled order proposes
        idx = run.order.next()
    if curriculum is not None:
        row.update({f"curriculum/{k}": float(v) for k, v in curriculum.last_diagnostics.items()})
    return idx


def _rollout(run: LocalRun, step: int, idx: np.ndarray, round_: int = 0) -> _Rollouts:
    """`n` sampled responses per prompt (seeded per step, and per round under dynamic sampling), graded; a
    curriculum learns each rollout's accuracy (not the shaped score)."""
    n, cfg = run.n, run.req.recipe.rollout
    run.model.eval()
    roll = ro.generate(run.model, run.tokenizer, [run.pool.messages[i] for i in idx], n=n,
                       max_new_tokens=cfg.max_new_tokens, temperature=cfg.temperature, top_p=cfg.top_p,
                       top_k=cfg.top_k, seed=step_seed(run.req.seed, step, 2 if round_ == 0 else 100 + round_))
    acc: list[float] = []
    rewards, statuses = score_responses(run.pool, idx, roll.texts, n, accuracy=acc)
    correct = np.asarray(acc, dtype=np.float64).reshape(len(idx), n)
    if run.curriculum is not None:
        run.curriculum.update(step, idx, correct)
    return _Rollouts(idx, roll, rewards, statuses, correct, group=torch.arange(len(idx)).repeat_interleave(n),
                     domain=torch.from_numpy(run.pool.domain[idx]).repeat_interleave(n), input_ids=roll.input_ids,
                     attn=roll.attention_mask)


def _dynamic_rollouts(run: LocalRun, step: int, ds: dict[str, Any], row: dict[str, Any]) -> _Rollouts:
    """Dynamic sampling: rounds drawn from the curriculum (or the shuffled order), each rolled out and graded, the
    groups whose accuracy varies kept until the batch holds `prompts_per_step` of them; every round's tokens count.
    Logs `ds/*` (rounds, prompts and rollouts generated, rollouts per informative group, zero-variance fill, the
    rounds' sizes)."""
    from policies.dynamic_sampling import dynamic_sample, round_options

    rounds: list[_Rollouts] = []

    def draw(r: int, n: int, used: np.ndarray) -> np.ndarray:
        if run.curriculum is not None:
            ids = run.curriculum.propose(step, allowed=~used, n=n)
            row.update({f"curriculum/{k}": float(v) for k, v in run.curriculum.last_diagnostics.items()})
            return ids
        assert run.order is not None  # no mixer with dynamic sampling (the policy loader refuses it)
        return _order_draw(run.order, n, used)

    def roll(r: int, ids: np.ndarray) -> np.ndarray:
        rounds.append(_rollout(run, step, ids, r))
        return rounds[-1].correct

    got = dynamic_sample(draw, roll, run.req.recipe.actor.prompts_per_step, len(run.pool), ds["oversample"],
                         ds["max_rounds"], **round_options(ds))
    row.update({f"ds/{k}": v for k, v in got.diagnostics().items()})
    picks = got.kept + got.filled
    n = run.n
    rows = [torch.tensor([i * n + j for rr, i in picks if rr == r for j in range(n)], dtype=torch.long)
            for r in range(len(rounds))]
    roll_ = ro.take_rows([b.roll for b in rounds], rows, run.tokenizer.pad_token_id)
    idx = np.array([rounds[r].idx[i] for r, i in picks], dtype=np.int64)
    rewards = torch.cat([rounds[r].rewards[rows[r]] for r in range(len(rounds))])
    statuses = [rounds[r].statuses[int(k)] for r in range(len(rounds)) for k in rows[r]]
    correct = np.concatenate([rounds[r].correct[[i for rr, i in picks if rr == r]] for r in range(len(rounds))])
    return _Rollouts(idx, roll_, rewards, statuses, correct, group=torch.arange(len(idx)).repeat_interleave(n),
                     domain=torch.from_numpy(run.pool.domain[idx]).repeat_interleave(n), input_ids=roll_.input_ids,
                     attn=roll_.attention_mask, generated_tokens=int(sum(int(b.mask.sum()) for b in rounds)),
                     drawn=np.concatenate(got.drawn))


def _order_draw(order: Any, n: int, used: np.ndarray) -> np.ndarray:
    """n prompt ids from the shuffled epoch order that are not `used` this step (the order moves on past them)."""
    seen, out = used.copy(), list[int]()
    while len(out) < n:
        for i in order.next():
            if not seen[i] and len(out) < n:
                seen[i] = True
                out.append(int(i))
    return np.asarray(out, dtype=np.int64)


def _advantages(run: LocalRun, b: _Rollouts) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor | None]:
    """(GRPO advantages, old log-probs, reference log-probs or None without KL): verl's outcome advantage of the
    reward placed on each response's last token."""
    mask = b.mask
    last = (mask.sum(dim=1).long() - 1).clamp(min=0)
    token_rewards = torch.zeros_like(mask)
    token_rewards[torch.arange(mask.shape[0]), last] = b.rewards
    advantages, _ = run.loss.grpo_advantage(token_rewards, mask, index=b.group.numpy(),
                                            norm_adv_by_std_in_grpo=run.req.recipe.actor.norm_adv_by_std_in_grpo)
    with torch.no_grad():
        old_lp = ro.response_log_probs(run.model, b.input_ids, b.attn, mask.shape[1])
        ref_lp = ro.response_log_probs(run.ref_model, b.input_ids, b.attn, mask.shape[1]) if run.kl_coef else None
    return advantages, old_lp, ref_lp


def _apply_policy(run: LocalRun, b: _Rollouts, advantages: torch.Tensor, old_lp: torch.Tensor, step: int,
                  row: dict[str, Any]) -> tuple[torch.Tensor, torch.Tensor | None]:
    """(advantages, rollout_is_weights): the data policy acts after advantages (selection / reweighting); stock
    GRPO leaves both as they are."""
    if run.policy is None:
        return advantages, None
    from policies import StepBatch

    batch = StepBatch(advantages=advantages, rewards=b.rewards, response_mask=b.mask, group=b.group,
                      old_log_probs=old_lp, domain=b.domain)
    res = run.policy.apply(batch, step=step)
    if res.advantages is not None:
        advantages = res.advantages
    row.update({f"policy/{k}": float(v) for k, v in res.diagnostics.items()})
    if run.mixing:
        row.update({f"policy/{k}": float(v) for k, v in run.policy.observe(batch, step=step).items()})
    return advantages, res.weights


def _update(run: LocalRun, b: _Rollouts, advantages: torch.Tensor, old_lp: torch.Tensor, ref_lp: torch.Tensor | None,
            weights: torch.Tensor | None, row: dict[str, Any]) -> dict[str, float]:
    """The actor update with verl's functions: clipped PG with rollout_is_weights plus KL to the reference; the
    actor metrics (`actor/kl_loss` goes straight into `row`)."""
    cfg = run.loss.cfg
    run.model.train()
    lp = ro.response_log_probs(run.model, b.input_ids, b.attn, b.mask.shape[1])
    pg_loss, pg_metrics = run.loss.policy_loss(
        old_log_prob=old_lp, log_prob=lp, advantages=advantages, response_mask=b.mask,
        loss_agg_mode=cfg.loss_agg_mode, config=cfg, rollout_is_weights=weights,
    )
    loss = pg_loss
    if run.kl_coef:
        assert ref_lp is not None  # computed whenever kl_coef is set
        kl_mat = run.loss.kl_penalty(lp, ref_lp, run.req.recipe.actor.kl_loss_type)
        kl_loss = run.loss.agg_loss(loss_mat=kl_mat, loss_mask=b.mask, loss_agg_mode=cfg.loss_agg_mode)
        loss = loss + run.kl_coef * kl_loss
        row["actor/kl_loss"] = float(kl_loss.detach())
    run.optim.zero_grad(set_to_none=True)
    loss.backward()
    grad_norm = torch.nn.utils.clip_grad_norm_(run.model.parameters(), run.req.recipe.actor.grad_clip)
    run.optim.step()
    return {"actor/pg_loss": float(pg_loss.detach()), "actor/grad_norm": float(grad_norm),
            **{k: float(v) for k, v in pg_metrics.items()}}


def _log_step(run: LocalRun, b: _Rollouts, step: int, weights: torch.Tensor | None, actor: dict[str, float],
              row: dict[str, Any]) -> None:
    """The step's compute into the run's account and its metrics into `row` (rewards, lengths, tokens, per-domain
    figures, the exploit watch)."""
    mask, rewards, statuses, compute = b.mask, b.rewards, b.statuses, run.compute
    rollout_tokens = int(mask.sum()) if b.generated_tokens is None else b.generated_tokens  # every round counts
    update_tokens = float((mask * (weights > 0).float()).sum()) if weights is not None else float(mask.sum())
    compute["rollout_tokens"] += rollout_tokens
    compute["update_tokens"] += update_tokens
    compute["prompts_rolled_out"] += len(b.idx) if b.drawn is None else len(b.drawn)
    compute["steps"] = step
    row.update({
        **actor,
        "reward/mean": float(rewards.mean()),
        "response/length_mean": float(mask.sum(dim=1).mean()),
        "response/truncation_rate": float(b.roll.truncated.float().mean()),
        "reward/no_answer_rate": float(np.mean([s == "no_answer" for s in statuses])),
        # a grader over its time budget scores 0 with status `timeout`: logged, never hidden in the reward
        "reward/timeout_rate": float(np.mean([s == "timeout" for s in statuses])),
        "tokens/rollout": rollout_tokens, "tokens/update": update_tokens,
        "tokens/rollout_cum": compute["rollout_tokens"], "data/prompts": len(b.idx),
        "data/zero_variance_frac": zero_variance_share(b.correct),
        # the exploit watch over the rollouts just scored (evaluation/exploit_watch.py)
        **step_watch(b.roll.texts, np.repeat(run.pool.grader[b.idx], run.n), rewards.numpy(),
                     mask.sum(dim=1).numpy(), b.roll.truncated.numpy()),
    })
    for d, name in enumerate(run.pool.domain_names):
        sel = b.domain == d
        row[f"reward/mean/{name}"] = float(rewards[sel].mean()) if bool(sel.any()) else float("nan")
        row[f"data/realised_prop_{name}"] = float(sel.float().mean())


def _heldout(run: LocalRun) -> dict[str, float]:
    """The run's held-out reward now (greedy, and sampled with the run's fixed evaluation seed)."""
    cfg = run.req.recipe
    return heldout_reward(run.model, run.tokenizer, run.heldout, cfg.rollout.max_new_tokens, cfg.trainer.val_samples,
                          run.val_seed)


@register_backend("local")
class LocalBackend(TrainingBackend):
    """CPU GRPO on tiny models (see the module docstring)."""

    runs_curricula = True
    runs_dynamic_sampling = True
    runs_rollout_budget = True
    runs_difficulty_prepass = True


    def train(self, req: TrainRequest) -> TrainResult:
        return run_training(req)
