"""Knights & Knaves assignment grader.

Final-answer semantics (GRADER_VERSION 5; every rule is a test in tests/evaluation/test_grader_corpus.py,
tests/evaluation/test_conclusion.py and tests/evaluation/adversarial_corpus.yaml). Since v5 every rule reads the
response's *conclusion* (`evaluation.graders.conclusion`), never the raw response; "response" below means it.

1. **Statements.** Accepted phrasings, in any order and case, markdown stripped: `X is a knight`,
   `X must be a knave`, `X is indeed a knight`, `X: knight`, `X - knave`, `X → knight`, `X (knave)`;
   lists joined by commas/"and" (`Michael and Ethan are knights`); role-first lists
   (`Knights: Michael, Ethan. Knaves: Zoey.`, `The knaves are Zoey and Ethan`); a Markdown table row
   (`| Michael | Knight |`, v3). Names are matched against the gold names, so "He is a knight" is not a
   person. A negation assigns the other role (v3; every person is one of the two): `X is not a knave`,
   `X isn't a knight`, `X must not be a knave`. A clause introduced by a supposition or a quoted claim
   ("Suppose X is ...", "Y says X is ...") is not a statement.
2. **Ambiguous or contradictory statements** ("X is a knight or a knave", "X is a knight and a knave") are
   no answer for that person (recorded as `X=?`), never a knight.
3. **Final answer block.** When the response has one, only it counts: the last `<answer>…</answer>` (to the
   end when unclosed), else the last `\\boxed{…}`, else the text after the last "final answer" / "the answer
   is" / "answer:" / "in conclusion" / "in summary" phrase. A block without any statement about a gold
   person is ignored (the whole response is read). An incomplete final block is not completed from the
   reasoning before it.
4. Inside the region read, the answer is the *last complete assignment block* (a run of statements naming
   every person once, < 300 characters apart), so a closing "Therefore Ethan is a knight." does not hide the
   full list before it; without a complete block, the last statement per person.
5. **Alternatives are no answer** (v3): when that last complete block follows another, different complete
   block and the two are joined by "or" / "alternatively" ("Michael is a knight, Ethan is a knight, Zoey is a
   knave; or Michael is a knave, ..."), two assignments are offered: status `hedged` (v5), no credit for either.
6. **A final answer followed by a different one is a hedge** (v4; v5 status `hedged`): after the graded
   assignment, a statement giving a person the other role ("But wait ... Zoey is actually a knight",
   "Correction: Emma is a knight"), or calling them possibly either ("Zoey could be a knight"), inside the final
   block or after it; several solutions announced ("Two assignments are consistent: (1) ... (2) ..."). An
   agreeing restatement keeps the credit; a question ("Zoey is a knight? No.") states nothing; a block the text
   rejects ("That doesn't work") and a complete assignment after it is a reflection: the later one is graded.
   v5 reads truth-teller(s) as knights, liar(s) as knaves, and "is no knave" as a knight.
7. Group statements (v4): "all three are knaves" / "everyone is a knight" assign every person; "All except Noah
   and Emma are knights" assigns the others the other role; "Neither X nor Y is a knave" makes both knights; a
   Markdown table with one column per person and a row of roles is read column by column.

Parsing is one linear tokenisation plus bounded scans around each role word: no regex backtracking.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

from evaluation.graders.conclusion import Conclusion
from evaluation.graders.registry import register_grader
from evaluation.graders.result import GradeResult

GRADER_VERSION = "5"

_MARKDOWN = re.compile(r"[*_`#]++")
# words and punctuation; line breaks are whitespace (a statement may wrap), names in a list need separators
_TOKEN = re.compile(r"[A-Za-z][A-Za-z'’\-]*+|->|→|[,:;.!?()=–—&|\-]")
_PHRASE_MARK = re.compile(
    r"\b(?:final answer|final assignment|the answer is|answer ?:|in conclusion|in summary|to summari[sz]e)",
    re.IGNORECASE,
)
_ROLES = {"knight": "knight", "knights": "knight", "knave": "knave", "knaves": "knave",
          # the synonyms puzzles define (v5): truth-tellers always tell the truth, liars always lie
          "truth-teller": "knight", "truth-tellers": "knight", "truthteller": "knight", "truthtellers": "knight",
          "liar": "knave", "liars": "knave"}
_COPULAS = {"is", "are", "was", "were"}
_LINK_SYMBOLS = {":", "=", "-", "–", "—", "→", "->", "(", "|"}  # "|": a Markdown table cell
_NEGATED_COPULAS = {"isn't", "isn’t", "aren't", "aren’t", "wasn't", "wasn’t", "weren't", "weren’t"}
_NEGATIONS = {"not", "never", "no"}  # "is no knave" (v5)
_MAYBE = {"could", "might", "may"}  # "Zoey could be a knight": a possibility, not an assignment (v5: hedged)
_OTHER = {"knight": "knave", "knave": "knight"}
_FILLERS = {"a", "an", "the", "both", "all", "also", "indeed", "definitely", "actually", "therefore", "thus",
            "then", "clearly", "certainly", "truly", "surely", "necessarily", "each", "either", "so"}
_SEPARATORS = {",", "and", "&"}
_HYPOTHETICAL = {"if", "suppose", "supposing", "assume", "assuming", "assumed", "whether", "unless", "imagine",
                 "says", "said", "say", "claims", "claimed", "claim", "states", "stated", "state", "tells", "told"}
_ROLE_FIRST_LINKS = {":", "=", "-", "–", "—", "→", "->", "are", "is", "were", "was", "include", "includes"}
_NOT_NAMES = (set(_ROLES) | _COPULAS | _FILLERS | _SEPARATORS | _HYPOTHETICAL
              | {"he", "she", "they", "it", "we", "i", "you", "hence", "since", "because", "not", "no", "yes",
                 "but", "or", "every", "neither", "none", "one", "this", "that", "there", "must", "be", "answer",
                 "final", "knights", "knaves", "person", "people", "everyone", "nobody", "solution"})
_BOUNDARIES = {".", "!", "?", ";", "|"}
_MAX_LIST = 16  # names in one list (puzzles have at most 8 people)
_MAX_FILLERS = 3
_BLOCK_GAP = 300  # characters allowed between two statements of one block

Statement = tuple[int, str, str | None]  # (character position, name_lower, role or None = no answer)


class _Parser:
    """Statements of one text; `names` (lower case) restricts persons, None accepts capitalised words (gold)."""

    def __init__(self, text: str, names: set[str] | None):
        self.text = text
        self.orig: list[str] = _TOKEN.findall(text)
        self.low = [t.lower() for t in self.orig]
        self._pos: list[int] | None = None  # token start offsets, computed only when a statement is found
        self.names = names

    def pos(self, i: int) -> int:
        if self._pos is None:
            self._pos = [m.start() for m in _TOKEN.finditer(self.text)]
        return self._pos[i]

    def _is_name(self, i: int) -> bool:
        if i < 0 or i >= len(self.low):
            return False
        if self.names is not None:
            return self.low[i] in self.names
        return self.orig[i][0].isupper() and self.low[i] not in _NOT_NAMES

    def _list_left(self, i: int) -> tuple[list[int], int]:
        """Name token indices of a list ending at token i (inclusive), and the index before the list."""
        if not self._is_name(i):
            return [], i
        out = [i]
        j = i - 1
        while len(out) < _MAX_LIST:
            k = j
            seps = 0
            while k >= 0 and self.low[k] in _SEPARATORS and seps < 2:
                k -= 1
                seps += 1
            if seps == 0 or not self._is_name(k):
                break
            out.append(k)
            j = k - 1
        return out[::-1], j

    def _list_right(self, i: int) -> list[int]:
        out: list[int] = []
        j = i
        while self._is_name(j) and len(out) < _MAX_LIST:
            out.append(j)
            k, seps = j + 1, 0
            while k < len(self.low) and self.low[k] in _SEPARATORS and seps < 2:
                k += 1
                seps += 1
            if seps == 0:
                break
            j = k
        return out

    def _hypothetical(self, before: int) -> bool:
        """A supposition or a reported claim among the 3 tokens before index `before` (inclusive)."""
        for k in range(before, max(before - 3, -1), -1):
            low = self.low[k]
            if low in _BOUNDARIES:
                return False
            if low in _HYPOTHETICAL:
                return True
        return False

    def _qualifier(self, j: int, role: str) -> bool:
        """True when the role word at j is followed by "or"/"and" another role: ambiguous or contradictory."""
        k = j + 1
        if k >= len(self.low) or self.low[k] not in ("or", "and", "/"):
            return False
        k += 1
        for _ in range(_MAX_FILLERS):
            if k < len(self.low) and self.low[k] in _FILLERS:
                k += 1
        return k < len(self.low) and self.low[k] in _ROLES

    def _role_list(self, j: int) -> list[int]:
        """Indices of a comma-separated run of role words starting at j ("knight, knight and knave")."""
        out = [j]
        k = j + 1
        while len(out) < _MAX_LIST:
            seps = 0
            while k < len(self.low) and self.low[k] in _SEPARATORS and seps < 2:
                k += 1
                seps += 1
            while k < len(self.low) and self.low[k] in ("a", "an") and seps:
                k += 1
            if seps == 0 or k >= len(self.low) or self.low[k] not in _ROLES:
                break
            out.append(k)
            k += 1
        return out

    def statements(self) -> list[Statement]:
        out: list[Statement] = []
        skip: set[int] = set()
        low = self.low
        for j in [j for j, t in enumerate(low) if t in _ROLES]:
            role = _ROLES[low[j]]
            if j in skip:
                continue
            if j > 1 and low[j - 1] in ("or", "and", "/") and low[j - 2] in _ROLES:
                continue  # the second half of "knight or knave": handled with the first
            final: str | None = None if self._qualifier(j, role) else role
            # names first: NAMES (is|are|was|were|must be|:|-|→|=|() [fillers] ROLE
            k = j - 1
            fillers = 0
            while k >= 0 and low[k] in _FILLERS and fillers < _MAX_FILLERS:
                k -= 1
                fillers += 1
            names: list[int] = []
            before = -1
            negated = False
            if k > 0 and low[k] in _NEGATIONS and low[k - 1] in _COPULAS:
                negated, k = True, k - 1  # "is not a knave": the copula links, the role flips
            if k >= 0:
                link = low[k]
                step = 0
                if link in _COPULAS or link in _LINK_SYMBOLS:
                    step = 1
                elif link in _NEGATED_COPULAS:  # "isn't a knight"
                    step, negated = 1, True
                elif link == "be" and k > 0 and low[k - 1] == "must":
                    step = 2
                elif link == "be" and k > 0 and low[k - 1] in _MAYBE:
                    step, final = 2, None  # "could be a knight": offered as possible, no assignment
                elif link == "be" and k > 1 and low[k - 1] in _FILLERS and low[k - 2] in _MAYBE:
                    step, final = 3, None  # "might also be a knave"
                elif link == "be" and k > 1 and low[k - 1] in _NEGATIONS and low[k - 2] == "must":
                    step, negated = 3, True  # "must not be a knave"
                if step:
                    k -= step
                    if k >= 0 and low[k] in (",", "|"):
                        k -= 1
                    names, before = self._list_left(k)
            if not names:  # role first: (the) ROLE(s) (:|are|is|=|-) NAMES
                if j + 1 < len(low) and low[j + 1] in _ROLE_FIRST_LINKS:
                    r = j + 2
                    if r < len(low) and low[r] == ":":
                        r += 1
                    names = self._list_right(r)
                    before = j - 1 - (1 if j > 0 and low[j - 1] == "the" else 0)
            question = j + 1 < len(low) and low[j + 1] == "?"  # "Zoey is a knight? No." asks, does not state
            if names and not question and not (before >= 0 and self._hypothetical(before)):
                roles = self._role_list(j)
                if len(roles) > 1:  # "A, B and C: knight, knight, knave" is respective; a count mismatch is no answer
                    skip.update(roles)
                    given = [_ROLES[low[r]] for r in roles]
                    per = given if len(given) == len(names) else [None] * len(names)
                    out.extend((self.pos(n), low[n], rl) for n, rl in zip(names, per, strict=True))
                else:
                    role_given = _OTHER[final] if (negated and final is not None) else final
                    out.extend((self.pos(n), low[n], role_given) for n in names)
        out.sort(key=lambda s: s[0])
        return out


_ANY_ROLE = re.compile(r"kni|kna|truth|liar", re.IGNORECASE)


# "all are knights", not "all of them are knights or knaves" (the puzzle's premise)
_GROUP_ROLE = (r"(?:are|is|must be|are all|must all be)(?: all)? (?:a |an )?(knights?|knaves?)\b"
               r"(?! ?(?:or|and|/) ?(?:a |an )?kn)")
_ALL = re.compile(r"\b(?:all(?: three| four| five| six| seven| eight| of them| of us)?|everyone|everybody|"
                  r"each of them) " + _GROUP_ROLE, re.IGNORECASE)
_ALL_EXCEPT = re.compile(r"\b(?:all|everyone|everybody)(?: of them)? (?:except|but|other than|apart from) "
                         r"([A-Za-z][A-Za-z ,&]{0,120}?) " + _GROUP_ROLE, re.IGNORECASE)
_NEITHER = re.compile(r"\bneither ([A-Za-z]+) nor ([A-Za-z]+) " + _GROUP_ROLE, re.IGNORECASE)
_SUPPOSED = re.compile(r"\b(?:if|suppose|supposing|assume|assuming|says|said|claims|claimed|whether)\b",
                       re.IGNORECASE)
_TABLE_ROW = re.compile(r"^ ?\|(.+)\| ?$", re.MULTILINE)


def _supposed(text: str, at: int) -> bool:
    head = text[max(0, at - 60): at]
    cut = max(head.rfind("."), head.rfind("\n"), head.rfind(";"))
    return _SUPPOSED.search(head[cut + 1:]) is not None


def _group_statements(text: str, names: set[str]) -> tuple[list[Statement], list[tuple[int, int]]]:
    """Rule 7: statements about every person at once, and the column-per-person table; with the spans of the
    "all except" / "neither ... nor" phrases (their inner "Zoey are knights" is not a statement)."""
    out: list[Statement] = []
    spans: list[tuple[int, int]] = []
    for m in _ALL.finditer(text):
        if not _supposed(text, m.start()):
            out.extend((m.start() + k, n, _ROLES[m.group(1).lower()]) for k, n in enumerate(sorted(names)))
    for m in _ALL_EXCEPT.finditer(text):
        listed = {w.lower() for w in re.findall(r"[A-Za-z]+", m.group(1))} & names
        if listed and not _supposed(text, m.start()):
            role = _ROLES[m.group(2).lower()]
            out.extend((m.start() + k, n, _OTHER[role] if n in listed else role) for k, n in enumerate(sorted(names)))
            spans.append(m.span())
    for m in _NEITHER.finditer(text):
        pair = [m.group(1).lower(), m.group(2).lower()]
        if set(pair) <= names and not _supposed(text, m.start()):
            role = _OTHER[_ROLES[m.group(3).lower()]]
            out.extend((m.start(k + 1), n, role) for k, n in enumerate(pair))
            spans.append(m.span())
    rows = [(r.start(), [c.strip().lower() for c in r.group(1).split("|")]) for r in _TABLE_ROW.finditer(text)]
    for i, (_, head) in enumerate(rows):
        if len(head) > 1 and all(c in names for c in head):
            body = [r for r in rows[i + 1: i + 3] if not all(set(c) <= set("-: ") for c in r[1])]
            if body and len(body[0][1]) == len(head) and all(c in _ROLES for c in body[0][1]):
                out.extend((body[0][0] + k, n, _ROLES[c]) for k, (n, c) in enumerate(zip(head, body[0][1],
                                                                                          strict=True)))
    return out, spans


def parse_assignments(text: str, names: set[str] | None = None) -> list[Statement]:
    """All `(position, name_lower, role)` statements in `text`, in order (role None: ambiguous/contradictory)."""
    clean = _MARKDOWN.sub("", text)
    stmts = _Parser(clean, names).statements()
    if names:
        group, spans = _group_statements(clean, names)
        stmts = sorted([st for st in stmts if not any(a <= st[0] < b for a, b in spans)] + group,
                       key=lambda st: st[0])
    return stmts


def parse_gold(gold: str) -> dict[str, str]:
    out: dict[str, str] = {}
    for _, name, role in parse_assignments(gold):
        if role is not None:
            out[name] = role
    return out


def _balanced_from(text: str, start: int) -> str:
    """Text inside the brace group opening at or after `start` (to the end when it never closes)."""
    open_at = text.find("{", start)
    if open_at < 0:
        return ""
    depth = 0
    for m in re.finditer(r"[{}]", text[open_at:]):
        depth += 1 if m.group(0) == "{" else -1
        if depth == 0:
            return text[open_at + 1: open_at + m.start()]
    return text[open_at + 1:]


def final_block(text: str) -> str | None:
    """The final answer block (rule 3), or None when the response has no marker."""
    low = text.lower()
    tag = low.rfind("<answer>")
    if tag >= 0:
        end = low.find("</answer>", tag)
        return text[tag + 8: end if end >= 0 else len(text)]
    box = text.rfind("\\boxed")
    if box >= 0:
        return _balanced_from(text, box)
    marks = list(_PHRASE_MARK.finditer(text))
    return text[marks[-1].end():] if marks else None


def _run(stmts: list[Statement], start: int) -> Iterator[tuple[int, dict[str, str | None]]]:
    """The run of statements from `start` (gaps < _BLOCK_GAP, no name repeated) as it grows: (index of its
    last statement, its block so far), at least once."""
    block: dict[str, str | None] = {}
    prev = stmts[start][0]
    for k in range(start, len(stmts)):
        pos, name, role = stmts[k]
        if pos - prev > _BLOCK_GAP or name in block:
            return
        block[name] = role
        prev = pos
        yield k, block


def _complete_block(stmts: list[Statement], names: set[str]) -> tuple[int, dict[str, str | None]] | None:
    """(index of its first statement, block) of the latest run of statements (gaps < _BLOCK_GAP, no name
    repeated) that assigns every name."""
    for start in range(len(stmts) - 1, -1, -1):
        *_, (_, block) = _run(stmts, start)
        if names <= block.keys():
            return start, block
    return None


def _last_complete_block(stmts: list[Statement], names: set[str]) -> dict[str, str | None] | None:
    """Latest run of statements (gaps < _BLOCK_GAP, no name repeated) that assigns every name."""
    found = _complete_block(stmts, names)
    return None if found is None else found[1]


_ALTERNATIVE = re.compile(r"\b(?:or|alternatively)\b", re.IGNORECASE)
_WORD = re.compile(r"[a-z']+")
_JOINING = {"or", "alternatively", "either", "it", "could", "also", "be", "that", "possibly", "maybe", "perhaps",
            "else", "otherwise", "s", "knight", "knights", "knave", "knaves"}


def _offers_alternatives(text: str, stmts: list[Statement], names: set[str]) -> bool:
    """Rule 5: the last complete block follows a different complete block, joined by "or"/"alternatively"."""
    last = _complete_block(stmts, names)
    if last is None or last[0] == 0:
        return False
    start, block = last
    prev = _complete_block(stmts[:start], names)
    if prev is None or prev[1] == block:
        return False
    prev_end = stmts[prev[0] + len(prev[1]) - 1][0]
    gap = text[prev_end: stmts[start][0]]
    if len(gap) > _BLOCK_GAP:
        return False
    # the joining words after the previous block's last role word: "or" / "alternatively" and nothing else that
    # carries meaning ("knave; or", "knave. Alternatively, it could also be"); "contradiction. Or" is reasoning
    low = gap.lower()
    words = _WORD.findall(low[max(low.rfind("knight"), low.rfind("knave"), 0):])[1:]
    return bool(words) and _ALTERNATIVE.search(" ".join(words)) is not None and set(words) <= _JOINING


_MULTI = re.compile(r"\b(?:two|2|both|multiple|several|more than one)\b[^.\n]{0,30}?\b(?:assignments|solutions|"
                    r"answers|possibilities|scenarios|configurations|cases|options)\b[^.\n]{0,20}?\b(?:are|is|"
                    r"remain|work|fit|satisfy|consistent|possible|valid)\b", re.IGNORECASE)


_CUE = re.compile(r"\b(?:wait|actually|correction|mistake|error|on second thought|oops|sorry|rather|instead)\b",
                  re.IGNORECASE)
_REJECTED = re.compile(r"\b(?:contradict\w*|impossible|inconsistent|fails?|cannot|can't|invalid|not possible|"
                       r"(?:doesn't|does not|won't|wouldn't) (?:work|hold)|wrong|not consistent)\b", re.IGNORECASE)


def _first_complete(stmts: list[Statement], names: set[str]) -> tuple[int, dict[str, str | None]] | None:
    """(index of its last statement, block) of the earliest run of statements that assigns every name."""
    for start in range(len(stmts)):
        for k, block in _run(stmts, start):
            if names <= block.keys():
                return k, block
    return None


def _contradicted(stmts: list[Statement], names: set[str], block: dict[str, str | None], after: list[Statement],
                  text: str, final: bool) -> bool:
    """Rule 6: after the graded assignment, or after an earlier complete assignment that a correction cue
    ("But wait", "Correction:", "Actually"; inside a final answer block none is needed) revises, a statement gives
    a person another role; or several
    complete, different assignments in a response that announces several solutions."""
    found = _complete_block(stmts, names)
    later = list(after)
    if found is not None:
        later += stmts[found[0] + len(found[1]):]
    if any(role is not None and block.get(name) not in (None, role) for _, name, role in later):
        return True
    first = _first_complete(stmts, names)
    if first is not None:
        end, stated = first
        for pos, name, role in stmts[end + 1:]:
            if role is not None and stated.get(name) not in (None, role):
                between = text[stmts[end][0]: pos]
                if (final or _CUE.search(between)) and not _REJECTED.search(between):
                    return True
                break
    if found is not None and _MULTI.search(text):
        prev = _complete_block(stmts[:found[0]], names)
        return prev is not None and prev[1] != found[1]
    return False


def _doubted(stmts: list[Statement], names: set[str], block: dict[str, str | None], after: list[Statement]) -> bool:
    """Rule 6 (v5): after the graded assignment, a person it assigns is called possibly either ("… though Zoey
    could be a knight", "Zoey might be a knave or a knight")."""
    if not any(role is None for _, _, role in stmts) and not any(role is None for _, _, role in after):
        return False  # nothing is left open anywhere: skip finding the block again
    found = _complete_block(stmts, names)
    later = list(after) + (stmts[found[0] + len(found[1]):] if found is not None else [])
    return any(role is None and block.get(name) is not None for _, name, role in later)


@register_grader("knights_knaves", version=GRADER_VERSION, budget_s=2.0)  # a regex grader (multiple_choice)
def grade_knights_knaves(c: Conclusion, gold: str) -> GradeResult:
    truth = parse_gold(gold)
    if not truth:
        return GradeResult(0.0, None, "error")  # gold without any assignment is a data bug
    if not c.ok:
        return c.refused()
    response = c.text
    names = set(truth)
    if not _ANY_ROLE.search(response):
        return GradeResult(0.0, None, "no_answer")  # no role word at all: nothing to tokenise
    clean = _MARKDOWN.sub("", response)
    stmts: list[Statement] = []
    read = clean
    after: list[Statement] = []  # statements after the final block, outside it (rule 6)
    block_text = final_block(clean)
    if block_text is not None:
        stmts = parse_assignments(block_text, names)
        read = block_text
        if stmts:
            end = clean.rfind(block_text) + len(block_text)
            after = parse_assignments(clean[end:], names) if end < len(clean) else []
            if after and _REJECTED.search(clean, end, after[0][0] + end) and _complete_block(after, names):
                # v5: the block is rejected ("That doesn't work") and a complete assignment follows: a reflection
                stmts, read, after = after, clean[end:], []
    if not stmts:
        stmts = parse_assignments(clean, names)
        read = clean
    if not stmts:
        return GradeResult(0.0, None, "no_answer")
    if _offers_alternatives(read, stmts, names):
        return GradeResult(0.0, None, "hedged")
    block = _last_complete_block(stmts, names)
    if block is None:  # no complete block: the last statement per name
        block = {}
        for _, name, role in stmts:
            block[name] = role
    if all(role is None for role in block.values()):
        return GradeResult(0.0, None, "hedged")  # every person "a knight or a knave" / "could be" either
    if _contradicted(stmts, names, block, after, read, read is not clean) or _doubted(stmts, names, block, after):
        return GradeResult(0.0, None, "hedged")  # rule 6: the conclusion gives a person another role
    order = [n for n in truth if n in block]
    parsed = ", ".join(f"{n.capitalize()}={block[n] or '?'}" for n in order)
    score = 1.0 if all(block.get(n) == r for n, r in truth.items()) else 0.0
    return GradeResult(score, parsed, "ok")
