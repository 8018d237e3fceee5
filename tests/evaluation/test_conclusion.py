"""Issue 49: the conclusion reader every grader family parses through — reflection keeps its credit, a hedge earns
none, an unclosed reasoning block is `truncated` — and the remaining answer classes, each a rule with a test.

Graded in this process (`grade_inprocess`, the pool workers' function) so the cases run without spawning workers;
the budgeted path is the same function behind the pool (tests/evaluation/test_grader_corpus.py)."""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from evaluation.exploit_watch import step_watch, unclosed_reasoning
from evaluation.graders import DEFAULT_TAGS, GradeResult, ThinkTags, read_conclusion
from evaluation.graders.pool import grade_inprocess
from evaluation.regrade import regrade_rows
from evaluation.reward import think_tags
from evaluation.suite import load_suite
from wtcommon.errors import UserError

KK_GOLD = "Michael is a knight, Ethan is a knight, and Zoey is a knave."


def g(grader: str, response: str, gold: str, tags: ThinkTags | None = DEFAULT_TAGS) -> GradeResult:
    return grade_inprocess(grader, response, gold, 4, tags)


# ---------------------------------------------------------------- the reader

def test_the_conclusion_is_after_a_closed_reasoning_block_and_an_unclosed_one_is_truncated() -> None:
    c = read_conclusion("<think>the answer is 12</think>\n\nSo \\boxed{15}.")
    assert c.ok and c.closed and "12" not in c.text and "15" in c.text
    assert read_conclusion("<think>the answer is 12, so \\boxed{12}").status == "truncated"
    assert read_conclusion("<think>\\boxed{12}</think>  \n").status == "no_answer"
    # a chat template that puts <think> in the prompt: only the closing tag is in the response
    assert read_conclusion("reasoning 12 ...</think>\\boxed{15}").text == "\\boxed{15}"
    # an answer, then a second block opened and never closed: truncated
    assert read_conclusion("<think>a</think>\\boxed{3}<think>more").status == "truncated"


def test_think_tags_are_configurable_per_model_and_none_reads_the_whole_response() -> None:
    seed = ThinkTags.parse("<reasoning>,</reasoning>")
    assert seed == ThinkTags("<reasoning>", "</reasoning>") and ThinkTags.parse("</reasoning>") == seed
    assert ThinkTags.parse("none") is None and ThinkTags.parse(None) == ThinkTags() and ThinkTags.parse("default")
    resp = "<reasoning>\\boxed{12}</reasoning> \\boxed{15}"
    assert g("math", resp, "15", seed) == GradeResult(1.0, "15", "ok")
    assert g("math", "<think>so 3", "3", None).status == "ok"  # no reasoning block for this model: read it all
    assert g("math", "<think>so 3", "3").status == "truncated"
    with pytest.raises(ValueError, match="OPEN,CLOSE"):
        ThinkTags.parse(",</x>")
    with pytest.raises(UserError, match="think_tags"):
        think_tags({"think_tags": ",</x>"})
    assert think_tags({"think_tags": "none"}) is None and think_tags(None) == ThinkTags()


def test_a_retracted_statement_is_reasoning_and_an_unretracted_one_joins_the_conclusion() -> None:
    assert read_conclusion("So the answer is 12. Wait, I forgot 3. The answer is 15.").text == "The answer is 15."
    assert read_conclusion("\\boxed{3} and \\boxed{4}").text == "\\boxed{3} and \\boxed{4}"
    assert read_conclusion("If the answer is A, the units fail.").text.startswith("If")  # a supposition states none
    assert read_conclusion("no statement at all").text == "no statement at all"


# ---------------------------------------------------------------- the reflections and hedges

