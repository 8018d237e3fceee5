"""Math grader: math-verify (symbolic equivalence) on the response's final answer vs the gold answer.

Final-answer semantics (GRADER_VERSION 2; every rule is a test in tests/evaluation/test_grader_corpus.py):

1. The **last balanced `\\boxed{…}`** (or `\\fbox{…}`) is what is graded; anything before it (a rejected
   `\\boxed{3}`) or after it (prose, other numbers) is not. Two boxes are never joined into a set.
2. Without a balanced box, math-verify reads the whole response (its "final answer is" / last expression rules).
3. On both sides, before math-verify: `\\%` and `%`, `^\\circ` / `^{\\circ}` / `°` / `\\degree`, a `\\text{…}` or
   `\\mbox{…}` unit after a value (`5\\text{ cm}`), and thousands separators (`1,234`, `1{,}234`, `1\\,234`)
   are removed, so `\\boxed{10\\%}` equals `10` and `10\\%`.

math-verify's own timeouts use `signal.alarm`, which breaks in threads (verl's reward loop, Ray actors), so
it is called with its timeouts off and the *parent* enforces the grader budget (`evaluation.graders.pool`).
"""

from __future__ import annotations

import logging
import re

from evaluation.graders.result import GradeResult

GRADER_VERSION = "2"

_BOX_OPEN = re.compile(r"\\(?:boxed|fbox) ?\{")
_PERCENT = re.compile(r"\\?%")
_DEGREE = re.compile(r"\^ ?\{ ?\\circ ?\}|\^ ?\\circ|°|\\degree")
# a \text{...}/\mbox{...} unit right after a value: a digit, brace or letter, optional space
_UNIT = re.compile(r"(?<=[0-9}a-zA-Z.)]) ?\\(?:text|mbox|mathrm) ?\{ ?[A-Za-z][A-Za-z .^0-9/]{0,40}\}")
_THOUSANDS = re.compile(r"(?<![0-9.])[0-9]{1,3}(?:(?:,|\{,\}|\\,)[0-9]{3})++(?![0-9])")
_SEP = re.compile(r",|\{,\}|\\,")


def last_boxed(text: str) -> str | None:
    """Content of the last balanced `\\boxed{…}` / `\\fbox{…}` (by opening position); None when none is closed.

    One pass over the braces (linear): each `{` is matched to its `}` with a stack."""
    opens = {m.end() - 1 for m in _BOX_OPEN.finditer(text)}
    if not opens:
        return None
    stack: list[int] = []
    best: tuple[int, int] | None = None
    for m in re.finditer(r"[{}]", text):
        if m.group(0) == "{":
            stack.append(m.start())
        elif stack:
            o = stack.pop()
            if o in opens and (best is None or o > best[0]):
                best = (o, m.start())
    return None if best is None else text[best[0] + 1: best[1]]


def normalise_answer(text: str) -> str:
    """Percent signs, degrees, trailing text units and thousands separators removed (rule 3); linear time."""
    out = _PERCENT.sub("", text)
    out = _DEGREE.sub("", out)
    out = _UNIT.sub("", out)
    return _THOUSANDS.sub(lambda m: _SEP.sub("", m.group(0)), out)


def _gold_text(gold: str) -> str:
    g = gold.strip()
    inner = last_boxed(g)
    if inner is not None:
        g = inner
    elif g.startswith("$") and g.endswith("$") and len(g) > 1:
        g = g.strip("$")
    return f"${normalise_answer(g).strip()}$"


def _quiet() -> None:
    # math-verify warns once per process that its timeout is off; here that is by design
    logging.getLogger("math_verify").setLevel(logging.ERROR)


def grade_math_inprocess(response: str, gold: str) -> GradeResult:
    """Grade one item in this process, without any timeout (callers enforce the budget)."""
    _quiet()
    try:
        from math_verify import ExprExtractionConfig, LatexExtractionConfig, parse, verify

        gold_parsed = parse(_gold_text(gold), parsing_timeout=None)
        if not gold_parsed:
            gold_parsed = parse(normalise_answer(gold), extraction_config=[ExprExtractionConfig()],
                                parsing_timeout=None)
        if not gold_parsed:
            return GradeResult(0.0, None, "error")  # unparsable gold: a data bug, never a silent zero
        boxed = last_boxed(response)
        target = f"\\boxed{{{normalise_answer(boxed)}}}" if boxed is not None else normalise_answer(response)
        pred = parse(
            target,
            extraction_config=[LatexExtractionConfig(boxed_match_priority=0), ExprExtractionConfig()],
            parsing_timeout=None,
        )
        if not pred:
            return GradeResult(0.0, None, "no_answer")
        ok = verify(gold_parsed, pred, timeout_seconds=None)
        return GradeResult(1.0 if ok else 0.0, str(pred[-1]), "ok")
    except Exception:
        return GradeResult(0.0, None, "error")


BUDGET_S = 5.0  # parent-enforced time budget per item (math-verify can run for minutes on power towers)


# Budgeted grading (a spawned pool per process) is `evaluation.graders.grade`/`grade_batch`; the pool imports
# this module, never the other way round.
__all__ = ["BUDGET_S", "GRADER_VERSION", "grade_math_inprocess", "last_boxed", "normalise_answer"]
