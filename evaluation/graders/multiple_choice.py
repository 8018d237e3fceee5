"""Multiple-choice letter grader.

Final-answer semantics (GRADER_VERSION 5; every rule is a test in tests/evaluation/test_grader_corpus.py,
tests/evaluation/test_conclusion.py and tests/evaluation/adversarial_corpus.yaml). Since v5 every rule reads the
response's *conclusion* (`evaluation.graders.conclusion`), never the raw response; "response" below means it.

1. An *explicit final-answer marker* is `\\boxed{X}` (also `\\boxed{(X)}`, `\\boxed{\\text{X}}`), an
   `<answer>X</answer>` tag, or an answer phrase *linked* to a letter: `Answer: X`, `The answer is (X)`,
   `Final answer (X)`, `The correct option is X`, `... would be X`. "answer choice A is incorrect" is prose,
   not a marker (no link). Hedged phrasings linked to a letter are markers too (v3): `I believe it is (C)`,
   `I think it's C`, `I'm fairly sure the answer is C`, `My best guess is C`, `I'd go with C`,
   `It is most likely C`, so a hedged answer after a listing of every option is read.
2. The **last** marker in the response is the answer; anything after it that is not itself a marker (an
   explanation mentioning other options) does not change it. Markers that disagree are rule 8.
3. With no marker, a last line that is only a letter (`(C)`, `**C**`, `C.`) is the answer, unless it is the
   next label of a list of options on the line before ("(C) 14" then "(D)"); otherwise a parenthesised
   letter `(C)` counts only when it is the *only* letter so written: a bare list of options ("(A) … (D)")
   is no answer.
4. A bare lower-case letter after a phrase counts at the end of its line ("the answer is c") or before
   punctuation ("the answer is b, since ...", "answer: c) 14"); letters that are not English words (all but
   a and i) also count before a space ("the answer is b because ...", v3). So "the answer is a bit unclear" is
   no answer; "Answer: I think ..." is the pronoun.
5. The letter set comes from the item's option count: "E" on a 4-option item parses but scores 0.
6. **Alternatives are no answer** (v3): a final marker that offers two letters ("The answer is B or C",
   "\\boxed{B/C}", "Answer: (A) or possibly (D)", "I'd go with B or C") gets no credit for either: status
   `hedged` (v5). A later single-letter marker is the answer ("B or C ... the answer is C"). Letters listed after
   a marker are alternatives too (v4): "Answer: A, B", "(A), (B), (C), or (D)", "A B C D".
7. **LaTeX around a letter** is read (v3): `\\(B\\)`, `\\[B\\]`, `\\mathrm{B}`, `\\text{B}`, `\\textbf{B}`,
   `\\mathbf{B}` (also inside `\\boxed{}`), so `The answer is \\(\\mathrm{C}\\)` is C.

8. **A final answer followed by a different one is a hedge** (v4; v5: status `hedged`, in the conclusion only,
   so "The answer is (A). Wait, no. The answer is (B)." is B: the retracted A is reasoning): markers
   naming two different letters ("The answer is (A). Wait, no. The answer is (B).", "\\boxed{C}. Actually no,
   it is D" within one conclusion) are status `hedged`; a restatement of the same letter keeps the
   credit. Markers also read (v4): the letter then its verdict ("Option C is correct.", "C is the correct
   answer", not "B would be right only at ..."), and a rejected letter then the answer ("not C; it is D"). A
   marker inside a supposition or a reported claim ("If the answer is A, then ...", "Bob says the answer is C")
   is not one. A letter offered as possible is a candidate too (v5): "(A) might also be correct", "could also be
   (A)", "or possibly A", "I think C" after an answer.
9. Read since v5: "not (B) but (D)" is D; `{C}` is (C); prose inside a box (`\\boxed{\\text{Option C}}`); and,
   without a letter, the option text the response itself listed ("C. 16" ... "The answer is 16." is C).

LaTeX letter wrappers and `\\( \\) \\[ \\]` delimiters are unwrapped, typographic apostrophes made plain, markdown
(`**`, `__`, backticks, `$`) removed and whitespace runs collapsed first (a run holding a
newline becomes one newline), so every pattern below uses bounded separators and matches in linear time
(no nested or adjacent unbounded quantifiers; the study's `\\s*`-chained phrase regex backtracked for minutes).
"""

