"""The paper protocol (evaluation/memorization_paper.py) equals an independent re-implementation of arXiv
2507.10532's released scoring (`truncate_prompt` + `cal_rouge`, github.com/wumingqi/LLM-Math-Evaluation), field by
field, on fixed completions: the prefix shown, the target, the clipped prediction, ROUGE-L and EM. The
re-implementation below shares no code with the module: a regex cut, its own rouge_score-style tokenizer and
a textbook LCS (only nltk's Porter stemmer, which rouge_score itself calls, is common)."""

from __future__ import annotations

import re

import pytest
from nltk.stem import porter

from evaluation.memorization_paper import score_completion
from evaluation.memorization_scores import score_continuation

_STEM = porter.PorterStemmer()


def ref_cut(problem: str, ratio: float) -> tuple[str, str]:
    """(prefix, target): the first boundary at or after int(len x ratio), the prefix right-stripped."""
    if ratio >= 1:
        return problem, ""
    m = re.compile(r"[ \n,.!?)\]}]").search(problem, int(len(problem) * ratio))
    end = m.start() if m else len(problem)
    return problem[:end].rstrip(), problem[end:].strip()


def ref_tokens(text: str) -> list[str]:
    words = [w for w in re.split(r"[^a-z0-9]+", text.lower()) if w]
    return [_STEM.stem(w) if len(w) > 3 else w for w in words]


def ref_lcs(a: list[str], b: list[str]) -> int:
    table = [[0] * (len(b) + 1) for _ in range(len(a) + 1)]
    for i, x in enumerate(a):
        for j, y in enumerate(b):
            table[i + 1][j + 1] = table[i][j] + 1 if x == y else max(table[i][j + 1], table[i + 1][j])
    return table[-1][-1]


def ref_score(problem: str, ratio: float, completion: str) -> dict:
    prefix, target = ref_cut(problem, ratio)
    prediction = " ".join(re.findall(r"\S+", completion)[:len(re.findall(r"\S+", target))])
    p, t = ref_tokens(prediction), ref_tokens(target)
    n = ref_lcs(p, t)
    f = 0.0 if n == 0 else 2 * (n / len(p)) * (n / len(t)) / (n / len(p) + n / len(t))
    return {"prefix": prefix, "target": target, "prediction": prediction, "rouge_l": f, "exact": abs(f - 1) < 5e-5}


PROBLEMS = [
    "What is the smallest positive integer $n$ such that $17n \\equiv 1234 \\pmod{7}?$",
    "Compute $\\dbinom{16}{5}$.",
    "If $x \\cdot y = 12$ and $x + y = 7$, what is the value of $x^2 + y^2$?",
    "The sum of two numbers is 22. Their difference is 4. What is the greater of the two numbers?",
    "Simplify $\\frac{\\sqrt{507}}{\\sqrt{48}}-\\frac{\\sqrt{175}}{\\sqrt{112}}$.",
    "How many vertical asymptotes does the graph of $y=\\frac{2}{x^2+x-6}$ have?",
    "Evaluate $\\left\\lceil3\\left(6-\\frac12\\right)\\right\\rceil$ ?!",
    "A rectangle has a perimeter of 30 units and its dimensions are whole numbers. What is the maximum possible "
    "area of the rectangle in square units?",
    "Let $f(x)=2x+1$. Find $f(f(3))$ ... ?",
    "Alice, Bob and Carol are writing letters. Alice writes twice as many as Bob, who writes three more than Carol.",
    "Solve for $x$:\n$$3x-7=11.$$",
    "Find (a) the mean; (b) the median; [c] the mode {of 1, 2, 2, 3}.",
]