REFLECTIONS = [
    ("math", "4 bags of 3 is 12. So the answer is 12. Wait, I forgot the 3 loose marbles: 15.\n\n\\boxed{15}", "15"),
    ("math", "**Final Answer** \\boxed{72}\n\nWait, every handshake is counted twice, so 72/2 = 36.\n\n\\boxed{36}",
     "36"),
    ("math", "<think>So the answer is 12. Hmm, no.</think>\nThe answer is $\\boxed{15}$.", "15"),
    ("math", "The answer is 12. Actually no, it is \\boxed{15}", "15"),
    ("multiple_choice", "so the answer is (B). Wait, no — B ignores friction. The answer is (C)", "C"),
    ("multiple_choice", "<think>Answer: B. Hmm, B double counts.</think>\n**Answer: C**", "C"),
    ("knights_knaves", "Michael is a knave, Ethan is a knight, Zoey is a knave. That doesn't work: Michael would be "
                       "telling the truth. So Michael is a knight, Ethan is a knight, Zoey is a knave.", KK_GOLD),
    ("knights_knaves", "<answer>Michael is a knave, Ethan is a knight, Zoey is a knave</answer> That doesn't work. "
                       "So Michael is a knight, Ethan is a knight, Zoey is a knave.", KK_GOLD),
]
HEDGES = [
    ("math", "<think>\\boxed{16}", "16", "truncated"),
    ("math", "<think>The answer is \\boxed{16}.</think>\n", "16", "no_answer"),
    ("math", "The answer is 16, though it could be 14.", "16", "hedged"),
    ("math", "The answer is 14, though it could be 16.", "16", "hedged"),
    ("math", "\\boxed{16} (or possibly 14)", "16", "hedged"),
    ("multiple_choice", "\\boxed{D}. Actually, I think C", "C", "hedged"),
    ("multiple_choice", "\\boxed{D}. Actually, I think C", "D", "hedged"),
    ("multiple_choice", "The answer is (D). (A) might also be correct.", "D", "hedged"),
    ("multiple_choice", "Answer: D, though it could be A.", "A", "hedged"),
    ("knights_knaves", "Final answer: Michael is a knight, Ethan is a knight, Zoey is a knave. Though Zoey could be "
                       "a knight.", KK_GOLD, "hedged"),
    ("knights_knaves", "<answer>Michael is a knight, Ethan is a knight, Zoey is a knave</answer>\nEthan might also be"
                       " a knave.", KK_GOLD, "hedged"),
]


@pytest.mark.parametrize(("grader", "response", "gold"), REFLECTIONS)
def test_a_reflection_before_one_final_answer_keeps_its_credit(grader: str, response: str, gold: str) -> None:
    assert g(grader, response, gold).score == 1.0


@pytest.mark.parametrize(("grader", "response", "gold", "status"), HEDGES)
def test_a_hedge_or_a_non_answer_earns_nothing_with_its_own_status(grader: str, response: str, gold: str,
                                                                   status: str) -> None:
    assert g(grader, response, gold) == GradeResult(0.0, None, status)  # type: ignore[arg-type]


def test_an_agreeing_restatement_in_the_conclusion_keeps_the_credit() -> None:
    assert g("math", "\\boxed{12}. So the answer is 12.", "12").score == 1.0
    assert g("multiple_choice", "The answer is (C). To restate: C is the correct answer.", "C").score == 1.0
    assert g("knights_knaves", f"<answer>{KK_GOLD}</answer> So Zoey is a knave, as stated.", KK_GOLD).score == 1.0


# ---------------------------------------------------------------- the remaining classes (rule 3 of the issue)

@pytest.mark.parametrize("response", [
    "Michael is a knight, Ethan is a knight, and Zoey is no knight.",
    "Michael is a truth-teller, Ethan is a truth-teller, and Zoey is a liar.",
    "Michael and Ethan are truthtellers; Zoey is a liar.",
    "Michael is no knave, Ethan is a knight, Zoey is no knight.",
])
def test_kk_defined_synonyms_and_no_negations_are_read(response: str) -> None:
    assert g("knights_knaves", response, KK_GOLD).score == 1.0


@pytest.mark.parametrize(("response", "gold", "score"), [
    ("The answer is not (B) but (D).", "D", 1.0),
    ("It is not B, but D.", "D", 1.0),
    ("The answer is {C}.", "C", 1.0),
    ("Answer: {c}", "C", 1.0),
    ("Options: (A) iron (B) copper (C) zinc (D) lead. The answer is zinc.", "C", 1.0),
    ("A. 12\nB. 14\nC. 16\nD. 18\n\nThe answer is 16.", "C", 1.0),
    ("The answer is \\boxed{\\text{Option C}}", "C", 1.0),
])
def test_mc_not_x_but_y_braces_option_text_and_prose_in_a_box(response: str, gold: str, score: float) -> None:
    assert g("multiple_choice", response, gold).score == score


