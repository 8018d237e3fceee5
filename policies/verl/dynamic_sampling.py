"""Dynamic sampling on verl: the `windtunnel_sync` trainer's replay buffer runs the same round rule as the local
trainer (`policies.dynamic_sampling.dynamic_sample`: over-sample, drop groups whose per-rollout accuracy does not
vary, refill until the batch holds B informative groups or the round cap), with verl's own rollout servers
generating each round.

Why not verl 0.9.1's built-in `algorithm.filter_groups` (v1 `ReplayBuffer._dapo_filtered_keys` and its `sample`
loop, `trainer/ppo/v1/replay_buffer.py`; VERL.md §6): it forces `data.gen_batch_size=1` (`trainer_base.py`
`_init_dataloader`), so a curriculum would be asked for one prompt at a time; it ignores `max_num_gen_batches`
(`_resolve_filter_groups_metric` logs so), so an easy pool refills without end; and it clears the evicted groups
from the TransferQueue inside `sample`, before any trainer hook sees them, so the rollout tokens they cost cannot
be counted toward the run's compute. This buffer subclasses the sync `ReplayBuffer` (its TransferQueue
bookkeeping, `_clear_groups`, `_materialize_batch`) and replaces only `sample` for the training partition.

A round: the trainer draws n prompt ids (the curriculum's `propose` with the step's earlier rounds masked out,
`draw`), submits them to verl's agent loop (`submit`), the buffer waits until every group finished, reads each
rollout's `acc` from `reward_extra_info` (never the shaped score) and the response lengths from the trajectory
tags (every generated token counts), and hands the round to the curriculum (`learn`). After the rounds the kept
groups (and a short batch's zero-variance fill, as the local rule does) are materialised in round order; every
other group of the step is cleared.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable
from typing import Any

import numpy as np
import transfer_queue as tq
from verl.trainer.ppo.v1.replay_buffer import ReplayBuffer
from verl.utils import tensordict_utils as tu
from verl.utils.dataset.rl_dataset import collate_fn

from policies.dynamic_sampling import dynamic_sample, round_options
from policies.errors import PolicyConfigError

ROUND_TIMEOUT_S = 3600.0  # one round's generation; the launcher's rollout watch bounds start-up and weight syncs


class DynamicSamplingBuffer(ReplayBuffer):
    """verl's sync replay buffer whose training `sample` runs dynamic-sampling rounds (module docstring)."""

    ds_params: dict[str, Any]
    pool_size: Callable[[], int]
    rollout_n: int
    draw: Callable[[int, int, np.ndarray], np.ndarray]
    submit: Callable[[np.ndarray], list[str]]
    learn: Callable[[np.ndarray, np.ndarray], None]
    last_drawn: np.ndarray  # every prompt id the last step drew, in round order (the ids log's line)

    @classmethod
    def from_buffer(cls, buf: ReplayBuffer, *, params: dict[str, Any], pool_size: Callable[[], int], rollout_n: int,
                    draw: Callable[[int, int, np.ndarray], np.ndarray],
                    submit: Callable[[np.ndarray], list[str]],
                    learn: Callable[[np.ndarray, np.ndarray], None]) -> DynamicSamplingBuffer:
        """This buffer with the state of the one verl built (`_build_replay_buffer`): verl's constructor contract
        stays verl's. `pool_size()`: the training pool's size (verl builds its dataset after the buffer);
        `draw(step, n, used)` -> prompt ids; `submit(ids)` -> their group uids in order;
        `learn(ids, correct)` feeds a round to the curriculum."""
        if type(buf) is not ReplayBuffer or buf.filter_groups_metric is not None:
            raise PolicyConfigError("windtunnel: dynamic_sampling replaces verl's sampler; remove "
                                    "algorithm.filter_groups and trainer.v1.sampler.custom_sampler from the recipe")
        out = cls.__new__(cls)
        out.__dict__.update(buf.__dict__)
        out.ds_params, out.pool_size, out.rollout_n = dict(params), pool_size, int(rollout_n)
        out.draw, out.submit, out.learn = draw, submit, learn
        out.last_drawn = np.zeros(0, np.int64)
        return out

    def sample(self, global_steps: int, partition_id: str, batch_size: int) -> tuple[Any, dict]:
        if partition_id != "train":
            return super().sample(global_steps, partition_id, batch_size)
        rounds: list[list[str]] = []
        tokens = [0]

        def roll(r: int, ids: np.ndarray) -> np.ndarray:
            uids = self.submit(ids)
            self._wait_finished(partition_id, set(uids))
            correct, n_tokens = self._round_outcome(partition_id, uids)
            tokens[0] += n_tokens
            self.learn(ids, correct)
            rounds.append(uids)
            return correct

        got = dynamic_sample(lambda r, n, used: self.draw(global_steps, n, used), roll, batch_size,
                             self.pool_size(), self.ds_params["oversample"], self.ds_params["max_rounds"],
                             **round_options(self.ds_params))
        picks = [rounds[r][i] for r, i in got.kept + got.filled]
        self._sync_metadata_from_transfer_queue()
        self._clear_groups(partition_id, {u for uids in rounds for u in uids} - set(picks))
        snapshot = dict(self.partitions[partition_id])
        metrics = {f"windtunnel/ds/{k}": v for k, v in got.diagnostics().items()}
        metrics["windtunnel/rollout_tokens"] = float(tokens[0])  # every round's responses, kept or not
        self.last_drawn = np.concatenate(got.drawn) if got.drawn else np.zeros(0, np.int64)  # the ids log's line
        return self._materialize_batch(partition_id, picks, snapshot), metrics

    def _wait_finished(self, partition_id: str, uids: set[str]) -> None:
        """Poll the TransferQueue until every group of the round finished; a failed group is an error (verl's sync
        buffer refuses one too), a round that outlives ROUND_TIMEOUT_S a RuntimeError naming what is missing."""
        t0, last = time.time(), time.time()
        while True:
            self._sync_metadata_from_transfer_queue()
            failed = uids & self.failure_keys[partition_id]
            if failed:
                raise RuntimeError(f"dynamic sampling: {len(failed)} prompt group(s) of the round failed to roll "
                                   f"out (e.g. {sorted(failed)[:3]}); see the rollout server's log")
            left = uids - self.finished_keys[partition_id]
            if not left:
                return
            if time.time() - t0 > ROUND_TIMEOUT_S:
                raise RuntimeError(f"dynamic sampling: {len(left)} of {len(uids)} prompt group(s) did not finish "
                                   f"within {ROUND_TIMEOUT_S:.0f} s")
            last = self._wait_for_next_poll(partition_id, last)

    def _round_outcome(self, partition_id: str, uids: list[str]) -> tuple[np.ndarray, int]:
        """((groups, rollout_n) per-rollout accuracy in `uids` order, response tokens of the round). Accuracy is
        the reward's `acc` (`evaluation/reward.py`), never the shaped score (verl-recipe #125)."""
        index = {u: g for g, u in enumerate(uids)}
        keys = sorted(k for k in self.partitions[partition_id] if k.split("_")[0] in index)
        tokens = int(sum(int(self.partitions[partition_id][k].get("response_len", 0)) for k in keys))
        data = tq.kv_batch_get(keys=keys, partition_id=partition_id, select_fields=["extra_fields"])
        rows: list[list[float]] = [[] for _ in uids]
        for key, extra in zip(keys, list(data["extra_fields"]), strict=True):
            info = (getattr(extra, "data", extra) or {}).get("reward_extra_info", {})
            if "acc" not in info:
                raise PolicyConfigError("windtunnel: dynamic_sampling reads per-rollout correctness: the reward "
                                        "function must return {'score': ..., 'acc': ...} (evaluation/reward.py "
                                        "compute_score does)")
            rows[index[key.split("_")[0]]].append(float(info["acc"]))
        short = [u for u, r in zip(uids, rows, strict=True) if len(r) != self.rollout_n]
        if short:
            raise RuntimeError(f"dynamic sampling: {len(short)} group(s) hold other than rollout.n = "
                               f"{self.rollout_n} trajectories (e.g. {short[0]})")
        return np.asarray(rows, dtype=np.float64).reshape(len(uids), self.rollout_n), tokens


