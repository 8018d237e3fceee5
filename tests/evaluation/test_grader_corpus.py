"""Issue 13: the adversarial corpus, the issue's cases, the time budget and the graders' final-answer properties."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from evaluation.graders import BUDGET_S, GRADER_VERSIONS, GRADERS, GradeResult, grade, grade_batch, grader_version
from evaluation.graders.pool import GraderPool

CORPUS = yaml.safe_load((Path(__file__).with_name("adversarial_corpus.yaml")).read_text())
KK_GOLD = "Michael is a knight, Ethan is a knight, and Zoey is a knave."


def _expect(res: GradeResult, case: dict) -> None:
    assert res.score == float(case["score"]), (case, res)
    if "status" in case:
        assert res.status == case["status"], (case, res)
    elif case.get("gold") != "?":
        assert res.status == "ok", (case, res)
    if "parsed" in case:
        assert res.parsed == case["parsed"], (case, res)


def test_corpus_has_at_least_100_labelled_outputs_across_the_three_graders():
    assert set(CORPUS) == set(GRADERS)
    assert sum(len(v) for v in CORPUS.values()) >= 100
    assert all(c.get("rule") and "response" in c and "score" in c for v in CORPUS.values() for c in v)


def test_corpus_covers_the_issue25_categories_for_every_grader():
    """Grader v3: alternatives are no answer in all three graders; the new formats each have labelled cases."""
    rules = {g: {c["rule"] for c in v} for g, v in CORPUS.items()}
    assert all("alternatives" in r for r in rules.values())
    assert {"lowercase_letter", "latex_letter", "hedged"} <= rules["multiple_choice"]
    assert {"markdown_table", "negation"} <= rules["knights_knaves"]
    assert all(GRADER_VERSIONS[g] == "5" for g in GRADERS)


@pytest.mark.parametrize("case", CORPUS["multiple_choice"], ids=lambda c: c["rule"])
def test_corpus_multiple_choice(case):
    _expect(grade("multiple_choice", case["response"], str(case["gold"]), n_options=case.get("n", 4)), case)


@pytest.mark.parametrize("case", CORPUS["knights_knaves"], ids=lambda c: c["rule"])
def test_corpus_knights_knaves(case):
    _expect(grade("knights_knaves", case["response"], KK_GOLD), case)


def test_corpus_math():
    cases = CORPUS["math"]
    res = grade_batch("math", [c["response"] for c in cases], [str(c["gold"]) for c in cases])
    for case, r in zip(cases, res, strict=True):
        _expect(r, case)


# --- the six cases of the issue -------------------------------------------------------------------


def test_issue13_case1_mc_extractor_is_linear_on_whitespace_runs():
    """33 s (40 spaces), x5 per 10 more, with the old phrase regex; now no_answer within the 2 s budget."""
    for pad in (40, 28, 20_000):
        assert grade("multiple_choice", "The answer" + " " * pad + "!", "A") == GradeResult(0.0, None, "no_answer")
    cell = "| The answer" + " " * 28 + "| 12 |"
    assert grade("multiple_choice", cell, "A").status == "no_answer"


def test_issue13_case2_percent_inside_boxed_scores():
    res = grade_batch("math", ["\\boxed{10\\%}", "\\boxed{10%}", "\\boxed{10 \\%}", "The answer is 10%"],
                      ["10", "10\\%", "10\\%", "10"])
    assert [(r.score, r.status) for r in res] == [(1.0, "ok")] * 4


def test_issue13_case3_two_boxes_that_disagree_are_hedged_unless_the_first_is_retracted():
    """Issue 39 (math v4) replaced "the last box wins": a box and then a different box is a hedge. Issue 49
    (v5): a box the text retracts ("is wrong") is reasoning, so the box after it is the conclusion."""
    two = "Thus \\boxed{3} is wrong; the answer is \\boxed{4}"
    assert grade("math", two, "4") == GradeResult(1.0, "4", "ok")
    assert grade("math", "Thus \\boxed{3}; the answer is \\boxed{4}", "4") == GradeResult(0.0, None, "hedged")
    assert grade("math", "Thus \\boxed{3} is wrong; the answer is \\boxed{4}", "3").score == 0.0
    assert grade("math", "\\boxed{4}; so the answer is \\boxed{4}", "4") == GradeResult(1.0, "4", "ok")


def test_issue13_case4_mc_answer_does_not_flip_after_the_final_answer_and_option_lists_are_no_answer():
    assert grade("multiple_choice", "**Answer: B**\n\nExplanation: answer choice A is incorrect", "B") == \
        GradeResult(1.0, "B", "ok")
    truncated = "Let me consider each option.\n(A) 3 m/s\n(B) 5 m/s\n(C) 7 m/s\n(D) 9 m/s"
    assert grade("multiple_choice", truncated, "D") == GradeResult(0.0, None, "no_answer")


def test_issue13_case5_knights_knaves_phrasings_ambiguity_and_final_block():
    assert grade("knights_knaves", "Michael and Ethan are knights, and Zoey is a knave.", KK_GOLD).score == 1.0
    assert grade("knights_knaves", "Knights: Michael, Ethan. Knaves: Zoey.", KK_GOLD).score == 1.0
    amb = grade("knights_knaves", "Michael is a knight or a knave. Ethan is a knight. Zoey is a knave.", KK_GOLD)
    assert amb == GradeResult(0.0, "Michael=?, Ethan=knight, Zoey=knave", "ok")
    final = grade("knights_knaves", "Michael is a knight, Ethan is a knight, Zoey is a knave.\n"
                                    "<answer>Michael is a knight, Ethan is a knight</answer>", KK_GOLD)
    assert final == GradeResult(0.0, "Michael=knight, Ethan=knight", "ok")


# case 6 (the sampler) is tests/policies/test_sampler.py::test_issue13_case6_static_proportions_converge_over_a_run


# --- the time budget ---------------------------------------------------------------------------------


def test_every_grader_has_a_budget_and_a_version():
    assert set(BUDGET_S) == set(GRADERS) == set(GRADER_VERSIONS)
    assert all(0 < b <= 10 for b in BUDGET_S.values())
    assert grader_version("math") == f"math-v{GRADER_VERSIONS['math']}"


def test_budget_overrun_is_a_timeout_status_for_every_grader_and_the_pool_recovers():
    """The same parent-enforced budget for all graders: an item not back in time is `timeout`, not a 0 'wrong'."""
    pool = GraderPool(1)
    try:
        # a 10 MB output takes the linear graders ~0.1-1 s, far over a 1 ms budget
        for grader, resp, gold in (("multiple_choice", "The answer is (B). " + "x " * 5_000_000, "B"),
                                   ("knights_knaves", "Michael is a knight. " * 500_000, "Michael is a knight")):
            assert pool.grade_items(grader, [resp], [gold], timeout_s=0.001) == [GradeResult(0.0, None, "timeout")]
            assert pool.grade_items(grader, [resp[:200]], [gold], timeout_s=5.0)[0].score == 1.0
        assert pool.restarts == 2
    finally:
        pool.close()


# --- properties ---------------------------------------------------------------------------------------

FRAGMENTS = ["answer", "Answer:", " ", "  ", "\n", "\\boxed{", "}", "{", "(A)", "(B)", "B", "is", "**", "$",
             "Michael", "Ethan", "Zoey", "knight", "knave", "or", "and", ",", ":", "-", "<answer>", "</answer>",
             "final answer", "the answer is", "\\text{", "%", "1,234", "^\\circ", "!", "|", "a"]
adversarial = st.lists(st.sampled_from(FRAGMENTS), max_size=400).map("".join) | st.builds(
    lambda frag, n, tail: frag * n + tail, st.sampled_from(FRAGMENTS), st.integers(1, 20_000 // 8),
    st.text(max_size=20))
any_text = st.text(max_size=20_000) | adversarial


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(text=any_text)
def test_any_string_up_to_20000_chars_grades_within_the_budget_mc_and_kk(text):
    """A timeout here would mean an extraction pattern is not linear: these graders must never use the budget."""
    text = text[:20_000]
    answered = ("ok", "no_answer", "hedged", "truncated")  # v5: hedges and unclosed reasoning blocks have their own
    assert grade("multiple_choice", text, "B").status in answered
    assert grade("knights_knaves", text, KK_GOLD).status in answered


@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(text=any_text)
def test_any_string_up_to_20000_chars_returns_from_the_math_grader(text):
    """Math always returns: graded, or `timeout` once its budget is spent (never a hang, never an exception)."""
    assert grade("math", text[:20_000], "3", timeout_s=2.0).status in ("ok", "no_answer", "hedged", "truncated",
                                                                       "timeout")


PROSE_WORDS = ["the", "option", "choice", "is", "wrong", "because", "A", "B", "C", "D", "(A)", "(C)", "not",
               "incorrect", "Explanation:", "\n", ",", ".", "7", "$3$", "x", "=", "Michael", "Ethan", "Zoey", "knight",
               "knave", "is a"]
prose = st.lists(st.sampled_from(PROSE_WORDS), max_size=40).map(" ".join)


@settings(max_examples=40, deadline=None)
@given(letter=st.sampled_from("ABCD"), style=st.sampled_from(["The answer is: ({})", "\\boxed{{{}}}", "Answer: {}",
                                                               "Final answer: ({})", "<answer>{}</answer>"]),
       tail=prose)
def test_prose_without_a_marker_after_a_marked_mc_answer_never_changes_it(letter, style, tail):
    assert grade("multiple_choice", style.format(letter) + "\n\n" + tail, letter) == GradeResult(1.0, letter, "ok")


ROLE_FREE_PROSE = st.lists(st.sampled_from([w for w in PROSE_WORDS if w not in ("knight", "knave")]),
                          max_size=40).map(" ".join)


@settings(max_examples=30, deadline=None)
@given(tail=ROLE_FREE_PROSE)
def test_prose_after_a_kk_answer_block_never_changes_it(tail):
    """Prose that assigns no role keeps the answer (issue 39: a tail that gives a person another role is a
    self-contradiction, `test_a_kk_answer_then_a_different_role_never_scores`)."""
    resp = "<answer>Michael is a knight, Ethan is a knight, Zoey is a knave</answer>\n" + tail
    assert grade("knights_knaves", resp, KK_GOLD).score == 1.0


@settings(max_examples=15, deadline=None)
@given(person=st.sampled_from([("Michael", "knave"), ("Ethan", "knave"), ("Zoey", "knight")]),
       lead=st.sampled_from(["But wait, ", "Correction: ", "Actually ", "", "Hmm. "]), inside=st.booleans())
def test_a_kk_answer_then_a_different_role_never_scores(person, lead, inside):
    answer = "Michael is a knight, Ethan is a knight, Zoey is a knave."
    flip = f" {lead}{person[0]} is a {person[1]}."
    resp = f"<answer>{answer}{flip}</answer>" if inside else f"<answer>{answer}</answer>\n{flip}"
    assert grade("knights_knaves", resp, KK_GOLD) == GradeResult(0.0, None, "hedged")


@settings(max_examples=10, deadline=None)
@given(value=st.integers(-999, 999), tail=prose)
def test_prose_after_a_boxed_math_answer_never_changes_it(value, tail):
    assert grade("math", f"So the result is \\boxed{{{value}}}.\n{tail}", str(value)).score == 1.0


decoration = st.sampled_from(["", " ", "  ", "\n", "\n\n", "**", "__", "*", "\t"])


@settings(max_examples=40, deadline=None)
@given(d=st.lists(decoration, min_size=6, max_size=6), letter=st.sampled_from("ABCD"))
def test_correct_mc_answer_survives_whitespace_and_markdown(d, letter):
    resp = f"Reasoning.{d[0]}{d[1]}The answer is{d[2]}:{d[3]}{d[4]}({letter}){d[5]}"
    assert grade("multiple_choice", resp, letter) == GradeResult(1.0, letter, "ok")


@settings(max_examples=30, deadline=None)
@given(d=st.lists(decoration, min_size=3, max_size=3))
def test_correct_kk_answer_survives_whitespace_and_markdown(d):
    a, b, c = d
    resp = f"{a}Michael{a} is a {b}knight{b}, {c}Ethan is a {a}knight{a}{c} and {b}Zoey{b} is a knave.{c}"
    assert grade("knights_knaves", resp, KK_GOLD).score == 1.0


@settings(max_examples=10, deadline=None)
@given(outer=st.sampled_from(["", "**", "$", "$$", "\n\n"]), inner=st.sampled_from(["", " ", "  ", "\n"]),
       value=st.integers(0, 99))
def test_correct_math_answer_survives_whitespace_and_markdown(outer, inner, value):
    resp = f"The result:{outer}\\boxed{{{inner}{value}{inner}}}{outer[::-1]}"
    assert grade("math", resp, str(value)).score == 1.0


def test_grader_timeouts_are_counted_by_the_evaluator_health_gate():
    from evaluation.benchmark_health import MAX_GRADER_TIMEOUT_RATE, grader_timeout_gate

    assert grader_timeout_gate("math500", 0, 500) is None
    assert grader_timeout_gate("math500", int(500 * MAX_GRADER_TIMEOUT_RATE), 500) is None  # at the gate passes
    msg = grader_timeout_gate("math500", 6, 500)
    assert msg is not None and msg.startswith("math500: 6 of 500") and "time budget" in msg
    assert grader_timeout_gate("math500", 0, 0) is None


# --- alternatives offered are no answer (grader v3, issue 25; status `hedged` since v5, issue 49) ---------


@settings(max_examples=40, deadline=None)
@given(pair=st.lists(st.sampled_from("ABCD"), min_size=2, max_size=2, unique=True), gold=st.sampled_from("ABCD"),
       style=st.sampled_from(["The answer is {} or {}.", "Answer: ({}) or ({})", "\\boxed{{{}/{}}}",
                              "I'd go with {} or possibly {}.", "<answer>{} or {}</answer>"]),
       head=prose)
def test_two_letters_offered_in_the_final_mc_answer_never_score(pair, gold, style, head):
    res = grade("multiple_choice", head + "\n" + style.format(*pair), gold)
    assert res == GradeResult(0.0, None, "hedged")


@settings(max_examples=15, deadline=None)
@given(a=st.integers(-50, 50), b=st.integers(-50, 50),
       style=st.sampled_from(["\\boxed{{{} \\text{{ or }} {}}}", "$\\boxed{{{}}}$ or $\\boxed{{{}}}$",
                              "The answer is {} or {}."]))
def test_two_values_offered_in_the_final_math_answer_never_score_against_one_gold(a, b, style):
    if a == b:
        return
    for gold in (a, b):
        assert grade("math", style.format(a, b), str(gold)) == GradeResult(0.0, None, "hedged")


ROLES = ("knight", "knave")


@settings(max_examples=30, deadline=None)
@given(first=st.lists(st.sampled_from(ROLES), min_size=3, max_size=3),
       second=st.lists(st.sampled_from(ROLES), min_size=3, max_size=3),
       joint=st.sampled_from(["; or ", ", or ", ". Alternatively, ", ". Or "]))
def test_two_kk_assignments_offered_never_score(first, second, joint):
    if first == second:
        return
    def say(roles: list[str]) -> str:
        return ", ".join(f"{n} is a {r}" for n, r in zip(("Michael", "Ethan", "Zoey"), roles, strict=True))

    for resp in (say(first) + joint + say(second), f"<answer>{say(first)}{joint}{say(second)}</answer>"):
        assert grade("knights_knaves", resp, KK_GOLD) == GradeResult(0.0, None, "hedged")


@settings(max_examples=30, deadline=None)
@given(roles=st.lists(st.sampled_from(ROLES), min_size=3, max_size=3), negate=st.lists(st.booleans(), min_size=3,
                                                                                       max_size=3))
def test_a_negated_role_is_the_other_role(roles, negate):
    other = {"knight": "knave", "knave": "knight"}
    parts = [f"{n} is not a {other[r]}" if neg else f"{n} is a {r}"
             for n, r, neg in zip(("Michael", "Ethan", "Zoey"), roles, negate, strict=True)]
    expect = 1.0 if roles == ["knight", "knight", "knave"] else 0.0
    assert grade("knights_knaves", ", ".join(parts) + ".", KK_GOLD).score == expect
