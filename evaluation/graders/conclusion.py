"""Where the reasoning ends and the answer starts: the one conclusion reader every grader family parses through.

Reasoning models revise interim answers ("So the answer is 12. Wait, I forgot the 3 loose marbles ... 15") and
then commit to one. Reading rules applied to the whole response refused those reflections and credited hedges
hidden in the reasoning, so every family grades only the *conclusion* this module returns (the registry calls
`read_conclusion` and hands the family a `Conclusion`, never the raw response; tests/test_code_rules.py refuses a
family that takes the raw text):

1. **A reasoning block** (`<think>…</think>` by default; `ThinkTags` sets the tags per model or suite, as
   lm-eval's `think_end_token`): the conclusion is the text after the last closing tag. A block opened and never
   closed is status `truncated` (the model ran out of tokens while reasoning); nothing after the block is
   `no_answer`. A closing tag without an opening one counts (chat templates put `<think>` in the prompt).
2. **The last explicit final-answer statement** starts the conclusion: a `\\boxed{`/`\\fbox{`, `<answer>`,
   "Final answer", a concluding "the answer is …" / "the correct value is …" / "Answer:", "in conclusion", a
   correction that restates ("Actually no, it is 15", "Correction: D"), and the family's own markers. An earlier
   statement joins the conclusion when it lies within `JOIN_CHARS` before it and nothing between them retracts
   it; a retraction ("Wait", "Actually", "hmm", "no,", "is wrong", "that doesn't work", "counted twice",
   "let me recheck", "on reflection") makes every statement before it reasoning.
   Without any statement the whole text (after the block) is the conclusion.

The family then collects every candidate the conclusion puts forward (stated, boxed, offered as possible);
candidates that disagree are status `hedged`. Reasoning before the conclusion neither costs nor earns credit.
Every pattern is linear (bounded separators, no nested quantifiers), so any input is read in linear time.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from typing import Literal, NamedTuple

from evaluation.graders.result import GradeResult

ConclusionStatus = Literal["ok", "truncated", "no_answer"]
Markers = Callable[[str], list[int]]  # a family's own final-answer statements: lower-cased text -> start offsets
JOIN_CHARS = 300  # an unretracted statement this close before the conclusion is part of it (a hedge's reach)


@dataclass(frozen=True)
class ThinkTags:
    """The reasoning block's tags; `ThinkTags.parse` reads the suite/model setting ("<think>,</think>", "none")."""

    open: str = "<think>"
    close: str = "</think>"

    @classmethod
    def parse(cls, spec: str | None) -> ThinkTags | None:
        """None/"default": the default tags; "none"/"": no reasoning block; "OPEN,CLOSE" or just "CLOSE" (its
        opening tag is CLOSE without its "/")."""
        if spec is None or spec.strip().lower() == "default":
            return cls()
        s = spec.strip()
        if s.lower() in ("", "none", "off"):
            return None
        if "," in s:
            o, c = (p.strip() for p in s.split(",", 1))
        else:
            c, o = s, s.replace("/", "", 1)
        if not o or not c:
            raise ValueError(f"think tags {spec!r}: expected 'OPEN,CLOSE', 'CLOSE' or 'none'")
        if o == c:
            raise ValueError(f"think tags {spec!r}: the opening and closing tags are the same; give 'OPEN,CLOSE' "
                             "(e.g. '<think>,</think>')")
        if o.startswith("</") and not c.startswith("</"):
            raise ValueError(f"think tags {spec!r}: the opening tag is a closing one; give them in the order "
                             f"'{c},{o}'")
        return cls(o, c)

    def spec(self) -> str:
        return f"{self.open},{self.close}"


DEFAULT_TAGS = ThinkTags()


class Conclusion(NamedTuple):  # a tuple: built once per graded response, at a tenth of a frozen dataclass's cost
    """The conclusion of one response: `text` (empty unless `status` is ok), where it starts in the response,
    and whether the response had a reasoning block (`closed`: None without one). `reasoning` is the text before
    the conclusion: a family may read it for the response's own labels (multiple choice: "(C) 14" maps the
    answer "14" to C), never for an answer."""

    text: str
    status: ConclusionStatus
    start: int = 0
    closed: bool | None = None
    reasoning: str = ""

    @property
    def ok(self) -> bool:
        return self.status == "ok"

    def refused(self) -> GradeResult:
        """The grade of a conclusion that holds no answer (`truncated` / `no_answer`)."""
        return GradeResult(0.0, None, self.status)