class DynamicSamplingRounds:
    """The `windtunnel_sync` trainer's side of dynamic sampling (mixed into `WindtunnelTrainer`): the buffer
    above in place of verl's, no `prepare_step` dispatch (the buffer submits every round), and the three
    callbacks. Without a `dynamic_sampling:` block every method is verl's."""

    wt_policy: Any
    wt_curriculum: Any
    wt_pending_metrics: dict[str, float]
    replay_buffer: Any
    train_dataset: Any
    config: Any
    global_steps: int

    def _build_replay_buffer(self) -> Any:
        buf = super()._build_replay_buffer()  # type: ignore[misc]
        if not self.wt_dynamic:
            return buf
        return DynamicSamplingBuffer.from_buffer(buf, params=self.wt_policy.dynamic_sampling,
                                                 pool_size=lambda: len(self.train_dataset),
                                                 rollout_n=int(self.config.actor_rollout_ref.rollout.n),
                                                 draw=self._wt_ds_draw, submit=self._wt_ds_submit,
                                                 learn=self._wt_ds_learn)

    @property
    def wt_dynamic(self) -> bool:
        return bool(self.wt_policy is not None and self.wt_policy.dynamic_sampling)

    def prepare_step(self) -> dict:
        if self.wt_dynamic:  # the buffer's `sample` submits every round itself
            return {}
        return super().prepare_step()  # type: ignore[misc]

    def wt_ds_drawn(self) -> np.ndarray:
        return self.replay_buffer.last_drawn

    def _wt_build_curriculum(self) -> Any:
        raise NotImplementedError  # WindtunnelTrainer's

    def _wt_ds_draw(self, step: int, n: int, used: np.ndarray) -> np.ndarray:
        """A round's n prompt ids, none of the step's earlier rounds: the curriculum's (the `uniform` epoch order
        beside a selector or reweighter, as the local trainer's shuffled order)."""
        if self.wt_curriculum is None:
            self.wt_curriculum = self._wt_build_curriculum()
        ids = self.wt_curriculum.propose(step, allowed=~used, n=n)
        self.wt_pending_metrics.update({f"curriculum/{k}": float(v)
                                        for k, v in self.wt_curriculum.last_diagnostics.items()})
        return ids

    def _wt_ds_submit(self, idx: np.ndarray) -> list[str]:
        """These dataset rows to verl's agent loop as one batch (what `_next_train_batch` and
        `_submit_batch_to_rollout` do, at any size); their group uids in order."""
        batch_dict = collate_fn([self.train_dataset[int(i)] for i in idx])
        uids = [str(uuid.uuid4()) for _ in range(len(idx))]
        batch_dict["uid"] = np.array(uids, dtype=object)
        batch = tu.get_tensordict(batch_dict)
        tu.assign_non_tensor_data(batch, "global_steps", self.global_steps)
        self._submit_batch_to_rollout(batch)  # type: ignore[attr-defined]
        return uids

    def _wt_ds_learn(self, idx: np.ndarray, correct: np.ndarray) -> None:
        """Every round teaches the curriculum (GRESO learns from every round's rollouts, as in its paper)."""
        self.wt_curriculum.update(int(self.global_steps), idx, correct)
