"""Math grader: math-verify (symbolic equivalence) on the response's final answer vs the gold answer.

Final-answer semantics (GRADER_VERSION 5; every rule is a test in tests/evaluation/test_grader_corpus.py,
tests/evaluation/test_conclusion.py and tests/evaluation/adversarial_corpus.yaml). Since v5 every rule reads the
response's *conclusion* (`evaluation.graders.conclusion`: after the reasoning block, from the last final-answer
statement, retracted statements left as reasoning), never the raw response; "response" below means it.

1. The **last balanced `\\boxed{…}`** (or `\\fbox{…}`) is what is graded; anything before it (a rejected
   `\\boxed{3}`) or after it (prose, other numbers) is not. Two boxes are never joined into a set.
2. Without a balanced box, math-verify reads the whole response (its "final answer is" / last expression rules).
3. On both sides, before math-verify: `\\%` and `%`, `^\\circ` / `^{\\circ}` / `°` / `\\degree`, a `\\text{…}` or
   `\\mbox{…}` unit after a value (`5\\text{ cm}`), and thousands separators (`1,234`, `1{,}234`, `1\\,234`)
   are removed, so `\\boxed{10\\%}` equals `10` and `10\\%`.
4. **Alternatives are no answer** (v3): a final answer that offers two values joined by "or" (`\\boxed{3 or 4}`,
   `\\boxed{3 \\text{ or } 4}`, `\\boxed{3} or \\boxed{4}`, "the answer is 3 or 4") is status `hedged` when the
   gold is one value. When the gold itself lists several values (a comma or "or" in it, e.g. the two roots
   `3, 4`), "or" is read as a list separator: `x = 3 or x = 4` is graded as `x = 3, x = 4`.

5. **A final answer followed by a different one is a hedge** (v4; v5: status `hedged`, in the conclusion only):
   several
   top-level boxes whose values disagree (`\\boxed{3} ... \\boxed{4}`, "\\boxed{4}, although \\boxed{8} is also
   possible"), or a stated answer followed by a correction or restatement that gives another value ("\\boxed{12}.
   Wait, ... the correct value is 15", "The answer is 12. Actually no, it is 15") is status `hedged`, whatever
   the gold (with a box, an answer phrase before the first box counts only when a correction cue follows it:
   "The answer is 12. Actually no, it is \\boxed{15}"). A restatement that agrees (`\\boxed{12}` ... "the answer
   is 12") keeps the credit. A nested box is one box (`\\boxed{x = \\boxed{9}}`).
   A value offered as possible in the conclusion's last 300 characters is a candidate too (v5): "16, though it
   could be 14", "\\boxed{16} (or possibly 14)", "might also be 9", "I think it is 7".
6. Read as values (v4): `12\\text{ m}^2` is 12 (the unit's exponent is the unit's), `0.\\overline{3}` is 1/3,
   and an inequality union `x < -1 or x > 1` is the interval union `(-\\infty,-1)\\cup(1,\\infty)`.
7. Prose inside a box before its value is left out (v5): `\\boxed{\\text{The total is } 15}` is 15.

math-verify's own timeouts use `signal.alarm`, which breaks in threads (verl's reward loop, Ray actors), so
it is called with its timeouts off and the *parent* enforces the grader budget (`evaluation.graders.pool`).
"""

from __future__ import annotations

import logging
import re

from evaluation.graders.conclusion import JOIN_CHARS, Conclusion
from evaluation.graders.registry import register_grader
from evaluation.graders.result import GradeResult

GRADER_VERSION = "5"

_BOX_OPEN = re.compile(r"\\(?:boxed|fbox) ?\{")
_PERCENT = re.compile(r"\\?%")
_DEGREE = re.compile(r"\^ ?\{ ?\\circ ?\}|\^ ?\\circ|°|\\degree")
# a \text{...}/\mbox{...} unit right after a value: a digit, brace or letter, optional space
_UNIT = re.compile(r"(?<=[0-9}a-zA-Z.)]) ?\\(?:text|mbox|mathrm) ?\{ ?[A-Za-z][A-Za-z .^0-9/]{0,40}\}"
                   r"(?: ?\^ ?(?:\{ ?[0-9] ?\}|[0-9]))?")  # "12\text{ m}^2": the unit's exponent goes with it (v4)
