"""Dynamic sampling (issue 50, Build 4): the over-sample / filter / refill rule on a synthetic pool with known
success rates, by property; the policy block's checks."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from policies import PolicyConfigError, load_policy
from policies.dynamic_sampling import dynamic_sample, informative


def _run(p: np.ndarray, k: int, batch: int, oversample: float, max_rounds: int, seed: int):
    """dynamic_sample over a pool whose prompt i is solved with probability p[i]; returns the result, every
    round's correctness and how many rollouts the roll function generated."""
    rng = np.random.default_rng(seed)
    seen: list[np.ndarray] = []

    def draw(r: int, n: int, used: np.ndarray) -> np.ndarray:
        free = np.flatnonzero(~used)
        return rng.choice(free, size=n, replace=False)

    def roll(r: int, ids: np.ndarray) -> np.ndarray:
        seen.append((rng.random((ids.size, k)) < p[ids, None]).astype(float))
        return seen[-1]

    got = dynamic_sample(draw, roll, batch, p.size, oversample, max_rounds)
    return got, seen


@settings(max_examples=80, deadline=None)
@given(st.integers(0, 2**31 - 1), st.integers(2, 8), st.integers(1, 16), st.floats(1.0, 4.0), st.integers(1, 6),
       st.sampled_from(["mixed", "easy", "hard"]))
def test_kept_groups_vary_and_every_generated_rollout_is_counted(seed, k, batch, oversample, max_rounds, kind):
    rng = np.random.default_rng(seed)
    pool = 120
    p = {"mixed": rng.uniform(0, 1, pool), "easy": np.where(rng.random(pool) < 0.9, 1.0, 0.5),
         "hard": np.where(rng.random(pool) < 0.9, 0.0, 0.5)}[kind]
    got, seen = _run(p, k, batch, oversample, max_rounds, seed)
    assert got.rounds == len(seen) <= max_rounds
    assert got.generated_rollouts == sum(c.size for c in seen)  # every rollout generated, kept or not
    assert got.generated_prompts == sum(c.shape[0] for c in seen)
    drawn = np.concatenate(got.drawn)
    assert drawn.size == np.unique(drawn).size  # a prompt is rolled out once a step
    kept = np.array([seen[r][i] for r, i in got.kept]).reshape(-1, k)
    assert len(got.kept) <= batch and (kept.max(axis=1) > kept.min(axis=1)).all()  # all non-zero variance
    assert got.informative_groups == sum(int(informative(c).sum()) for c in seen)
    if len(got.kept) < batch:  # short only when the rounds or the pool ran out
        assert got.rounds == max_rounds or got.generated_prompts + math.ceil(oversample * batch) > pool
        filled = np.array([seen[r][i] for r, i in got.filled]).reshape(-1, k)
        assert (filled.max(axis=1) == filled.min(axis=1)).all() and len(got.kept) + len(got.filled) <= batch
    diag = got.diagnostics()
    assert diag["generated_rollouts"] == got.generated_rollouts and diag["rounds"] == got.rounds
    if got.kept:
        assert diag["rollouts_per_informative_group"] == got.generated_rollouts / len(got.kept)


def test_rollouts_per_informative_group_tracks_the_known_rate():
    """p = 0.5 for a fifth of the pool, solved or unsolved elsewhere: with K = 4 a group is informative with
    probability 0.2 x (1 - 2 x 0.5^4) = 0.175, so a full batch costs about K / 0.175 = 22.9 rollouts a group, plus
    at most one round's surplus (32 prompts x 4 / 32 = 4)."""
    rng = np.random.default_rng(0)
    p = np.where(rng.random(20000) < 0.2, 0.5, rng.integers(0, 2, 20000).astype(float))
    per = []
    for seed in range(40):
        got, _ = _run(p, 4, 32, 1.0, 100, seed)
        assert len(got.kept) == 32
        per.append(got.generated_rollouts / 32)
    assert 22.9 - 2 < np.mean(per) < 22.9 + 4