def test_math_prose_inside_a_box_is_read_as_its_value() -> None:
    assert g("math", "\\boxed{\\text{The total is } 15}", "15") == GradeResult(1.0, "15", "ok")
    assert g("math", "\\boxed{\\text{Answer: }42}", "42").score == 1.0


# ---------------------------------------------------------------- bad input (unchanged: bounded, no traceback)

BAD = st.one_of(
    st.text(max_size=3000),
    st.binary(max_size=2000).map(lambda b: b.decode("latin-1")),
    st.lists(st.sampled_from(["<think>", "</think>", "\\boxed{", "}", "{", "Wait, ", "The answer is ", "(C) ", "7",
                              "Zoey is a knave. ", "<answer>", "</answer>", "\n\n", "or "]), max_size=400).map("".join),
)


@settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck))
@given(text=BAD)
def test_empty_binary_and_unbalanced_tag_input_grades_without_a_traceback(text: str) -> None:
    for grader, gold in (("math", "7"), ("multiple_choice", "C"), ("knights_knaves", KK_GOLD)):
        r = g(grader, text, gold)
        assert r.status in ("ok", "no_answer", "hedged", "truncated") and r.score in (0.0, 1.0)


def test_huge_responses_read_in_linear_time() -> None:
    """The reader alone on 200,000-character adversarial strings: well under a second each (the grader budget
    is 2-5 s per item); linear patterns, not a timed assertion of throughput (benchmarks/ measures that)."""
    for text in ("Wait, " * 40_000, "<think>" * 30_000, "\\boxed{" * 30_000, "The answer is " * 15_000,
                 "the answer is 1. " * 12_000):
        t0 = time.perf_counter()
        read_conclusion(text)
        assert time.perf_counter() - t0 < 2.0


# ---------------------------------------------------------------- where the grade is used

def test_the_exploit_watch_logs_the_share_of_rollouts_whose_reasoning_never_closed() -> None:
    texts = ["<think>so 3", "<think>x</think>\\boxed{3}", "\\boxed{3}", "<think>a</think><think>b"]
    assert unclosed_reasoning(texts).tolist() == [True, False, False, True]
    w = step_watch(texts, "math", np.array([0.0, 1.0, 1.0, 0.0]), np.ones(4), np.zeros(4, bool))
    assert w["watch/unclosed_reasoning_frac"] == 0.5  # of all rollouts: truncation earns no reward to share
    assert unclosed_reasoning(texts, None).tolist() == [False] * 4


def test_regrade_reports_each_status_transition() -> None:
    base = {"prompt": "p", "parsed": None, "finish_reason": "stop", "response_tokens": 5, "prompt_tokens": 3,
            "max_gen_toks": 32, "grader_version": "math-v4", "status": "no_answer", "score": 0.0, "gold": "15"}
    rows = [{**base, "benchmark": "gsm8k", "item_id": "a", "response": "The answer is 12. Wait, 15. \\boxed{15}"},
            {**base, "benchmark": "gsm8k", "item_id": "b", "response": "The answer is 15, though it could be 14.",
             "status": "ok", "score": 1.0}]
    _, _, changes = regrade_rows(rows, load_suite("db12"), processes=0)
    assert changes[0].status_changes == (("no_answer", "ok", 1), ("ok", "hedged", 1))
    assert changes[0].describe_statuses() == "no_answer->ok 1, ok->hedged 1"


def test_the_reward_and_the_evaluator_hooks_take_the_think_tags_of_the_model() -> None:
    """Through the budgeted pool (the verl/local reward and lm-eval's hooks): a row's think_tags reaches the reader."""
    from evaluation.reward import compute_score
    from evaluation.tasks.functions import process_math

    truncated = compute_score("gsm8k", "<think>so \\boxed{3}", "3")
    assert (truncated["score"], truncated["status"]) == (0.0, "truncated")
    assert compute_score("gsm8k", "<think>so \\boxed{3}", "3", {"think_tags": "none"})["score"] == 1.0
    custom = "<r>\\boxed{4}</r> \\boxed{3}"
    assert compute_score("gsm8k", custom, "3", {"think_tags": "<r>,</r>"})["score"] == 1.0
    assert compute_score("gsm8k", custom, "3")["status"] == "hedged"  # default tags: both boxes are the conclusion
    assert process_math({"answer": "3", "think_tags": "none"}, ["<think>so \\boxed{3}"])["acc"] == 1.0
    assert process_math({"answer": "3"}, ["<think>so \\boxed{3}"])["acc"] == 0.0


