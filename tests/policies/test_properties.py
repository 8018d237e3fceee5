"""Property-based tests (hypothesis) of the policy math."""

from __future__ import annotations

import glob
from pathlib import Path

import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from policy_batches import random_batch
from policies import StepBatch, load_policy
from policies.actuators.mix import apply_floor

POLICY_DIR = Path(__file__).resolve().parents[2] / "campaigns" / "policy"
ALL = sorted(Path(p).stem for p in glob.glob(str(POLICY_DIR / "*.yaml")))
SELECT_REWEIGHT = [n for n in ALL if load_policy(POLICY_DIR / f"{n}.yaml").mechanism in ("select", "reweight")]
REWEIGHT = [n for n in ALL if load_policy(POLICY_DIR / f"{n}.yaml").mechanism == "reweight"]
DETERMINISTIC = [n for n in SELECT_REWEIGHT if not n.startswith(("matched_random", "matched_update_tokens_"))]
FAST = settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])

seeds = st.integers(0, 10_000)


@FAST
@given(seed=seeds, name=st.sampled_from(REWEIGHT), pad=st.integers(0, 3))
def test_reweight_weights_average_one_over_their_declared_unit(seed, name, pad):
    batch = random_batch(seed, groups=8, pad_rows=pad, binary=bool(seed % 2))
    pol = load_policy(POLICY_DIR / f"{name}.yaml")
    w = pol.apply(batch, step=0).weights
    unit = pol.actuator.params["normalize"]
    m = batch.mask
    if unit == "sequences":
        per_seq = (w * m).sum(-1) / m.sum(-1).clamp_min(1)
        mean = per_seq[batch.valid].mean()
    elif unit == "tokens":
        mean = (w * m).sum() / m.sum()
    else:
        inf = batch.valid & ((batch.advantages.abs() * m).sum(-1) > 0)
        if not inf.any():
            return
        mi = m * inf.float()[:, None]
        mean = (w * mi).sum() / mi.sum()
    assert float(mean) == pytest.approx(1.0, abs=1e-4)


@FAST
@given(seed=seeds, name=st.sampled_from(SELECT_REWEIGHT), pad=st.integers(1, 4))
def test_padding_rows_and_masked_tokens_never_get_weight(seed, name, pad):
    batch = random_batch(seed, groups=6, pad_rows=pad)
    w = load_policy(POLICY_DIR / f"{name}.yaml", seed=seed).apply(batch, step=seed % 7).weights
    assert (w[batch.response_mask == 0] == 0).all()
    assert (w[batch.is_padding] == 0).all()
    assert torch.isfinite(w).all() and (w >= 0).all()


def _permute_groups(batch: StepBatch, gperm: torch.Tensor, n: int) -> tuple[StepBatch, torch.Tensor]:
    rows = (gperm[:, None] * n + torch.arange(n)[None]).reshape(-1)
    inv = torch.empty_like(gperm)
    inv[gperm] = torch.arange(gperm.numel())
    pb = StepBatch(advantages=batch.advantages[rows], rewards=batch.rewards[rows],
                   response_mask=batch.response_mask[rows],
                   group=inv[batch.group[rows]], old_log_probs=batch.old_log_probs[rows], domain=batch.domain[rows])
    return pb, rows


@FAST
@given(seed=seeds, name=st.sampled_from(DETERMINISTIC))
def test_results_invariant_to_permuting_whole_groups(seed, name):
    groups, n = 10, 5
    batch = random_batch(seed, groups=groups, n=n, binary=False)  # continuous rewards: no cross-group ties
    gperm = torch.randperm(groups, generator=torch.Generator().manual_seed(seed))
    pb, rows = _permute_groups(batch, gperm, n)
    pol = load_policy(POLICY_DIR / f"{name}.yaml", rollout_n=5)
    a = pol.apply(batch, step=0)
    b = pol.apply(pb, step=0)
    assert torch.allclose(b.weights, a.weights[rows], atol=1e-5)
    if a.advantages is not None:
        assert torch.allclose(b.advantages, a.advantages[rows], atol=1e-5)


@settings(max_examples=200, deadline=None)
@given(z=st.lists(st.floats(-50, 50), min_size=1, max_size=8), frac=st.floats(0, 1))
def test_projection_floor_holds_for_any_scores(z, frac):
    k = len(z)
    floor = frac / k  # any floor with K * floor <= 1
    p = apply_floor(torch.softmax(torch.tensor(z, dtype=torch.float64), 0), floor, "projection")
    assert float(p.min()) >= floor - 1e-12
    assert float(p.sum()) == pytest.approx(1.0, abs=1e-9)


@FAST
@given(seed=seeds, which=st.sampled_from(["gfpo", "maxvar", "topk", "difffilter", "topk_per_group"]))
def test_matched_random_keeps_the_selectors_counts(seed, which):
    batch = random_batch(seed, groups=12)
    sel = load_policy(POLICY_DIR / f"{which}.yaml", seed=seed)
    cfg = {**sel.config, "name": f"mr_{which}", "control": {"name": "matched_random", "structure": "auto"},
           "loss_norm": "all_tokens", "recompute_advantages": False}
    ctl = load_policy(cfg, seed=seed)
    k_sel = sel.apply(batch, step=3).weights.sum(-1) > 0
    k_ctl = ctl.apply(batch, step=3).weights.sum(-1) > 0
    assert int(k_ctl.sum()) == int(k_sel.sum())
    structure = sel.actuator.matched_structure
    g = batch.group
    per_group = lambda k: torch.bincount(g[k], minlength=batch.n_groups)  # noqa: E731
    if structure == "per_group":
        assert torch.equal(per_group(k_ctl), per_group(k_sel))
    if structure == "whole_groups":
        cnt = per_group(k_ctl)
        assert ((cnt == 0) | (cnt == 5)).all()
        assert int((cnt > 0).sum()) == int((per_group(k_sel) > 0).sum())
    # same seed and step -> same draw; another step -> (almost surely) another draw
    assert torch.equal(k_ctl, ctl.apply(batch, step=3).weights.sum(-1) > 0)


