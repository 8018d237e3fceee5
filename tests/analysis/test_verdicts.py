"""One verdict per claim: Holm over superiority + TOST, recomputed by hand with scipy/statsmodels."""

from __future__ import annotations

import json
import warnings

import numpy as np
import pandas as pd
import pytest
from scipy import stats
from tests.holm_reference import multipletests
from statsmodels.stats.power import TTestPower
from typer.testing import CliRunner

from analysis.comparisons import paired_comparisons
from analysis.records import normalise_records
from analysis.verdicts import VERDICTS, verdict_counts, verdict_table
from evaluation.suite import load_suite
from tests.released import RELEASED

SUITE = load_suite("db12")


def _records(shifts: dict[str, np.ndarray], seed: int = 0) -> pd.DataFrame:
    """baseline + one policy per entry of shifts; policy = baseline + shift[seed] on every benchmark."""
    rng = np.random.default_rng(seed)
    n = len(next(iter(shifts.values())))
    base = rng.uniform(30, 60, (n, 12))
    rows = []
    for pol, sh in {"baseline": np.zeros(n), **shifts}.items():
        for i in range(n):
            for j, b in enumerate(SUITE.benchmark_ids):
                rows.append({"run_id": f"{pol}_s{i + 1}", "campaign": "c", "model": "m", "policy": pol,
                             "seed": i + 1, "step": 10, "benchmark": b, "accuracy": float(base[i, j] + sh[i])})
    return normalise_records(pd.DataFrame(rows), SUITE)


def test_verdicts_by_hand_holm_over_superiority_and_tost() -> None:
    shifts = {"topk": np.array([5.0, 5.3, 4.8, 5.1, 4.9, 5.2]),      # clearly better
              "gfpo": np.array([0.05, -0.04, 0.02, -0.03, 0.01, 0.0]),  # equivalent within 0.5
              "maxvar": np.array([-4.0, 3.5, -1.0, 2.0, -3.0, 0.5])}  # undecided
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        t = paired_comparisons(_records(shifts), SUITE, n_resamples=200).table
    v = verdict_table(t, "DB-12", 0.5).set_index("policy")
    assert v.loc["topk", "verdict"] == "better" and v.loc["gfpo", "verdict"] == "equivalent"
    assert v.loc["maxvar", "verdict"] == "undecided"
    # by hand: paired t and TOST p from scipy, Holm over all six from statsmodels
    p_sup, p_eq = [], []
    for pol in v.index:
        d = shifts[pol]
        p_sup.append(stats.ttest_1samp(d, 0).pvalue)
        p_eq.append(max(stats.ttest_1samp(d, -0.5, alternative="greater").pvalue,
                        stats.ttest_1samp(d, 0.5, alternative="less").pvalue))
    holm = multipletests(p_sup + p_eq, method="holm")[1]
    assert np.allclose(v["p_superiority"], p_sup, rtol=1e-6) and np.allclose(v["p_equivalence"], p_eq, rtol=1e-6)
    assert np.allclose(v["p_superiority_holm"], holm[:3]) and np.allclose(v["p_equivalence_holm"], holm[3:])
    # seeds to decide: 80% power for +-0.5 at alpha / (2m) = 0.05/6, by statsmodels' solver
    sd = np.std(shifts["maxvar"], ddof=1)
    n_sm = TTestPower().solve_power(effect_size=0.5 / sd, alpha=0.05 / 6, power=0.8)
    assert v.loc["maxvar", "seeds_to_decide"] == np.ceil(n_sm - 1e-9)
    lo, mid, hi = v.loc["maxvar", ["seeds_to_decide_lo", "seeds_to_decide", "seeds_to_decide_hi"]]
    assert lo <= mid <= hi
    assert np.isnan(v.loc["topk", "seeds_to_decide"])
    assert verdict_counts(v) == {"better": 1, "worse": 0, "equivalent": 1, "undecided": 1}


def test_exactly_one_verdict_and_aa_floor_flag_on_released_records() -> None:
    if not RELEASED.is_file():
        pytest.skip("released records not present")
    from cli import app

    for margin in ("0.5", "1.0"):
        res = CliRunner().invoke(app, ["verdicts", str(RELEASED), "--margin", margin, "--json"])
        assert res.exit_code == 0, res.output
        doc = json.loads(res.output)
        assert len(doc["verdicts"]) == 45 and sum(doc["counts"].values()) == 45
        assert all(r["verdict"] in VERDICTS for r in doc["verdicts"])
        keys = {(r["campaign"], r["model"], r["regime"], r["policy"]) for r in doc["verdicts"]}
        assert len(keys) == 45  # one verdict per comparison
        # the 7B A/A row (mixer static vs main baseline) differs by > 1 point: every 7B margin <= 1 is flagged
        seven = [r for r in doc["verdicts"] if r["model"] == "Qwen2.5-7B-Instruct"
                 and r["campaign"] in ("main", "mixer")]
        assert seven and all(r["margin_below_aa_floor"] and r["aa_floor"] > 1.0 for r in seven)
        assert "Holm" in doc["method"]
