"""Hypothesis strategies that build, from a gold answer, responses a grader must NOT credit (exploits) and
responses it MUST credit (equivalent forms), one strategy per class and family.

Why generated rather than hand-written: the hand-written corpus (tests/evaluation/adversarial_corpus.yaml) is
written by the people who wrote the graders; a strategy varies wording, order, markup and values, so a hole in a
rule shows up as a class with a non-zero rate. Each strategy draws `Case(response, gold, n_options)`; the class
says whether credit is expected. Importable without pytest (hypothesis is a runtime dependency).
"""

from __future__ import annotations

from dataclasses import dataclass

from hypothesis import strategies as st

FAMILIES = ("math", "multiple_choice", "knights_knaves", "zebra_logic")
GRADER_OF = {"math": "math", "multiple_choice": "multiple_choice", "knights_knaves": "knights_knaves",
             "zebra_logic": "multiple_choice"}  # zebra_logic_mc is graded by the multiple-choice grader


@dataclass(frozen=True)
class Case:
    response: str
    gold: str
    n_options: int | None = None


# ---------------------------------------------------------------- shared pieces

REASONING = st.sampled_from(["Let me work through this carefully.", "First, restate the problem.",
                             "We check each condition in turn.", "Step 1: set up the equations.", ""])
# look-alike characters: Cyrillic/Greek letters and a digit-like letter that render like the Latin ones
LOOKALIKE_LETTER = {"A": "А", "B": "В", "C": "С", "E": "Е", "H": "Н"}
LOOKALIKE_DIGIT = {"0": "О", "1": "l", "3": "З"}
CUT = 400  # characters kept of a response cut at the generation limit


def _pad(reason: str, n: int) -> str:
    return (reason + " ") * n


# ---------------------------------------------------------------- math

INTS = st.integers(2, 999)


def _other(v: int, d: int) -> int:
    return v + d if d else v + 1


math_deny = {
    "several_finals": st.builds(lambda v, d, r, s: Case(f"{r} {s.format(v, _other(v, d))}", str(v)),
                                INTS, st.integers(1, 50), REASONING,
                                st.sampled_from(["\\boxed{{{}}} and \\boxed{{{}}}", "$\\boxed{{{}}}$, $\\boxed{{{}}}$",
                                                 "\\boxed{{{}}}, although \\boxed{{{}}} is also possible",
                                                 "So \\boxed{{{}}}. Hence \\boxed{{{}}}."])),
    "candidate_list": st.builds(lambda v, d, s: Case(s.format(v, _other(v, d)), str(v)), INTS, st.integers(1, 50),
                                st.sampled_from(["\\boxed{{{} \\text{{ or }} {}}}", "The answer is {} or {}.",
                                                 "$\\boxed{{{}}}$ or $\\boxed{{{}}}$", "\\boxed{{{}, {}}}"])),
    "answer_then_contradiction": st.builds(
        lambda v, d, s: Case(s.format(v, _other(v, d)), str(v)), INTS, st.integers(1, 50),
        st.sampled_from(["\\boxed{{{}}}. Wait, let me recheck: the correct value is {}.",
                         "The answer is \\boxed{{{}}}. Actually no, it is {}.",
                         "The answer is {}. Actually no, it is {}.",
                         "The answer is {}. Actually no, it is \\boxed{{{}}}.",
                         "\\boxed{{{}}}\n\nHmm, correction: the answer is {}."])),
    "format_only": st.builds(lambda v, s: Case(s, str(v)), INTS,
                             st.sampled_from(["\\boxed{}", "The answer is \\boxed{answer}.",
                                              "Final answer: $\\boxed{\\quad}$",
                                              "The final answer is", ""])),
    "past_generation_limit": st.builds(lambda v, r: Case((_pad(r or "Reasoning.", 80) + f"\\boxed{{{v}}}")[:CUT] +
                                                         f"The answer is \\boxed{{{v}"[:-1], str(v)), INTS, REASONING),
    "lookalike_unicode": st.builds(
        lambda ds, s: Case(s.format("".join(LOOKALIKE_DIGIT[c] for c in ds)), str(int(ds))),
        st.text(alphabet="013", min_size=2, max_size=3).filter(lambda x: x[0] != "0"),
        st.sampled_from(["\\boxed{{{}}}", "The answer is {}."])),
}
math_credit = {
    "latex_variants": st.builds(lambda a, b, s: Case(s.format(a=a, b=b), f"\\frac{{{a}}}{{{b}}}"),
                                st.integers(1, 9), st.integers(11, 19),
                                st.sampled_from(["\\boxed{{\\dfrac{{{a}}}{{{b}}}}}", "\\boxed{{\\tfrac{{{a}}}{{{b}}}}}",
                                                 "\\boxed{{{a}/{b}}}", "$\\boxed{{\\frac{{{a}}}{{{b}}}}}$"])),
    "fraction_decimal": st.builds(lambda n, s: Case(s.format(n / 4), f"\\frac{{{n}}}{{4}}"),
                                  st.integers(1, 39).filter(lambda n: n % 2), st.sampled_from(["\\boxed{{{}}}",
                                                                                           "The answer is {}."])),
    "markdown": st.builds(lambda v, w: Case(f"{w}The answer is $\\boxed{{{v}}}${w[::-1]}", str(v)), INTS,
                          st.sampled_from(["**", "__", "\n\n", "### ", ""])),
    "agreeing_restatement": st.builds(lambda v, s: Case(s.format(v), str(v)), INTS,
                                      st.sampled_from(["\\boxed{{{0}}}. So the answer is {0}.",
                                                       "The answer is {0}. Final answer: \\boxed{{{0}}}"])),
    "unit_with_exponent": st.builds(lambda v, u: Case(f"\\boxed{{{v}\\text{{ {u}}}^2}}", str(v)), INTS,
                                    st.sampled_from(["m", "cm", "km", "ft"])),
    "repeating_decimal": st.builds(lambda d: Case(f"\\boxed{{0.\\overline{{{d}}}}}", f"\\frac{{{d}}}{{9}}"),
                                   st.integers(1, 8)),
    "inequality_union": st.builds(lambda a, b, s: Case(s.format(a=-a, b=b), f"(-\\infty,{-a})\\cup({b},\\infty)"),
                                  st.integers(1, 9), st.integers(1, 9),
                                  st.sampled_from(["The solution set is $x<{a}$ or $x>{b}$.",
                                                   "The answer is x < {a} or x > {b}"])),
}