@FAST
@given(seed=seeds)
def test_matched_update_tokens_matches_token_mass(seed):
    batch = random_batch(seed, groups=12)
    sel = load_policy(POLICY_DIR / "gfpo.yaml")
    ctl = load_policy(POLICY_DIR / "matched_update_tokens_gfpo.yaml")
    ws, wc = sel.apply(batch, step=1).weights, ctl.apply(batch, step=1).weights
    assert float(wc.sum()) == pytest.approx(float(ws.sum()), rel=1e-5)
    assert ((wc > 0) == (batch.mask > 0)).all()  # every valid token still carries gradient
    rs = load_policy({**ctl.config, "control": {"name": "matched_update_tokens", "mode": "random_sequences"}},
                     seed=seed)
    wr = rs.apply(batch, step=1).weights
    kept_tokens = float(ws.sum())
    longest = float(batch.mask.sum(-1).max())
    assert kept_tokens <= float(wr.sum()) < kept_tokens + longest


def _brute_maxvar(vals: list[float], n: int) -> list[int]:
    order = sorted(range(len(vals)), key=lambda i: (vals[i], i))
    best, best_var = None, -1.0
    for a in range(n + 1):
        idx = order[:a] + order[len(vals) - (n - a):] if n - a > 0 else order[:a]
        x = [vals[i] for i in idx]
        mu = sum(x) / n
        var = sum((v - mu) ** 2 for v in x) / n
        if var > best_var + 1e-9:
            best, best_var = idx, var
    return sorted(best)


@FAST
@given(data=st.lists(st.lists(st.sampled_from([0.0, 0.25, 0.5, 1.0]), min_size=5, max_size=5), min_size=1, max_size=6),
       frac=st.sampled_from([0.2, 0.5, 0.6, 0.9]))
def test_max_variance_matches_brute_force(data, frac):
    from policy_batches import make_batch

    flat = [v for g in data for v in g]
    batch = make_batch(flat, [3] * len(flat), 5)
    pol = load_policy({"name": "mv", "mechanism": "select", "scorer": {"name": "reward_difficulty"},
                       "actuator": {"name": "max_variance", "params": {"keep_fraction": frac}}})
    keep = (pol.apply(batch, step=0).weights.sum(-1) > 0).reshape(-1, 5)
    n = max(1, round(frac * 5))
    for g, vals in enumerate(data):
        assert torch.nonzero(keep[g]).reshape(-1).tolist() == _brute_maxvar(vals, n)


@FAST
@given(data=st.lists(st.tuples(st.integers(0, 1), st.integers(1, 9)), min_size=5, max_size=30), k=st.integers(1, 4))
def test_gfpo_matches_per_group_python_reference(data, k):
    from policy_batches import make_batch

    n = 5
    data = data[: len(data) // n * n]
    rewards = [float(r) for r, _ in data]
    lengths = [ln for _, ln in data]
    batch = make_batch(rewards, lengths, n)
    pol = load_policy({"name": "g", "mechanism": "select", "scorer": {"name": "reward_difficulty"},
                       "actuator": {"name": "gfpo", "params": {"k": k}}}, rollout_n=5)
    keep = pol.apply(batch, step=0).weights.sum(-1) > 0
    expect = torch.zeros(len(rewards), dtype=torch.bool)
    for g in range(len(rewards) // n):
        idx = range(g * n, g * n + n)
        best = sorted(idx, key=lambda i: (-rewards[i] / lengths[i], i))[:k]
        expect[best] = True
    assert torch.equal(keep, expect)


@FAST
@given(seed=seeds, sizes=st.lists(st.integers(1, 7), min_size=1, max_size=8))
def test_unequal_groups_use_the_general_layout(seed, sizes):
    """Groups of different sizes (the vectorised fallback path) agree with a per-group Python reference."""
    gen = torch.Generator().manual_seed(seed)
    group = torch.cat([torch.full((s,), i) for i, s in enumerate(sizes)])
    perm = torch.randperm(group.numel(), generator=gen)  # groups interleaved in the batch
    group = group[perm]
    b, L = group.numel(), 6
    rewards = torch.rand(b, generator=gen)
    lengths = torch.randint(1, L + 1, (b,), generator=gen)
    mask = (torch.arange(L)[None] < lengths[:, None]).float()
    batch = StepBatch(advantages=torch.randn(b, L, generator=gen) * mask, rewards=rewards, response_mask=mask,
                      group=group)
    pol = load_policy({"name": "tp", "mechanism": "select", "scorer": {"name": "reward_difficulty"},
                       "actuator": {"name": "gfpo", "params": {"k": 2, "metric": "reward"}}})
    keep = pol.apply(batch, step=0).weights.sum(-1) > 0
    for g in range(len(sizes)):
        idx = torch.nonzero(group == g).reshape(-1).tolist()
        best = sorted(idx, key=lambda i: (-float(rewards[i]), i))[:2]
        assert sorted(torch.nonzero(keep & (group == g)).reshape(-1).tolist()) == sorted(best)
