"""The verl trainer seam (VERL.md §7): verl's real Hydra config, a real TransferQueue on a local Ray, the
plugin-registered trainer, fake rollouts, verl's real `_compute_advantage`."""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

import numpy as np
import pytest
import torch

REPO = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def tq_env():
    import ray
    import transfer_queue as tq
    import verl
    from hydra import compose, initialize_config_dir

    cfg_dir = os.path.join(verl.__path__[0], "trainer/config")
    overrides = [
        "algorithm.adv_estimator=grpo", "actor_rollout_ref.rollout.n=5", "data.train_batch_size=2",
        "actor_rollout_ref.rollout.name=vllm", "transfer_queue.backend.SimpleStorage.num_data_storage_units=1",
        "algorithm.rollout_correction.rollout_is=token", "data.seed=7",
        "trainer.v1.trainer_mode=windtunnel_sync",
        f"+windtunnel.policy={REPO / 'campaigns/policy/gfpo.yaml'}",
    ]
    with initialize_config_dir(config_dir=cfg_dir, version_base=None):
        cfg = compose("ppo_trainer", overrides=overrides)
    # a private runtime without token auth, whatever an earlier test of this worker left configured: the
    # environment the GCS inherits and the token config Ray caches in this process (refreshed as
    # orchestrator/engine/executor/ray_jobs.py::configure_token_auth does)
    from ray._raylet import AuthenticationTokenLoader, Config  # type: ignore[attr-defined]

    saved = {k: os.environ.pop(k) for k in ("RAY_AUTH_MODE", "RAY_AUTH_TOKEN_PATH", "RAY_AUTH_TOKEN")
             if k in os.environ}
    Config.initialize("")
    AuthenticationTokenLoader.instance().reset_cache()
    # the runtime's session files in a temp dir of its own (short: Ray's socket paths), removed at the end,
    # never a /tmp/ray/session_* left behind
    temp = tempfile.mkdtemp(prefix="wt-seam-")
    try:
        ray.init(address="local", num_cpus=4, include_dashboard=False, _temp_dir=temp)
    finally:
        os.environ.update(saved)
    try:
        tq.init(cfg.transfer_queue)
        yield cfg
    finally:
        try:
            tq.close()
        finally:
            ray.shutdown()
            shutil.rmtree(temp, ignore_errors=True)


def _jag(rows):
    return torch.nested.as_nested_tensor(rows, layout=torch.jagged)


def test_trainer_writes_policy_weights_into_returned_meta(tq_env):
    import transfer_queue as tq
    from transfer_queue.metadata import KVBatchMeta
    from verl.trainer.ppo.core_algos import compute_grpo_outcome_advantage
    from verl.trainer.ppo.v1 import get_trainer_cls
    from verl.utils import tensordict_utils as tu

    from policies.verl.plugin import WindtunnelTrainer

    cls = get_trainer_cls("windtunnel_sync")
    assert cls is WindtunnelTrainer
    trainer = cls(config=tq_env)
    assert trainer.wt_policy.name == "gfpo"
    trainer.global_steps = 1

    gen = torch.Generator().manual_seed(0)
    lengths = [3, 5, 2, 4, 6, 1, 3, 3, 2, 5]
    rewards = [1, 0, 1, 1, 0, 0, 0, 0, 1, 0]
    uids = ["ua"] * 5 + ["ub"] * 5
    keys = [f"{u}_{i % 5}_0" for i, u in enumerate(uids)]  # {uid}_{session}_{turn}: one session per rollout
    rm, masks, olp, rlp = [], [], [], []
    prompts = [torch.tensor([5, 6, 7] if u == "ua" else [8, 9]) for u in uids]
    responses = [100 * i + torch.arange(n) for i, n in enumerate(lengths)]  # distinct content per rollout
    for n, r in zip(lengths, rewards, strict=True):
        s = torch.zeros(n)
        s[-1] = r
        rm.append(s)
        masks.append(torch.ones(n, dtype=torch.int64))
        o = -torch.rand(n, generator=gen)
        olp.append(o)
        rlp.append(o + 0.1 * torch.randn(n, generator=gen))
    tq.kv_batch_put(keys=keys, partition_id="train", fields=tu.get_tensordict({
        "rm_scores": _jag(rm), "response_mask": _jag(masks), "old_log_probs": _jag(olp),
        "rollout_log_probs": _jag(rlp), "uid": uids, "prompts": _jag(prompts), "responses": _jag(responses)}))
    metrics: dict = {}
    meta = trainer._compute_advantage(KVBatchMeta(partition_id="train", keys=keys, tags=[{}] * len(keys)), metrics)
    # the worker fetches exactly meta.fields: our weights must be listed (VERL.md §3.3 pitfall)
    assert "rollout_is_weights" in meta.fields and "advantages" in meta.fields
    out = tq.kv_batch_get(keys=keys, partition_id="train")
    w = out["rollout_is_weights"].to_padded_tensor(0.0)
    adv = out["advantages"].to_padded_tensor(0.0)

    # independent expectations: verl's own GRPO advantages on the same data ...
    L = max(lengths)
    tlr = torch.zeros(10, L)
    mask = torch.zeros(10, L)
    for i, (n, r) in enumerate(zip(lengths, rewards, strict=True)):
        tlr[i, n - 1] = r
        mask[i, :n] = 1
    ref_adv, _ = compute_grpo_outcome_advantage(tlr, mask, np.array(uids, dtype=object))
    assert torch.allclose(adv, ref_adv * mask, atol=1e-5)
    # ... gfpo keeps, per group, the 3 highest reward / length; ties (group b's four zeros) go to the earlier
    # rollout in an order fixed by content (bridge.canonical_order), not by the order rollouts finished in
    from policies.verl.bridge import canonical_order

    pad = lambda rows: torch.nested.as_nested_tensor(rows, layout=torch.jagged).to_padded_tensor(-1)  # noqa: E731
    rank = torch.argsort(canonical_order(pad(prompts), pad(responses), torch.tensor([0] * 5 + [1] * 5),
                                         torch.zeros(10, dtype=torch.bool))).tolist()
    eff = [r / n for n, r in zip(lengths, rewards, strict=True)]
    keep = torch.zeros(10)
    for g in range(2):
        idx = sorted(range(5 * g, 5 * g + 5), key=lambda i: (-eff[i], rank[i]))[:3]
        keep[idx] = 1
    # ... multiplied into verl's token-level IS weights (truncated at 2.0), never overwriting them
    olp_p = torch.nested.as_nested_tensor(olp, layout=torch.jagged).to_padded_tensor(0.0)
    rlp_p = torch.nested.as_nested_tensor(rlp, layout=torch.jagged).to_padded_tensor(0.0)
    is_w = torch.exp(olp_p - rlp_p).clamp(max=2.0) * mask
    assert torch.allclose(w, keep[:, None] * is_w, atol=1e-5)
    assert metrics["windtunnel/kept_frac"] == pytest.approx(0.6)
    assert metrics["windtunnel/update_tokens"] == float(sum(n for n, k in zip(lengths, keep.tolist(), strict=True)
                                                            if k))
    tq.kv_clear(keys=keys, partition_id="train")