# ---------------------------------------------------------------- multiple choice (and zebra)


def _letters(n: int) -> str:
    return "ABCDEFGHIJ"[:n]


def _mc(n_lo: int, n_hi: int) -> st.SearchStrategy[tuple[int, int, int]]:
    """(n_options, gold index, another index)."""
    return st.integers(n_lo, n_hi).flatmap(
        lambda n: st.tuples(st.just(n), st.integers(0, n - 1), st.integers(1, n - 1)).map(
            lambda t: (t[0], t[1], (t[1] + t[2]) % t[0])))


def _mc_family(n_lo: int, n_hi: int, label: str) -> tuple[dict, dict]:
    """The deny and credit classes of a letter family; `label` is what the options name ("option", "house")."""
    base = _mc(n_lo, n_hi)

    def case(fmt: str):
        return lambda t: Case(fmt.format(g=_letters(t[0])[t[1]], o=_letters(t[0])[t[2]], label=label),
                              _letters(t[0])[t[1]], t[0])

    def pick(*fmts: str):
        return st.sampled_from(fmts).flatmap(lambda f: base.map(case(f)))

    deny = {
        "several_finals": pick("The answer is ({g}). Final answer: ({o})", "\\boxed{{{g}}} ... \\boxed{{{o}}}",
                               "Answer: {g}\nAnswer: {o}"),
        "candidate_list": pick("Answer: {g}, {o}", "The answer is {g} or {o}.", "\\boxed{{{g}/{o}}}",
                               "Answer: ({g}) and ({o})"),
        "every_option": st.sampled_from(range(len(_LISTINGS))).flatmap(lambda k: base.map(lambda t: Case(
            _every_option(t[0], k), _letters(t[0])[t[1]], t[0]))),
        # a retraction then the gold is a reflection (issue 49: credited, evaluation/grader_audit/reasoning.py)
        "answer_then_contradiction": pick("The answer is ({g}). Wait, no. The answer is ({o}).",
                                          "\\boxed{{{g}}}. Actually no, it is {o}.", "Answer: {g}\nCorrection: {o}"),
        "supposition_only": pick("If the answer is {g}, then the {label} count is wrong.",
                                 "Suppose the answer is ({g}); we check it next."),
        "quoted_claim": pick("Bob says the answer is {g}.", "The hint claims the answer is ({g}), which I doubt."),
        "format_only": pick("Answer:", "The answer is ( ).", "\\boxed{{}}", "Final answer: [letter]"),
        "past_generation_limit": base.map(lambda t: Case((_pad("Checking each " + label + ".", 60))[:CUT]
                                                         + "The answer is (", _letters(t[0])[t[1]], t[0])),
        "lookalike_unicode": st.sampled_from(sorted(LOOKALIKE_LETTER)).flatmap(lambda g: st.sampled_from(
            ["The answer is ({}).", "Answer: {}", "\\boxed{{{}}}"]).map(
            lambda f: Case(f.format(LOOKALIKE_LETTER[g]), g, max(n_lo, "ABCDEFGHIJ".index(g) + 1)))),
    }
    credit = {
        "case": pick("THE ANSWER IS ({g}).", "final answer: {g}"),
        "markdown": pick("**Answer: {g}**", "The answer is **({g})**", "__Final answer:__ `{g}`",
                         "The answer is $\\boxed{{\\text{{{g}}}}}$"),
        "latex_variants": pick("The answer is \\({g}\\).", "Therefore \\boxed{{\\mathrm{{{g}}}}}",
                               "The correct option is \\(\\text{{({g})}}\\)."),
        "agreeing_restatement": pick("The answer is ({g}). To restate: the answer is ({g}).",
                                     "\\boxed{{{g}}}. So the final answer is {g}."),
        "verdict_after_letter": pick("Option {g} is correct.", "{g} is the correct answer.",
                                     "The answer is not {o}; it is {g}."),
        "lowercase": base.filter(lambda t: _letters(t[0])[t[1]] not in "AI").map(
            lambda t: Case(f"after all that, the answer is {_letters(t[0])[t[1]].lower()}", _letters(t[0])[t[1]],
                           t[0])),
    }
    return deny, credit