def test_the_policy_block_is_checked():
    pol = load_policy({"name": "ds", "mechanism": "curriculum", "curriculum": {"name": "uniform"},
                       "dynamic_sampling": {}}, seed=0)
    assert pol.dynamic_sampling == {"oversample": 3.0, "max_rounds": 10}
    with pytest.raises(PolicyConfigError, match=r"dynamic_sampling.max_rounds: got 0"):
        load_policy({"name": "ds", "mechanism": "curriculum", "curriculum": {"name": "uniform"},
                     "dynamic_sampling": {"max_rounds": 0}}, seed=0)
    with pytest.raises(PolicyConfigError, match="unknown parameter"):
        load_policy({"name": "ds", "mechanism": "curriculum", "curriculum": {"name": "uniform"},
                     "dynamic_sampling": {"rounds": 3}}, seed=0)
    with pytest.raises(PolicyConfigError, match="not with mechanism none"):
        load_policy({"name": "ds", "mechanism": "none", "dynamic_sampling": {}}, seed=0)


def test_preflight_takes_dynamic_sampling_on_local_and_verl_and_refuses_a_backend_that_would_ignore_it(
        monkeypatch):
    from pathlib import Path

    from orchestrator.engine.grid import expand
    from orchestrator.engine.spec import load_campaign
    from orchestrator.preflight import check_backend_curricula
    from training.verl_launcher import VerlBackend

    repo = Path(__file__).resolve().parents[2]
    over = ["policies=[baseline,dynamic_sampling,greso_ds]"]
    for camp in ("demo.yaml", "demo_verl.yaml"):  # both trainers draw the rounds (verl: its replay buffer)
        spec = load_campaign(repo / "campaigns" / camp, over)
        assert not [p for p in check_backend_curricula(spec, expand(spec), repo / "campaigns") if "dynamic" in p]
    monkeypatch.setattr(VerlBackend, "runs_dynamic_sampling", False)  # a backend without the rounds
    verl = load_campaign(repo / "campaigns/demo_verl.yaml", over)
    problems = [p for p in check_backend_curricula(verl, expand(verl), repo / "campaigns") if "dynamic" in p]
    assert len(problems) == 2 and all("key 'dynamic_sampling': the verl backend" in p for p in problems)


def _run_greso(p, k, batch, oversample, max_rounds, seed, safety=1.25, min_round=0.25):
    rng = np.random.default_rng(seed)
    seen: list[np.ndarray] = []

    def draw(r: int, n: int, used: np.ndarray) -> np.ndarray:
        return rng.choice(np.flatnonzero(~used), size=n, replace=False)

    def roll(r: int, ids: np.ndarray) -> np.ndarray:
        seen.append((rng.random((ids.size, k)) < p[ids, None]).astype(float))
        return seen[-1]

    got = dynamic_sample(draw, roll, batch, p.size, oversample, max_rounds, next_round="greso", safety=safety,
                         min_round=min_round)
    return got, seen


@settings(max_examples=80, deadline=None)
@given(st.integers(0, 2**31 - 1), st.integers(2, 8), st.integers(1, 24), st.floats(1.0, 4.0), st.integers(1, 8),
       st.floats(1.0, 2.0), st.floats(0.0, 1.0), st.sampled_from(["mixed", "easy", "hard", "half"]))
def test_greso_rounds_draw_what_the_last_rate_says_is_needed_within_the_cap(seed, k, batch, oversample, max_rounds,
                                                                            safety, min_round, kind):
    """GRESO's adaptive next round (ray_trainer.py lines 1154-1162 at b277843): the first round draws the cap,
    each later one int(remaining / informative share of the round before x safety), clipped to [min_round x
    batch, cap] and to the pool left; every rollout counted, every kept group varies."""
    rng = np.random.default_rng(seed)
    pool = 400
    p = {"mixed": rng.uniform(0, 1, pool), "easy": np.where(rng.random(pool) < 0.9, 1.0, 0.5),
         "hard": np.where(rng.random(pool) < 0.9, 0.0, 0.5), "half": np.full(pool, 0.5)}[kind]
    got, seen = _run_greso(p, k, batch, oversample, max_rounds, seed, safety, min_round)
    cap = math.ceil(oversample * batch)
    assert got.rounds == len(seen) <= max_rounds
    assert got.generated_rollouts == sum(c.size for c in seen)  # every rollout generated, kept or not
    kept = np.array([seen[r][i] for r, i in got.kept]).reshape(-1, k)
    assert len(got.kept) <= batch and (kept.max(axis=1) > kept.min(axis=1)).all()  # all non-zero variance
    sizes = [d.size for d in got.drawn]
    assert sizes[0] == min(cap, pool) and max(sizes) <= cap
    found, left = 0, pool - sizes[0]
    for r in range(1, len(sizes)):
        share = informative(seen[r - 1]).mean()
        found += int(informative(seen[r - 1]).sum())
        remaining = batch - min(found, batch)
        assert remaining > 0  # a round is drawn only while the batch is short
        want = cap if share == 0 else min(cap, max(int(remaining / share * safety), math.ceil(min_round * batch), 1))
        assert sizes[r] == min(want, left)  # no more than the estimate needs, never above the cap
        left -= sizes[r]
    diag = got.diagnostics()
    assert diag["round_size_first"] == sizes[0] and diag["round_size_last"] == sizes[-1]
    assert diag["round_size_mean"] == pytest.approx(np.mean(sizes))


