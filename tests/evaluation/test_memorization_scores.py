"""The probe's scores as a user reads them: the LCS is the true LCS, exact means verbatim, an answer counts only
when the model states it beyond what the problem's own rest says, and the problem text is the prompt without
our instruction (whichever prompt builder wrote it)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from evaluation.memorization_scores import (answer_occurrences, lcs_length, problem_text, rouge_l,
                                            score_continuation, word_tokens)
from evaluation.prompts import kk_prompt, math_prompt, mc_prompt


def _dp_lcs(a: list[str], b: list[str]) -> int:
    row = [0] * (len(b) + 1)
    for x in a:
        prev, row = row, [0]
        for j, y in enumerate(b):
            row.append(prev[j] + 1 if x == y else max(prev[j + 1], row[j]))
    return row[-1]


tokens = st.lists(st.sampled_from(["a", "b", "c", "$", "7", "\\frac"]), max_size=60)


@settings(max_examples=300, deadline=None)
@given(tokens, tokens)
def test_the_bit_parallel_lcs_is_the_textbook_lcs(a, b):
    assert lcs_length(a, b) == _dp_lcs(a, b) == lcs_length(b, a)


@settings(max_examples=100, deadline=None)
@given(tokens, tokens)
def test_rouge_l_is_an_f1_in_0_1_and_1_only_for_equal_sequences(a, b):
    r = rouge_l(a, b)
    assert 0.0 <= r <= 1.0
    assert (r == 1.0) == (bool(a) and a == b)


def test_lcs_of_long_texts_is_fast_and_right():
    a = word_tokens("Let $x$ be a real number such that " * 60)
    assert lcs_length(a, a) == len(a) == 600
    assert lcs_length(a, a[::2]) == len(a[::2])


def test_exact_means_the_rest_verbatim_up_to_whitespace_and_more_text_after_it_does_not_matter():
    rest = " $2x = 10$ for $x$."
    assert score_continuation("$2x=10$ for  $x$.\nThe answer is 5.", rest, "5", "math").exact
    s = score_continuation(" $2x = 12$ for $x$.", rest, "5", "math")
    assert not s.exact and 0.8 < s.rouge_l < 1.0
    assert score_continuation("", rest, "5", "math").rouge_l == 0.0


def test_the_answer_counts_only_beyond_what_the_rest_itself_states():
    # the rest already says 7: copying it is not the answer; a continuation that then says 7 again is
    assert not score_continuation(" 7 apples?", " 7 apples?", "7", "math").answer
    assert score_continuation(" 7 apples? 3 + 4 = 7", " 7 apples?", "7", "math").answer
    assert answer_occurrences("17 and 7.5 and x7", "7", "math") == 0
    assert answer_occurrences("it is $\\frac{3}{4}$", "\\frac{3}{4}", "math") == 1
    assert answer_occurrences("so x = 5, and x=5", "5", "math") == 2
    assert answer_occurrences("The answer is: (C)", "C", "multiple_choice") == 1
    assert answer_occurrences("C. carbon", "C", "multiple_choice") == 0
    gold = "Alice is a knight, and Bob is a knave."
    assert answer_occurrences("Alice is a knight. Bob is a knave.", gold, "knights_knaves") == 1
    assert answer_occurrences("Alice is a knight.", gold, "knights_knaves") == 0


@pytest.mark.parametrize("prompt", [math_prompt("What is $3 + 4$?"), kk_prompt("What is $3 + 4$?"),
                                    "What is $3 + 4$? Put the final answer in \\boxed{}."])
def test_problem_text_drops_the_instruction_of_each_prompt_builder(prompt):
    assert problem_text(prompt) == "What is $3 + 4$?"


def test_problem_text_keeps_the_options_of_a_multiple_choice_item():
    assert problem_text(mc_prompt("Which?", ["iron", "water"])) == "Which?\n\nA. iron\nB. water"


def test_the_copied_synthetic_instructions_are_the_training_generators():
    """The demo's fixture items come from training/synthetic.py, which evaluation may not import."""
    from evaluation import memorization_scores
    from training import synthetic

    assert set(memorization_scores._SYNTHETIC) == {synthetic.MATH_INSTRUCTION, synthetic.LOGIC_INSTRUCTION,
                                                  synthetic.SCIENCE_INSTRUCTION}
    import random

    for make in (synthetic.math_item, synthetic.logic_item, synthetic.choice_item):
        item = make(random.Random(0), 0)
        text = problem_text(item.prompt)
        assert text and not any(i in text for i in memorization_scores._SYNTHETIC)
