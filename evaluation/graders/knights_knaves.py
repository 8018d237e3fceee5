"""Knights & Knaves assignment grader.

Robust where the study's grader failed (STUDY.md §4.2): markdown bold is stripped, `Name: knight`
and `Name - knave` count, names are matched against the gold names (so "He is a knight" is not a
person), and the answer is the *last complete assignment block* (a run of statements naming every
person), so a closing "Therefore Ethan is a knight." does not hide the full list before it.
"""

from __future__ import annotations

import re

from evaluation.graders.result import GradeResult

_MARKDOWN = re.compile(r"[*_`#]+")
_STATEMENT = re.compile(
    r"\b([A-Za-z][A-Za-z'\-]*)\s*"
    r"(?:,\s*)?"
    r"(?:is|was|must\s+be|=|:|-|–|—|→|->)\s*"
    r"(?:(?:indeed|definitely|actually|therefore|also|clearly|thus|then)\s+)?"
    r"(?:(?:a|an|the)\s+)?"
    r"(knight|knave)s?\b",
    re.IGNORECASE,
)
_BLOCK_GAP = 300  # characters allowed between two statements of one block


def parse_assignments(text: str) -> list[tuple[int, str, str]]:
    """All `(position, name_lower, role)` statements in `text`, in order."""
    clean = _MARKDOWN.sub("", text)
    return [(m.start(), m.group(1).lower(), m.group(2).lower()) for m in _STATEMENT.finditer(clean)]


def parse_gold(gold: str) -> dict[str, str]:
    out: dict[str, str] = {}
    for _, name, role in parse_assignments(gold):
        out[name] = role
    return out


def _last_complete_block(stmts: list[tuple[int, str, str]], names: set[str]) -> dict[str, str] | None:
    """Latest run of statements (gaps < _BLOCK_GAP, no name repeated) that assigns every name."""
    for start in range(len(stmts) - 1, -1, -1):
        block: dict[str, str] = {}
        prev = stmts[start][0]
        for pos, name, role in stmts[start:]:
            if pos - prev > _BLOCK_GAP or name in block:
                break
            block[name] = role
            prev = pos
        if names <= block.keys():
            return block
    return None


def grade_knights_knaves(response: str, gold: str) -> GradeResult:
    truth = parse_gold(gold)
    if not truth:
        return GradeResult(0.0, None, "error")  # gold without any assignment is a data bug
    names = set(truth)
    stmts = [s for s in parse_assignments(response) if s[1] in names]
    if not stmts:
        return GradeResult(0.0, None, "no_answer")
    block = _last_complete_block(stmts, names)
    if block is None:  # no complete block: the last statement per name
        block = {}
        for _, name, role in stmts:
            block[name] = role
    order = [n for n in truth if n in block]
    parsed = ", ".join(f"{n.capitalize()}={block[n]}" for n in order)
    score = 1.0 if all(block.get(n) == r for n, r in truth.items()) else 0.0
    return GradeResult(score, parsed, "ok")
