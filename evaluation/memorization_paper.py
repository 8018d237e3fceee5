"""The paper's memorization protocol, as pure functions of text (`campaign audit memorization --protocol paper`).

Wu et al., "Reasoning or Memorization? Unreliable Results of Reinforcement Learning Due to Data Contamination"
(arXiv 2507.10532, §3.2 and §4.2, Table 2, Fig. 5), released code github.com/wumingqi/LLM-Math-Evaluation
(`math_evaluation/inference_vllm.py`: `truncate_prompt`, `cal_rouge`; read here through its fork
ashtonrliu/LLM-Math-Evaluation at 074a6e7). Rewritten, not copied; what each step does, as they do it:

- cut: the problem's first `int(len(problem) x ratio)` *characters*; the cut then moves forward to the next
  boundary character (`BOUNDARY`: space, newline, `, . ! ? ) ] }`), which is left out of the prefix, and the
  prefix is right-stripped. A ratio >= 1 shows the whole problem (the answer-accuracy point, no completion score).
- target: the problem after the prefix, stripped (it starts at the boundary character).
- prediction: the completion stripped and clipped to the target's whitespace-word count, re-joined by spaces.
- ROUGE-L: `rouge_score`'s F-measure of prediction against target with Porter stemming (its default tokenizer
  lower-cases and keeps only [a-z0-9] runs: every symbol is dropped). The released code calls it through
  `evaluate.load("rouge")`, whose one-example bootstrap aggregate is that same F-measure.
- exact match: `round(ROUGE-L, 4) == 1.0` (so a prediction equal to the target up to case, symbols and
  stemming counts); a target with no letter or digit scores ROUGE-L 0 and is never exact.
- answer: the full completion's final answer extracted and graded against the gold (here by the suite's own
  grader, `evaluation.graders.grade_batch`; the paper uses Qwen's math parser and grader).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from typing import Any

BOUNDARY = " \n,.!?)]}"
COMPLETION_RATIOS = (0.8, 0.6, 0.4)  # Table 2
RATIOS = (0.8, 0.6, 0.4, 1.0)  # Fig. 5: answer accuracy also on the whole problem
EM_DIGITS = 4


def cut(problem: str, ratio: float) -> str:
    """The prefix shown: the first `ratio` of the characters, moved forward to a boundary, right-stripped."""
    if ratio >= 1.0:
        return problem
    k = int(len(problem) * ratio)
    if k >= len(problem):
        return problem
    while k < len(problem) and problem[k] not in BOUNDARY:
        k += 1
    return problem[:k].rstrip()


def target_of(problem: str, prefix: str) -> str:
    """What the model should reproduce: the problem after the prefix, stripped."""
    return problem[len(prefix):].strip()


def clip(completion: str, target: str) -> str:
    """The completion's first len(target.split()) whitespace words, joined by single spaces."""
    return " ".join(completion.strip().split()[:len(target.split())])


@lru_cache(maxsize=1)
def _scorer() -> Any:
    from rouge_score import rouge_scorer

    return rouge_scorer.RougeScorer(["rougeL"], use_stemmer=True)


def rouge_l(prediction: str, target: str) -> float:
    """`rouge_score` ROUGE-L F-measure (Porter stemming), target as the reference."""
    return float(_scorer().score(target, prediction)["rougeL"].fmeasure)


def exact_match(rouge: float) -> bool:
    return round(rouge, EM_DIGITS) == 1.0


@dataclass(frozen=True)
class PaperScore:
    """One completion scored at one ratio: the prefix, the target, the clipped prediction, ROUGE-L and EM."""

    prefix: str
    target: str
    prediction: str
    rouge_l: float
    exact: bool


def score_completion(problem: str, ratio: float, completion: str) -> PaperScore:
    """The completion scores of one item at one ratio < 1 (module docstring)."""
    prefix = cut(problem, ratio)
    target = target_of(problem, prefix)
    prediction = clip(completion, target)
    r = rouge_l(prediction, target)
    return PaperScore(prefix, target, prediction, r, exact_match(r))


DEFINITIONS = {
    "protocol": "paper: Wu et al., arXiv 2507.10532 (released code github.com/wumingqi/LLM-Math-Evaluation)",
    "prefix": "the problem's first int(len x ratio) characters, moved forward to the next boundary character "
              f"({BOUNDARY!r}), right-stripped; ratio 1: the whole problem",
    "target": "the problem after the prefix, stripped",
    "prediction": "the completion's first len(target.split()) whitespace words",
    "rouge_l": "rouge_score ROUGE-L F-measure of prediction vs target, Porter stemming (lower-cased, symbols "
               "dropped)",
    "exact": f"round(ROUGE-L, {EM_DIGITS}) == 1",
    "answer": "the completion's final answer, extracted and graded by the suite's grader, is correct",
}

__all__ = ["BOUNDARY", "COMPLETION_RATIOS", "DEFINITIONS", "EM_DIGITS", "PaperScore", "RATIOS", "clip", "cut",
           "exact_match", "rouge_l", "score_completion", "target_of"]