from __future__ import annotations

import re
import string

from evaluation.graders.conclusion import Conclusion
from evaluation.graders.registry import register_grader
from evaluation.graders.result import GradeResult, Status

GRADER_VERSION = "5"
LETTERS = string.ascii_uppercase

_MARKUP = re.compile(r"[*_`$]++")
# \mathrm{B}, \text{(B)}, \textbf{B} ... around one letter -> the letter; \( \) \[ \] math delimiters -> nothing
_LATEX_LETTER = re.compile(r"\\(?:mathrm|mathbf|mathit|mathsf|text|textbf|textrm|textit|operatorname) ?\{ ?"
                           r"(\(? ?[A-Za-z] ?\)?) ?\}")
_LATEX_DELIM = re.compile(r"\\[()\[\]]")
_BRACED = re.compile(r"(?<![A-Za-z\\])\{ ?([A-Za-z]) ?\}")  # "{C}" (v5): read as "(C)"
# a whitespace run holding a newline -> one newline; any other run of 2+ (or a tab) -> one space; template
# substitutions (no Python callback per run), possessive so a long run is read once
_NL_RUN = re.compile(r"[^\S\n]*+\n\s*+")
_WS_RUN = re.compile(r"[^\S\n]{2,}+|[^\S\n ]")
# \boxed{B}, \boxed{(B)}, \boxed{\text{B}}, \boxed{B. iron}
# prose inside the box before the letter (v5): \boxed{\text{Option C}}, \boxed{\text{The answer is (C)}}
_BOXED = re.compile(r"\\boxed ?\{ ?(?:\\text(?:bf)? ?\{ ?)?(?i:(?:the )?(?:(?:correct |final )?answer|option|choice)"
                    r"(?: is)?:? )?\(? ?([A-Za-z]) ?\)?(?=[\s.}:)/,])")
_TAG = re.compile(r"<answer> ?(?:\\boxed ?\{ ?)?[(\[]? ?([A-Za-z]) ?[)\]]?(?![A-Za-z0-9'])", re.IGNORECASE)
_LINK = r"(?::|：|=|-|is|would be|should be|will be|must be)"
# an answer phrase linked to a letter; separators are single optional spaces/newlines (text is normalised)
_PHRASE = re.compile(
    r"\b(?:final answer(?:\s?" + _LINK + r")?|(?:correct (?:answer|option|choice)|answer)\s?" + _LINK + r")"
    r"(?:\s?[:：])?\s?(?:(?:option|choice|letter)\s)?"
    r"([(\[]\s?[A-Za-z]\s?[)\]]|[A-Za-z])(?![A-Za-z0-9'])",
    re.IGNORECASE,
)
_HEDGE = re.compile(
    r"\b(?:i (?:believe|think|guess|suspect|reckon|feel)(?: that)?(?: it| this| the (?:correct |right |best )?"
    r"(?:answer|option|choice))? ?(?:is|'s|would be|must be|should be)"
    r"|i(?:'m| am) (?:fairly |pretty |quite |reasonably )?(?:sure|confident|certain)(?: that)? (?:it|the answer)"
    r" ?(?:is|'s)"
    r"|my (?:final |best )?(?:answer|guess|choice|pick|bet) (?:is|would be|'s)"
    r"|i(?:'d| would| will|'ll)? (?:go with|choose|pick|select|opt for)"
    r"|(?:it|this) ?(?:is|'s) (?:most )?(?:likely|probably))"
    r"(?:\s?[:：])?\s?(?:(?:option|choice|letter)\s)?"
    r"([(\[]\s?[A-Za-z]\s?[)\]]|[A-Za-z])(?![A-Za-z0-9'])",
    re.IGNORECASE,
)
_LOWER_END = re.compile(r"[.!)]? ?(?:\n|$)")
_LOWER_PUNCT = re.compile(r"[.,;:!?)]")
# after a marker's letter: "or" / "/" / "and" / a comma or a space and a second letter = several letters offered
# ("B or C", "A, B", "(A), (B), (C), or (D)", "A B C D"; rule 6); "Answer: A I think" is the pronoun
_ALT = re.compile(r" ?[)\]]? ?(?:[/&,;]? ?(?:or|and/or|and|nor)(?: (?:maybe|possibly|perhaps|else))? |[/&,;] ?|(?= ))"
                  r" ?(?:(?:option|choice) )?"
                  r"(?:[(\[] ?[A-Za-z] ?[)\]]|(?!I [a-z])[A-Z](?![A-Za-z0-9'])|[a-z](?=[.,;:!?)}]|\n|$))")
