"""Family-wise control for sequential seeds (analysis/sequential/family.py): the Holm step-down over
group-sequential boundaries, its invariants, and its family-wise error on simulated campaigns whose comparisons
share a reference arm (analysis/sequential/plan.py)."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats
from tests.holm_reference import multipletests

from analysis.sequential.boundaries import t_bounds_mc
from analysis.sequential.design import SequentialDesign
from analysis.sequential.family import familywise_look, fixed_holm, holm_table, level_bounds, simulate_family
from analysis.sequential.plan import Comparisons, operating, simulate_diffs

ONE_LOOK = SequentialDesign(looks=(6,), small_sample="nominal")
FOUR = SequentialDesign(looks=(3, 6, 9, 12), small_sample="nominal")


def _rejected(decisions: dict) -> set[str]:
    return {k for k, d in decisions.items() if d.decision in ("superior", "inferior")}


def test_levels_vectorised_equal_the_single_level_mc_bounds():
    """The batched boundaries are t_bounds_mc's, level by level (same null paths, same order statistic)."""
    alphas = (0.05, 0.05 / 7, 0.05 / 40)
    got = level_bounds((3, 6, 9, 12), 12, alphas, "obf")
    for a, row in zip(alphas, got, strict=True):
        np.testing.assert_array_equal(row, np.array(t_bounds_mc((3, 6, 9, 12), 12, a, "obf")))
    tab = holm_table(SequentialDesign(looks=(3, 6, 9, 12)), 40)
    assert np.all(np.isinf(tab[0])) and np.all(np.diff(np.where(np.isinf(tab[1:]), 1e9, tab[1:]), axis=0) >= 0)


def diff_sets(n: int) -> st.SearchStrategy:
    return st.lists(st.lists(st.floats(-6, 6, allow_nan=False), min_size=n, max_size=n), min_size=1, max_size=8)


@settings(max_examples=40, deadline=None)
@given(diff_sets(6))
def test_one_look_is_holms_procedure(rows):
    """With one look the step-down is Holm (1979) on the paired t p-values, in the CLI path and the simulation."""
    x = np.asarray(rows) + np.linspace(0, 0.01, 6)  # no zero-variance comparison
    names = [f"c{i}" for i in range(len(x))]
    design = replace(ONE_LOOK, familywise="holm")
    dec, _ = familywise_look(dict(zip(names, x, strict=True)), 0, design, len(x))
    assert list(dec) == names
    p = np.array([2 * stats.t.sf(abs(dec[n].stat), 5) for n in names])
    holm = multipletests(p, alpha=0.05, method="holm")[0]
    assert _rejected(dec) == {n for n, r in zip(names, holm, strict=True) if r}
    sim = simulate_family(x[None], design, "holm").decision[0]
    np.testing.assert_array_equal(sim != 0, holm)
    np.testing.assert_array_equal(fixed_holm(x[None], 6)[0] != 0, holm)


@settings(max_examples=30, deadline=None)
@given(diff_sets(12), st.integers(0, 3), st.integers(0, 7), st.floats(0.1, 5))
def test_step_down_sits_between_bonferroni_and_unadjusted_and_is_monotone(rows, look, which, push):
    """Holm rejects everything Bonferroni (alpha/m each) rejects and nothing the unadjusted test (alpha each)
    does not; making one comparison's evidence stronger never takes a rejection away."""
    n = FOUR.looks[look]
    x = (np.asarray(rows) + np.linspace(0, 0.02, 12))[:, :n]
    names = [f"c{i}" for i in range(len(x))]
    data = dict(zip(names, x, strict=True))
    got = {fw: _rejected(familywise_look(data, look, replace(FOUR, familywise=fw), len(x))[0])
           for fw in ("bonferroni", "holm", "none")}
    assert got["bonferroni"] <= got["holm"] <= got["none"]
    j = which % len(x)
    stronger = dict(data)
    stronger[names[j]] = x[j] + push * np.sign(x[j].mean() or 1.0)
    assert got["holm"] <= _rejected(familywise_look(stronger, look, replace(FOUR, familywise="holm"), len(x))[0])


def test_earlier_rejections_free_alpha_for_the_rest():
    """A comparison rejected at an earlier look lowers the level's denominator: a borderline comparison that
    fails at alpha/m passes once enough of the family was rejected before."""
    rng = np.random.default_rng(3)
    d = rng.normal(1.6, 1.0, 6)
    design = replace(FOUR, familywise="holm")
    alone = familywise_look({"x": d}, 1, design, 10)
    after = familywise_look({"x": d}, 1, design, 10, rejected_before=9)
    assert alone[1]["x"] == pytest.approx(0.005) and after[1]["x"] == pytest.approx(0.05)
    assert alone[0]["x"].critical > after[0]["x"].critical


@pytest.mark.parametrize("rho,p_real", [(0.0, 0.0), (0.5, 0.0), (0.9, 0.0), (0.5, 0.2)])
def test_familywise_error_holds_with_a_shared_reference(rho, p_real):
    """Simulated campaigns of 24 comparisons in 4 cells whose comparisons share their reference arm (correlation
    rho): the Holm step-down (OBF, equivalence and futility stops) keeps P(any false efficacy claim) <= 0.05
    under the global null and with 20% real effects, and never rejects less than Bonferroni on the same data."""
    comp = Comparisons(cell=np.repeat(np.arange(4), 6), sd=np.full(24, 2.0), gh_policy=np.ones(24),
                       gh_ref=np.ones(24), planned_seeds=np.full(24, 12))
    diffs, delta = simulate_diffs(comp, 1500, 12, effect=2.5, p_real=p_real, rho=rho, seed=11)
    design = SequentialDesign(looks=(3, 6, 9, 12), equivalence_margin=1.0, futility_cp=0.15)
    holm = simulate_family(diffs, design, "holm")
    bonf = simulate_family(diffs, design, "bonferroni")
    se = np.sqrt(0.05 * 0.95 / 1500)
    assert operating(comp, holm.decision, holm.seeds_used, delta)["fwer"] <= 0.05 + 2 * se
    eff = np.isin(bonf.decision, (1, -1))
    assert np.all(np.isin(holm.decision[eff], (1, -1)))
    if p_real:
        assert (np.isin(holm.decision, (1, -1)).sum() > eff.sum())


def test_shared_reference_correlates_the_comparisons_of_a_cell():
    comp = Comparisons(cell=np.array([0, 0, 1]), sd=np.array([1.0, 3.0, 1.0]), gh_policy=np.ones(3),
                       gh_ref=np.ones(3), planned_seeds=np.full(3, 12))
    d, _ = simulate_diffs(comp, 4000, 12, effect=0.0, p_real=0.0, rho=0.5, seed=2)
    flat = d.transpose(1, 0, 2).reshape(3, -1)
    c = np.corrcoef(flat)
    assert c[0, 1] == pytest.approx(0.5, abs=0.03) and abs(c[0, 2]) < 0.03
    assert flat.std(axis=1) == pytest.approx([1.0, 3.0, 1.0], rel=0.03)
