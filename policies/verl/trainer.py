"""`windtunnel_sync`: verl 0.9.1's v1 sync trainer with the data-policy hook (VERL.md §3).

- After verl's own `_compute_advantage` it reads the fields the policy needs from the TransferQueue, builds a
  `StepBatch`, runs the policy and writes `rollout_is_weights` *multiplied into* any weights verl's rollout
  correction wrote (P8), plus `advantages` when the policy recomputes them. It returns the meta from its OWN
  `kv_batch_put`: super's meta has a frozen `fields` list, and returning it makes the worker skip the new
  field, silently ignoring the weights (VERL.md §3.3).
- Mixers: the same hook feeds the step's per-domain signals to the policy; `_fetch_one_gen_batch` draws the
  next prompts from per-domain pools with `DomainSampler` in the policy's proportions, so mixing changes
  what is rolled out (P12). Target and realised proportions and an inert flag are logged.
- Curricula (VERL.md §3.5): a policy with a `curriculum:` block proposes the next prompts in the same
  `_fetch_one_gen_batch` seam (under a mixer: the mixer's domain counts, the curriculum's prompts within each
  domain, `policies.curricula.compose`), learns from each rollout's correctness (the reward's `acc`, not the
  shaped score) after the reward, logs each step's proposed ids to `<run>/rollout_ids.jsonl` and its
  diagnostics as `windtunnel/curriculum/*`; its state (npz + JSON) is saved in every verl checkpoint folder.
- Metrics go through verl's metrics dict as `windtunnel/<key>`.

Config (Hydra overrides; `policies.verl.launcher.launcher_overrides` writes them):
`trainer.v1.trainer_mode=windtunnel_sync`, `+windtunnel.policy=<abs path to a policy YAML>` (an inline
mapping `+windtunnel.policy={name: ..., ...}` also works), optional `+windtunnel.seed` (default `data.seed`),
`+windtunnel.domains=[math,logic,science]`, `+windtunnel.domain_key=domain` (dataset column).
"""

from __future__ import annotations

import json
import os
import time
import uuid
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import torch
import transfer_queue as tq
from omegaconf import DictConfig, OmegaConf
from tensordict import TensorDict
from verl.trainer.ppo.v1 import PPOTrainerSync, register_trainer
from verl.utils import tensordict_utils as tu
from verl.utils.dataset.rl_dataset import collate_fn
from verl.workers.utils.padding import response_to_nested

from policies.curricula.compose import curriculum_batch
from policies.curricula.state import load_state, save_state
from policies.errors import PolicyConfigError
from policies.loader import load_policy
from policies.policy import DataPolicy
from policies.sampler import DomainSampler, is_inert
from policies.verl.dynamic_sampling import DynamicSamplingRounds
from policies.verl.bridge import (apply_in_canonical_order, build_step_batch, rollout_correctness, rolled_out_prompts,
                                  to_list)
from wtcommon import rollout_watch
from wtcommon.prompt_ids import PromptIdLog

if TYPE_CHECKING:
    from torch import Tensor

TRAINER_NAME = "windtunnel_sync"
METRIC_PREFIX = "windtunnel/"


def policy_from_config(config: DictConfig) -> DataPolicy | None:
    """Build the policy named by `windtunnel.policy` (path or mapping); None when the block is absent."""
    block = config.get("windtunnel", None)
    if block is None or block.get("policy", None) is None:
        return None
    src = block.get("policy")
    source: Any = OmegaConf.to_container(src, resolve=True) if isinstance(src, DictConfig) else str(src)
    seed = block.get("seed", None)
    if seed is None:
        seed = config.data.get("seed", 0) or 0
    domains = block.get("domains", None)
    domains = list(domains) if domains is not None else None
    return load_policy(source, seed=int(seed), domains=domains, rollout_n=int(config.actor_rollout_ref.rollout.n))


