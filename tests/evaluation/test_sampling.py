"""Sampled-decoding metrics (pure) and the suite's decoding fields."""

from __future__ import annotations

import math

import numpy as np
import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from evaluation.sampling import benchmark_metrics, item_metrics, majority, pass_at_k, pass_at_k_table
from evaluation.suite import SUITE_DIR, SuiteError, parse_suite
from evaluation.tasks.build import task_config


def _closed_form(n: int, c: int, k: int) -> float:
    """Chen et al. (2021), eq. 1 with exact integer binomials."""
    return 1.0 - math.comb(n - c, k) / math.comb(n, k)


@settings(max_examples=200, deadline=None)
@given(st.integers(1, 40).flatmap(lambda n: st.tuples(st.just(n), st.integers(0, n), st.integers(1, n))))
def test_pass_at_k_equals_the_closed_form(nck):
    n, c, k = nck
    assert pass_at_k(n, [c], k)[0] == pytest.approx(_closed_form(n, c, k), abs=1e-12)


def test_hand_made_table():
    # 4 samples: c correct -> pass@1..4 (by hand from C(4-c, j) / C(4, j))
    expected = np.array([[0, 0, 0, 0],
                         [1 / 4, 1 / 2, 3 / 4, 1],
                         [1 / 2, 5 / 6, 1, 1],
                         [3 / 4, 1, 1, 1],
                         [1, 1, 1, 1]])
    np.testing.assert_allclose(pass_at_k_table(4), expected, atol=1e-12)


def test_pass_at_k_is_stable_for_many_samples():
    # C(1000, 500) overflows a float; the product form does not
    v = pass_at_k(1000, [1, 500, 999], 500)
    assert v[0] == pytest.approx(0.5) and v[1] == pytest.approx(1.0) and v[2] == 1.0
    assert np.isfinite(pass_at_k_table(1024)).all()


@settings(max_examples=100, deadline=None)
@given(st.lists(st.lists(st.sampled_from([0.0, 1.0]), min_size=5, max_size=5), min_size=1, max_size=30))
def test_item_metrics_pass1_is_avg_and_pass_is_monotone(rows):
    scores = np.array(rows)
    per = item_metrics(scores, [[None] * 5] * len(rows))
    np.testing.assert_allclose(per["pass1"], per["avg"])
    for j in range(1, 5):
        assert (per[f"pass{j + 1}"] >= per[f"pass{j}"] - 1e-12).all()
    np.testing.assert_array_equal(per["pass5"], scores.max(axis=1))  # pass@n: any sample correct
    assert (per["maj"] == 0).all()  # nobody voted


def test_majority_vote_and_its_tie_rule():
    # "7" twice beats "5" once; the score is that of the first "7" sample
    assert majority(["5", "7", None, "7"], [0, 1, 0, 1]) == 1.0
    # a 2-2 tie goes to the answer that appeared first ("5", wrong)
    assert majority(["5", "7", "7", "5"], [0, 1, 1, 0]) == 0.0
    assert majority([None, ""], [0, 0]) == 0.0


def test_benchmark_metrics_names_and_values():
    scores = np.array([[1, 0, 0, 0], [1, 1, 0, 1]], dtype=float)
    answers = [["3", "4", "4", "5"], ["9", "9", "2", "9"]]
    m = benchmark_metrics("aime24", scores, answers)
    assert list(m) == ["aime24@avg4", "aime24@pass1", "aime24@pass2", "aime24@pass3", "aime24@pass4",
                       "aime24@maj4"]
    assert m["aime24@avg4"] == pytest.approx(100 * (0.25 + 0.75) / 2)
    assert m["aime24@pass2"] == pytest.approx(100 * (_closed_form(4, 1, 2) + _closed_form(4, 3, 2)) / 2)
    assert m["aime24@maj4"] == pytest.approx(50.0)  # item 1: "4" wins (wrong); item 2: "9" wins (right)


def _suite_with(**bench):
    raw = yaml.safe_load((SUITE_DIR / "db12.yaml").read_text())
    raw["benchmarks"][1].update(bench)  # aime24
    return parse_suite(raw, "s.yaml")