# a repeating decimal 0.\overline{3}, 1.2\overline{34} (v4: read as the exact fraction)
_REPEATING = re.compile(r"(-?)([0-9]*)\.([0-9]*)\\overline ?\{ ?([0-9]{1,12}) ?\}")
# an inequality union "x < -1 or x > 1" (v4: read as the interval union (-\infty,-1)\cup(1,\infty))
_REL = r"(<|>|\\le(?:q)?|\\ge(?:q)?|≤|≥)"
_NUM = r"(-? ?[0-9]+(?:\.[0-9]+)?|-?\\frac ?\{[0-9]+\} ?\{[0-9]+\})"
_INEQ_UNION = re.compile(r"([a-z]) ?" + _REL + r" ?" + _NUM + r" ?\$? ?(?:or|\\text ?\{ ?or ?\}|\\cup|\\lor) ?\$? ?"
                         r"\1 ?" + _REL + r" ?" + _NUM)
# rule 5: after a stated answer, a correction or a restatement that gives a value ("Wait, ... the correct value is
# 15", "Actually no, it is 15", "the answer is 15"); the value is a plain number, fraction or `x = number`
_VALUE = r"\$? ?((?:[a-z] ?= ?)?-? ?(?:\\frac ?\{ ?-?[0-9]+ ?\} ?\{ ?[0-9]+ ?\}|[0-9]+(?:[.,][0-9]+)*(?: ?/ ?[0-9]+)?))"
_STATED = re.compile(
    r"(?i:\b(?:(?:the )?final answer|the answer|the (?:correct|right|real|actual|true) (?:value|answer|result)"
    r"|(?:wait|actually|correction|oops|sorry|hmm|no|rather|instead)[,.!:;]?(?: (?:no|wait|actually)[,.!:;]?)?"
    r" (?:it|that|this|the value|the result)) ?(?:is|'s|would be|should be|must be|:|=)(?: actually)? ?)" + _VALUE
    + r"(?= ?(?:[.,;!)\n$]|\\[)\]]|$))")
# a value offered as possible in the conclusion (v5, a hedge): "16, though it could be 14", "12 (or maybe 13)",
# "might also be 9", "I think it is 7" after an answer; read in the conclusion's last JOIN_CHARS characters
_OFFERED = re.compile(r"(?i:\b(?:(?:could|might|may) (?:also |instead |well |possibly |even )?be|or (?:possibly|maybe|"
                      r"perhaps)|alternatively|i (?:think|guess|suspect|believe)(?: it(?:'s| is| might be| could be))?"
                      r"|(?:possibly|perhaps|maybe)(?: it(?:'s| is))?)) ?(?:just )?" + _VALUE
                      + r"(?= ?(?:[.,;!)\n$]|\\[)\]]|$))")
_THOUSANDS = re.compile(r"(?<![0-9.])[0-9]{1,3}(?:(?:,|\{,\}|\\,)[0-9]{3})++(?![0-9])")
_SEP = re.compile(r",|\{,\}|\\,")
# "or" between two values (rule 4): a word, or \text{or} / \mbox{or} with optional spaces
_OR = re.compile(r"\\(?:text|mbox|textrm|mathrm) ?\{ ?or ?\}|(?<![A-Za-z\\])or(?![A-Za-z])")
# what may stand between two boxes that offer alternatives: "or" and spacing/markup only
_GAP_NOISE = re.compile(r"[\s$,;.]|\\(?:quad|qquad|,|;|!)|\\\(|\\\)|\\\[|\\\]|\\(?:text|mbox) ?\{|\}")
# without a box, "or" counts only before a value ("3 or 4", "x = 3 or $x = 4$"), not before prose ("10, or ten")
_OR_VALUE = re.compile(r"(?<![A-Za-z\\])or(?![A-Za-z]) {0,3}\$? {0,3}(?:[-+0-9(\\]|[a-z] {0,2}=)")
_ANSWER_PHRASE = re.compile(r"(?:final answer|answer is|answer:)", re.IGNORECASE)


def _boxes(text: str) -> list[tuple[int, int, int]]:
    """(start of `\\boxed`, its `{`, its matching `}`) of every balanced box, by opening position.

    One pass over the braces (linear): each `{` is matched to its `}` with a stack."""
    opens = {m.end() - 1: m.start() for m in _BOX_OPEN.finditer(text)}
    if not opens:
        return []
    stack: list[int] = []
    out: list[tuple[int, int, int]] = []
    for m in re.finditer(r"[{}]", text):
        if m.group(0) == "{":
            stack.append(m.start())
        elif stack:
            o = stack.pop()
            if o in opens:
                out.append((opens[o], o, m.start()))
    return sorted(out, key=lambda b: b[1])