# the letter first, the verdict after: "Option C is correct.", "C is the correct answer", "(C) is right" (v4)
_VERDICT = re.compile(r"(?:\b(?:option|choice|letter) )?(?<![A-Za-z0-9'])([(\[] ?[A-Z] ?[)\]]|[A-Z])(?![A-Za-z0-9'])"
                      r" ?(?:is|must be|would be|should be) (?:the )?(?:correct|right|best)\b"
                      r"(?!,? (?:only|if|when|for|in|under|at|provided|assuming|unless|with)\b)")
# a rejected letter or a correction, then the answer: "not C; it is D", "Actually no, it is D", "Wait, it's D",
# "Correction: D" (v4)
_NOT_THEN = re.compile(r"\b(?i:not \(?[A-Z]\)?,? but(?: rather)?(?: option| choice)?"
                       r"|(?:not \(?[A-Z]\)?|actually|wait|no|rather|instead|oops|sorry)[;,.:!]?"
                       r"(?: (?:no|actually|wait|sorry)[;,.:!]?)? ?(?:it|that|this|the answer|the correct one)"
                       r" ?(?:is|'s|must be|should be|would be)|correction ?[:：]) ?"
                       r"([(\[] ?[A-Za-z] ?[)\]]|[A-Z])(?![A-Za-z0-9'])")
_NOT_THEN_WORDS = re.compile(r"not|actually|wait|no|rather|instead|oops|sorry|correction")  # gate on lower case
# a letter offered as possible in the conclusion (v5, a hedge): "(A) might also be correct", "could also be (A)",
# "or possibly A", "though B is possible"
_OFFERED = re.compile(r"(?:\b(?:option|choice) )?(?<![A-Za-z0-9'])([(\[] ?[A-Z] ?[)\]]|[A-Z])(?![A-Za-z0-9'])"
                      r" (?:might|could|may) (?:also |well |equally |possibly )?be (?:correct|right|the answer|valid)"
                      r"|(?:\b(?:could|might|may) (?:also |equally |possibly )?be|\bor (?:possibly|maybe|perhaps))"
                      r" (?:option |choice )?([(\[] ?[A-Z] ?[)\]]|[A-Z])(?![A-Za-z0-9'])"
                      r"|(?<![A-Za-z0-9'])([(\[] ?[A-Z] ?[)\]]|[A-Z]) (?:is|seems) (?:also )?(?:possible|plausible)\b"
                      r"|\b(?i:i (?:think|guess|believe|suspect|feel))(?: it's| it is| it might be)? ?"
                      r"([(\[] ?[A-Z] ?[)\]]|[A-Z])(?![A-Za-z0-9'])(?! (?:is|was) (?:wrong|incorrect|not|out))")
# a marker inside a supposition or a reported claim is not the response's answer ("If the answer is A, ...")
_SUPPOSE = re.compile(r"\b(?:if|suppose|supposing|assume|assuming|whether|unless|says|said|claims|claimed|"
                      r"thinks|argues|would mean|were)\b", re.IGNORECASE)
_SENTENCE_END = re.compile(r"[.!?\n;]")
_CONDITIONALS = {"if", "whether", "unless"}
_CLAUSE_AFTER = re.compile(r" ?[)\]]? ?(?:,|then\b|the\b|we\b|it\b)")
_PRONOUN_I = re.compile(r" [a-z]")
_PAREN = re.compile(r"\(([A-Z])\)")
_OPTION_LABEL = re.compile(r"[(\[]?([A-Z])[)\].:] ")


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


def normalise_text(response: str) -> str:
    """LaTeX letter wrappers unwrapped, markdown removed, whitespace runs collapsed (a run with a newline -> one
    newline); linear time."""
    text = response.replace("’", "'")
    if "\\" in text:  # each substitution only where its characters occur (v5: the grader's cost kept flat)
        text = _LATEX_DELIM.sub("", _LATEX_LETTER.sub(lambda m: m.group(1), text))
    if "{" in text:
        text = _BRACED.sub(r"(\1)", text)
    text = _MARKUP.sub("", text)
    return _WS_RUN.sub(" ", _NL_RUN.sub("\n", text) if "\n" in text else text)


