"""The curriculum rules (issue 34) against independent loop re-implementations (curricula_reference.py), on a
synthetic pool with known per-prompt success probabilities p ~ Beta(0.5, 0.5) and rollouts simulated as
Bernoulli(p), K = 8. Where the reference draws the same uniforms (greso, prioritized_replay, prompt_replay,
mopps' selection), the ids must be identical; learnability's sequential reference uses another stream, so the
inclusion frequencies are compared. About 6 CPU-s in all."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from policies.curricula import greso as greso_mod
from policies.curricula.base import Curriculum
from policies.curricula.learnability import weighted_without_replacement
from policies.curricula.mopps import posterior_update, thompson_nearest
from policies.curricula.registry import CURRICULA, build_curriculum, check_curriculum
from policies.curricula.state import load_state, save_state
from policies.errors import PolicyConfigError
from tests.policies import curricula_reference as ref

POOL, BATCH, K = 2000, 128, 8


@pytest.fixture(scope="module")
def true_p() -> np.ndarray:
    return np.random.default_rng(7).beta(0.5, 0.5, POOL)


def rollouts(rng: np.random.Generator, p: np.ndarray, ids: np.ndarray, k: int = K) -> np.ndarray:
    return (rng.random((len(ids), k)) < p[ids, None]).astype(np.float64)


def make(name: str, params: dict | None = None, pool: int = POOL, batch: int = BATCH, seed: int = 1,
         pass_rates: np.ndarray | None = None) -> Curriculum:
    if name == "hardest_k" and pass_rates is None:
        pass_rates = np.random.default_rng(3).random(pool)
        params = {"fraction": max(0.3, batch / pool), **(params or {})}
    return build_curriculum(name, params or {}, pool, batch, seed, pass_rates=pass_rates)


def run(c: Curriculum, p: np.ndarray, steps: int, seed: int = 0, start: int = 0) -> list[np.ndarray]:
    """Closed loop: propose, simulate the rollouts, update; returns each step's ids."""
    rng = np.random.default_rng(seed)
    out = []
    for s in range(start, start + steps):
        ids = c.propose(s)
        c.update(s, ids, rollouts(rng, p, ids))
        out.append(ids)
    return out


# ---------------------------------------------------------------- uniform (the matched-random control)

def test_uniform_is_epoch_style_every_prompt_once_per_epoch() -> None:
    c = make("uniform", pool=1000, batch=100)
    ids = np.concatenate([c.propose(s) for s in range(20)])
    assert np.array_equal(np.sort(ids[:1000]), np.arange(1000)) and np.array_equal(np.sort(ids[1000:]),
                                                                                   np.arange(1000))


# ---------------------------------------------------------------- mopps

def test_mopps_selection_and_update_match_the_reference() -> None:
    gen = np.random.default_rng(0)
    alpha, beta = 1 + gen.random(500) * 20, 1 + gen.random(500) * 20
    cand = np.sort(gen.choice(500, 300, replace=False))
    ids, _ = thompson_nearest(np.random.default_rng(5), alpha, beta, cand, 40, 0.5)
    assert list(ids) == ref.mopps_select(np.random.default_rng(5), alpha, beta, cand, 40, 0.5)
    correct = (gen.random((40, K)) < 0.3).astype(float)
    a1, b1, a2, b2 = alpha.copy(), beta.copy(), alpha.copy(), beta.copy()
    posterior_update(a1, b1, ids, correct, 0.5, 1.0, 1.0)
    ref.mopps_update(a2, b2, ids, correct, 0.5)
    np.testing.assert_allclose(a1, a2)
    np.testing.assert_allclose(b1, b2)


def test_mopps_posterior_means_converge_to_the_true_p(true_p: np.ndarray) -> None:
    c = make("mopps", {"decay": 1.0})
    rng, ids = np.random.default_rng(1), np.arange(POOL)
    for s in range(50):  # 400 rollouts of every prompt
        c.update(s, ids, rollouts(rng, true_p, ids))
    err = np.abs(c.posterior_mean() - true_p)  # type: ignore[attr-defined]
    assert err.mean() < 0.02 and err.max() < 0.12


