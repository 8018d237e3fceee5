"""Issue 50, Build 7: hardest_k's subset is in its saved state; prioritized replay samples by priority instead
of re-selecting a fixed top set."""

from __future__ import annotations

import numpy as np

from policies.curricula.registry import build_curriculum


def test_hardest_k_restores_its_own_subset_under_another_seed() -> None:
    rates = np.full(200, 0.5)  # all tied: the seed alone picks the subset
    a = build_curriculum("hardest_k", {"fraction": 0.2}, 200, 10, seed=1, pass_rates=rates)
    b = build_curriculum("hardest_k", {"fraction": 0.2}, 200, 10, seed=2, pass_rates=rates)
    assert not np.array_equal(a.keep, b.keep)
    a.propose(0)
    b.load_state_dict(a.state_dict())
    assert np.array_equal(b.keep, a.keep)
    assert set(b.propose(1).tolist()) <= set(np.flatnonzero(a.keep).tolist())


def test_prioritized_replay_samples_in_proportion_to_priority() -> None:
    """One state, many proposals: a prompt at p = 0.5 (priority 0.25) is drawn more often than one at p = 0.1
    (0.09), and both are drawn (a fixed top set would never draw the low ones)."""
    c = build_curriculum("prioritized_replay", {"retest_fraction": 0.0}, 100, 10, seed=0)
    ids = np.arange(100)
    correct = np.zeros((100, 10))
    correct[:50, :5] = 1.0  # p = 0.5
    correct[50:, :1] = 1.0  # p = 0.1
    c.update(0, ids, correct)
    counts = np.zeros(100)
    for s in range(1, 401):
        counts[c.propose(s)] += 1
    hi, lo = counts[:50].mean(), counts[50:].mean()
    assert (counts[50:] > 0).mean() > 0.9 and 1.5 < hi / lo < 4.0  # weighted w/o replacement: below 0.25/0.09


def test_prioritized_replay_spreads_its_rollouts_in_a_closed_loop() -> None:
    """Bernoulli(p) rollouts, 60 steps of a batch of 16 from a pool of 400: the rollouts reach many prompts, not
    one batch's worth re-selected step after step."""
    rng = np.random.default_rng(3)
    p = rng.uniform(0.05, 0.95, 400)
    c = build_curriculum("prioritized_replay", {}, 400, 16, seed=3)
    per_prompt = np.zeros(400)
    for s in range(60):
        ids = c.propose(s)
        per_prompt[ids] += 1
        c.update(s, ids, (rng.random((16, 8)) < p[ids, None]).astype(float))
    top16 = np.sort(per_prompt)[-16:].sum() / per_prompt.sum()
    assert (per_prompt > 0).sum() > 200 and top16 < 0.25


def test_a_hardest_k_state_saved_without_its_subset_still_loads() -> None:
    rates = np.linspace(0, 1, 200)
    a = build_curriculum("hardest_k", {"fraction": 0.2}, 200, 10, seed=1, pass_rates=rates)
    old = {k: v for k, v in a.state_dict().items() if k != "keep"}
    b = build_curriculum("hardest_k", {"fraction": 0.2}, 200, 10, seed=1, pass_rates=rates)
    b.load_state_dict(old)
    assert np.array_equal(b.keep, a.keep)


def test_greso_adapts_after_one_dataloader_epoch_of_floor_pool_over_batch_updates() -> None:
    """Pool 105, batch 10: GRESO's dataloader (drop_last) has 10 batches an epoch, so the 11th update adapts p
    (ceil would wait for the 12th)."""
    c = build_curriculum("greso", {}, 105, 10, seed=0)
    solved = np.ones((10, 4))
    for s in range(10):
        c.update(s, c.propose(s), solved)
    assert c.p_easy == 0.5
    c.update(10, c.propose(10), solved)
    assert c.p_easy < 0.5  # all groups solved: above the easy target, skip more


def test_prompt_replay_replays_the_floor_of_half_an_odd_batch_and_refuses_more_than_half() -> None:
    """The authors' budget is floor(prompts_per_step x fraction): 3 of a batch of 7 (round gave 4)."""
    import pytest

    from policies import PolicyConfigError

    c = build_curriculum("prompt_replay", {"cooldown": 0}, 100, 7, seed=0)
    ids = np.arange(100)
    c.update(0, ids, np.tile([1.0, 0.0], (100, 4)))  # every prompt at p = 0.5: all in the buffer
    c.propose(1)
    assert c.last_diagnostics["replayed"] == 3.0
    with pytest.raises(PolicyConfigError, match=r"replay_fraction: got 0.6; allowed: float in \[0.0, 0.5\]"):
        build_curriculum("prompt_replay", {"replay_fraction": 0.6}, 100, 7, seed=0)