_LISTINGS = ("The answer is {paren_or}.", "Answer: {spaced}", "Answer: {commas}", "\\boxed{{{commas}}}")


def _every_option(n: int, style: int) -> str:
    """Every option enumerated as the answer: "(A), (B), (C), or (D)", "A B C D", "A, B, C, D", boxed."""
    letters = _letters(n)
    paren_or = ", ".join(f"({c})" for c in letters[:-1]) + f", or ({letters[-1]})"
    return _LISTINGS[style].format(paren_or=paren_or, spaced=" ".join(letters), commas=", ".join(letters))


mc_deny, mc_credit = _mc_family(4, 10, "option")
zebra_deny, zebra_credit = _mc_family(3, 6, "house")

# ---------------------------------------------------------------- knights & knaves

NAMES = ("Michael", "Ethan", "Zoey", "Sofia", "Noah", "Emma", "Liam", "Ava")
ROLE_SET = ("knight", "knave")
_FLIP = {"knight": "knave", "knave": "knight"}


def _world() -> st.SearchStrategy[list[tuple[str, str]]]:
    return st.integers(2, 5).flatmap(lambda k: st.permutations(NAMES).map(lambda p: list(p[:k]))).flatmap(
        lambda names: st.lists(st.sampled_from(ROLE_SET), min_size=len(names), max_size=len(names)).map(
            lambda roles: list(zip(names, roles, strict=True))))


def _gold(w: list[tuple[str, str]]) -> str:
    return ", ".join(f"{n} is a {r}" for n, r in w) + "."


def _say(w: list[tuple[str, str]]) -> str:
    return ", ".join(f"{n} is a {r}" for n, r in w)


def _flip_one(w: list[tuple[str, str]], i: int) -> list[tuple[str, str]]:
    return [(n, _FLIP[r] if k == i % len(w) else r) for k, (n, r) in enumerate(w)]


def _kk(fn) -> st.SearchStrategy[Case]:
    return st.tuples(_world(), st.integers(0, 7), REASONING).map(lambda t: Case(fn(*t), _gold(t[0])))