def test_mopps_and_learnability_concentrate_near_one_half(true_p: np.ndarray) -> None:
    far = {}
    for name in ("uniform", "mopps", "learnability"):
        ids = np.concatenate(run(make(name), true_p, 40)[20:])
        far[name] = float(np.abs(true_p[ids] - 0.5).mean())
    assert far["uniform"] > 0.3  # Beta(0.5, 0.5) sits at the ends
    assert far["mopps"] < 0.2 and far["learnability"] < 0.25, far


# ---------------------------------------------------------------- learnability

def test_learnability_draws_have_the_sequential_references_distribution() -> None:
    w = np.random.default_rng(2).random(30) * 0.25
    w[[3, 11]] = 0.0  # never drawn while enough positive weights remain
    mask = np.ones(30, dtype=bool)
    rv, rr = np.random.default_rng(10), np.random.default_rng(11)
    fv, fr = np.zeros(30), np.zeros(30)
    reps = 2000
    for _ in range(reps):
        fv[weighted_without_replacement(rv, w, mask, 6)[0]] += 1
        fr[ref.learnability_draw(rr, w, range(30), 6)] += 1
    assert fv[[3, 11]].sum() == 0 and fr[[3, 11]].sum() == 0
    assert np.abs(fv - fr).max() / reps < 0.05  # inclusion frequencies: sd of a difference ~0.015


def test_learnability_fills_uniformly_when_too_few_prompts_have_weight() -> None:
    w = np.zeros(50)
    w[:3] = 0.2
    ids, fill = weighted_without_replacement(np.random.default_rng(0), w, np.ones(50, dtype=bool), 10)
    assert fill == 7 and set(ids[:3]) == {0, 1, 2} and len(set(ids)) == 10


# ---------------------------------------------------------------- prioritized replay

def test_prioritized_replay_matches_the_heap_reference_in_lockstep(true_p: np.ndarray) -> None:
    c = make("prioritized_replay", {"retest_interval": 4, "retest_fraction": 0.25}, pool=300, batch=32, seed=4)
    r = ref.PrioritizedReplayRef(300, 4, 0.25, seed=4)
    rng, p = np.random.default_rng(0), true_p[:300]
    retested = 0
    for s in range(25):
        ids, want = c.propose(s), r.propose(s, 32)
        assert sorted(ids.tolist()) == sorted(want), s
        retested += c.last_diagnostics["retested"]
        correct = rollouts(rng, p, ids)
        c.update(s, ids, correct)
        r.update(s, ids, correct)
    assert retested > 0


# ---------------------------------------------------------------- prompt replay

def test_prompt_replay_matches_the_list_reference_in_lockstep(true_p: np.ndarray) -> None:
    c = make("prompt_replay", {"cooldown": 2, "max_reuse": 2}, pool=300, batch=40, seed=6)
    r = ref.PromptReplayRef(300, seed=6, cooldown=2, cap=2)
    rng, p = np.random.default_rng(0), true_p[:300]
    replayed = 0.0
    for s in range(30):
        ids = c.propose(s)
        assert sorted(ids.tolist()) == sorted(r.propose(s, 40)), s
        replayed += c.last_diagnostics["replayed"]
        correct = rollouts(rng, p, ids)
        c.update(s, ids, correct)
        r.update(ids, correct)
    assert replayed > 100


def test_prompt_replay_respects_its_cooldown_cap_and_band(true_p: np.ndarray) -> None:
    params = {"cooldown": 3, "max_reuse": 2, "band_low": 0.25, "band_high": 0.75}
    c = make("prompt_replay", params, pool=600, batch=60)
    rng, p = np.random.default_rng(0), true_p[:600]
    last, replays = np.full(600, -10**6), np.zeros(600, dtype=int)
    rate = np.full(600, np.nan)
    for s in range(40):
        buffer_before = c.in_buffer.copy()  # type: ignore[attr-defined]
        ids = c.propose(s)
        replayed = ids[: int(c.last_diagnostics["replayed"])]
        assert buffer_before[replayed].all()
        assert (s - last[replayed] >= 3).all()  # cooldown
        assert ((rate[replayed] >= 0.25) & (rate[replayed] <= 0.75)).all()  # band, from its latest group
        replays[replayed] += 1
        last[ids] = s
        correct = rollouts(rng, p, ids)
        rate[ids] = correct.mean(axis=1)
        c.update(s, ids, correct)
    assert replays.max() <= 2 and replays.sum() > 100