def test_greso_rounds_spend_fewer_prompts_than_fixed_ones_at_a_known_rate():
    """p = 0.5 everywhere and K = 4: a group is informative with probability 1 - 2 x 0.5^4 = 0.875. With GRESO's
    1.5 x batch first round (sampling_batch_size 384 for 256) the first round nearly always fills the batch; with
    a 40% informative pool (p = 0.5 on 0.457 of it) the second round is sized to the shortfall, not the cap."""
    rng = np.random.default_rng(1)
    p = np.where(rng.random(40000) < 0.457, 0.5, rng.integers(0, 2, 40000).astype(float))
    batch, fixed, greso = 64, [], []
    for seed in range(30):
        a, _ = _run(p, 4, batch, 1.5, 10, seed)
        b, _ = _run_greso(p, 4, batch, 1.5, 10, seed)
        assert len(a.kept) == len(b.kept) == batch
        fixed.append(a.generated_prompts)
        greso.append(b.generated_prompts)
        assert all(d.size <= 96 for d in b.drawn)
    # fixed: 96 + 96 prompts (a round finds ~38 of the 64); greso: 96 + about 26 / 0.4 x 1.25 = 81
    assert np.mean(greso) < np.mean(fixed) - 8
    assert np.mean(fixed) == pytest.approx(192, abs=10)


def test_the_next_round_option_is_checked_and_absent_from_a_fixed_block():
    base = {"name": "ds", "mechanism": "curriculum", "curriculum": {"name": "uniform"}}
    fixed = load_policy({**base, "dynamic_sampling": {"next_round": "fixed"}}, seed=0)
    assert fixed.dynamic_sampling == {"oversample": 3.0, "max_rounds": 10}  # the block written before the option
    greso = load_policy({**base, "dynamic_sampling": {"next_round": "greso", "safety": 1.5}}, seed=0)
    assert greso.dynamic_sampling == {"oversample": 3.0, "max_rounds": 10, "next_round": "greso", "safety": 1.5,
                                      "min_round": 0.25}
    with pytest.raises(PolicyConfigError, match="next_round: got 'adaptive'"):
        load_policy({**base, "dynamic_sampling": {"next_round": "adaptive"}}, seed=0)
    with pytest.raises(PolicyConfigError, match=r"\['safety'\] only with next_round: greso"):
        load_policy({**base, "dynamic_sampling": {"safety": 1.5}}, seed=0)
    with pytest.raises(PolicyConfigError, match=r"dynamic_sampling.safety: got 0.5"):
        load_policy({**base, "dynamic_sampling": {"next_round": "greso", "safety": 0.5}}, seed=0)
    with pytest.raises(PolicyConfigError, match=r"dynamic_sampling.min_round: got 4.0, above oversample 2.0"):
        load_policy({**base, "dynamic_sampling": {"next_round": "greso", "oversample": 2.0, "min_round": 4.0}}, seed=0)
    shipped = load_policy(Path(__file__).resolve().parents[2] / "campaigns/policy/greso_ds.yaml", seed=0)
    assert shipped.dynamic_sampling["next_round"] == "greso"
