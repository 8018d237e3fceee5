"""The memory-sensitivity flag on hand-made paired Δ records: a gain on the recalled benchmarks with none on the
clean one is flagged; the same gain with a clean gain, a gain spread evenly, or no clean Δ at all is not."""

from __future__ import annotations

import json

import pandas as pd
import pytest

from analysis.memory_sensitivity import MemorizationRatesError, memory_sensitive, read_rates

RATES = {"math500": 0.7, "aime24": 0.6, "gsm8k": 0.1, "kk_hard": 0.0}


def _table(policy: str, deltas: dict[str, tuple[float, float]]) -> pd.DataFrame:
    return pd.DataFrame([{"campaign": "c", "policy": policy, "reference": "baseline", "metric": m, "mean_diff": d,
                          "t_lo": lo} for m, (d, lo) in deltas.items()])


def _one(deltas, **kw):
    return memory_sensitive(_table("p", deltas), RATES, **kw).iloc[0]


def test_a_gain_on_the_recalled_benchmarks_and_none_on_the_clean_one_is_flagged():
    r = _one({"math500": (6.0, 2.0), "aime24": (4.0, 0.5), "gsm8k": (0.5, -1.0), "kk_hard": (0.0, -1.0),
              "clean_arith": (0.2, -1.5)})
    assert bool(r.memory_sensitive) is True
    assert r.high_recall == "aime24,math500" and r.gain_high == 5.0 and r.gain_low == 0.25


def test_a_clean_gain_clears_it():
    r = _one({"math500": (6.0, 2.0), "aime24": (4.0, 0.5), "gsm8k": (0.5, -1.0), "clean_arith": (3.0, 0.4)})
    assert not r.memory_sensitive and "clean_arith +3.00" in r.reason


def test_a_gain_spread_over_recalled_and_unrecalled_benchmarks_is_not_concentrated():
    # 5 on the recalled, 3 elsewhere: under the default 2x concentration
    r = _one({"math500": (5.0, 1.0), "aime24": (5.0, 1.0), "gsm8k": (3.0, 0.5), "kk_hard": (3.0, 0.5),
              "clean_arith": (0.0, -2.0)})
    assert not r.memory_sensitive
    assert _one({"math500": (5.0, 1.0), "gsm8k": (3.0, 0.5), "clean_arith": (0.0, -2.0)},
                concentration=1.5).memory_sensitive


def test_no_recalled_benchmark_is_false_and_no_clean_delta_is_no_verdict():
    assert not _one({"math500": (5.0, 1.0), "clean_arith": (0.0, -1.0)}, threshold=0.9).memory_sensitive
    r = _one({"math500": (5.0, 1.0), "gsm8k": (0.0, -1.0)})
    assert r.memory_sensitive is None and "no clean control" in r.reason


def test_a_loss_on_the_recalled_benchmarks_is_not_flagged_and_each_comparison_gets_its_row():
    t = pd.concat([_table("a", {"math500": (-3.0, -5.0), "clean_arith": (0.0, -1.0)}),
                   _table("b", {"math500": (3.0, 1.0), "clean_arith": (0.0, -1.0)})])
    out = memory_sensitive(t, RATES).set_index("policy")
    assert list(out.index) == ["a", "b"] and not out.loc["a", "memory_sensitive"] and out.loc["b", "memory_sensitive"]


def test_rates_are_read_from_a_probe_report_and_bad_input_names_it(tmp_path):
    p = tmp_path / "memorization.json"
    p.write_text(json.dumps({"benchmarks": [{"benchmark": "math500", "near_rate": 0.5},
                                            {"benchmark": "aime24", "near_rate": None}]}))
    assert read_rates(p) == {"math500": 0.5}
    p.write_text("{")
    with pytest.raises(MemorizationRatesError, match="memorization.json"):
        read_rates(p)
    with pytest.raises(MemorizationRatesError, match="t_lo"):
        memory_sensitive(pd.DataFrame({"metric": ["x"], "mean_diff": [1.0]}), RATES)