def last_boxed(text: str) -> str | None:
    """Content of the last balanced `\\boxed{…}` / `\\fbox{…}` (by opening position); None when none is closed."""
    boxes = _boxes(text)
    return None if not boxes else text[boxes[-1][1] + 1: boxes[-1][2]]


def offers_alternatives(response: str) -> bool:
    """Rule 4: the final answer offers values joined by "or" (inside the last box, between the last two boxes,
    or, without a box, after the last answer phrase on its line)."""
    boxes = _boxes(response)
    if boxes:
        _, o, c = boxes[-1]
        if _OR.search(response, o + 1, c):
            return True
        prev = [b for b in boxes[:-1] if b[2] < boxes[-1][0]]
        if prev:
            gap = _GAP_NOISE.sub("", response[prev[-1][2] + 1: boxes[-1][0]])
            return gap.lower() == "or"
        return False
    marks = list(_ANSWER_PHRASE.finditer(response))
    if not marks:
        return False
    line = response[marks[-1].end():].split("\n", 1)[0]
    return _OR_VALUE.search(line) is not None


def _repeating(m: re.Match[str]) -> str:
    from fractions import Fraction

    sign, whole, fixed, rep = m.groups()
    value = (Fraction(int(whole or "0")) + Fraction(int(fixed or "0"), 10 ** len(fixed))
             + Fraction(int(rep), 10 ** len(fixed) * (10 ** len(rep) - 1)))
    return f"{sign}\\frac{{{value.numerator}}}{{{value.denominator}}}"


def _interval(m: re.Match[str]) -> str:
    """`x < a or x > b` as `(-\\infty,a)\\cup(b,\\infty)` (either order); unchanged when it is not a union of
    two rays pointing away from each other."""
    _, r1, v1, r2, v2 = m.groups()
    rays = []
    for rel, v in ((r1, v1), (r2, v2)):
        strict = rel in ("<", ">")
        if rel in ("<", "\\le", "\\leq", "≤"):
            rays.append((0, f"(-\\infty,{v.replace(' ', '')}" + (")" if strict else "]")))
        else:
            rays.append((1, ("(" if strict else "[") + f"{v.replace(' ', '')},\\infty)"))
    if {rays[0][0], rays[1][0]} != {0, 1}:
        return m.group(0)
    rays.sort()
    union = f"{rays[0][1]}\\cup{rays[1][1]}"
    return union if "$" in m.string or "\\" in m.string else f"${union}$"  # plain prose: give it math delimiters


_CUE = re.compile(r"(?i:\b(?:wait|actually|correction|oops|sorry|no,|mistake|on second thought)\b)")


def _outer_boxes(text: str) -> list[tuple[int, int, int]]:
    """The boxes not inside another box, by position (`\\boxed{x = \\boxed{9}}` is one)."""
    out: list[tuple[int, int, int]] = []
    for b in _boxes(text):
        if not out or b[0] > out[-1][2]:
            out.append(b)
    return out


def stated_answers(response: str) -> list[str]:
    """Every final answer the response states (rule 5), in order: the content of each top-level box and each
    value introduced by an answer phrase or a correction ("the correct value is 15", "Actually no, it is 15")
    after the first box (before it only when a correction cue follows it; anywhere when there is no box)."""
    found = [(o, _BOX_PROSE.sub("", response[o + 1: c])) for _, o, c in _outer_boxes(response)]
    first_box = found[0][0] if found else -1
    # with a box, a phrase before it is reasoning ("for part (a) the answer is 3.") unless a correction follows
    # it before the box ("The answer is 12. Actually no, it is \\boxed{15}")
    found += [(m.start(1), m.group(1)) for m in _STATED.finditer(response)
              if m.start() > first_box or _CUE.search(response, m.end(), first_box)]
    found += [(m.start(1), m.group(1)) for m in _OFFERED.finditer(response, max(0, len(response) - JOIN_CHARS))]
    return [text for _, text in sorted(found)]


