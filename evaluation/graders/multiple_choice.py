"""Multiple-choice letter grader.

Anchors on answer phrases (`The answer is: (X)`, `Answer: X`, `Final answer: (D)`, `\\boxed{X}`)
instead of "the last capital letter", which the published study's grader used and which the
article "A" or the pronoun "I" after the answer fooled (STUDY.md §4.2). The letter set comes
from the item's option count, so "E" on a 4-option item parses but scores 0.
"""

from __future__ import annotations

import re
import string

from evaluation.graders.result import GradeResult

LETTERS = string.ascii_uppercase

# \boxed{B}, \boxed{(B)}, \boxed{\text{B}}, \boxed{B. iron}
_BOXED = re.compile(r"\\boxed\s*\{\s*(?:\\text(?:bf)?\s*\{\s*)?\(?\s*([A-Za-z])\s*\)?(?=[\s.}:)])")
# answer phrase, optional "option"/"choice", optional markdown bold / colon / "is", then the letter
_PHRASE = re.compile(
    r"\b(?:final\s+answer|correct\s+(?:answer|option|choice)|the\s+answer|answer)\b"
    r"\s*(?:\*\*|__)?\s*(?:is|would\s+be|should\s+be|:|：|=|-)?\s*(?:\*\*|__)?\s*[:：]?\s*"
    r"(?:(?:option|choice)\s+)?(?:\*\*|__)?\s*\$?\s*"
    r"(\(\s*[A-Za-z]\s*\)|\[[A-Za-z]\]|[A-Za-z])(?![A-Za-z0-9'])",
    re.IGNORECASE,
)
# a line that is only a letter: "(C)", "**C**", "C."
_LONE_LINE = re.compile(r"^\W*\(?([A-Z])\)?\W*$")
# last resort: a parenthesised capital "(C)" anywhere (never a bare capital: articles, pronouns)
_PAREN = re.compile(r"\(([A-Z])\)")


def letter_set(n_options: int | None) -> str:
    """Allowed letters for an item with `n_options` options (None: the common 4-option case)."""
    n = 4 if n_options is None else int(n_options)
    if not 2 <= n <= 26:
        raise ValueError(f"n_options must be between 2 and 26, got {n_options!r}")
    return LETTERS[:n]


def normalise_gold(gold: str, n_options: int | None) -> str | None:
    """Gold as one allowed letter ("B", "(B)", " b. " all give "B"); None when it is not one."""
    g = gold.strip().strip("()[]. *").upper()
    return g if len(g) == 1 and g in letter_set(n_options) else None


def extract_letter(response: str) -> str | None:
    """The answer letter of `response`: the last boxed letter or answer phrase, else a lone-letter last line."""
    candidates: list[tuple[int, str]] = []
    for m in _BOXED.finditer(response):
        candidates.append((m.start(), m.group(1)))
    for m in _PHRASE.finditer(response):
        raw = m.group(1)
        letter = raw.strip("()[] ")
        rest = response[m.end():]
        if raw == letter:  # bare letter, no brackets
            if letter.islower():
                # "the answer is c" counts; "the answer is a bit unclear" does not
                if not re.match(r"\s*[.!)]?\s*(?:$|\n)", rest):
                    continue
            elif letter == "I" and re.match(r"\s+[a-z]", rest):
                continue  # "Answer: I think ..." is the pronoun
        candidates.append((m.start(1), letter.upper()))
    if candidates:
        return max(candidates)[1].upper()
    lines = [ln.strip() for ln in response.strip().splitlines() if ln.strip()]
    if lines:
        m = _LONE_LINE.match(lines[-1])
        if m:
            return m.group(1)
    parens = _PAREN.findall(response)
    return parens[-1] if parens else None


def grade_multiple_choice(response: str, gold: str, n_options: int | None = None) -> GradeResult:
    allowed = letter_set(n_options)
    g = normalise_gold(gold, n_options)
    if g is None:
        return GradeResult(0.0, None, "error")  # bad gold is a data bug, surfaced by the status
    pred = extract_letter(response)
    if pred is None:
        return GradeResult(0.0, None, "no_answer")
    return GradeResult(1.0 if (pred == g and pred in allowed) else 0.0, pred, "ok")
