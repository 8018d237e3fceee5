"""Table-driven grader tests: tricky real-world outputs (STUDY.md §4.2 table and more)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from evaluation.graders import GradeResult, grade, grade_batch
from evaluation.graders.pool import MathPool

# (response, gold, n_options, expected score, expected parsed letter or None, status)
MC_CASES = [
    ("The answer is B. A careful check confirms it.", "B", 4, 1.0, "B", "ok"),
    ("Answer: B. I think this is right.", "B", 10, 1.0, "B", "ok"),
    ("after all that, the answer is c", "C", 4, 1.0, "C", "ok"),
    ("so we get \\boxed{C}", "C", 4, 1.0, "C", "ok"),
    ("Final answer: (D)", "D", 4, 1.0, "D", "ok"),
    ("The answer is: (A)", "A", 10, 1.0, "A", "ok"),
    ("The answer is: A", "A", 10, 1.0, "A", "ok"),
    ("**Answer:** C", "C", 4, 1.0, "C", "ok"),
    ("The correct option is (B).", "B", 4, 1.0, "B", "ok"),
    ("Answer: I think it is (C)", "C", 10, 1.0, "C", "ok"),
    ("I first thought A. Final answer: \\boxed{\\text{D}}", "D", 4, 1.0, "D", "ok"),
    ("The answer is (A). Wait, no. The answer is (B).", "B", 4, 1.0, "B", "ok"),  # v5: a retracted answer is reasoning
    ("Reasoning...\n\n(C)", "C", 4, 1.0, "C", "ok"),
    ("The answer is B", "C", 4, 0.0, "B", "ok"),
    ("The answer is (E)", "E", 10, 1.0, "E", "ok"),
    ("The answer is (E)", "A", 4, 0.0, "E", "ok"),  # letter outside the 4-option set never scores
    ("the answer is a bit unclear to me", "A", 4, 0.0, None, "no_answer"),
    ("I am not sure. A tough one.", "A", 4, 0.0, None, "no_answer"),
    ("", "A", 4, 0.0, None, "no_answer"),
    ("The answer is (B)", "(B)", 4, 1.0, "B", "ok"),  # gold in parentheses is normalised
    ("The answer is (B)", "?", 4, 0.0, None, "error"),  # unscorable gold is an error, not a 0
    ("The answer is (F)", "F", 4, 0.0, None, "error"),  # gold outside the item's letter set
]


@pytest.mark.parametrize("response,gold,n,score,parsed,status", MC_CASES)
def test_multiple_choice_table(response, gold, n, score, parsed, status):
    res = grade("multiple_choice", response, gold, n_options=n)
    assert res == GradeResult(score, parsed, status)


KK_GOLD = "Michael is a knight, Ethan is a knave, and Zoe is a knight."
KK_CASES = [
    ("Michael is a knight, Ethan is a knave, and Zoe is a knight.", 1.0, "ok"),
    ("**Michael** is a **knight**\n**Ethan** is a **knave**\n**Zoe** is a **knight**", 1.0, "ok"),
    ("Michael: knight\nEthan: knave\nZoe: knight", 1.0, "ok"),
    ("- Michael - knight\n- Ethan - knave\n- Zoe - knight", 1.0, "ok"),
    # full list then a closing sentence about one person: the last complete block is used
    ("Michael is a knight, Ethan is a knave, Zoe is a knight.\nTherefore Ethan is a knave.", 1.0, "ok"),
    # v4: a different role after the complete block is a self-contradiction
    ("Michael is a knight. Ethan is a knave. Zoe is a knight. Therefore Ethan is a knight indeed.", 0.0, "hedged"),
    # reasoning with a wrong assumption first, final block right
    ("Suppose Michael is a knave. Then Ethan is a knight, contradiction.\n\n"
     "Final answer: Michael is a knight, Ethan is a knave, Zoe is a knight.", 1.0, "ok"),
    # "He is a knight" is not a person; "knightly" is not "knight"
    ("He is a knight. Michael is knightly.", 0.0, "no_answer"),
    # grader v3 (issue 25): "is not a knave" assigns the other role (was no statement, no_answer, under v2);
    # Michael alone is an incomplete answer: graded, wrong
    ("He is a knight. Michael is not a knave. Michael is knightly.", 0.0, "ok"),
    ("Michael is not a knave, Ethan is not a knight, and Zoe is not a knave.", 1.0, "ok"),
    ("Michael is a knight, Ethan is a knight, and Zoe is a knight.", 0.0, "ok"),
    ("Michael is a knight and Ethan is a knave.", 0.0, "ok"),  # Zoe missing
    ("MICHAEL is a Knight, ethan is a KNAVE, Zoe is a knight.", 1.0, "ok"),
    ("no idea", 0.0, "no_answer"),
]


@pytest.mark.parametrize("response,score,status", KK_CASES)
def test_knights_knaves_table(response, score, status):
    res = grade("knights_knaves", response, KK_GOLD)
    assert (res.score, res.status) == (score, status)
    if status == "ok":
        assert res.parsed is not None and "Michael=" in res.parsed


def test_knights_knaves_gold_without_assignment_is_error():
    assert grade("knights_knaves", "Michael is a knight", "nothing here").status == "error"


MATH_CASES = [
    ("So the answer is $\\boxed{\\frac{1}{2}}$.", "0.5", 1.0, "ok"),
    ("The answer is \\boxed{42}.", "42", 1.0, "ok"),
    ("... is $\\boxed{72}$.", "72", 1.0, "ok"),  # lm-eval's gsm8k flexible filter gets "$." here
    ("\\boxed{\\dfrac{3}{4}}", "\\frac{3}{4}", 1.0, "ok"),
    ("\\boxed{2\\sqrt{2}}", "\\sqrt{8}", 1.0, "ok"),
    ("\\boxed{x^2+2x+1}", "(x+1)^2", 1.0, "ok"),
    ("\\boxed{41}", "42", 0.0, "ok"),
    ("The answer is \\boxed{1,234}", "1234", 1.0, "ok"),
    ("I do not know.", "42", 0.0, "no_answer"),
]


def test_math_table():
    res = grade_batch("math", [c[0] for c in MATH_CASES], [c[1] for c in MATH_CASES], processes=2)
    got = [(r.score, r.status) for r in res]
    assert got == [(c[2], c[3]) for c in MATH_CASES]


def test_math_single_grade_matches_batch():
    assert grade("math", "thus \\boxed{7}", "7") == GradeResult(1.0, "7", "ok")


def test_math_timeout_is_reported_and_pool_recovers():
    pool = MathPool(1)
    try:
        # a power tower math-verify does not finish within 20 s, next to a trivial item:
        # the tower times out (killed with its pool), the pool restarts and the trivial item still grades
        slow = "\\boxed{" + "9^{" * 12 + "9" + "}" * 12 + "}"
        res = pool.grade([slow, "\\boxed{3}"], ["\\frac{1}{3}", "3"], timeout_s=3.0)
        assert res == [GradeResult(0.0, None, "timeout"), GradeResult(1.0, "3", "ok")]
        assert pool.restarts == 1
    finally:
        pool.close()


def test_unknown_grader_is_loud():
    with pytest.raises(ValueError, match="unknown grader"):
        grade("regex", "x", "y")


@settings(max_examples=60, deadline=None)
@given(letter_idx=st.integers(0, 9), n=st.integers(2, 10),
       style=st.sampled_from(["The answer is: ({})", "\\boxed{{{}}}", "Answer: {}", "Final answer: ({})"]),
       prefix=st.text(alphabet="abcdefghij .,\n", max_size=40))
def test_mc_any_answer_style_round_trips(letter_idx, n, style, prefix):
    """A gold letter written in any accepted format after arbitrary lower-case reasoning scores 1."""
    letter = "ABCDEFGHIJ"[letter_idx % n]
    res = grade("multiple_choice", prefix + " " + style.format(letter), letter, n_options=n)
    assert res == GradeResult(1.0, letter, "ok")


def test_each_grader_is_declared_once_by_its_decorator():
    """Issue 23: the graders, their versions and budgets come from one registration per grader module."""
    from evaluation.graders import BUDGET_S, GRADER_VERSIONS, GRADERS
    from evaluation.graders.registry import REGISTRY, get_grader, register_grader

    assert GRADERS == ("math", "multiple_choice", "knights_knaves") == tuple(REGISTRY)
    assert GRADER_VERSIONS == {g: get_grader(g).version for g in GRADERS}
    assert BUDGET_S == {g: get_grader(g).budget_s for g in GRADERS}
    with pytest.raises(ValueError, match="already registered"):
        register_grader("math", version="9", budget_s=1.0)(lambda response, gold: GradeResult(0.0, None, "ok"))
    known = r"known: \['knights_knaves', 'math', 'multiple_choice'\]"
    with pytest.raises(ValueError, match=rf"unknown grader 'regex' {known}"):
        get_grader("regex")
    assert REGISTRY["math"].version == GRADER_VERSIONS["math"]  # the refused registration changed nothing
