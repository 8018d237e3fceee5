"""Random-effects summary across groups: DerSimonian-Laird against statsmodels and a hand calculation."""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats
from statsmodels.stats.meta_analysis import combine_effects

from analysis.meta import dersimonian_laird, random_effects_table
from analysis.comparisons import paired_comparisons
from analysis.records import read_records
from evaluation.suite import load_suite
from tests.released import RELEASED, needs_released


def test_dl_by_hand_three_studies() -> None:
    y, v = np.array([1.0, 2.0, 4.0]), np.array([1.0, 1.0, 1.0])
    # equal variances: mu_FE = 7/3, Q = (4/3)^2 + (1/3)^2 + (5/3)^2 = 42/9, C = 3 - 3/3 = 2
    q = 42 / 9
    tau2 = (q - 2) / 2
    r = dersimonian_laird(y, v)
    assert float(r["q"]) == pytest.approx(q) and float(r["tau2"]) == pytest.approx(tau2)
    assert float(r["mu"]) == pytest.approx(7 / 3)  # equal weights 1/(1+tau2)
    assert float(r["se"]) == pytest.approx(math.sqrt((1 + tau2) / 3))
    assert float(r["i2"]) == pytest.approx((q - 2) / q)
    t = stats.t.ppf(0.975, 2)
    assert float(r["hi_u"]) == pytest.approx(7 / 3 + t * np.std(y, ddof=1) / math.sqrt(3))


@settings(max_examples=40, deadline=None, derandomize=True)
@given(st.integers(2, 8), st.integers(0, 2**31 - 1))
def test_dl_matches_statsmodels_combine_effects(k: int, seed: int) -> None:
    rng = np.random.default_rng(seed)
    y = rng.normal(0, 2, k)
    v = rng.uniform(0.05, 3, k)
    r = dersimonian_laird(y, v)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        sm = combine_effects(y, v, method_re="dl")
    assert float(r["q"]) == pytest.approx(sm.q, rel=1e-9)
    if sm.tau2 < 0:  # statsmodels 0.15 leaves the moment estimate untruncated; DL truncates at 0 -> fixed effect
        assert float(r["tau2"]) == 0
        assert float(r["mu"]) == pytest.approx(sm.mean_effect_fe, rel=1e-9, abs=1e-12)
        assert float(r["se"]) == pytest.approx(sm.sd_eff_w_fe, rel=1e-9)
        return
    assert float(r["mu"]) == pytest.approx(sm.mean_effect_re, rel=1e-9, abs=1e-12)
    assert float(r["tau2"]) == pytest.approx(sm.tau2, rel=1e-9, abs=1e-12)
    assert float(r["se"]) == pytest.approx(sm.sd_eff_w_re, rel=1e-9)
    lo, hi = sm.conf_int()[1]  # row 1: random effects, z interval
    assert (float(r["lo"]), float(r["hi"])) == (pytest.approx(lo, rel=1e-9, abs=1e-12),
                                                pytest.approx(hi, rel=1e-9, abs=1e-12))
    h = stats.t.ppf(0.975, k - 1) * sm.sd_eff_w_re_hksj
    assert float(r["hi_hksj"]) == pytest.approx(sm.mean_effect_re + h, rel=1e-9, abs=1e-12)
    assert 0 <= float(r["i2"]) < 1 and float(r["tau2"]) >= 0


@needs_released
def test_random_effects_table_on_released_records() -> None:
    s = load_suite("db12")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        t = paired_comparisons(read_records(RELEASED, s), s, n_resamples=200).table
    re = random_effects_table(t, "DB-12")
    assert set(re["policy"]) >= {"topk", "gfpo", "maxvar", "difffilter"}
    assert re.loc[re["policy"] == "topk", "k_groups"].item() >= 5  # main x2, crossfamily x3, ...
    for row in re.itertuples():
        eff = t[(t["metric"] == "DB-12") & (t["kind"] == "effect") & (t["policy"] == row.policy)
                & (t["reference"] == row.reference)]
        assert row.k_groups == len(eff)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            sm = combine_effects(eff["mean_diff"].to_numpy(), eff["sd_used"].to_numpy() ** 2 / eff["n"].to_numpy(),
                                 method_re="dl")
        want = (sm.mean_effect_re, sm.tau2) if sm.tau2 >= 0 else (sm.mean_effect_fe, 0.0)
        assert (row.mu, row.tau2) == (pytest.approx(want[0]), pytest.approx(want[1], abs=1e-12))
        assert row.mean_groups == pytest.approx(eff["mean_diff"].mean())
        assert row.lo_t < row.mean_groups < row.hi_t