COMPLETIONS = [
    lambda t: t,  # verbatim
    lambda t: t.upper(),  # case only: the paper's EM, not ours
    lambda t: t + " The answer is $\\boxed{5}$. Next problem: 3 + 4 = 7.",  # verbatim, then more
    lambda t: "",  # nothing
    lambda t: " ".join(reversed(t.split())),  # the words out of order
    lambda t: t.replace("$", "").replace("\\", ""),  # symbols dropped
    lambda t: "computing writing letters numbers " + t,  # extra words first: clipped away from the target
    lambda t: "\n\n  " + t.replace(" ", "\n"),  # whitespace changed
    lambda t: t[: len(t) // 2],  # half of it
    lambda t: "unrelated text about cats and dogs and birds",
    lambda t: t.replace("numbers", "number").replace("writes", "writing"),  # stemming
    lambda t: "?!" + t,
]


def _cases() -> list[tuple[str, float, str]]:
    out = []
    for i, problem in enumerate(PROBLEMS):
        for j, ratio in enumerate((0.8, 0.6, 0.4)):
            target = ref_cut(problem, ratio)[1]
            out.append((problem, ratio, COMPLETIONS[(i + j) % len(COMPLETIONS)](target)))
    return out


CASES = _cases()


def test_the_fixture_holds_the_boundary_cases():
    """>= 30 items, among them a cut inside a word, inside a LaTeX command and a target of only punctuation."""
    assert len(CASES) >= 30
    inside_word = inside_latex = punctuation_only = 0
    for problem, ratio, _ in CASES:
        k = int(len(problem) * ratio)
        inside_word += problem[k - 1].isalpha() and problem[k].isalpha()
        inside_latex += bool(re.search(r"\\[a-z]*$", problem[:k])) and problem[k].isalpha()
        punctuation_only += not re.search(r"[A-Za-z0-9]", ref_cut(problem, ratio)[1])
    assert inside_word >= 5 and inside_latex >= 2 and punctuation_only >= 1, (inside_word, inside_latex,
                                                                                punctuation_only)


@pytest.mark.parametrize("i", range(len(CASES)))
def test_paper_protocol_equals_the_independent_reimplementation(i):
    problem, ratio, completion = CASES[i]
    got = score_completion(problem, ratio, completion)
    want = ref_score(problem, ratio, completion)
    assert got.prefix == want["prefix"] and got.target == want["target"]
    assert got.prediction == want["prediction"]
    assert got.rouge_l == pytest.approx(want["rouge_l"], abs=1e-12)
    assert got.exact == want["exact"]


def test_a_cut_never_splits_a_word_or_a_latex_command_and_the_prefix_and_target_rebuild_the_problem():
    for problem, ratio, _ in CASES:
        s = score_completion(problem, ratio, "")
        rest = problem[len(s.prefix):]
        assert rest.strip() == s.target and problem.startswith(s.prefix)
        assert not rest or not rest[0].isalnum() or not s.prefix, (problem, ratio)
        assert s.prefix == s.prefix.rstrip()


def test_the_two_protocols_differ_where_the_paper_is_lenient():
    """The same completions: the paper counts a case-changed or symbol-dropped rest as exact, ours does not; a
    target of only punctuation is never exact for the paper (no token) and scores on its symbols for ours."""
    problem = "If $x \\cdot y = 12$ and $x + y = 7$, what is the value of $x^2 + y^2$?"
    rest_paper = score_completion(problem, 0.6, "").target
    upper = rest_paper.upper()
    assert score_completion(problem, 0.6, upper).exact
    assert not score_continuation(upper, " " + rest_paper, "25", "math").exact
    plain = rest_paper.replace("$", "")
    assert score_completion(problem, 0.6, plain).exact
    assert score_continuation(plain, " " + rest_paper, "25", "math").rouge_l < 1
    only = score_completion("Evaluate $\\left\\lceil3\\left(6-\\frac12\\right)\\right\\rceil$ ?!", 0.8, "?!")
    assert only.target == "?!" and only.rouge_l == 0.0 and not only.exact
    assert score_continuation("?!", " ?!", "10", "math").exact


def test_paper_rows_are_scored_and_summarised_with_the_graders_answer():
    """score() fills a planned row's prediction, ROUGE-L, EM and the grader's answer; summarise() gives EM and
    answer rates per ratio, with no completion score at ratio 1."""
    from evaluation.memorization_paper import cut, target_of
    from evaluation.memorization_paper_probe import score, summarise, summary_row

    problem = "The sum of two numbers is 22. Their difference is 4. What is the greater of the two numbers?"
    rows = []
    for ratio in (0.6, 1.0):
        prefix = cut(problem, ratio)
        rows.append({"benchmark": "m", "item_id": "1", "grader": "math", "problem": problem, "gold": "13",
                     "n_options": 0, "ratio": ratio, "skipped": None, "prefix": prefix,
                     "target": target_of(problem, prefix) if ratio < 1 else None})
    rows.append({**rows[0], "item_id": "2", "skipped": "longer than the model's context"})
    score(rows, [target_of(problem, rows[0]["prefix"]) + " So $x=\\boxed{13}$.", "The answer is \\boxed{12}."],
          processes=0)
    assert rows[0]["exact"] and rows[0]["rouge_l"] == 1.0 and rows[0]["answer"] and rows[0]["extracted"] == "13"
    assert rows[1]["rouge_l"] is None and not rows[1]["answer"] and rows[1]["extracted"] == "12"
    s60, s100 = summarise(rows)
    assert (s60.ratio, s60.n_items, s60.n_probed, s60.exact, s60.answer) == (0.6, 2, 1, 1, 1)
    assert s100.exact is None and s100.mean_rouge_l is None and summary_row(s100)["exact_rate"] is None
    assert summary_row(s60)["exact_rate"] == 1.0 and s60.skipped == {"longer than the model's context": 1}


def _paper_rows() -> list[dict]:
    from evaluation.memorization_paper import cut, target_of

    rows = []
    for bench, hits in (("math500", 3), ("gsm8k", 0)):
        for i in range(4):
            for ratio in (0.8, 0.6, 0.4, 1.0):
                problem = f"Problem {i} of {bench}: compute the sum of the first {i + 3} odd numbers, please."
                prefix = cut(problem, ratio)
                target = target_of(problem, prefix) if ratio < 1 else None
                hit = i < hits
                rows.append({"benchmark": bench, "item_id": str(i), "grader": "math", "ratio": ratio,
                             "skipped": None, "problem": problem, "prefix": prefix, "target": target,
                             "completion": "x", "prediction": target if hit else "x",
                             "rouge_l": None if ratio == 1 else float(hit), "exact": None if ratio == 1 else hit,
                             "answer": hit, "gold": "9"})
    return rows


def test_a_paper_report_is_read_by_the_campaign_report_as_em_at_60_percent(tmp_path):
    """`campaign report` reads a paper-protocol probe: the rate is Table 2's EM at 60%, stated as such."""
    from analysis.memorization_section import read_probe
    from evaluation.memorization import ProbeResult
    from evaluation.memorization_report import write_paper_report

    res = ProbeResult(_paper_rows(), {"protocol": "paper", "ratios": [0.8, 0.6, 0.4, 1.0]}, False, tmp_path / "c")
    files = write_paper_report(tmp_path / "out", res)
    probe = read_probe(files[0])
    assert probe.protocol == "paper" and probe.prefix == 0.6
    assert probe.rates["math500"].rate == 0.75 and probe.rates["gsm8k"].rate == 0.0
    assert "exact match as arXiv 2507.10532 counts it" in probe.recall() and "60%" in probe.recall()
    import pandas as pd

    per = pd.read_csv(files[1])
    assert list(per.ratio) == [0.8, 0.6, 0.4, 1.0] * 2 and per.exact_rate.isna().tolist() == [False] * 3 + [True] + \
        [False] * 3 + [True]
    items = pd.read_csv(files[2])
    assert {"problem", "prefix", "target", "completion", "prediction"} <= set(items.columns) and len(items) == 32
    from analysis.memorization_section import _rates_table, memorization_section_html

    note = memorization_section_html(pd.DataFrame(columns=["model"]), {"tiny": probe}, ["math500", "gsm8k"])
    assert "exact match as arXiv 2507.10532 counts it" in note and "near-verbatim" not in note
    table = _rates_table(pd.DataFrame(columns=["metric", "policy", "reference"]), probe, ["math500", "gsm8k"])
    assert list(table.columns[:2]) == ["benchmark", "EM at 60% (paper)"] and table.iloc[0, 1].startswith("75%")


@pytest.mark.parametrize("value, protocol", [(True, "windtunnel"), ({"protocol": "paper"}, "paper"),
                                             ({}, "windtunnel"), (False, "windtunnel")])
def test_a_campaign_asks_for_either_protocol_and_the_evaluation_key_does_not_move(value, protocol):
    from evaluation.settings import EvaluationOptions, evaluation_key

    opts = EvaluationOptions.from_mapping({"memorization": value})
    assert opts.memorization_protocol == protocol and opts.memorization == (value is not False)
    assert evaluation_key("db12", {"memorization": value}) == evaluation_key("db12", {})


@pytest.mark.parametrize("value", ["paper", {"protocol": "rouge"}, {"protocol": "paper", "prefix": 0.5}, 3])
def test_a_malformed_memorization_option_names_the_key_and_the_form(value):
    from wtcommon.config_fields import ConfigFieldError

    from evaluation.settings import EvaluationOptions

    with pytest.raises(ConfigFieldError, match=r"memorization: got .*\{protocol: paper\}"):
        EvaluationOptions.from_mapping({"memorization": value})