def test_the_exploit_watch_counts_candidates_in_the_conclusion_not_in_the_retracted_reasoning() -> None:
    reflection = "So \\boxed{12}. Wait, I forgot the loose ones.\n\n\\boxed{15}"
    hedge = "\\boxed{15} or \\boxed{16}"
    w = step_watch([reflection, hedge], "math", np.array([1.0, 1.0]), np.ones(2), np.zeros(2, bool))
    assert w["watch/multi_answer_frac"] == 0.5  # the hedge only: the reflection commits to one answer


def test_a_suite_sets_a_benchmarks_think_tags_for_the_evaluator_and_regrade(tmp_path) -> None:
    """`options: {think_tags: ...}` on a suite benchmark: validated on load (exit-2 error naming the field), passed
    to lm-eval's dataset hook as each row's `think_tags`, and used by regrade."""
    from evaluation.suite import SuiteError
    from evaluation.tasks.build import task_config
    from evaluation.tasks.functions import load_benchmark

    src = (Path(__file__).resolve().parents[2] / "campaigns" / "suite" / "db12.yaml").read_text()
    line = "  - {id: gsm8k,                 domain: math,    n_items: 1319, grader: math}"
    assert line in src
    custom = tmp_path / "reasoning.yaml"
    custom.write_text(src.replace(line, line[:-1] + ", options: {think_tags: '<r>,</r>'}}"))
    suite = load_suite(custom)
    cfg = task_config(suite, suite.benchmark("gsm8k"), tmp_path)
    assert cfg["dataset_kwargs"]["think_tags"] == "<r>,</r>"
    assert "think_tags" not in task_config(suite, suite.benchmark("math500"), tmp_path)["dataset_kwargs"]
    from evaluation.benchmark_data import FIXTURE_DIR

    rows = load_benchmark(str(FIXTURE_DIR / "gsm8k.parquet"), "math", think_tags="<r>,</r>")["test"]
    assert set(rows["think_tags"]) == {"<r>,</r>"}
    base = {"prompt": "p", "parsed": None, "finish_reason": "stop", "response_tokens": 5, "prompt_tokens": 3,
            "max_gen_toks": 32, "grader_version": "math-v4", "status": "ok", "score": 0.0, "gold": "3",
            "benchmark": "gsm8k", "item_id": "a", "response": "<r>\\boxed{4}</r> \\boxed{3}"}
    new, _, _ = regrade_rows([base], suite, processes=0)
    assert new[0]["score"] == 1.0  # under the suite's tags the first box is reasoning
    bad = tmp_path / "bad.yaml"
    bad.write_text(src.replace(line, line[:-1] + ", options: {think_tags: ',</r>'}}"))
    with pytest.raises(SuiteError, match="options.think_tags"):
        load_suite(bad)


@pytest.mark.parametrize("spec", ["5", "true", "['<r>', '</r>']", "'<r>,<r>'", "'</think>,<think>'"])
def test_a_suite_refuses_think_tags_that_are_not_two_distinct_tags_in_order(tmp_path, spec) -> None:
    """issue 59: a number, a bool or a list was read as its text (tags no model writes); identical or swapped tags
    passed. Each (as YAML in the suite file) is a SuiteError naming the field."""
    from evaluation.suite import SuiteError

    src = (Path(__file__).resolve().parents[2] / "campaigns" / "suite" / "db12.yaml").read_text()
    line = "  - {id: gsm8k,                 domain: math,    n_items: 1319, grader: math}"
    bad = tmp_path / "bad.yaml"
    bad.write_text(src.replace(line, line[:-1] + f", options: {{think_tags: {spec}}}}}"))
    with pytest.raises(SuiteError, match="options.think_tags"):
        load_suite(bad)
