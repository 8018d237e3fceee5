"""Power at plan time: MDE per planned comparison from a stated SD or a pooled prior SD."""

from __future__ import annotations

import math
import warnings
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
from statsmodels.stats.power import TTestPower

from analysis.comparisons import paired_comparisons
from analysis.power import plan_power, power_section, prior_sd
from analysis.records import read_records
from evaluation.suite import load_suite
from tests.released import RELEASED

REPO = Path(__file__).resolve().parents[2]


def _runs(seeds: dict[str, list[int]], model: str = "Qwen2.5-7B-Instruct") -> list[SimpleNamespace]:
    return [SimpleNamespace(group="main", model=model, regime="", policy=p,
                            reference="" if p == "baseline" else "baseline", seed=s)
            for p, ss in seeds.items() for s in ss]


def test_stated_sd_mde_matches_statsmodels_and_flags_the_margin() -> None:
    rows = plan_power(_runs({"baseline": [1, 2, 3], "topk": [1, 2, 3], "gfpo": [1, 2, 3, 4, 5, 6]}), margin=1.0, sd=1.5)
    by = {r["policy"]: r for r in rows}
    assert set(by) == {"topk", "gfpo"} and by["gfpo"]["n_pairs"] == 3  # pairs need the reference's seeds too
    dz = TTestPower().solve_power(effect_size=None, nobs=3, alpha=0.05, power=0.8)
    assert by["topk"]["mde"] == pytest.approx(dz * 1.5, rel=1e-6)
    assert not by["topk"]["detects_margin"]
    need = by["topk"]["seeds_for_margin"]
    assert TTestPower().power(effect_size=1 / 1.5, nobs=need, alpha=0.05) >= 0.8 > \
        TTestPower().power(effect_size=1 / 1.5, nobs=need - 1, alpha=0.05)


def test_prior_sd_is_pooled_by_hand_and_gives_an_mde_interval() -> None:
    if not RELEASED.is_file():
        pytest.skip("released records not present")
    s = load_suite("db12")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        t = paired_comparisons(read_records(RELEASED, s), s, aggregates=["DB-12"], n_resamples=100).table
    prior = prior_sd(t, "DB-12")
    e = t[(t["metric"] == "DB-12") & (t["kind"] == "effect") & (t["model"] == "Qwen2.5-7B-Instruct")]
    pooled = math.sqrt(sum(2 * v ** 2 for v in e["sd_used"]) / (2 * len(e)))
    assert prior["Qwen2.5-7B-Instruct"] == (pytest.approx(pooled), 2 * len(e))
    doc = power_section(_runs({"baseline": [1, 2, 3], "topk": [1, 2, 3]}), margin=0.5, prior_path=str(RELEASED))
    r = doc["comparisons"][0]
    assert r["sd"] == pytest.approx(pooled) and r["mde_lo"] < r["mde"] < r["mde_hi"]
    assert doc["cannot_detect_margin"] == 1 and "prior records" in r["sd_source"]
    other = power_section(_runs({"baseline": [1, 2], "topk": [1, 2]}, model="NewModel-1B"), margin=0.5,
                          prior_path=str(RELEASED))["comparisons"][0]
    assert "all models pooled" in other["sd_source"] and np.isfinite(other["mde"])


def test_campaign_plan_json_carries_the_power_table() -> None:
    import json

    from typer.testing import CliRunner

    from cli import app

    res = CliRunner().invoke(app, ["plan", str(REPO / "campaigns" / "demo.yaml"), "--sd", "1.5", "--margin", "1.0",
                                   "--json"])
    assert res.exit_code == 0, res.output
    p = json.loads(res.stdout if hasattr(res, "stdout") else res.output)["power"]
    dz = TTestPower().solve_power(effect_size=None, nobs=p["comparisons"][0]["n_pairs"], alpha=0.05, power=0.8)
    assert p["comparisons"] and all(c["mde"] == pytest.approx(dz * 1.5, rel=1e-6) for c in p["comparisons"])
    assert p["cannot_detect_margin"] == sum(c["mde"] > 1.0 for c in p["comparisons"])
    bad = CliRunner().invoke(app, ["plan", str(REPO / "campaigns" / "demo.yaml"), "--prior", "/nonexistent.csv"])
    assert bad.exit_code == 2 and "file not found" in bad.output