@register_trainer(TRAINER_NAME)
class WindtunnelTrainer(DynamicSamplingRounds, PPOTrainerSync):
    """PPOTrainerSync + the Windtunnel data-policy hook (see the module docstring)."""

    # verl branches on `self.trainer_mode == "sync"`, read from the registry name in the config
    # (`trainer/ppo/v1/trainer_base.py:129`): with "windtunnel_sync" it built the async replay buffer (:153),
    # forced one-prompt dataloader fetches (:731, so the mixer drew every batch one prompt at a time and
    # logged one prompt's proportions) and checkpointed the TransferQueue (:902, :1004). This class IS verl's
    # sync trainer plus a hook, so it reports the mode "sync" whatever name selected it.
    @property
    def trainer_mode(self) -> str:
        return "sync"

    @trainer_mode.setter
    def trainer_mode(self, value: str) -> None:  # verl assigns the config's name; the mode stays sync
        pass

    def __init__(self, config: DictConfig) -> None:
        self.wt_policy = policy_from_config(config)  # before super(): `_build_replay_buffer` reads it
        super().__init__(config)
        block = config.get("windtunnel", None) or {}
        self.wt_domain_key: str = block.get("domain_key", "domain")
        self.wt_sampler: DomainSampler | None = None
        self.wt_pending_metrics: dict[str, float] = {}
        self.wt_skip_update = False  # set by `_compute_advantage` when the policy zeroed every weight
        self.wt_curriculum: Any = None  # built on the training pool at the first fetch or on resume
        self.wt_uid_prompt: dict[str, int] = {}  # this step's prompt group uid -> pool index (curriculum update)
        self.wt_ids_log: PromptIdLog | None = None
        self.wt_resume_step: int | None = None
        self._wt_runtime_record(started_at=time.time())
        self._wt_wait("start-up", "the actor workers and the rollout servers")

    # ---- the waits that can hang (wtcommon/rollout_watch.py: the launcher bounds them) -----------------
    def _wt_wait(self, kind: str, what: str) -> None:
        train_dir = self._wt_run_dir()
        if train_dir is not None:
            rollout_watch.begin(train_dir, kind, what)

    def _wt_waited(self) -> None:
        train_dir = self._wt_run_dir()
        if train_dir is not None:
            rollout_watch.end(train_dir)

    def on_init_end(self) -> None:
        self._wt_wait("weight sync", "the first weight sync to the rollout servers")
        super().on_init_end()
        self._wt_wait("start-up", "the agent loop")

    def on_train_begin(self) -> None:
        self._wt_waited()
        super().on_train_begin()

    # ---- which runtime this run lives in (isolation is checkable from outside) ------------------------
    def _wt_runtime_record(self, **fields: Any) -> None:
        """Merge `fields` into `<run>/verl_runtime.json` next to the checkpoint dir: the Ray runtime's GCS
        address, the TransferQueue controller's actor id and the times the trainer started/ended.
        Concurrent runs must show different controllers (docs/verl_on_cpu.md, isolation)."""
        import ray
        from transfer_queue import interface as tq_interface

        run_dir = Path(str(self.config.trainer.default_local_dir))
        if not run_dir.is_absolute():
            return  # not launched by Windtunnel (which always passes an absolute per-run dir): write nothing
        path = run_dir.parent / RUNTIME_FILE
        rec = json.loads(path.read_text()) if path.is_file() else {}
        controller = getattr(tq_interface, "_TQ_CONTROLLER", None)
        ctx = ray.get_runtime_context()
        rec.update({"gcs_address": ctx.gcs_address, "job_id": ctx.get_job_id(), "pid": os.getpid(),
                    "tq_controller_actor_id": controller._actor_id.hex() if controller is not None else None})
        rec.update(fields)
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps(rec, indent=1))
        os.replace(tmp, path)

    def _wt_rank_nodes(self) -> list[str] | None:
        """The Ray node id of every actor/rollout worker (FSDP rank order): a multi-node run's proof that its
        ranks span its nodes. None when verl's worker group does not expose its actors."""
        import ray

        wg = getattr(self, "actor_rollout_wg", None)
        workers = getattr(wg, "_workers", None) or getattr(wg, "workers", None)
        if not workers:
            return None
        try:
            return ray.get([w.__ray_call__.remote(lambda _: ray.get_runtime_context().get_node_id())
                            for w in workers], timeout=60)
        except Exception:  # a diagnostic: never the reason a run fails
            return None

    def on_step_end(self) -> None:
        self._wt_wait("weight sync", f"the weight sync after step {int(self.global_steps)}")
        super().on_step_end()
        self._wt_waited()
        # `fit` returns from inside its loop after the last step (`trainer_base.py:527`) and never reaches
        # `on_train_end`, so the end time is the last step's end
        extra = {}
        if not getattr(self, "_wt_ranks_recorded", False):
            self._wt_ranks_recorded = True
            extra["rank_nodes"] = self._wt_rank_nodes()
        self._wt_runtime_record(ended_at=time.time(), last_step=int(self.global_steps), **extra)

    # ---- selection / reweighting / mixer feedback ------------------------------------------------
    def _compute_advantage(self, batch, metrics: dict):
        batch = super()._compute_advantage(batch, metrics)
        policy = self.wt_policy
        self.wt_skip_update = False
        if policy is None:
            return batch
        # rollouts of this step (rows verl did not add as `_balance_batch` padding): what the reward function
        # was called for, so a reward audit can be checked against verl's own batch
        metrics[f"{METRIC_PREFIX}rollouts"] = float(sum(not t.get("is_padding", False) for t in batch.tags))
        step = int(getattr(self, "global_steps", 0) or 0)
        existing = list(batch.fields or [])
        metrics.update(self._wt_watch(batch, existing))
        if self.wt_dynamic:  # the rounds fed the curriculum already; the ids log holds every round's prompts
            self._wt_log_ids(step, self.wt_ds_drawn())
        elif self.wt_curriculum is not None:
            metrics.update(self._wt_update_curriculum(batch, existing, step))
        if policy.mechanism == "none":
            return batch
        select = ["uid", "response_mask", "rm_scores", "advantages"]
        if policy.scorer is not None and "old_log_probs" in policy.scorer.reads:
            select.append("old_log_probs")
        if policy.mechanism == "mix":
            select.append(self.wt_domain_key)
        else:  # the content that fixes the order the policy sees the rows in (bridge.canonical_order)
            select += ["prompts", "responses"]
        has_is = "rollout_is_weights" in existing
        if has_is:
            select.append("rollout_is_weights")
        data = tq.kv_batch_get(keys=batch.keys, partition_id=batch.partition_id, select_fields=select)
        jagged_mask = data["response_mask"]
        uids = to_list(data["uid"])
        domains = to_list(data[self.wt_domain_key]) if policy.mechanism == "mix" else None
        keys = ("response_mask", "rm_scores", "advantages", "old_log_probs", "rollout_is_weights")
        padded: dict[str, Tensor] = {
            k: data[k].to_padded_tensor(0.0) if k != "response_mask" else data[k].to_padded_tensor(0)
            for k in keys if k in select}
        sb = build_step_batch(padded, uids, batch.tags, domains=domains, domain_names=policy.domains or None)
        out = {f"{METRIC_PREFIX}{k}": float(v) for k, v in self.wt_pending_metrics.items()}
        self.wt_pending_metrics = {}
        if policy.mechanism == "mix":
            assert domains is not None  # read above for a mix policy
            out.update(rolled_out_prompts(uids, domains, [bool(t.get("is_padding", False)) for t in batch.tags],
                                          policy.domains, prefix=METRIC_PREFIX))
            out.update({f"{METRIC_PREFIX}{k}": v for k, v in policy.observe(sb, step=step).items()})
            metrics.update(out)
            return batch
        # in an order fixed by content, not by which sample finished first (bridge.canonical_order)
        res = apply_in_canonical_order(policy, sb, data["prompts"].to_padded_tensor(-1),
                                       data["responses"].to_padded_tensor(-1), step)
        out.update({f"{METRIC_PREFIX}{k}": float(v) for k, v in res.diagnostics.items()})
        metrics.update(out)
        fields: dict[str, Any] = {}
        if res.weights is not None:
            w = res.weights
            if has_is:
                w = w * padded["rollout_is_weights"].float()  # multiply, never overwrite (P8)
            fields["rollout_is_weights"] = response_to_nested(w, jagged_mask)
            # Every weight zero: the policy keeps nothing this step, so the actor must not move. verl would
            # still call `optimizer.step()` on the zero gradient (`workers/engine/fsdp/transformer_impl.py:
            # optimizer_step` skips only non-finite norms), and AdamW then moves every parameter by its
            # decoupled weight decay and by the momentum of earlier steps. `_update_actor` skips the update.
            self.wt_skip_update = not bool(torch.any(w != 0))
            metrics[f"{METRIC_PREFIX}update_skipped"] = float(self.wt_skip_update)
        if res.advantages is not None:
            fields["advantages"] = response_to_nested(res.advantages, jagged_mask)
        if not fields:
            return batch
        meta = tq.kv_batch_put(keys=batch.keys, partition_id=batch.partition_id,
                               fields=TensorDict(fields, batch_size=len(batch)))
        # Return OUR put's meta (its `fields` lists every persisted field, incl. ours); keep the step's tags
        # and batch-level extra_info, which the put does not carry.
        if not meta.tags or len(meta.tags) != len(batch.keys):
            meta.tags = batch.tags
        if batch.extra_info:
            meta.extra_info = {**(meta.extra_info or {}), **batch.extra_info}
        return meta

    def _update_actor(self, batch, metrics: dict):
        if self.wt_skip_update:
            self.wt_skip_update = False
            return batch  # no optimizer or LR-scheduler step: the parameters stay bit-identical
        return super()._update_actor(batch, metrics)

    # ---- mixing before rollout -----------------------------------------------------------------
    def _wt_build_sampler(self) -> DomainSampler:
        policy = self.wt_policy
        assert policy is not None  # built only for a mix policy (_fetch_one_gen_batch)
        key = self.wt_domain_key
        frame = self.train_dataset.dataframe
        if key not in frame.column_names:
            raise PolicyConfigError(f"windtunnel: the training data has no {key!r} column (columns: "
                                    f"{frame.column_names}); "
                                    "add it or set +windtunnel.domain_key")
        names = policy.domains
        index = {n: i for i, n in enumerate(names)}
        values = [str(v) for v in frame[key]]
        bad = sorted(set(values) - set(index))
        if bad:
            raise PolicyConfigError(f"windtunnel: domain values {bad[:5]} in column {key!r} are not in the policy's "
                                    f"domains {names}")
        gen_bs = self.config.data.get("gen_batch_size", None) or self.config.data.train_batch_size
        return DomainSampler(np.array([index[v] for v in values]), batch_size=int(gen_bs), seed=policy.seed,
                             n_domains=len(names), names=names)

    def _fetch_one_gen_batch(self) -> TensorDict:
        policy = self.wt_policy
        mixing = policy is not None and policy.mechanism == "mix"
        if policy is None or (not mixing and policy.curriculum is None):
            return super()._fetch_one_gen_batch()
        diag: dict[str, float] = {}
        if mixing and self.wt_sampler is None:
            self.wt_sampler = self._wt_build_sampler()
        if policy.curriculum is not None:
            if self.wt_curriculum is None:
                self.wt_curriculum = self._wt_build_curriculum()
            step = int(getattr(self, "global_steps", 0) or 0)
            counts = self.wt_sampler.counts(policy.proportions()) if self.wt_sampler is not None else None
            idx = curriculum_batch(self.wt_curriculum, step, counts, self._wt_pool_domains(policy.domains or None))
            diag.update({f"curriculum/{k}": float(v) for k, v in self.wt_curriculum.last_diagnostics.items()})
            self._wt_log_ids(step, idx)
        else:
            assert self.wt_sampler is not None  # mixing
            idx = self.wt_sampler.sample(policy.proportions())
        batch_dict = collate_fn([self.train_dataset[int(i)] for i in idx])
        uids = [str(uuid.uuid4()) for _ in range(len(idx))]
        batch_dict["uid"] = np.array(uids, dtype=object)
        self.wt_uid_prompt.update(zip(uids, (int(i) for i in idx), strict=True))  # until the update
        if not mixing:
            self.wt_pending_metrics.update(diag)
            return tu.get_tensordict(batch_dict)
        assert self.wt_sampler is not None  # built above for a mixer
        diag.update(self.wt_sampler.last_diagnostics)
        # the target THIS batch was drawn for (`target_prop_*` is overwritten in the same step's metrics by the
        # mixer's next proportions, computed from this batch's rewards)
        diag.update({f"batch_{k}": v for k, v in self.wt_sampler.last_diagnostics.items()
                     if k.startswith("target_prop_")})
        diag["mix_inert"] = float(is_inert(self.wt_sampler.history[-50:]) and len(self.wt_sampler.history) >= 10)
        self.wt_pending_metrics.update(diag)
        return tu.get_tensordict(batch_dict)

    # ---- the exploit watch ----------------------------------------------------------------------
    def _wt_watch(self, batch: Any, existing: list[str]) -> dict[str, float]:
        """The exploit watch (evaluation/exploit_watch.py) over this step's scored rollouts, the local trainer's
        `watch/*` keys: rewarded responses offering several final answers, answering without reasoning, at the
        length limit, and the mean response length. Each row is read by its data source's grader family."""
        from evaluation.exploit_watch import step_watch
        from evaluation.reward import route

        if getattr(self, "tokenizer", None) is None or not {"responses", "response_mask", "rm_scores"} <= set(existing):
            return {}  # verl's batch always holds them; a trainer built without them (a unit fake) has no watch
        fields = ["responses", "response_mask", "rm_scores"] + (["data_source"] if "data_source" in existing else [])
        data = tq.kv_batch_get(keys=batch.keys, partition_id=batch.partition_id, select_fields=fields)
        keep = np.array([not t.get("is_padding", False) for t in batch.tags], dtype=bool)
        mask = data["response_mask"].to_padded_tensor(0)
        lengths = mask.sum(-1)
        responses = data["responses"].to_padded_tensor(self.tokenizer.pad_token_id)
        texts = self.tokenizer.batch_decode([r[: int(n)] for r, n in zip(responses, lengths, strict=True)],
                                            skip_special_tokens=True)
        sources = to_list(data["data_source"]) if "data_source" in fields else ["unknown"] * len(texts)
        family: dict[str, str] = {}
        for src in {str(x) for x in sources}:
            try:
                family[src] = route(src)[0]
            except ValueError:  # the reward refuses such a row itself; here it is read by no family
                family[src] = ""
        graders = np.array([family[str(src)] for src in sources], dtype=object)
        rewards = data["rm_scores"].to_padded_tensor(0.0).sum(-1).float().numpy()
        at_limit = (lengths >= int(self.config.data.max_response_length)).numpy()
        return step_watch([t for t, k in zip(texts, keep, strict=True) if k], graders[keep], rewards[keep],
                          lengths.float().numpy()[keep], at_limit[keep])

    # ---- curricula before rollout ----------------------------------------------------------------
    def _wt_pool_domains(self, names: list[str] | None) -> np.ndarray:
        """(pool,) dense domain id of every training prompt (zeros without domains): a mixer's counts are
        drawn within these."""
        frame = self.train_dataset.dataframe
        if not names or self.wt_domain_key not in frame.column_names:
            return np.zeros(len(self.train_dataset), dtype=np.int64)
        index = {n: i for i, n in enumerate(names)}
        return np.array([index.get(str(v), -1) for v in frame[self.wt_domain_key]], dtype=np.int64)

    def _wt_build_curriculum(self) -> Any:
        """The policy's curriculum over verl's training pool (one id per dataset row), one batch per fetch."""
        policy = self.wt_policy
        assert policy is not None and (policy.curriculum is not None or policy.dynamic_sampling)
        gen_bs = int(self.config.data.get("gen_batch_size", None) or self.config.data.train_batch_size)
        if policy.curriculum is None:  # dynamic sampling beside a selector/reweighter: the uniform epoch order
            from policies.curricula.registry import build_curriculum

            return build_curriculum("uniform", {}, len(self.train_dataset), int(self.config.data.train_batch_size),
                                    int(policy.seed) + 4)
        domains = self._wt_pool_domains(policy.domains or None)
        if policy.mechanism == "mix":  # a mixer may give one domain the whole batch (training.prompt_choice)
            sizes = np.bincount(domains[domains >= 0], minlength=len(policy.domains))
            short = [f"{n} ({int(c)})" for n, c in zip(policy.domains, sizes, strict=True) if c < gen_bs]
            if short:
                raise PolicyConfigError(f"windtunnel: curriculum with a mixer: domain pool(s) {short} hold fewer "
                                        f"prompts than data.train_batch_size = {gen_bs}; lower it or add prompts")
        # its own stream of the run seed, so its draws move neither the mixer's sampler nor verl's dataloader
        return policy.build_curriculum(len(self.train_dataset), gen_bs, seed=int(policy.seed) + 4, domains=domains)

    def _wt_run_dir(self) -> Path | None:
        run_dir = Path(str(self.config.trainer.default_local_dir))
        return run_dir.parent if run_dir.is_absolute() else None  # not launched by Windtunnel: no log

    def _wt_log_ids(self, step: int, idx: np.ndarray) -> None:
        """`<run>/rollout_ids.jsonl`, the local trainer's format: a resumed run keeps the lines up to its
        checkpoint step and continues the file."""
        if self.wt_ids_log is None:
            run_dir = self._wt_run_dir()
            if run_dir is None:
                return
            self.wt_ids_log = PromptIdLog(run_dir, resume_step=self.wt_resume_step)
        self.wt_ids_log.log(step, idx)

    def _wt_update_curriculum(self, batch: Any, existing: list[str], step: int) -> dict[str, float]:
        """Feed the step's per-rollout correctness to the curriculum: the reward's `acc` (in `extra_fields`'
        `reward_extra_info`), never the shaped score (verl-recipe #125)."""
        select = ["uid"] + (["extra_fields"] if "extra_fields" in existing else ["rm_scores"])
        data = tq.kv_batch_get(keys=batch.keys, partition_id=batch.partition_id, select_fields=select)
        uids = to_list(data["uid"])
        padding = [bool(t.get("is_padding", False)) for t in batch.tags]
        extra = to_list(data["extra_fields"]) if "extra_fields" in select else None
        ids, correct, from_acc = rollout_correctness(uids, padding, self.wt_uid_prompt, extra)
        if not from_acc:
            raise PolicyConfigError("windtunnel: curriculum: the rollouts carry no `acc` in their reward_extra_info; "
                                    "a curriculum reads per-rollout correctness, so the reward function must "
                                    "return {'score': ..., 'acc': ...} (evaluation/reward.py compute_score does)")
        self.wt_curriculum.update(step, ids, correct)
        self.wt_uid_prompt = {}
        return {f"{METRIC_PREFIX}curriculum/zero_variance_share":
                float(np.mean(np.all(correct == correct[:, :1], axis=1))) if correct.size else float("nan"),
                f"{METRIC_PREFIX}curriculum/mean_acc": float(correct.mean()) if correct.size else float("nan")}

    # ---- mixing state in checkpoints (verl's data.pt holds only the dataloader) --------------------
    def _wt_step_folder(self) -> Path:
        base = Path(self.config.trainer.default_local_dir)
        if self.config.trainer.get("resume_mode",
                                   "auto") == "resume_path" and self.config.trainer.get("resume_from_path"):
            return Path(self.config.trainer.resume_from_path).absolute()
        return base.absolute() / f"global_step_{self.global_steps}"

    def _save_checkpoint(self, *args: Any, **kwargs: Any):
        out = super()._save_checkpoint(*args, **kwargs)
        folder = Path(self.config.trainer.default_local_dir).absolute() / f"global_step_{self.global_steps}"
        if self.wt_policy is not None and self.wt_policy.mechanism == "mix":
            save_mix_state(folder / MIX_STATE_FILE, self.wt_policy, self.wt_sampler)
        if self.wt_curriculum is not None:
            save_state(folder / CURRICULUM_STATE_FILE, self.wt_curriculum)
        return out

    def _load_checkpoint(self, *args: Any, **kwargs: Any):
        out = super()._load_checkpoint(*args, **kwargs)
        if self.wt_policy is not None and self.wt_policy.mechanism == "mix" and self.global_steps > 0:
            path = self._wt_step_folder() / MIX_STATE_FILE
            if path.is_file():
                state = load_mix_state(path, self.wt_policy)
                if state.get("sampler") is not None:
                    self.wt_sampler = self._wt_build_sampler()
                    self.wt_sampler.load_state_dict(state["sampler"])
                # visible in verl's metrics of the next step: the mixer resumed from this checkpoint step
                self.wt_pending_metrics["mix_state_restored_step"] = float(self.global_steps)
        if self.wt_policy is not None and (self.wt_policy.curriculum is not None or self.wt_dynamic) \
                and self.global_steps > 0:
            self.wt_resume_step = int(self.global_steps)
            path = self._wt_step_folder() / CURRICULUM_STATE_FILE
            # a checkpoint without the state would resume a fresh curriculum: other prompts than the run's own
            self.wt_curriculum = self._wt_build_curriculum()
            self.wt_curriculum.load_state_dict(load_state(path))  # missing or foreign: PolicyConfigError
            self.wt_pending_metrics["curriculum_state_restored_step"] = float(self.global_steps)
        return out


MIX_STATE_FILE = "windtunnel_mix.json"
CURRICULUM_STATE_FILE = "windtunnel_curriculum.npz"  # + its JSON sidecar (policies.curricula.state)
RUNTIME_FILE = "verl_runtime.json"


def save_mix_state(path: Path, policy: DataPolicy, sampler: DomainSampler | None) -> None:
    """Atomically write the mixer's statistics/proportions and the sampler's position as JSON."""
    path.parent.mkdir(parents=True, exist_ok=True)
    state = {"policy": policy.name, "state": policy.state_dict(), "sampler": sampler.state_dict() if sampler else None}
    tmp = path.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(state))
    os.replace(tmp, path)


def load_mix_state(path: Path, policy: DataPolicy) -> dict:
    state = json.loads(path.read_text())
    if state.get("policy") != policy.name:
        raise PolicyConfigError(f"{path}: mixing state of policy {state.get('policy')!r}, but this run uses "
                                f"{policy.name!r}")
    policy.load_state_dict(state["state"])
    return state