# Explicit final-answer statements, found on the lower-cased text in one scan for their key words (`_KEY`, a
# plain alternation: a case-insensitive alternation of full phrases cost 10x), each key confirmed by a pattern
# anchored at it; what must come before it is checked in a window of at most _HEAD characters ending at it.
_HEAD = 32
_KEY = re.compile(r"boxed|fbox|<answer>|final|conclusion|summar|answer|correction|solution|value|result|option"
                  r"|choice|it's|it is|it must|it should|that's|that is|this is")
_BRACE = re.compile(r" ?\{")
_FINAL = re.compile(r"final (?:answer|assignment)\b")
_BACKREF = re.compile(r"(?:is|as) (?:the|my) $")  # "This is the final answer." refers back: it states nothing
_COLON = re.compile(r" ?[:：]")
_NOUN_TAIL = re.compile(r"(?: to (?:the|this) (?:problem|question))? ?(?:is|would be|should be|must be|=|:)(?! not\b)")
_OWNER = re.compile(r"(?:the|my|our) ((?:correct|right|actual|real|true|final) )?$")
_RESTATE = re.compile(r"(?:it|that|this)(?:'s| is| must be| should be) ?(?=[$\\(\[{0-9-]|[a-z]\b)")
_CUE_BEFORE = re.compile(r"(?:wait|actually|no|rather|instead|oops|sorry)[,.:;!]?(?: (?:no|wait|actually)[,.:;!]?)? $")
_NOUNS = ("answer", "solution", "value", "result", "option", "choice")
# what retracts an earlier statement (the reasoning revises it); a word start is checked after the match
_RETRACT = re.compile(
    r"(?:wait|hold on|hmm+|actually|oops|sorry|correction|mistake|on (?:second thought|reflection)"
    r"|scratch that|no[,.!;:]|nope|let me (?:re|double|check|verify|reconsider|recount|recalculate)"
    r"|re-?(?:check|examine|consider|calculate|count|evaluate)\w{0,3}|double[- ]check\w{0,3}"
    r"|that (?:doesn't|does not|can't|cannot|won't|would not|wouldn't) (?:work|be right|be correct|hold|be it)"
    r"|(?:is|was|seems|looks|that's|that is) (?:wrong|incorrect|not right|off)"
    r"|i (?:forgot|missed|made an? (?:error|mistake)|miscounted|overcounted|undercounted|double[- ]counted)"
    r"|counted twice|contradict\w{0,6}|doesn't work|does not work|not consistent|inconsistent|invalid"
    r"|(?:my )?(?:first|initial) (?:guess|thought|attempt|answer)|however|but then)\b"
)
# a statement inside a supposition or a reported claim states nothing ("If the answer is A, ...", "Bob says the
# answer is C"): it starts no conclusion
_SUPPOSED = re.compile(r"(?:if|suppose|supposing|assume|assuming|whether|unless|says|said|claims|claimed|"
                       r"thinks|argues)\b")
_END = re.compile(r"[.!?\n;]")


def _lower(text: str) -> str:
    """`text` lower-cased with its length kept (a character whose lower case is longer stays as it is)."""
    low = text.lower()
    return low if len(low) == len(text) else "".join(c if len(c.lower()) != 1 else c.lower() for c in text)


def _word_start(low: str, at: int) -> bool:
    return at == 0 or not low[at - 1].isalnum()


def _found(rx: re.Pattern[str], low: str, a: int, b: int) -> bool:
    """True when `rx` matches in low[a:b] at the start of a word."""
    return any(_word_start(low, m.start()) for m in rx.finditer(low, a, b))