def normalise_answer(text: str) -> str:
    """Percent signs, degrees, trailing text units (with their exponent) and thousands separators removed
    (rule 3); repeating decimals as fractions and inequality unions as interval unions (rule 6); linear time."""
    out = _REPEATING.sub(_repeating, text)
    out = _INEQ_UNION.sub(_interval, out)
    out = _PERCENT.sub("", out)
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


def _read_values(text: str) -> str:
    """Repeating decimals and inequality unions rewritten as values (rule 6), only when the text has them."""
    if "overline" in text:
        text = _REPEATING.sub(_repeating, text)
    if "<" in text or ">" in text or "\\le" in text or "\\ge" in text or "≤" in text or "≥" in text:
        text = _INEQ_UNION.sub(_interval, text)
    return text


# prose inside a box before its value (v5): \boxed{\text{The total is } 15}, \boxed{\text{Answer: }15}
_BOX_PROSE = re.compile(r"^ ?\\(?:text|mbox|textrm|mathrm) ?\{ ?[A-Za-z][A-Za-z ,.:'=]{0,80}(?:is|:|=) ?\} ?")


def _box_value(boxed: str) -> str:
    return normalise_answer(_BOX_PROSE.sub("", boxed))


def _quiet() -> None:
    # math-verify warns once per process that its timeout is off; here that is by design
    logging.getLogger("math_verify").setLevel(logging.ERROR)


def _contradicted(response: str, graded: str | None, pred: list) -> bool:
    """Rule 5: a stated answer other than the graded one that math-verify reads as a different value. Only the
    statements whose text differs from the graded box are parsed, so a one-box response costs no extra parse."""
    from math_verify import ExprExtractionConfig, LatexExtractionConfig, parse, verify

    same = None if graded is None else _box_value(graded).strip()
    for text in stated_answers(response):
        norm = normalise_answer(text).strip()
        if norm == same:
            continue
        other = parse(f"\\boxed{{{norm}}}", extraction_config=[LatexExtractionConfig(boxed_match_priority=0),
                                                                ExprExtractionConfig()], parsing_timeout=None)
        if other and not verify(other, pred, timeout_seconds=None):
            return True
    return False


BUDGET_S = 5.0  # parent-enforced time budget per item (math-verify can run for minutes on power towers)


@register_grader("math", version=GRADER_VERSION, budget_s=BUDGET_S)
def grade_math_inprocess(c: Conclusion, gold: str) -> GradeResult:
    """Grade one conclusion in this process, without any timeout (callers enforce the budget)."""
    _quiet()
    try:
        from math_verify import ExprExtractionConfig, LatexExtractionConfig, parse, verify

        gold_parsed = parse(_gold_text(gold), parsing_timeout=None)
        if not gold_parsed:
            gold_parsed = parse(normalise_answer(gold), extraction_config=[ExprExtractionConfig()],
                                parsing_timeout=None)
        if not gold_parsed:
            return GradeResult(0.0, None, "error")  # unparsable gold: a data bug, never a silent zero
        if not c.ok:
            return c.refused()  # truncated reasoning, or nothing after it
        response = _read_values(c.text)
        if offers_alternatives(response):
            if not _OR.search(gold) and "," not in normalise_answer(gold):  # "12,345" is one value
                return GradeResult(0.0, None, "hedged")  # rule 4: two values offered for one
            response = _OR.sub(",", response)  # the gold is a list: "or" separates its values
        boxed = last_boxed(response)
        target = f"\\boxed{{{_box_value(boxed)}}}" if boxed is not None else normalise_answer(response)
        pred = parse(
            target,
            extraction_config=[LatexExtractionConfig(boxed_match_priority=0), ExprExtractionConfig()],
            parsing_timeout=None,
        )
        if not pred:
            return GradeResult(0.0, None, "no_answer")
        if _contradicted(response, boxed, pred):
            return GradeResult(0.0, None, "hedged")  # rule 5: the conclusion puts forward another value
        ok = verify(gold_parsed, pred, timeout_seconds=None)
        return GradeResult(1.0 if ok else 0.0, str(pred[-1]), "ok")
    except Exception:
        return GradeResult(0.0, None, "error")


# Budgeted grading (a spawned pool per process) is `evaluation.graders.grade`/`grade_batch`; the pool imports
# this module, never the other way round.
__all__ = ["BUDGET_S", "GRADER_VERSION", "grade_math_inprocess", "last_boxed", "normalise_answer",
           "offers_alternatives", "stated_answers"]