def test_prompt_replay_prefers_rates_near_the_target() -> None:
    c = make("prompt_replay", {"cooldown": 0}, pool=200, batch=20)
    ids = np.arange(200)
    correct = np.zeros((200, 8))
    for i in range(200):  # rates 1/8 .. 7/8 over the pool
        correct[i, : 1 + i % 7] = 1
    c.update(0, ids, correct)
    replayed = c.propose(1)[:10]
    assert np.all(correct[replayed].mean(axis=1) == 0.5)


# ---------------------------------------------------------------- greso

def test_greso_matches_the_reference_walk_in_lockstep(true_p: np.ndarray) -> None:
    c = make("greso", pool=400, batch=40, seed=9)
    r = ref.GresoRef(400, 40, seed=9)
    rng, p = np.random.default_rng(0), true_p[:400]
    for s in range(40):
        ids = c.propose(s)
        assert ids.tolist() == r.propose(40), s
        correct = rollouts(rng, p, ids)
        c.update(s, ids, correct)
        r.update(ids, correct)
        assert (c.p_easy, c.p_hard) == pytest.approx((r.p_easy, r.p_hard))  # type: ignore[attr-defined]
    assert c.p_easy != 0.5 or c.p_hard != 0.5  # type: ignore[attr-defined]  # adaptation happened


def test_greso_skips_zero_variance_prompts_with_the_stated_retry_probability() -> None:
    pool, batch = 3000, 100
    c = make("greso", pool=pool, batch=batch)
    easy1, easy2, hard1 = np.arange(0, 1000), np.arange(1000, 1500), np.arange(1500, 2000)
    c.update(0, easy1, np.ones((1000, K)))
    c.update(0, easy2, np.ones((500, K)))
    c.update(1, easy2, np.ones((500, K)))
    c.update(1, hard1, np.zeros((500, K)))
    # one epoch: 1000 unmarked + 0.5 * 1000 + 0.25 * 500 + 0.5 * 500 kept = 1875 expected -> 18 steps stay inside it
    ids = np.concatenate([c.propose(s) for s in range(18)])
    rate = {name: np.isin(s, ids).mean() for name, s in
            (("easy1", easy1), ("easy2", easy2), ("hard1", hard1), ("fresh", np.arange(2000, 3000)))}
    assert rate["easy1"] == pytest.approx(0.5 * 1800 / 1875, abs=0.06)
    assert rate["easy2"] == pytest.approx(0.25 * 1800 / 1875, abs=0.06)
    assert rate["hard1"] == pytest.approx(0.5 * 1800 / 1875, abs=0.07)
    assert rate["fresh"] == pytest.approx(1800 / 1875, abs=0.03)


def test_greso_adapts_its_retry_probability_toward_the_target_share() -> None:
    p = {"p_easy": 0.5, "p_hard": 0.5, "target_zero_variance": 0.25, "delta": 0.01, "min_p": 0.05, "max_p": 0.95}
    assert greso_mod.adapt(0.5, 0.5, 0.20, 0.0, p) == pytest.approx((0.49, 0.51))  # too many easy: skip more
    assert greso_mod.adapt(0.05, 0.95, 0.5, 0.0, p) == pytest.approx((0.05, 0.95))  # clamped
    assert greso_mod.adapt(0.5, 0.5, 0.0, 0.2, p) == pytest.approx((0.51, 0.49))


def test_greso_on_a_solved_pool_falls_back_to_uniform_never_empty() -> None:
    c = make("greso", {"retry_floor": 0.0}, pool=500, batch=100)
    ids = np.arange(500)
    for s in range(60):  # keep probability 0.5 ** 60: nothing is retried
        c.update(s, ids, np.ones((500, K)))
    got = c.propose(60)
    assert len(np.unique(got)) == 100 and c.last_diagnostics["fallback_uniform"] == 100
    c2 = make("greso", pool=500, batch=100)  # the 0.01 floor: a few retried, the rest filled
    c2.update(0, ids, np.ones((500, K)))
    for s in range(1, 30):
        c2.update(s, ids, np.ones((500, K)))
    got = c2.propose(30)
    assert len(np.unique(got)) == 100 and 0 < c2.last_diagnostics["fallback_uniform"] < 100