def _stated(low: str, at: int) -> bool:
    """False when the sentence before `at` (at most 60 characters) opens a supposition or a reported claim: the
    last supposition word there has no sentence end after it."""
    words = [m for m in _SUPPOSED.finditer(low, max(0, at - 60), at) if _word_start(low, m.start())]
    return not words or _END.search(low, words[-1].end(), at) is not None


def _mark(low: str, m: re.Match[str]) -> tuple[int, int] | None:
    """(start, probe) of the statement whose key word `m` found, or None when the key states nothing here."""
    key, p, end = m.group(0), m.start(), m.end()
    if key in ("boxed", "fbox"):
        return (p - 1, p - 1) if p and low[p - 1] == "\\" and _BRACE.match(low, end) else None
    if key == "<answer>":
        return p, p
    if not _word_start(low, p):
        return None
    if key == "final":
        ok = _FINAL.match(low, p) and not _BACKREF.search(low, max(0, p - _HEAD), p)
        return (p, p) if ok else None
    if key in ("conclusion", "summar"):
        ok = low.startswith("in ", p - 3) or (key == "summar" and low.startswith("to ", p - 3))
        return (p - 3, p - 3) if ok and _word_start(low, p - 3) else None
    if key in ("answer", "correction") and _COLON.match(low, end):
        return p, p
    if key in _NOUNS:
        owner = _OWNER.search(low, max(0, p - _HEAD), p) if _NOUN_TAIL.match(low, end) else None
        if owner and (owner.group(1) or key in ("answer", "solution")) and _word_start(low, owner.start()):
            return owner.start(), owner.start()
        return None
    if key[0] in "it" and _RESTATE.match(low, p):  # "actually no, it is 15": starts at the cue, probed at "it is"
        cue = _CUE_BEFORE.search(low, max(0, p - _HEAD), p)
        return (cue.start(), p) if cue and _word_start(low, cue.start()) else None
    return None


def _marks(low: str) -> list[tuple[int, int]]:
    """(start, probe) of every explicit final-answer statement in lower-cased `low`: a correction statement
    ("actually no, it is 15") starts at its cue, but its own cue does not retract the statement before it, so the
    retraction scan for the previous statement stops at its probe ("it is")."""
    return [mk for mk in map(partial(_mark, low), _KEY.finditer(low)) if mk is not None]


def _start(text: str, extra: Markers | None) -> int:
    """Offset where the conclusion of `text` (no reasoning block) starts (rule 2)."""
    low = _lower(text)
    marks = _marks(low)
    if extra is not None:
        marks += [(at, at) for at in extra(low)]
    start, probe = -1, -1
    for m, m_probe in sorted(set(marks), reverse=True):  # from the last statement back, while they join
        if start >= 0 and (start - m > JOIN_CHARS or _found(_RETRACT, low, m, probe if probe > m else start)):
            break
        if _stated(low, m):
            start, probe = m, m_probe
    return max(start, 0)


def read_conclusion(response: str, tags: ThinkTags | None = DEFAULT_TAGS, extra: Markers | None = None) -> Conclusion:
    """The conclusion of `response` (rules 1-2); `extra`: the family's own final-answer statements (a function of
    the lower-cased text giving their start offsets)."""
    text = response if isinstance(response, str) else str(response)
    base, closed = 0, None
    if tags is not None:
        c = text.rfind(tags.close)
        o = text.rfind(tags.open)
        if o >= 0 and o > c:
            return Conclusion("", "truncated", len(text), False)
        if c >= 0:
            base, closed = c + len(tags.close), True
            if not text[base:].strip():
                return Conclusion("", "no_answer", len(text), True)
    body = text[base:]
    at = _start(body, extra)
    return Conclusion(body[at:], "ok", base + at, closed, text[:base + at])


def reasoning_unclosed(response: str, tags: ThinkTags | None = DEFAULT_TAGS) -> bool:
    """True when the response opens a reasoning block and never closes it (the exploit watch's truncation share)."""
    return tags is not None and read_conclusion(response, tags).status == "truncated"


__all__ = ["DEFAULT_TAGS", "JOIN_CHARS", "Conclusion", "ThinkTags", "read_conclusion", "reasoning_unclosed"]
