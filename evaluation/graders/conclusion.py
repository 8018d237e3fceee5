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
from dataclasses import dataclass
from typing import Literal

from evaluation.graders.result import GradeResult

ConclusionStatus = Literal["ok", "truncated", "no_answer"]
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
        return cls(o, c)

    def spec(self) -> str:
        return f"{self.open},{self.close}"


DEFAULT_TAGS = ThinkTags()


@dataclass(frozen=True)
class Conclusion:
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


# explicit final-answer statements; group "at" (when present) is where the statement starts
_MARK = re.compile(
    r"\\(?:boxed|fbox) ?\{|<answer>"
    r"|(?i:(?<!is the )(?<!is my )(?<!as the )(?<!as my )\bfinal (?:answer|assignment)\b|\banswer ?[:：]"
    r"|\bin (?:conclusion|summary)\b|\bto summari[sz]e\b"
    r"|\b(?:the|my|our) (?:(?:correct|right|actual|real|true|final) (?:answer|value|result|option|choice|"
    r"solution)|answer|solution)(?: to (?:the|this) (?:problem|question))? ?(?:is|would be|should be|must be|=|:)"
    r"(?! not\b)"
    r"|\bcorrection ?[:：]"
    r"|\b(?:wait|actually|no|rather|instead|oops|sorry)[,.:;!]?(?: (?:no|wait|actually)[,.:;!]?)? "
    r"(?P<at>(?:it|that|this)(?:'s| is| must be| should be)) ?(?=[$\\(\[{0-9-]|[A-Za-z]\b|[A-Z]\)))"
)
# what retracts an earlier statement (the reasoning revises it)
_RETRACT = re.compile(
    r"(?i)\b(?:wait|hold on|hmm+|actually|oops|sorry|correction|mistake|on (?:second thought|reflection)"
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
_SUPPOSED = re.compile(r"(?i)\b(?:if|suppose|supposing|assume|assuming|whether|unless|says|said|claims|claimed|"
                       r"thinks|argues)\b")
_SENTENCE_END = re.compile(r"[.!?\n;]")


def _stated(text: str, at: int) -> bool:
    head = text[max(0, at - 60): at]
    ends = list(_SENTENCE_END.finditer(head))
    return _SUPPOSED.search(head, ends[-1].end() if ends else 0) is None


def _start(text: str, extra: re.Pattern[str] | None) -> int:
    """Offset where the conclusion of `text` (no reasoning block) starts (rule 2)."""
    # (start, probe): a correction statement ("Actually no, it is 15") starts at its cue, but its own cue does
    # not retract the statement before it up to its probe ("it is")
    marks = [(m.start(), m.start("at") if m.group("at") else m.start()) for m in _MARK.finditer(text)]
    if extra is not None:
        marks += [(m.start(), m.start()) for m in extra.finditer(text)]
    marks = sorted(mk for mk in marks if _stated(text, mk[0]))
    if not marks:
        return 0
    start, probe = marks[-1]
    for m, m_probe in reversed(marks[:-1]):
        if start - m > JOIN_CHARS or _RETRACT.search(text, m, probe if probe > m else start):
            break
        start, probe = m, m_probe
    return start


def read_conclusion(response: str, tags: ThinkTags | None = DEFAULT_TAGS,
                    extra: re.Pattern[str] | None = None) -> Conclusion:
    """The conclusion of `response` (rules 1-2); `extra`: the family's own final-answer markers."""
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