kk_deny = {
    "several_finals": _kk(lambda w, i, r: f"{r} Final answer: {_say(w)}. Final answer: {_say(_flip_one(w, i))}."),
    "candidate_list": _kk(lambda w, i, r: f"Two assignments are consistent: (1) {_say(w)}. "
                          f"(2) {_say(_flip_one(w, i))}."),
    "every_option": _kk(lambda w, i, r: f"Either {_say(w)}, or {_say(_flip_one(w, i))}."),
    "answer_then_contradiction": _kk(lambda w, i, r: f"{_say(w)}. But wait, {w[i % len(w)][0]} is actually a "
                                                     f"{_FLIP[w[i % len(w)][1]]}."),
    "correction_after_block": _kk(lambda w, i, r: f"<answer>{_say(w)}</answer>\nCorrection: {w[i % len(w)][0]} is a "
                                                  f"{_FLIP[w[i % len(w)][1]]}."),
    "supposition_only": _kk(lambda w, i, r: " ".join(f"Suppose {n} is a {ro}." for n, ro in w)),
    "quoted_claim": _kk(lambda w, i, r: f"{w[0][0]} says " + " and ".join(f"{n} is a {ro}" for n, ro in w) + "."),
    "format_only": _kk(lambda w, i, r: "<answer></answer>" if i % 2 else "Final answer: " + ", ".join(
        f"{n} is a ___" for n, _ in w)),
    "past_generation_limit": _kk(lambda w, i, r: (_pad("Checking each statement.", 40))[:CUT] + "<answer>"
                                 + _say(w[:-1]) + f", {w[-1][0]} is a"),
    "lookalike_unicode": _kk(lambda w, i, r: ", ".join(f"{n} is a {ro.replace('i', 'і').replace('a', 'а')}"
                                                       for n, ro in w) + "."),
}
kk_credit = {
    "reordered": _kk(lambda w, i, r: ". ".join(f"{n} is a {ro}" for n, ro in reversed(w)) + "."),
    "case": _kk(lambda w, i, r: ", ".join(f"{n.upper()} is a {ro.capitalize()}" for n, ro in w) + "."),
    "markdown": _kk(lambda w, i, r: "\n".join(f"- **{n}**: {ro}" for n, ro in w)),
    "markdown_table": _kk(lambda w, i, r: "| Person | Role |\n|---|---|\n" + "\n".join(f"| {n} | {ro.capitalize()} |"
                                                                                           for n, ro in w)),
    "column_table": _kk(lambda w, i, r: "| " + " | ".join(n for n, _ in w) + " |\n|" + "---|" * len(w) + "\n| "
                        + " | ".join(ro.capitalize() for _, ro in w) + " |"),
    "agreeing_restatement": _kk(lambda w, i, r: f"<answer>{_say(w)}</answer>\nSo {w[0][0]} is a {w[0][1]}, as stated."),
    "negation": _kk(lambda w, i, r: ", ".join(f"{n} is not a {_FLIP[ro]}" for n, ro in w) + "."),
    "all_except": st.tuples(st.integers(3, 5), st.sampled_from(ROLE_SET)).map(lambda t: Case(
        f"All except {NAMES[0]} are {t[1]}s.", _gold([(NAMES[0], _FLIP[t[1]])] + [(n, t[1]) for n in NAMES[1:t[0]]]))),
    "neither_nor": st.sampled_from(ROLE_SET).map(lambda ro: Case(
        f"Neither {NAMES[0]} nor {NAMES[1]} is a {_FLIP[ro]}, and {NAMES[2]} is a {ro}.",
        _gold([(NAMES[0], ro), (NAMES[1], ro), (NAMES[2], ro)]))),
}

# family -> {"deny"|"credit": {class: strategy}}
CLASSES: dict[str, dict[str, dict[str, st.SearchStrategy[Case]]]] = {
    "math": {"deny": math_deny, "credit": math_credit},
    "multiple_choice": {"deny": mc_deny, "credit": mc_credit},
    "knights_knaves": {"deny": kk_deny, "credit": kk_credit},
    "zebra_logic": {"deny": zebra_deny, "credit": zebra_credit},
}

__all__ = ["CLASSES", "Case", "FAMILIES", "GRADER_OF"]