# ---------------------------------------------------------------- hardest_k

def test_hardest_k_keeps_the_hardest_fraction_and_needs_the_pre_pass() -> None:
    rates = np.random.default_rng(0).permutation(1000) / 1000.0
    c = make("hardest_k", {"fraction": 0.2}, pool=1000, batch=50, pass_rates=rates)
    ids = np.concatenate([c.propose(s) for s in range(4)])
    assert set(ids.tolist()) <= ref.hardest(rates, 0.2)
    with pytest.raises(PolicyConfigError, match="pass_rates: missing.*pre-pass"):
        build_curriculum("hardest_k", {}, 1000, 50, 0)
    with pytest.raises(PolicyConfigError, match=r"params.fraction 0.01 keeps 10 of 1000.*raise fraction"):
        build_curriculum("hardest_k", {"fraction": 0.01}, 1000, 50, 0, pass_rates=rates)


# ---------------------------------------------------------------- sec (a mixer)

def test_sec_values_follow_td0_over_the_steps_that_sampled_each_domain() -> None:
    import torch

    from policies.actuators.mix import SEC, DomainStats

    rows = [[0.5, None, 1.0], [0.2, 0.4, None], [None, 0.8, 0.1], [1.0, 1.0, 1.0]]
    stats = DomainStats(3, window=100, unit="steps")
    for row in rows:  # feed the per-step means directly, as DomainStats.update computes them
        vals = torch.tensor([float("nan") if v is None else v for v in row])
        stats._steps["abs_adv"] = torch.cat([stats._steps["abs_adv"], vals[None]])
    sec = SEC(alpha=0.5, temperature=0.5, floor=0.0, floor_mode="max_renormalise", signal="mean_abs_advantage",
              window=100, window_unit="steps", update_step=1)
    q = np.array(ref.sec_values(rows, 0.5))
    want = np.exp(q / 0.5) / np.exp(q / 0.5).sum()
    np.testing.assert_allclose(sec.mix(stats).numpy(), want, rtol=1e-5)


# ---------------------------------------------------------------- state, invariants, bad inputs

@pytest.mark.parametrize("name", sorted(CURRICULA))
def test_state_round_trip_gives_identical_future_proposals(name: str, true_p: np.ndarray, tmp_path: Path) -> None:
    c = make(name, pool=500, batch=50)
    run(c, true_p[:500], 6)
    save_state(tmp_path / "cur.npz", c)
    after = run(c, true_p[:500], 6, seed=5, start=6)
    fresh = make(name, pool=500, batch=50, seed=99)  # another seed: everything must come from the state
    fresh.load_state_dict(load_state(tmp_path / "cur.npz"))
    again = run(fresh, true_p[:500], 6, seed=5, start=6)
    assert all(np.array_equal(a, b) for a, b in zip(after, again, strict=True))


@settings(max_examples=30, deadline=None)
@given(name=st.sampled_from(sorted(CURRICULA)), pool=st.integers(20, 300), frac=st.floats(0.05, 1.0),
       allowed_frac=st.floats(0.2, 1.0), seed=st.integers(0, 10**6))
def test_proposals_are_unique_in_range_exact_and_allowed(name: str, pool: int, frac: float, allowed_frac: float,
                                                         seed: int) -> None:
    gen = np.random.default_rng(seed)
    batch = max(1, int(frac * pool * 0.3))
    c = make(name, pool=pool, batch=batch, seed=seed)
    p = gen.random(pool)
    allowed = gen.random(pool) < allowed_frac
    allowed[gen.choice(pool, batch, replace=False)] = True  # at least a batch allowed
    for s in range(6):
        ids = c.propose(s, allowed=allowed if s % 2 else None, n=None if s % 3 else batch)
        assert ids.dtype == np.int64 and ids.size == batch and np.unique(ids).size == batch
        assert ids.min() >= 0 and ids.max() < pool
        if s % 2:
            assert allowed[ids].all()
        c.update(s, ids, rollouts(gen, p, ids, k=4))
    few = c.propose(6, allowed=np.flatnonzero(allowed)[:1], n=1)  # an id array, one prompt
    assert few.tolist() == [int(np.flatnonzero(allowed)[0])]


