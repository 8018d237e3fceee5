"""One prompt template per domain and the answer format the training reward teaches.

The study lost a campaign because training taught `Answer:` while the math benchmarks read
`\\boxed{}` (STUDY.md L1). Prompts, the rendered gold answer used by `campaign calibrate`, and the
graders are defined together here so they share the answer format by construction.
"""

from __future__ import annotations

import string

MATH_INSTRUCTION = "Please reason step by step, and put your final answer within \\boxed{}."
KK_INSTRUCTION = (
    "Please reason step by step, and finish with one statement per person of the form "
    "\"X is a knight\" or \"X is a knave\"."
)


def mc_instruction(n_options: int) -> str:
    letters = string.ascii_uppercase[:n_options]
    return (f"Please reason step by step, and finish with \"The answer is: (X)\" where X is one letter "
            f"out of {', '.join(letters)}.")


def math_prompt(problem: str) -> str:
    return f"{problem.strip()}\n\n{MATH_INSTRUCTION}"


def kk_prompt(puzzle: str) -> str:
    return f"{puzzle.strip()}\n\n{KK_INSTRUCTION}"


def mc_prompt(question: str, options: list[str] | dict[str, str]) -> str:
    """Question, blank line, `A. option` lines, blank line, instruction. A dict keeps gapped letters."""
    items = options.items() if isinstance(options, dict) else zip(string.ascii_uppercase, options, strict=False)
    pairs = list(items)
    lines = "\n".join(f"{k}. {v}" for k, v in pairs)
    n = string.ascii_uppercase.index(pairs[-1][0]) + 1
    return f"{question.strip()}\n\n{lines}\n\n{mc_instruction(n)}"


def render_gold(grader: str, gold: str) -> str:
    """The gold answer written in the format training rewards; graded, it must score 1 (calibrate)."""
    if grader == "math":
        return f"Let me work it out. The answer is \\boxed{{{gold}}}."
    if grader == "multiple_choice":
        return f"Checking each option. The answer is: ({gold.strip().strip('()')})"
    if grader == "knights_knaves":
        return f"Working through the statements. {gold.strip()}"
    raise ValueError(f"unknown grader {grader!r}")
