"""Grading throughput: items/s per grader on 6,194 synthetic answers (the db12 item count).

Math runs math-verify in a spawn process pool with a parent-enforced timeout; the table compares
2 processes with 1 process (same pool code: the baseline measured in this run) and with the
in-process floor (no pool, no timeout). Multiple-choice and K&K graders are regex-only and run
in-process. Prints a table and the 2-process/1-process ratio; asserts nothing about time.
"""

from __future__ import annotations

import random
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from rich.console import Console  # noqa: E402
from rich.table import Table  # noqa: E402

from evaluation.graders import grade_batch  # noqa: E402
from evaluation.graders.math import MathPool  # noqa: E402

N = 6194
NAMES = ["Alice", "Bob", "Carol", "Dave", "Erin", "Frank", "Gina", "Hank"]


def math_items(rng: random.Random) -> tuple[list[str], list[str]]:
    resp, gold = [], []
    for i in range(N):
        a, b = rng.randint(1, 99), rng.randint(2, 99)
        kind = i % 4
        if kind == 0:
            resp.append(f"Adding gives {a + b}. The answer is \\boxed{{{a + b}}}."); gold.append(str(a + b))
        elif kind == 1:  # equivalent rewrite
            resp.append(f"So the ratio is $\\boxed{{\\dfrac{{{2 * a}}}{{{2 * b}}}}}$."); gold.append(f"\\frac{{{a}}}{{{b}}}")
        elif kind == 2:  # wrong
            resp.append(f"The answer is \\boxed{{{a * b + 1}}}"); gold.append(str(a * b))
        else:  # no answer
            resp.append("I am not sure how to finish this one."); gold.append(str(a))
    return resp, gold


def mc_items(rng: random.Random) -> tuple[list[str], list[str]]:
    styles = ["The answer is: ({})", "\\boxed{{{}}}", "Answer: {}. I think so.", "Final answer: ({})",
              "The answer is {}. A careful check agrees."]
    resp, gold = [], []
    for i in range(N):
        g = "ABCDEFGHIJ"[rng.randrange(10)]
        p = g if i % 3 else "ABCDEFGHIJ"[rng.randrange(10)]
        resp.append("Let me think step by step about each option.\n" + styles[i % len(styles)].format(p))
        gold.append(g)
    return resp, gold


def kk_items(rng: random.Random) -> tuple[list[str], list[str]]:
    resp, gold = [], []
    for i in range(N):
        names = rng.sample(NAMES, rng.randint(2, 8))
        roles = [rng.choice(["knight", "knave"]) for _ in names]
        gold.append(", and ".join(f"{n} is a {r}" for n, r in zip(names, roles)) + ".")
        said = roles if i % 2 else [rng.choice(["knight", "knave"]) for _ in names]
        body = "\n".join(f"**{n}**: {r}" if i % 3 == 0 else f"{n} is a {r}." for n, r in zip(names, said))
        resp.append(f"Suppose {names[0]} is a knave. That leads to a contradiction.\n\nFinal answer:\n{body}")
    return resp, gold


def timed(fn) -> tuple[float, list]:
    t = time.perf_counter()
    out = fn()
    return time.perf_counter() - t, out


def main() -> None:
    rng = random.Random(0)
    console = Console(width=140)
    table = Table(title=f"grading throughput, {N} synthetic answers per grader")
    for c in ("grader", "mode", "seconds", "items/s", "ok/no_answer/timeout/error", "mean score"):
        table.add_column(c, justify="left" if c in ("grader", "mode") else "right")

    def row(grader: str, mode: str, secs: float, res: list) -> None:
        st = [sum(r.status == s for r in res) for s in ("ok", "no_answer", "timeout", "error")]
        table.add_row(grader, mode, f"{secs:.2f}", f"{len(res) / secs:,.0f}", "/".join(map(str, st)),
                      f"{sum(r.score for r in res) / len(res):.3f}")

    resp, gold = math_items(rng)
    rates = {}
    for procs in (1, 2):
        pool = MathPool(procs)
        pool.grade(resp[:4], gold[:4])  # start and warm the workers outside the timing
        secs, res = timed(lambda: pool.grade(resp, gold, timeout_s=5.0))
        pool.close()
        rates[procs] = N / secs
        row("math", f"pool, {procs} process{'es' if procs > 1 else ''}", secs, res)
    secs, res = timed(lambda: grade_batch("math", resp, gold, processes=0))
    row("math", "in-process floor (no timeout)", secs, res)
    for grader, make, kw in (("multiple_choice", mc_items, {"n_options": 10}), ("knights_knaves", kk_items, {})):
        r, g = make(rng)
        secs, res = timed(lambda: grade_batch(grader, r, g, **kw))
        row(grader, "in-process (regex)", secs, res)
    console.print(table)
    console.print(f"math: 2 processes vs 1 process = [bold]{rates[2] / rates[1]:.2f}x[/bold] "
                  f"({rates[2]:,.0f} vs {rates[1]:,.0f} items/s)")


if __name__ == "__main__":
    main()
