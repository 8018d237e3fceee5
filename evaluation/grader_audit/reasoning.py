"""Reasoning-style strategies (issue 49): reflections a grader must credit and hedges or non-answers it must not.

A *reflection* puts forward an interim answer (a stated, boxed or final-answer-marked value, letter or
assignment), retracts it in one of many wordings ("Wait", "Hmm, on second thought", "No, that's wrong", "That
doesn't work"), and commits to one final answer; with and without a `<think>` block. A *hedge* commits to an
answer and then, in its conclusion, offers another as possible ("though it could be 14", "(A) might also be
correct", "Actually, I think C", "Zoey could be a knave"), in both orders, so the gold is sometimes first and
sometimes last. A *non-answer* ends inside an unclosed reasoning block or writes nothing after it. Every class is a
generator over wordings, values and wrappers, never one literal.
"""

from __future__ import annotations

from hypothesis import strategies as st

from evaluation.grader_audit.strategies import INTS, Case, _flip_one, _gold, _letters, _mc, _say, _world

RETRACT = st.sampled_from(["Wait, ", "Hmm, wait. ", "Actually, no. ", "Hold on, ", "But wait, ", "Let me recheck. ",
                           "No, that's wrong. ", "Oops, ", "Hmm, on second thought, ", "Wait, no — "])
WHY = st.sampled_from(["I forgot the 3 loose marbles.", "every handshake is counted twice.",
                       "I made an arithmetic error in the second step.", "that doesn't work with the last condition.",
                       "let me recount the cases.", "the units do not match.", ""])
THINK = st.booleans()
LEAD = st.sampled_from(["Let me work through this.", "First, set up the problem.", "Okay, so we need to check.", ""])


def _wrap(think: bool, lead: str, interim: str, retract: str, why: str, final: str) -> str:
    """A reflection: interim answer, retraction, final answer; the first three inside `<think>` when `think`."""
    reasoning = f"{lead} {interim} {retract}{why}".strip()
    return f"<think>\n{reasoning}\n</think>\n\n{final}" if think else f"{reasoning}\n\n{final}"


def _reflection(interims: list[str], finals: list[str], values) -> st.SearchStrategy[Case]:
    """Reflections over every (interim wording, final wording, retraction, reason, think) with `values` drawing
    (format kwargs, gold, n_options)."""
    return st.tuples(st.sampled_from(interims), st.sampled_from(finals), RETRACT, WHY, THINK, LEAD, values).map(
        lambda t: Case(_wrap(t[4], t[5], t[0].format(**t[6][0]), t[2], t[3], t[1].format(**t[6][0])), t[6][1],
                       t[6][2]))


def _hedge(forms: list[str], values, think: st.SearchStrategy[bool] = THINK) -> st.SearchStrategy[Case]:
    """Hedges in both orders: `forms` take {a} (the committed answer) and {b} (the one offered as possible)."""
    def build(t):
        form, (kw, gold, n), swap, th, lead = t
        a, b = (kw["o"], kw["g"]) if swap else (kw["g"], kw["o"])
        body = form.format(a=a, b=b)
        return Case(f"<think>{lead}</think>\n{body}" if th else f"{lead}\n{body}", gold, n)
    return st.tuples(st.sampled_from(forms), values, st.booleans(), think, LEAD).map(build)


def _unclosed(finals: list[str], values) -> st.SearchStrategy[Case]:
    """The answer only inside a reasoning block never closed, or before an empty `</think>`."""
    def build(t):
        form, (kw, gold, n), closed, tail = t
        inside = f"<think>\nLet me compute. {form.format(**kw)}"
        return Case(inside + ("\n</think>" + tail if closed else tail), gold, n)
    return st.tuples(st.sampled_from(finals), values, st.booleans(), st.sampled_from(["", "\n", "  \n\n"])).map(build)


# ---------------------------------------------------------------- math
_MATH_VALUES = st.tuples(INTS, st.integers(1, 40)).map(lambda t: ({"g": t[0], "o": t[0] + t[1]}, str(t[0]), None))
_MATH_INTERIM = ["So the answer is {o}.", "The answer is \\boxed{{{o}}}.", "**Final Answer** \\boxed{{{o}}}",
                 "Final answer: {o}.", "So the total is {o}.", "That gives $\\boxed{{{o}}}$."]
_MATH_FINAL = ["So the answer is \\boxed{{{g}}}.", "**Final Answer**\n\\boxed{{{g}}}", "The final answer is {g}.",
               "Answer: {g}", "Therefore, the correct value is $\\boxed{{{g}}}$.", "\\boxed{{{g}}}"]