def test_suite_decoding_defaults_are_the_greedy_single_pass():
    s = _suite_with()
    for b in s.benchmarks:
        assert b.decoding.greedy and b.metric_name == "accuracy"
        assert "repeats" not in task_config(s, b, SUITE_DIR)
    assert s.decodings()["aime24"] == {"samples": 1, "temperature": 0.0, "top_p": 1.0, "seed": 0, "metric": "avg"}


def test_suite_sampled_benchmark_becomes_a_repeated_task():
    s = _suite_with(samples=16, temperature=0.6, top_p=0.95, seed=3, metric="pass8")
    b = s.benchmark("aime24")
    assert (b.samples, b.temperature, b.top_p, b.seed) == (16, 0.6, 0.95, 3)
    assert b.metric_name == "aime24@pass8"
    assert s.aggregate_metrics("Math-Heavy-6")["aime24"] == "aime24@pass8"
    assert s.aggregate_metrics("Math-Heavy-6")["math500"] == "accuracy"
    cfg = task_config(s, b, SUITE_DIR)
    assert cfg["repeats"] == 16
    assert cfg["filter_list"] == [{"name": "none", "filter": [{"function": "take_first_k", "k": 16}]}]
    assert cfg["generation_kwargs"]["do_sample"] is True and cfg["generation_kwargs"]["temperature"] == 0.6
    assert _suite_with(samples=4, temperature=1.0).benchmark("aime24").metric_name == "aime24@avg4"


@pytest.mark.parametrize("bench,field", [
    ({"samples": 4}, "samples"),  # k greedy samples are identical
    ({"samples": 0, "temperature": 0.7}, "samples"),
    ({"temperature": -1}, "temperature"),
    ({"top_p": 0}, "top_p"),
    ({"seed": -2}, "seed"),
    ({"samples": 4, "temperature": 0.7, "metric": "pass5"}, "metric"),
    ({"metric": "best"}, "metric"),
])
def test_bad_decoding_names_file_field_and_fix(bench, field):
    with pytest.raises(SuiteError, match=rf"s\.yaml: benchmarks\[1\]\.{field}: "):
        _suite_with(**bench)


def test_vllm_request_is_one_request_with_n_samples():
    from evaluation.backends.vllm import sampling_kwargs

    gen = {"until": ["<|im_end|>"], "do_sample": True, "temperature": 0.8, "top_p": 0.9, "max_gen_toks": 64}
    kw = sampling_kwargs(gen, n=4, seed=11, eos="<|endoftext|>", default_max_gen_toks=256)
    assert kw == {"n": 4, "seed": 11, "temperature": 0.8, "top_p": 0.9, "max_tokens": 64,
                  "stop": ["<|im_end|>", "<|endoftext|>"]}
    with pytest.raises(ValueError, match="temperature > 0"):
        sampling_kwargs({"do_sample": False, "temperature": 0.0}, n=4, seed=0, eos="", default_max_gen_toks=8)


def test_decoding_is_an_evaluation_setting_and_greedy_keys_are_unchanged(tmp_path, monkeypatch):
    import evaluation.suite as suite_mod
    from evaluation.settings import evaluation_key, evaluation_settings

    greedy = evaluation_settings("db12", {})["benchmarks"]
    assert not any({"samples", "seed", "metric"} & set(b) for b in greedy)  # the pre-sampling key holds
    raw = yaml.safe_load((SUITE_DIR / "db12.yaml").read_text())
    (tmp_path / "same.yaml").write_text(yaml.safe_dump(raw))
    raw["benchmarks"][1].update(samples=4, temperature=0.8, seed=1)
    (tmp_path / "k4.yaml").write_text(yaml.safe_dump({**raw, "name": "db12"}))
    raw["benchmarks"][1].update(seed=2)
    (tmp_path / "k4b.yaml").write_text(yaml.safe_dump({**raw, "name": "db12"}))
    monkeypatch.setattr(suite_mod, "SUITE_DIR", tmp_path)
    keys = {n: evaluation_key(n, {}) for n in ("same", "k4", "k4b")}
    assert len(set(keys.values())) == 3
    aime = evaluation_settings("k4", {})["benchmarks"][1]
    assert (aime["samples"], aime["temperature"], aime["seed"]) == (4, 0.8, 1)
