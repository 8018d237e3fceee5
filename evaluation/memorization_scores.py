"""What the memorization probe scores, as pure functions of text (evaluation/memorization.py runs the model).

The probe's `windtunnel` protocol (arXiv 2507.10532's "partial-prompt completion", scored our way; the paper's
own scoring is evaluation/memorization_paper.py) shows a model the first part of a benchmark problem and asks
whether its greedy continuation reproduces the rest. Three scores per item:

- exact: the continuation's first len(reference) word tokens equal the reference's (verbatim up to whitespace).
- ROUGE-L: F1 of the longest common subsequence of the continuation's first len(reference) word tokens and the
  reference's word tokens (computed here, bit-parallel; no library: `rouge_score` would lowercase and drop every
  symbol, and a math problem is mostly symbols). Exact implies ROUGE-L = 1.
- answer: the continuation holds the gold answer more often than the reference suffix itself does, i.e. the model
  went on to the answer (a suffix that states the gold is not credit for copying it).

Word tokens are `\\w+` runs and single non-space symbols (`$`, `\\`, `{`, `+`), the same for every model, so
ROUGE-L does not depend on the model's tokenizer (the prefix length does: it is a share of the model's tokens).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from evaluation.prompts import KK_INSTRUCTION, MATH_INSTRUCTION

_WORD = re.compile(r"\w+|[^\w\s]")
# the answer-format instructions the prompts end with: evaluation/prompts.py (the benchmarks) and
# training/synthetic.py (the demo's fixture items; tests/evaluation/test_memorization_scores.py checks the copy)
_SYNTHETIC = ("Put the final answer in \\boxed{}.", "Answer with one 'X is a knight/knave' statement per person.",
              "Answer with one letter out of A, B, C, D.")
_MC = (r"Please reason step by step, and finish with \"The answer is: \(X\)\" where X is one letter out of "
       r"[A-Z](?:, [A-Z])*\.")
_INSTRUCTION = re.compile(r"\s*(?:" + "|".join([re.escape(MATH_INSTRUCTION), re.escape(KK_INSTRUCTION), _MC,
                                                *map(re.escape, _SYNTHETIC)]) + r")\s*$")


def problem_text(prompt: str) -> str:
    """The prompt without the answer-format instruction the suite appends: the problem as a model may have read
    it in pretraining (the instruction is ours, so recalling it proves nothing)."""
    return _INSTRUCTION.sub("", prompt).strip()


def word_tokens(text: str) -> list[str]:
    return _WORD.findall(text)


def lcs_length(a: list[str], b: list[str]) -> int:
    """Length of the longest common subsequence, bit-parallel over `a` (Allison-Dix / Hyyrö): one big-int
    update per element of `b`, so a 1,000 x 1,000 comparison costs microseconds, not a million Python steps."""
    if not a or not b:
        return 0
    masks: dict[str, int] = {}
    for i, x in enumerate(a):
        masks[x] = masks.get(x, 0) | (1 << i)
    full = (1 << len(a)) - 1
    v = full
    for y in b:
        u = v & masks.get(y, 0)
        v = ((v + u) | (v - u)) & full
    return len(a) - bin(v).count("1")


def rouge_l(candidate: list[str], reference: list[str]) -> float:
    """ROUGE-L F1 (precision = LCS / len(candidate), recall = LCS / len(reference)); 0 when either is empty."""
    n = lcs_length(reference, candidate)
    if n == 0:
        return 0.0
    p, r = n / len(candidate), n / len(reference)
    return 2 * p * r / (p + r)


def _gold_pattern(gold: str) -> str:
    """The gold as written, any whitespace allowed between its characters, not inside a longer number or word."""
    body = r"\s*".join(re.escape(c) for c in re.sub(r"\s+", "", gold).replace("$", ""))
    return rf"(?<![0-9A-Za-z.]){body}(?![0-9A-Za-z]|\.[0-9])"


def answer_occurrences(text: str, gold: str, grader: str) -> int:
    """How often `text` states `gold` as its grader would read it: math, the gold as written (spaces and `$`
    ignored) not inside a longer number or word; multiple choice, `answer is (X)`; Knights & Knaves, the fewest
    occurrences of any one of the gold's `X is a knight/knave` statements (all of them must be there)."""
    if grader == "multiple_choice":
        letter = re.escape(gold.strip().strip("()"))
        return len(re.findall(rf"answer is:?\s*\(?{letter}\)?(?![A-Za-z])", text))
    if grader == "knights_knaves":
        claims = re.findall(r"(\w+) is a (knight|knave)", gold)
        if not claims:
            return 0
        return min(len(re.findall(rf"\b{re.escape(who)} is a {role}\b", text)) for who, role in claims)
    if not re.sub(r"[\s$]+", "", gold):
        return 0
    return len(re.findall(_gold_pattern(gold), text.replace("$", "")))


@dataclass(frozen=True)
class ItemScore:
    exact: bool
    rouge_l: float
    answer: bool


def score_continuation(continuation: str, reference: str, gold: str, grader: str) -> ItemScore:
    """The three scores of one item (module docstring), from the model's continuation and the true suffix."""
    ref = word_tokens(reference)
    cand = word_tokens(continuation)[:len(ref)]
    answer = answer_occurrences(continuation, gold, grader) > answer_occurrences(reference, gold, grader)
    return ItemScore(exact=bool(ref) and cand == ref, rouge_l=rouge_l(cand, ref), answer=answer)


__all__ = ["ItemScore", "answer_occurrences", "lcs_length", "problem_text", "rouge_l", "score_continuation",
           "word_tokens"]