def _letter(text: str, m: re.Match[str]) -> str | None:
    """The marker's letter, or None when it offers alternatives ("B or C", rule 6)."""
    return None if _ALT.match(text, m.end(1), m.end(1) + 40) else m.group(1).strip("()[] \n").upper()


def _supposed(text: str, at: int, end: int) -> bool:
    """True when the sentence before position `at` (up to 60 characters) opens a supposition or a reported claim.
    A conditional ("if", "whether", "unless") counts only with its clause after the letter at `end`
    ("If the answer is A, then ..."), so "if" in the reasoning before "The answer is: (A)" does not."""
    head = text[max(0, at - 60): at]
    ends = list(_SENTENCE_END.finditer(head))
    words = {w.lower() for w in _SUPPOSE.findall(head[ends[-1].end() if ends else 0:])}
    if words - _CONDITIONALS:
        return True
    return bool(words) and _CLAUSE_AFTER.match(text, end) is not None


def _markers(text: str) -> list[tuple[int, str | None]]:
    """(position, letter) of every explicit final-answer marker in normalised `text`; letter None: alternatives;
    "": a marker inside a supposition or claim (no answer, but its letter is no bare answer either)."""
    out: list[tuple[int, str | None]] = ([(m.start(1), _letter(text, m)) for m in _BOXED.finditer(text)]
                                         if "\\boxed" in text else [])
    if "<" in text:
        out += [(m.start(1), _letter(text, m)) for m in _TAG.finditer(text)]
    low = text.lower()
    if "correct" in low or "right" in low or "best" in low:  # the verdict words: skip the scan without them
        out += [(m.start(1), "" if _supposed(text, m.start(), m.end(1)) else m.group(1).strip("()[] ").upper())
                for m in _VERDICT.finditer(text)]
    if _NOT_THEN_WORDS.search(low):
        out += [(m.start(1), _letter(text, m)) for m in _NOT_THEN.finditer(text)]
    for m in [*_PHRASE.finditer(text), *_HEDGE.finditer(text)]:
        raw = m.group(1)
        letter = raw.strip("()[] \n")
        if raw == letter:  # bare letter, no brackets
            rest = text[m.end(): m.end() + 4]
            if letter.islower() and not _LOWER_END.match(rest) and not (
                    _LOWER_PUNCT.match(rest) or (letter not in "ai" and rest[:1] == " ")):
                continue  # "the answer is a bit unclear"
            if letter in "Ii" and _PRONOUN_I.match(rest):
                continue  # "Answer: I think ..."
        if _supposed(text, m.start(), m.end(1)):
            out.append((m.start(1), ""))  # "If the answer is A, then ...", "Bob says the answer is C": not an answer
            continue
        out.append((m.start(1), _letter(text, m)))
    return out


def _lone_last_line(text: str) -> str | None:
    """The letter of a last line that is only a letter, unless it is the next label of a list of options."""
    lines = [ln.strip() for ln in text.strip().split("\n") if ln.strip()]
    if not lines:
        return None
    core = lines[-1].strip(" ()[]{}.:!#>-")
    if len(core) != 1 or core not in LETTERS:
        return None
    if len(lines) > 1:
        prev = _OPTION_LABEL.match(lines[-2].lstrip(" #>-") + " ")
        if prev and ord(core) - ord(prev.group(1)) == 1:
            return None  # "(C) 14\n(D)": the next label of a listed set of options, not an answer
    return core


_MAYBE = re.compile(r"might|could|may|possibl|plausib|perhaps|maybe|think|guess|believe|suspect|feel", re.IGNORECASE)


def _offered(text: str) -> list[tuple[int, str | None]]:
    """(position, letter) of each letter the text offers as possible ("(A) might also be correct")."""
    out: list[tuple[int, str | None]] = []
    for m in _OFFERED.finditer(text):
        k = next(i for i in (1, 2, 3, 4) if m.group(i))
        out.append((m.start(k), m.group(k).strip("()[] ").upper()))
    return out


# the response's own listing of options ("(C) 14", "C. iron", "C) copper"), one per line or inline
_LISTED = re.compile(r"(?:^|\n| )[(\[]?([A-Z])[)\].:] ([^\n()\[\]]{1,60}?)(?= [(\[]?[A-Z][)\].:] |\n|$)")
_TEXT_ANSWER = re.compile(r"(?i:\b(?:answer is|answer ?:|the (?:correct|right) (?:option|choice|one) is|"
                          r"final answer:?)) "
                          r"([^\n.;!?]{1,60})")