@pytest.mark.parametrize(("name", "params", "pattern"), [
    ("mopps", {"target": 1.2}, r"curriculum 'mopps': params.target: got 1.2; allowed: float in \(0.0, 1.0\)"),
    ("mopps", {"target": 0.0}, r"params.target: got 0.0"),
    ("mopps", {"decay": -0.1}, r"params.decay: got -0.1; allowed: float in \[0.0, 1.0\]"),
    ("learnability", {"decay": -1}, r"params.decay"),
    ("greso", {"min_p": 0.9, "max_p": 0.5}, r"params.min_p 0.9 > params.max_p 0.5; set min_p <= max_p"),
    ("prompt_replay", {"band_low": 0.8, "band_high": 0.2}, r"band_low 0.8 > params.band_high 0.2"),
    ("prompt_replay", {"target": -0.5}, r"params.target"),
    ("uniform", {"temperature": 1}, r"unknown parameter\(s\) \['temperature'\]"),
])
def test_bad_parameters_are_refused_naming_the_field(name: str, params: dict, pattern: str) -> None:
    with pytest.raises(PolicyConfigError, match=pattern):
        check_curriculum(name, params)
    with pytest.raises(PolicyConfigError, match=pattern):
        make(name, params)


def test_every_bad_parameter_is_reported_at_once() -> None:
    with pytest.raises(PolicyConfigError) as exc:
        check_curriculum("mopps", {"target": 2.0, "decay": -1.0, "tau": 1})
    msg = str(exc.value)
    assert "unknown parameter(s) ['tau']" in msg and "params.target: got 2.0" in msg and "params.decay: got -1.0" in msg


def test_bad_pool_batch_and_names_are_refused() -> None:
    with pytest.raises(PolicyConfigError, match="pool_size 10 is smaller than batch_size 20"):
        build_curriculum("mopps", {}, 10, 20, 0)
    with pytest.raises(PolicyConfigError, match=r"unknown curriculum 'mops'; did you mean \['mopps'\]"):
        build_curriculum("mops", {}, 100, 10, 0)
    c = make("uniform", pool=100, batch=10)
    with pytest.raises(PolicyConfigError, match="asked for 10 prompts among 5 allowed"):
        c.propose(0, allowed=np.arange(5))
    with pytest.raises(PolicyConfigError, match="correct must lie in"):
        c.update(0, np.arange(10), np.full((10, 4), 2.0))


def test_a_policy_yaml_with_a_bad_curriculum_parameter_names_the_file_and_field(tmp_path: Path) -> None:
    from policies import load_policy

    f = tmp_path / "mine.yaml"
    f.write_text("name: mine\nmechanism: curriculum\ncurriculum: {name: mopps, params: {target: 1.5}}\n")
    with pytest.raises(PolicyConfigError, match=r"mine.yaml.*curriculum.*params.target: got 1.5"):
        load_policy(f)


def test_every_shipped_curriculum_yaml_loads_and_names_its_paper() -> None:
    import yaml

    from policies import load_policy

    root = Path(__file__).resolve().parents[2] / "campaigns" / "policy"
    # the shipped rules only: other tests register rules of their own into the process-wide registry
    shipped = {n for n, cls in CURRICULA.items() if cls.__module__.startswith("policies.curricula.")}
    for name in sorted(shipped - {"uniform"}) + ["matched_random_curriculum"]:
        raw = yaml.safe_load((root / f"{name}.yaml").read_text())
        assert raw["mechanism"] == "curriculum" and load_policy(root / f"{name}.yaml").name == name
        assert name == "matched_random_curriculum" or "arXiv" in raw["description"]
        check_curriculum(raw["curriculum"]["name"], raw["curriculum"]["params"])
    assert math.isclose(check_curriculum("greso", {})["target_zero_variance"], 0.25)
