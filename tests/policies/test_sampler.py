"""Pre-rollout mixing: the sampler realises the proportions it is given, and inert mixers are detected."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from policies import DomainSampler, PolicyConfigError, is_inert
from policies.sampler import largest_remainder


@settings(max_examples=100, deadline=None)
@given(p=st.lists(st.floats(0, 1), min_size=1, max_size=6).filter(lambda v: sum(v) > 1e-6), n=st.integers(1, 300))
def test_largest_remainder_sums_and_is_within_one(p, n):
    p = np.asarray(p) / sum(p)
    c = largest_remainder(p, n)
    assert c.sum() == n and np.all(np.abs(c - p * n) < 1.0 + 1e-9)


def test_sampler_realises_target_counts_and_draws_only_from_each_domains_pool():
    domains = np.repeat([0, 1, 2], [100, 50, 30])
    s = DomainSampler(domains, batch_size=64, seed=3, names=["math", "logic", "science"])
    idx = s.sample([0.5, 0.25, 0.25])
    counts = np.bincount(domains[idx], minlength=3)
    assert counts.tolist() == [32, 16, 16]
    assert s.last_diagnostics["realised_prop_math"] == 0.5 and s.last_diagnostics["target_prop_logic"] == 0.25
    assert len(set(idx.tolist())) == 64  # without replacement inside an epoch


def test_sampler_walks_each_pool_without_replacement_per_epoch():
    domains = np.repeat([0, 1], [10, 10])
    s = DomainSampler(domains, batch_size=4, seed=0)
    seen = np.concatenate([s.sample([1.0, 0.0]) for _ in range(5)])  # 20 draws from a pool of 10
    assert sorted(seen[:10].tolist()) == list(range(10)) and sorted(seen[10:].tolist()) == list(range(10))
    assert s.epochs[0] == 2


def test_same_seed_same_batches_and_state_round_trip():
    d = np.arange(90) % 3
    a, b = DomainSampler(d, 16, seed=5), DomainSampler(d, 16, seed=5)
    assert all(np.array_equal(a.sample([0.2, 0.3, 0.5]), b.sample([0.2, 0.3, 0.5])) for _ in range(3))
    state = a.state_dict()
    nxt = a.sample([0.2, 0.3, 0.5])
    c = DomainSampler(d, 16, seed=99)
    c.load_state_dict(state)
    assert np.array_equal(c.sample([0.2, 0.3, 0.5]), nxt)


def test_changing_proportions_change_the_data_and_inertness_is_reported():
    d = np.arange(300) % 3
    s = DomainSampler(d, 60, seed=1)
    for p in ([1 / 3] * 3, [0.6, 0.2, 0.2], [0.2, 0.2, 0.6]):
        s.sample(p)
    assert not is_inert(s.history, tol=0.02)
    flat = DomainSampler(d, 60, seed=1)
    for _ in range(5):
        flat.sample([1 / 3] * 3)
    assert is_inert(flat.history, tol=0.02)
    assert not is_inert(flat.history[:1])  # one step is no evidence


def test_bad_proportions_are_errors():
    s = DomainSampler(np.arange(9) % 3, 4, seed=0)
    with pytest.raises(PolicyConfigError, match="3 finite non-negative"):
        s.sample([0.5, 0.5])
    with pytest.raises(PolicyConfigError, match="3 finite non-negative"):
        s.sample([0.5, -0.1, 0.6])


def test_mixer_and_sampler_state_survive_a_json_checkpoint(tmp_path):
    import torch

    from policies import load_policy
    from policies.verl.trainer import load_mix_state, save_mix_state
    from policy_batches import make_batch

    pol = load_policy({"name": "m", "mechanism": "mix", "domains": ["a", "b", "c"],
                       "actuator": {"name": "tscl", "params": {"signal": "reward_slope", "window_unit": "steps"}}})
    s = DomainSampler(np.arange(30) % 3, 6, seed=2)
    doms = torch.arange(3).repeat_interleave(5)
    for step in range(1, 4):
        pol.observe(make_batch(torch.rand(15, generator=torch.Generator().manual_seed(step)), [3] * 15, 5, domains=doms), step=step)
        s.sample(pol.proportions())
    save_mix_state(tmp_path / "mix.json", pol, s)
    fresh = load_policy(pol.config)
    state = load_mix_state(tmp_path / "mix.json", fresh)
    s2 = DomainSampler(np.arange(30) % 3, 6, seed=99)
    s2.load_state_dict(state["sampler"])
    assert torch.allclose(fresh.proportions(), pol.proportions())
    assert torch.allclose(fresh.stats.slope(), pol.stats.slope())
    assert np.array_equal(s2.sample(fresh.proportions()), s.sample(pol.proportions()))