_NOT_WORD = re.compile(r"[^a-z0-9]+")


def _option_text(text: str, listing: str) -> str | None:
    """The letter of the option whose text the conclusion's answer phrase gives ("The answer is 14" where the
    response listed "(C) 14"; v5), when exactly one listed option has that text."""
    answers = list(_TEXT_ANSWER.finditer(text))
    if not answers:
        return None
    said = _NOT_WORD.sub(" ", answers[-1].group(1).lower()).strip()
    options: dict[str, set[str]] = {}
    for m in _LISTED.finditer(listing):
        options.setdefault(_NOT_WORD.sub(" ", m.group(2).lower()).strip(), set()).add(m.group(1))
    letters = options.get(said, set())
    return next(iter(letters)) if said and len(letters) == 1 else None


def read_letter(response: str, listing: str = "") -> tuple[str | None, Status]:
    """(letter, status) of a conclusion under the module's rules: `hedged` when its markers or the letters it
    offers as possible disagree (rules 6 and 8), `no_answer` when it gives none. `listing`: the text where the
    response may have listed the options (its reasoning), for rule 9."""
    text = normalise_text(response)
    marks = _markers(text)
    supposed = any(letter == "" for _, letter in marks)
    marks = [mk for mk in marks if mk[1] != ""]
    if marks:
        offered = {letter for _, letter in _offered(text)} if _MAYBE.search(text) else set()
        letters = {letter for _, letter in marks if letter is not None} | offered
        if len(letters) > 1:
            return None, "hedged"  # rule 8: the conclusion puts forward two letters
        last = max(marks, key=lambda mk: mk[0])[1]
        return (last, "ok") if last is not None else (None, "hedged")  # None: alternatives offered (rule 6)
    if supposed:
        return None, "no_answer"  # the only answer-like phrase is a supposition or a reported claim
    lone = _lone_last_line(text)
    if lone is not None:
        return lone, "ok"
    parens = set(_PAREN.findall(text))
    if len(parens) == 1:
        return parens.pop(), "ok"
    mapped = _option_text(text, normalise_text(listing) + "\n" + text)
    return (mapped, "ok") if mapped is not None else (None, "no_answer")


def extract_letter(response: str) -> str | None:
    """The answer letter of `response` under the module's final-answer rules; None when there is none."""
    return read_letter(response)[0]


# the family's own final-answer statements for the conclusion reader: a letter then its verdict ("C is correct.",
# "(C) is the correct answer"), found from the verdict (a literal, so the scan skips to it) on the lower-cased text
_VERDICT_WORDS = re.compile(r" (?:is|must be) (?:the )?(?:correct|right)(?: answer| option)?(?=[.!\n]|$)")
_LETTER_BEFORE = re.compile(r"(?:^|(?<=[^a-z0-9']))\(?[a-j]\)?$")


def concluding_verdicts(low: str) -> list[int]:
    """Start offsets of "C is correct." / "(C) is the correct answer" in lower-cased `low`."""
    if "correct" not in low and "right" not in low:
        return []
    out = []
    for m in _VERDICT_WORDS.finditer(low):
        letter = _LETTER_BEFORE.search(low, max(0, m.start() - 3), m.start())
        if letter:
            out.append(letter.start())
    return out


# the regex graders take < 50 ms on any 20,000-character string (benchmarks/grading_throughput.py), so their
# budget only guards against a defect
@register_grader("multiple_choice", version=GRADER_VERSION, budget_s=2.0, takes_options=True,
                 markers=concluding_verdicts)
def grade_multiple_choice(c: Conclusion, gold: str, n_options: int | None = None) -> GradeResult:
    allowed = letter_set(n_options)
    g = normalise_gold(gold, n_options)
    if g is None:
        return GradeResult(0.0, None, "error")  # bad gold is a data bug, surfaced by the status
    if not c.ok:
        return c.refused()
    pred, status = read_letter(c.text, c.reasoning)
    if pred is None:
        return GradeResult(0.0, None, status)
    return GradeResult(1.0 if (pred == g and pred in allowed) else 0.0, pred, "ok")