math_reflect = {"reflection": _reflection(_MATH_INTERIM, _MATH_FINAL, _MATH_VALUES)}
math_hedge = {
    "hedge_in_conclusion": _hedge(["The answer is {a}, though it could be {b}.", "\\boxed{{{a}}}. Actually, I think "
                                   "it might be {b}.", "\\boxed{{{a}}} (or possibly {b})", "The answer is {a}. It "
                                   "might also be {b}.", "\\boxed{{{a}}} or \\boxed{{{b}}}", "Final answer: {a}. "
                                   "Maybe {b}.", "**Final Answer** \\boxed{{{a}}}\n\\boxed{{{b}}}"], _MATH_VALUES),
    "unclosed_reasoning": _unclosed(["So the answer is \\boxed{{{g}}}.", "The final answer is {g}.", "{g}"],
                                    _MATH_VALUES),
}

# ---------------------------------------------------------------- multiple choice (and zebra)


def _mc_values(lo: int, hi: int):
    return _mc(lo, hi).map(lambda t: ({"g": _letters(t[0])[t[1]], "o": _letters(t[0])[t[2]]}, _letters(t[0])[t[1]],
                                      t[0]))


_MC_INTERIM = ["so the answer is ({o}).", "\\boxed{{{o}}}", "Answer: {o}", "**Final Answer:** ({o})",
               "Option {o} is correct."]
_MC_FINAL = ["The answer is ({g}).", "\\boxed{{{g}}}", "Final answer: {g}", "**Answer: {g}**", "Option {g} is correct.",
             "The correct option is ({g})."]
_MC_HEDGES = ["\\boxed{{{a}}}. Actually, I think {b}.", "The answer is ({a}). ({b}) might also be correct.",
              "Answer: {a}, though it could be {b}.", "The answer is ({a}) or possibly ({b}).",
              "Final answer: {a}. {b} is also plausible.", "\\boxed{{{a}}}. Hmm, I think it's {b}."]


def _mc_reasoning(lo: int, hi: int) -> tuple[dict, dict]:
    values = _mc_values(lo, hi)
    return ({"reflection": _reflection(_MC_INTERIM, _MC_FINAL, values)},
            {"hedge_in_conclusion": _hedge(_MC_HEDGES, values),
             "unclosed_reasoning": _unclosed(["The answer is ({g}).", "\\boxed{{{g}}}", "({g})"], values)})


mc_reflect, mc_hedge = _mc_reasoning(4, 10)
zebra_reflect, zebra_hedge = _mc_reasoning(3, 6)

# ---------------------------------------------------------------- knights & knaves
_KK_VALUES = st.tuples(_world(), st.integers(0, 7)).map(
    lambda t: ({"g": _say(t[0]), "o": _say(_flip_one(t[0], t[1])), "name": t[0][t[1] % len(t[0])][0],
                "flip": {"knight": "knave", "knave": "knight"}[t[0][t[1] % len(t[0])][1]]}, _gold(t[0]), None))
_KK_INTERIM = ["So {o}.", "Final answer: {o}.", "<answer>{o}</answer>", "This gives {o}."]
_KK_RETRACT = st.sampled_from(["That doesn't work: ", "Wait, that contradicts the statements: ",
                               "Hmm, but then ", "No, that's wrong: ", "But wait, this is inconsistent: "])
_KK_FINAL = ["So {g}.", "Final answer: {g}.", "<answer>{g}</answer>", "**Final Answer:** {g}."]
kk_reflect = {"reflection": st.tuples(st.sampled_from(_KK_INTERIM), st.sampled_from(_KK_FINAL), _KK_RETRACT,
                                      st.sampled_from(["someone's claim would be both true and false.",
                                                       "the second statement fails.", ""]), THINK, LEAD,
                                      _KK_VALUES).map(
    lambda t: Case(_wrap(t[4], t[5], t[0].format(**t[6][0]), t[2], t[3], t[1].format(**t[6][0])), t[6][1]))}
kk_hedge = {
    "hedge_in_conclusion": st.tuples(st.sampled_from([
        "Final answer: {g}. Though {name} could be a {flip}.", "<answer>{g}</answer>\n{name} might also be a {flip}.",
        "So {g}. Alternatively, {name} is a {flip}.", "Final answer: {g}, or maybe {name} is a {flip}."]),
        _KK_VALUES, THINK).map(lambda t: Case(("<think>Checking.</think>\n" if t[2] else "") + t[0].format(**t[1][0]),
                                              t[1][1])),
    "unclosed_reasoning": _unclosed(["So {g}.", "<answer>{g}</answer>"], _KK_VALUES),
}

# family -> (reflection classes that must be credited, hedge / non-answer classes that must not)
REASONING: dict[str, tuple[dict[str, st.SearchStrategy[Case]], dict[str, st.SearchStrategy[Case]]]] = {
    "math": (math_reflect, math_hedge),
    "multiple_choice": (mc_reflect, mc_hedge),
    "knights_knaves": (kk_reflect, kk_hedge),
    "zebra_logic": (zebra_reflect, zebra_hedge),
}

__all__ = ["REASONING"]
