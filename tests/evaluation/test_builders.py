"""Benchmark builders as pure functions over local fixture rows (the hub download itself needs network)."""

from __future__ import annotations

import random

import pytest

from evaluation.benchmark_data import validate_items
from evaluation.builders import (BUILDERS, GENERATED, SOURCES, BuildError, build_bbh, build_gpqa, build_gsm8k, build_kk,
                                 build_math, build_mmlu_pro, build_zebra, gsm8k_answer, sample_sorted)
from evaluation.graders import grade
from evaluation.prompts import render_gold
from evaluation.suite import load_suite


def test_every_suite_benchmark_has_a_builder_and_a_source():
    """A hub source for each of db12's and db12_post_cutoff's, a generator for db12_clean's 13th
    (evaluation/clean_benchmark.py)."""
    ids = load_suite("db12_post_cutoff").benchmark_ids
    assert sorted(SOURCES) == sorted(ids) and not set(GENERATED) & set(SOURCES)
    every = set(load_suite("db12_clean").benchmark_ids) | set(ids)
    assert sorted(BUILDERS) == sorted(every) == sorted([*SOURCES, *GENERATED])


def test_gsm8k_final_answer_and_prompt():
    df = build_gsm8k([{"question": "2+2?", "answer": "2+2=4\n#### 1,004"}])
    assert df.loc[0, "answer"] == "1004" and "\\boxed{}" in df.loc[0, "prompt"]
    assert gsm8k_answer("x #### 7 ") == "7"
    with pytest.raises(BuildError, match="no '####'"):
        build_gsm8k([{"question": "q", "answer": "no marker"}])


def test_olympiad_list_answers_and_missing_fields():
    df = build_math("olympiadbench", [{"question": "q", "final_answer": ["$\\frac{1}{2}$"], "id": 9}],
                    "question", "final_answer", "id")
    assert (df.loc[0, "item_id"], df.loc[0, "answer"]) == ("olympiadbench-9", "\\frac{1}{2}")
    with pytest.raises(BuildError, match=r"math500: source row 0 has no field 'answer'"):
        build_math("math500", [{"problem": "q"}], "problem", "answer")


def test_bbh_letter_from_target_and_option_count():
    text = "Which is first?\nOptions:\n(A) red\n(B) green\n(C) blue"
    df = build_bbh("bbh_tracking", [{"input": text, "target": "(B)"}])
    assert (df.loc[0, "answer"], df.loc[0, "n_options"]) == ("B", 3)
    assert "The answer is: (X)" in df.loc[0, "prompt"]
    with pytest.raises(BuildError, match="target '\\(D\\)' is not one of its options"):
        build_bbh("bbh_tracking", [{"input": text, "target": "(D)"}])


def test_zebra_sample_gold_letter_and_hidden_answers():
    rows = [{"id": f"z{i}", "puzzle": "p", "question": "q", "choices": ["x", "y", "z"],
             "answer": ["x", "y", "z"][i % 3]}
            for i in range(20)]
    df = build_zebra(rows, k=5)
    idx = sorted(random.Random(42).sample(range(20), 5))
    assert df["item_id"].tolist() == [f"zebra_logic_mc-z{i}" for i in idx]
    assert df["answer"].tolist() == ["ABC"[i % 3] for i in idx]
    with pytest.raises(BuildError, match="hidden answers"):
        build_zebra([dict(rows[0], answer="")], k=1)


def test_gpqa_one_shuffle_across_items_keeps_gold_on_the_correct_text():
    rows = [{"Question": f"q{i}", "Correct Answer": f"right{i}", "Incorrect Answer 1": "w1\nx",
             "Incorrect Answer 2": "w2", "Incorrect Answer 3": "w3"} for i in range(10)]
    df = build_gpqa(rows)
    assert df.equals(build_gpqa(rows))  # deterministic
    for i, (p, a) in enumerate(zip(df["prompt"], df["answer"], strict=True)):
        assert f"{a}. right{i}" in p and "w1 x" in p  # newlines removed from options
    assert len(set(df["answer"])) > 1  # actually shuffled


def test_mmlu_pro_skips_na_options_but_keeps_letters():
    rows = [{"question_id": i, "category": "physics" if i % 2 else "law", "question": f"q{i}",
             "options": ["a", "N/A", "c", "d"], "answer": "C"} for i in range(8)]
    df = build_mmlu_pro("mmlu_pro_physics", rows, "physics", k=3)
    assert len(df) == 3 and all(int(x.split("-")[-1]) % 2 for x in df["item_id"])
    p = df.loc[0, "prompt"]
    assert "A. a\nC. c\nD. d" in p and "B. N/A" not in p
    assert df.loc[0, "n_options"] == 4
    validate_items(df, "built", "multiple_choice")


def test_sample_sorted_needs_enough_rows():
    assert sample_sorted([{"i": i} for i in range(5)], 5) == [{"i": i} for i in range(5)]
    with pytest.raises(BuildError, match="need 6 rows"):
        sample_sorted([{}] * 5, 6)


@pytest.mark.parametrize("grader,gold,n", [("math", "\\frac{3}{4}", None), ("multiple_choice", "J", 10),
                                           ("knights_knaves", "Ann is a knight, and Bo is a knave.", None)])
def test_training_answer_format_round_trips_through_the_grader(grader, gold, n):
    assert grade(grader, render_gold(grader, gold), gold, n_options=n).score == 1.0


def test_kk_builder_uses_solution_text():
    df = build_kk([{"quiz": "Ann says ...", "solution_text": "Ann is a knight."}])
    assert df.loc[0, "answer"] == "Ann is a knight." and "X is a knight" in df.loc[0, "prompt"]