def _compose(overrides):
    import verl
    from hydra import compose, initialize_config_dir

    with initialize_config_dir(config_dir=os.path.join(verl.__path__[0], "trainer/config"), version_base=None):
        return compose("ppo_trainer", overrides=overrides)


def test_mixer_trainer_feeds_signals_and_changes_what_is_rolled_out(tq_env, tmp_path):
    """Pre-rollout mixing inside the real trainer: `_compute_advantage` feeds per-domain rewards to dump_ucb,
    and `_fetch_one_gen_batch` then draws the next prompts from per-domain pools in the new proportions."""
    import pandas as pd
    import transfer_queue as tq
    from transfer_queue.metadata import KVBatchMeta
    from verl.trainer.ppo.utils import create_rl_dataset
    from verl.trainer.ppo.v1 import get_trainer_cls
    from verl.utils import tensordict_utils as tu

    from training.tiny_model import build_tokenizer
    from policies.sampler import largest_remainder

    domains = ["math", "logic", "science"]
    rows = [{"prompt": [{"role": "user", "content": f"question {i} of {d}"}], "data_source": f"synthetic_{d}",
             "reward_model": {"ground_truth": "1", "style": "rule"}, "extra_info": {"index": i}, "domain": d}
            for i, d in enumerate(domains[i % 3] for i in range(60))]
    path = tmp_path / "train.parquet"
    pd.DataFrame(rows).to_parquet(path)
    cfg = _compose([
        "algorithm.adv_estimator=grpo", "actor_rollout_ref.rollout.n=5", "data.train_batch_size=12",
        "actor_rollout_ref.rollout.name=vllm", "transfer_queue.backend.SimpleStorage.num_data_storage_units=1",
        "trainer.v1.trainer_mode=windtunnel_sync", f"+windtunnel.policy={REPO / 'campaigns/policy/dump_ucb.yaml'}",
        "+windtunnel.seed=3", "data.filter_overlong_prompts=False",
    ])
    trainer = get_trainer_cls("windtunnel_sync")(config=cfg)
    trainer.train_dataset = create_rl_dataset([str(path)], cfg.data, build_tokenizer(), None, is_train=True)

    first = trainer._fetch_one_gen_batch()
    assert sorted(set(first["domain"])) == sorted(domains)
    assert [list(first["domain"]).count(d) for d in domains] == [4, 4, 4]  # uniform before any signal

    # one step of rollouts: math solved, logic and science failed (domain comes from the dataset column)
    uids, keys, doms, rm = [], [], [], []
    for p, d in enumerate(domains):
        for j in range(5):
            uids.append(f"p{p}")
            keys.append(f"p{p}_{j}_0")
            doms.append(d)
            rm.append(torch.tensor([0.0, 1.0 if d == "math" else 0.0]))
    tq.kv_batch_put(keys=keys, partition_id="train", fields=tu.get_tensordict({
        "rm_scores": _jag(rm), "response_mask": _jag([torch.ones(2, dtype=torch.int64)] * 15),
        "old_log_probs": _jag([torch.zeros(2)] * 15), "uid": uids, "domain": doms}))
    trainer.global_steps = 1
    metrics: dict = {}
    trainer._compute_advantage(KVBatchMeta(partition_id="train", keys=keys, tags=[{}] * 15), metrics)
    # as run, dump_ucb = softmax(window mean reward / T) with the max-then-renormalise floor
    expect = torch.softmax(torch.tensor([1.0, 0.0, 0.0]), 0)
    assert [metrics[f"windtunnel/target_prop_{d}"] for d in domains] == pytest.approx(expect.tolist(), abs=1e-6)
    assert metrics["windtunnel/realised_prop_math"] == pytest.approx(1 / 3)  # the first batch's composition

    second = trainer._fetch_one_gen_batch()
    counts = [list(second["domain"]).count(d) for d in domains]
    assert counts == largest_remainder(expect.numpy().astype("float64"), 12).tolist()
    assert counts[0] > 4  # the mixer changed what is rolled out
    tq.kv_clear(keys=keys, partition_id="train")
