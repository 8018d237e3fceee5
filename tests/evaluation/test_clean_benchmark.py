"""The generated clean benchmark: one seed gives one set, another seed another; every gold is the exact value of
the expression the prompt shows (re-evaluated here from the prompt's LaTeX by sympy, not by the generator), the
math grader credits it; `campaign data benchmarks` builds it without network; db12_clean's 12-benchmark
aggregates are db12's."""

from __future__ import annotations

import json
import re
from fractions import Fraction

import pytest
import sympy
from hypothesis import given, settings
from hypothesis import strategies as st
from latex2sympy2_extended import latex2sympy

from evaluation.clean_benchmark import CLEAN_ID, build_clean, generated_rows, render_fraction
from evaluation.graders import grade_inprocess
from evaluation.prompts import render_gold
from evaluation.suite import load_suite

seeds = st.integers(min_value=0, max_value=2**31)


def _frame(n: int, seed: int):
    return build_clean(generated_rows(n, {"seed": seed})[0])


def _gold_value(gold: str) -> sympy.Rational:
    m = re.fullmatch(r"(-?)\\frac\{(\d+)\}\{(\d+)\}", gold)
    if m:
        return sympy.Rational(int(m.group(2)), int(m.group(3))) * (-1 if m.group(1) else 1)
    return sympy.Integer(int(gold))


@settings(max_examples=20, deadline=None)
@given(seeds, seeds)
def test_one_seed_gives_one_set_and_two_seeds_two(a, b):
    first, again = _frame(30, a), _frame(30, a)
    assert first.equals(again)
    assert first.prompt.is_unique and len(first) == 30
    if a != b:
        other = _frame(30, b)
        assert list(first.prompt) != list(other.prompt)
        assert len(set(first.prompt) & set(other.prompt)) < 10  # a few short expressions may recur, not the set
        assert set(first.item_id).isdisjoint(set(other.item_id))


@settings(max_examples=15, deadline=None)
@given(seeds)
def test_every_gold_is_the_exact_value_of_the_shown_expression_and_the_grader_credits_it(seed):
    df = _frame(12, seed)
    for prompt, gold in zip(df.prompt, df.answer, strict=True):
        expr = re.fullmatch(r"Compute \$(.+)\$\.", prompt.split("\n\n")[0]).group(1)
        shown = sympy.nsimplify(sympy.simplify(latex2sympy(expr)), rational=True)
        assert shown == _gold_value(gold), (expr, gold)
        assert Fraction(str(shown)) == Fraction(str(_gold_value(gold)))  # lowest terms: one rational, one spelling
        assert grade_inprocess("math", render_gold("math", gold), gold).score == 1.0
        wrong = render_fraction(Fraction(str(_gold_value(gold))) + 1)
        assert grade_inprocess("math", render_gold("math", wrong), gold).score == 0.0


def test_campaign_data_benchmarks_builds_it_offline_with_the_suites_seed(tmp_path, campaign_cli):
    r = campaign_cli(["data", "benchmarks", "--suite", "db12_clean", "--only", CLEAN_ID, "--out", str(tmp_path / "d")])
    assert r.returncode == 0, r.stderr
    man = json.loads((tmp_path / "d" / "manifest.json").read_text())["benchmarks"][CLEAN_ID]
    seed = load_suite("db12_clean").benchmark(CLEAN_ID).options["seed"]
    assert man["n_items"] == 500 and man["source"]["seed"] == seed
    import pandas as pd

    from evaluation.benchmark_data import read_benchmark

    df = read_benchmark(tmp_path / "d", CLEAN_ID, "math")
    assert df.equals(_frame(500, seed).astype(df.dtypes.to_dict()))
    assert isinstance(df, pd.DataFrame) and df.answer.str.len().max() < 40


def test_a_campaign_seed_overrides_the_suites_and_a_bad_one_is_the_users_error(tmp_path):
    from evaluation.benchmark_build import build_benchmarks
    from wtcommon.errors import UserError

    s = load_suite("db12_clean")
    build_benchmarks(s, [CLEAN_ID], tmp_path / "a", seed=7)
    man = json.loads((tmp_path / "a" / "manifest.json").read_text())["benchmarks"][CLEAN_ID]
    assert man["source"]["seed"] == 7
    import dataclasses

    bad = dataclasses.replace(s, benchmarks=tuple(dataclasses.replace(b, options={"seed": "x"}) if b.id == CLEAN_ID
                                                  else b for b in s.benchmarks))
    with pytest.raises(UserError, match="options.seed"):
        build_benchmarks(bad, [CLEAN_ID], tmp_path / "b")
    assert not (tmp_path / "b").exists()


def test_db12_clean_keeps_db12s_aggregates_and_puts_the_clean_set_in_its_own():
    clean, db12 = load_suite("db12_clean"), load_suite("db12")
    assert clean.benchmark_ids == db12.benchmark_ids + [CLEAN_ID]
    for a in db12.aggregates:
        assert clean.aggregate(a.name).benchmarks == a.benchmarks and a.kind == clean.aggregate(a.name).kind
    assert [a.name for a in clean.aggregates if CLEAN_ID in a.benchmarks] == ["Clean-1"]
    assert clean.benchmark(CLEAN_ID).grader == "math"


@pytest.mark.slow
def test_the_evaluator_grades_it_with_the_math_grader(tmp_path, run_meta):
    """A tiny model overfit to answer four clean items scores 100 through the evaluator; golds off by one, 0."""
    import dataclasses

    from evaluation.benchmark_data import write_benchmark, write_manifest
    from evaluation.evaluator import evaluate_checkpoint
    from training.calibration_models import boxed_answer_pairs, overfit_tiny_model

    df = _frame(4, 11)
    data = tmp_path / "data"
    write_benchmark(df, data, CLEAN_ID, "math")
    write_manifest(data, [CLEAN_ID], kind="fixture")
    model = overfit_tiny_model(tmp_path / "m", boxed_answer_pairs(df.prompt, df.answer), steps=300, lr=6e-3)
    s = load_suite("db12_clean")
    s = dataclasses.replace(s, benchmarks=tuple(dataclasses.replace(b, max_gen_toks=40) for b in s.benchmarks))
    rec = evaluate_checkpoint(model, suite=s, data_dir=data, run_meta=run_meta, benchmarks=[CLEAN_ID],
                              progress=False).records
    assert rec.iloc[0]["accuracy"] == 100.0 and rec.iloc[0]["n_correct"] == 4
