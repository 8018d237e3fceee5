"""Pre-rollout mixing: the sampler realises the proportions it is given, and inert mixers are detected."""

from __future__ import annotations

import json

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
        pol.observe(make_batch(torch.rand(15, generator=torch.Generator().manual_seed(step)), [3] * 15, 5,
                               domains=doms), step=step)
        s.sample(pol.proportions())
    save_mix_state(tmp_path / "mix.json", pol, s)
    fresh = load_policy(pol.config)
    state = load_mix_state(tmp_path / "mix.json", fresh)
    s2 = DomainSampler(np.arange(30) % 3, 6, seed=99)
    s2.load_state_dict(state["sampler"])
    assert torch.allclose(fresh.proportions(), pol.proportions())
    assert torch.allclose(fresh.stats.slope(), pol.stats.slope())
    assert np.array_equal(s2.sample(fresh.proportions()), s.sample(pol.proportions()))


# --- issue 13: the rounding remainder is carried across steps -----------------------------------------

STATIC_TOL_PP = 0.5  # percentage points: the issue's tolerance for `static` over 300 steps at 64 prompts


def _realised_share(s: DomainSampler, domains: np.ndarray, props, steps: int) -> np.ndarray:
    counts = np.zeros(s.n_domains)
    for _ in range(steps):
        counts += np.bincount(domains[s.sample(props)], minlength=s.n_domains)
    return counts / counts.sum()


def test_issue13_case6_static_proportions_converge_over_a_run():
    """Largest remainder restarted every step gave [22, 21, 21] for the whole run (math 34.4%)."""
    domains = np.arange(600) % 3
    s = DomainSampler(domains, batch_size=64, seed=0, names=["math", "logic", "science"])
    share = _realised_share(s, domains, [1 / 3] * 3, steps=300)
    deviation_pp = 100 * np.abs(share - 1 / 3).max()
    assert deviation_pp <= STATIC_TOL_PP, deviation_pp
    assert {tuple(np.round(h * 64).astype(int)) for h in s.history} != {(22, 21, 21)}  # not the same every step


def test_a_projected_floor_is_met_on_average():
    """floor 0.05 at 64 prompts is 3.2 prompts: 3/64 = 0.047 every step before; now 3 or 4 with mean 3.2."""
    import torch

    from policies.actuators.mix import apply_floor

    # a softmax this peaked leaves the two small domains at the floor itself: [0.9, 0.05, 0.05]
    p = apply_floor(torch.softmax(torch.tensor([30.0, 0.0, 0.0], dtype=torch.float64), 0), 0.05, "projection")
    p = p.numpy()
    assert np.allclose(p, [0.9, 0.05, 0.05])
    domains = np.arange(600) % 3
    s = DomainSampler(domains, batch_size=64, seed=1)
    share = _realised_share(s, domains, p, steps=300)
    # cumulative counts are within one prompt of the cumulative target: 1 / (64 * 300) in share
    assert np.all(np.abs(share - p / p.sum()) <= 1.0 / (64 * 300) + 1e-12), (share, p)
    assert share.min() >= 0.05 - 1.0 / (64 * 300)
    per_step = np.array([np.round(h * 64) for h in s.history])[:, 1]
    assert set(per_step.tolist()) == {3.0, 4.0}  # 3.2 on average, not 3 every step


@settings(max_examples=60, deadline=None)
@given(props=st.lists(st.lists(st.floats(0, 1), min_size=3, max_size=3).filter(lambda v: sum(v) > 1e-3),
                      min_size=1, max_size=40),
       n=st.integers(1, 100))
def test_cumulative_counts_track_cumulative_targets_for_any_proportion_sequence(props, n):
    """The carried remainder keeps every domain within 2 items of its cumulative target, counts >= 0, sum n."""
    domains = np.arange(300) % 3
    s = DomainSampler(domains, batch_size=n, seed=0)
    got, want = np.zeros(3), np.zeros(3)
    for p in props:
        idx = s.sample(p)
        c = np.bincount(domains[idx], minlength=3)
        assert c.sum() == n and idx.size == n
        got += c
        want += np.asarray(p) / sum(p) * n
    assert np.all(np.abs(got - want) < 2.0), (got, want)


def test_carry_survives_a_checkpoint_round_trip_and_old_states_load():
    d = np.arange(90) % 3
    a = DomainSampler(d, 64, seed=5)
    a.sample([1 / 3] * 3)
    state = a.state_dict()
    assert state["carry"] != [0.0, 0.0, 0.0]  # something is owed after one step of 21.33 each
    nxt = [np.bincount(d[a.sample([1 / 3] * 3)], minlength=3).tolist() for _ in range(2)]
    b = DomainSampler(d, 64, seed=99)
    b.load_state_dict(json.loads(json.dumps(state)))
    assert [np.bincount(d[b.sample([1 / 3] * 3)], minlength=3).tolist() for _ in range(2)] == nxt
    old = {k: v for k, v in state.items() if k != "carry"}  # a checkpoint written before the carry existed
    c = DomainSampler(d, 64, seed=99)
    c.load_state_dict(old)
    assert np.bincount(d[c.sample([1 / 3] * 3)], minlength=3).sum() == 64
