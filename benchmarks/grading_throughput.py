"""Grading throughput: items/s per grader on 6,194 synthetic answers (the db12 item count), and the worst case.

Math runs math-verify in a spawn process pool with a parent-enforced timeout; the table compares
2 processes with 1 process (same pool code: the baseline measured in this run) and with the
in-process floor (no pool, no timeout). Multiple-choice and K&K graders are regex-only and run
in-process. Prints a table and the 2-process/1-process ratio; asserts nothing about time.

Worst case (issue 13): the slowest of `--worst-n` (default 10,000) random and adversarial strings of up to
20,000 characters per grader, in ms, with its ratio to the target: 50 ms for the multiple-choice and K&K
extraction (in-process, no pool, so the figure is the grader's own cost; CPU time, with the wall time beside
it, because a shared machine inflates wall time), and the math grader's budget
(`evaluation.graders.BUDGET_S["math"]`) for one call through the budgeted pool (a timeout returns at the
budget; the pool's restart after it is done before the next timed call). `--math-worst-n` can lower the math
count on a loaded machine (math-verify takes ~10-50 ms per long string); the table prints the count used.

Side by side (issue 49): `--baseline DIR` measures the in-process floor (items/s per grader, no pool, the
grader's own cost) on the same items with the code of this tree and with the code of the tree at DIR (an older
commit, e.g. `git worktree add DIR b653ab6` or `git archive b653ab6 | tar -x -C DIR`), each in its own process,
and prints both with their ratio: the reasoning-style mix (a `<think>` block or a retracted interim answer before
the final one) beside the plain mix. CPU time, 3 passes per run and 2 runs per tree alternated, the fastest kept
(a shared machine's load only slows a pass).
"""

from __future__ import annotations

import argparse
import random
import string
import sys
import time
from functools import partial
from pathlib import Path

# `--root DIR` (used by --baseline) imports the graders of another tree; read before the imports below
sys.path.insert(0, sys.argv[sys.argv.index("--root") + 1] if "--root" in sys.argv
                else str(Path(__file__).resolve().parent.parent))

from rich.console import Console
from rich.table import Table

from evaluation.graders import BUDGET_S, grade_batch
from evaluation.graders.pool import MathPool
from evaluation.graders.pool import GraderPool, grade_inprocess

N = 6194
_ROOT = sys.path[0]  # the tree whose graders were imported
NAMES = ["Alice", "Bob", "Carol", "Dave", "Erin", "Frank", "Gina", "Hank"]


def math_items(rng: random.Random) -> tuple[list[str], list[str]]:
    resp, gold = [], []
    for i in range(N):
        a, b = rng.randint(1, 99), rng.randint(2, 99)
        kind = i % 4
        if kind == 0:
            resp.append(f"Adding gives {a + b}. The answer is \\boxed{{{a + b}}}.")
            gold.append(str(a + b))
        elif kind == 1:  # equivalent rewrite
            resp.append(f"So the ratio is $\\boxed{{\\dfrac{{{2 * a}}}{{{2 * b}}}}}$.")
            gold.append(f"\\frac{{{a}}}{{{b}}}")
        elif kind == 2:  # wrong
            resp.append(f"The answer is \\boxed{{{a * b + 1}}}")
            gold.append(str(a * b))
        else:  # no answer
            resp.append("I am not sure how to finish this one.")
            gold.append(str(a))
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
        gold.append(", and ".join(f"{n} is a {r}" for n, r in zip(names, roles, strict=True)) + ".")
        said = roles if i % 2 else [rng.choice(["knight", "knave"]) for _ in names]
        body = "\n".join(f"**{n}**: {r}" if i % 3 == 0 else f"{n} is a {r}." for n, r in zip(names, said, strict=True))
        resp.append(f"Suppose {names[0]} is a knave. That leads to a contradiction.\n\nFinal answer:\n{body}")
    return resp, gold


MAX_CHARS = 20_000
TARGET_MS = {"multiple_choice": 50.0, "knights_knaves": 50.0}
FRAGMENTS = ["The answer", " ", "  ", "\n", "answer", "Answer:", "is", "**", "__", "$", "\\boxed{", "{", "}", "(A)",
             "(B)", "B", "a", "!", "|", "<answer>", "</answer>", "final answer", "the answer is", "\\text{", "%",
             "1,234", "{,}", "^\\circ", "Michael", "Ethan", "Zoey", "is a", "knight", "knave", "knights", "or", "and",
             ",", ":", "-", "→", "9^{", "\\frac{", "x", "=", "1+", "(", ")", ".", "Suppose", "says", "not"]
ADVERSARIAL = [  # known worst cases for backtracking or quadratic scans, padded to the length limit
    lambda n: "The answer" + " " * (n - 11) + "!",
    lambda n: ("| The answer" + " " * 28 + "| 12 |\n") * (n // 48),
    lambda n: "answer is " * (n // 10),
    lambda n: "Answer: " + "(A) " * (n // 4 - 2),
    lambda n: "\\boxed{" * (n // 7),
    lambda n: "{" * n,
    lambda n: "Michael is a " * (n // 13),
    lambda n: "Michael, " * (n // 9 - 2) + "are knights",
    lambda n: "Knights: " + "Michael, " * (n // 9 - 2),
    lambda n: "a knight or " * (n // 12),
    lambda n: "<answer>" * (n // 8),
    lambda n: "1," * (n // 2),
    lambda n: "1,234" * (n // 5),
    lambda n: "$" + "1+" * (n // 2 - 2) + "1$",
    lambda n: "\\boxed{" + "9^{" * (n // 3 - 4) + "9" + "}" * (n // 3 - 4) + "}",
    lambda n: "\\frac{" * (n // 6),
    lambda n: " " * n,
    lambda n: "\n" * n,
    lambda n: "Wait, " * (n // 6),  # issue 49: the conclusion reader's retraction scan
    lambda n: "<think>" * (n // 7),
    lambda n: "the answer is 1. Wait, " * (n // 23),
    lambda n: "</think>" * (n // 8),
]


def worst_case_strings(rng: random.Random, n: int) -> list[tuple[str, str]]:
    """(kind, text) pairs: a third adversarial templates, a third fragment soup, a third random printable text."""
    out: list[tuple[str, str]] = []
    for i in range(n):
        length = rng.choice([MAX_CHARS, rng.randint(1, MAX_CHARS)])
        if i % 3 == 0:
            k = rng.randrange(len(ADVERSARIAL))
            out.append((f"adversarial #{k}", ADVERSARIAL[k](length)[:MAX_CHARS]))
        elif i % 3 == 1:
            parts, size = [], 0
            while size < length:
                f = rng.choice(FRAGMENTS) * rng.choice([1, 1, 1, 5, 50])
                parts.append(f)
                size += len(f)
            out.append(("fragment soup", "".join(parts)[:length]))
        else:
            out.append(("random printable", "".join(rng.choices(string.printable, k=length))))
    return out


def worst_case(strings: list[tuple[str, str]], math_n: int):
    """Yields (grader, n, slowest ms, slowest wall ms, target ms, kind of the slowest, timeouts) per grader.

    MC and K&K: the slowest is CPU time of this process (a machine shared with other jobs inflates wall time,
    reported beside it); math: wall time of one budgeted call, which is what the budget bounds."""
    golds = {"multiple_choice": "B", "knights_knaves": "Michael is a knight, Ethan is a knight, and Zoey is a knave."}
    for grader, gold in golds.items():
        slowest, kind, wall = 0.0, "", 0.0
        for k, text in strings:
            t, w = time.process_time(), time.perf_counter()
            grade_inprocess(grader, text, gold, 4)
            ms = 1000 * (time.process_time() - t)
            wall = max(wall, 1000 * (time.perf_counter() - w))
            if ms > slowest:
                slowest, kind = ms, k
        yield (grader, len(strings), slowest, wall, TARGET_MS[grader], kind, 0)
    pool = GraderPool(1)
    slowest, kind, timeouts = 0.0, "", 0
    try:
        for k, text in strings[:math_n]:
            pool._ensure()  # a restart after a timeout is not part of the next item's time
            t = time.perf_counter()
            res = pool.grade_items("math", [text], ["3"], timeout_s=BUDGET_S["math"])[0]
            ms = 1000 * (time.perf_counter() - t)
            timeouts += res.status == "timeout"
            if ms > slowest:
                slowest, kind = ms, k
    finally:
        pool.close()
    yield ("math", min(math_n, len(strings)), slowest, slowest, 1000 * BUDGET_S["math"], kind, timeouts)


def reasoning_items(rng: random.Random, n: int) -> dict[str, tuple[list[str], list[str]]]:
    """Reasoning-style responses per grader: a ~1,500-character reasoning (half inside `<think>`) with an interim
    answer retracted ("Wait, ...") before the final one."""
    pad = "We check each condition in turn and keep the count. " * 30
    out: dict[str, tuple[list[str], list[str]]] = {}
    for grader, make in (("math", math_items), ("multiple_choice", mc_items), ("knights_knaves", kk_items)):
        resp, gold = make(rng)
        wrapped = []
        for i, r in enumerate(resp[:n]):
            interim = {"math": "So the answer is 7.", "multiple_choice": "So the answer is (A).",
                       "knights_knaves": "So Alice is a knave."}[grader]
            body = f"{pad}{interim} Wait, I made an error."
            wrapped.append(f"<think>{body}</think>\n{r}" if i % 2 else f"{body}\n\n{r}")
        out[grader] = (wrapped, gold[:n])
    return out


def floor_rates(n: int, rounds: int = 3) -> dict[str, float]:
    """In-process items/s per grader and mix (plain, reasoning) on `n` items: the fastest of `rounds` CPU-timed
    passes."""
    rng = random.Random(0)
    plain = {"math": math_items(rng), "multiple_choice": mc_items(rng), "knights_knaves": kk_items(rng)}
    mixes = {"plain": {g: (r[:n], gd[:n]) for g, (r, gd) in plain.items()}, "reasoning": reasoning_items(rng, n)}
    out: dict[str, float] = {}
    for mix, items in mixes.items():
        for grader, (resp, gold) in items.items():
            best = float("inf")
            for _ in range(rounds):
                t = time.process_time()
                for r, gd in zip(resp, gold, strict=True):
                    grade_inprocess(grader, r, gd, 10)
                best = min(best, time.process_time() - t)
            out[f"{grader}/{mix}"] = len(resp) / best
    return out


def side_by_side(baseline: str, n: int, console: Console) -> None:
    """The in-process floor of this tree and of the tree at `baseline`, each in its own process, and the ratio."""
    import json
    import subprocess

    def measure(root: str) -> dict[str, float]:
        done = subprocess.run([sys.executable, str(Path(__file__).resolve()), "--floor-json", "--floor-n", str(n),
                               "--root", root], capture_output=True, text=True, check=True)
        return json.loads(done.stdout.strip().splitlines()[-1])

    # alternated, the best of each kept: a shared machine's load comes and goes, and only ever slows a pass
    before: dict[str, float] = {}
    after: dict[str, float] = {}
    for _ in range(2):
        for best, root in ((before, str(Path(baseline).resolve())), (after, _ROOT)):
            for key, rate in measure(root).items():
                best[key] = max(best.get(key, 0.0), rate)
    t = Table(title=f"in-process grading floor, {n} items per grader and mix (items/s, CPU time, best of 6 "
                    "passes in 2 alternated runs per tree)")
    for c in ("grader / mix", f"before ({baseline})", "after (this tree)", "before / after (slowdown)"):
        t.add_column(c, justify="left" if c == "grader / mix" else "right")
    worst = 0.0
    for key in before:
        slow = before[key] / after[key]
        worst = max(worst, slow)
        t.add_row(key, f"{before[key]:,.0f}", f"{after[key]:,.0f}", f"{slow:.2f}x")
    console.print(t)
    console.print(f"worst slowdown: [bold]{worst:.2f}x[/bold] (the issue's bound: 1.2x)")


def timed(fn) -> tuple[float, list]:
    t = time.perf_counter()
    out = fn()
    return time.perf_counter() - t, out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--worst-n", type=int, default=10_000, help="strings for the worst-case row (default 10,000)")
    ap.add_argument("--math-worst-n", type=int, default=None, help="strings for math's worst case (default --worst-n)")
    ap.add_argument("--skip-throughput", action="store_true", help="print only the worst-case table")
    ap.add_argument("--baseline", default=None, help="a tree of an older commit: print the in-process floor of "
                    "both side by side and stop")
    ap.add_argument("--floor-n", type=int, default=2000, help="items per grader and mix for --baseline")
    ap.add_argument("--floor-json", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--root", default=None, help=argparse.SUPPRESS)
    args = ap.parse_args()
    rng = random.Random(0)
    console = Console(width=140)
    if args.floor_json:
        import json

        print(json.dumps(floor_rates(args.floor_n)))
        return
    if args.baseline:
        side_by_side(args.baseline, args.floor_n, console)
        return
    strings = worst_case_strings(random.Random(13), args.worst_n)
    worst = Table(title=f"worst case: slowest of random and adversarial strings (<= {MAX_CHARS:,} chars) per grader")
    for c in ("grader", "strings", "slowest ms", "(wall ms)", "target ms", "slowest / target", "slowest kind",
              "timeouts"):
        worst.add_column(c, justify="left" if c in ("grader", "slowest kind") else "right")
    for grader, n, ms, wall, target, kind, touts in worst_case(strings, args.math_worst_n or args.worst_n):
        print(f"worst case {grader}: {n} strings, slowest {ms:.1f} ms ({kind}), {touts} timeouts", flush=True)
        worst.add_row(grader, f"{n:,}", f"{ms:.1f}" + (" wall" if grader == "math" else " cpu"), f"{wall:.1f}",
                      f"{target:.0f}" + (" (budget)" if grader == "math" else ""), f"{ms / target:.3f}", kind,
                      str(touts))
    console.print(worst)
    if args.skip_throughput:
        return
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
        secs, res = timed(partial(pool.grade, resp, gold, timeout_s=5.0))
        pool.close()
        rates[procs] = N / secs
        row("math", f"pool, {procs} process{'es' if procs > 1 else ''}", secs, res)
    secs, res = timed(lambda: grade_batch("math", resp, gold, processes=0))
    row("math", "in-process floor (no timeout)", secs, res)
    for grader, make, kw in (("multiple_choice", mc_items, {"n_options": 10}), ("knights_knaves", kk_items, {})):
        r, g = make(rng)
        grade_batch(grader, r[:4], g[:4], **kw)  # warm the shared pool outside the timing
        secs, res = timed(partial(grade_batch, grader, r, g, **kw))
        row(grader, "pool, 2 processes (budgeted)", secs, res)
        secs, res = timed(partial(grade_batch, grader, r, g, processes=0, **kw))
        row(grader, "in-process floor (no budget)", secs, res)
    console.print(table)
    console.print(f"math: 2 processes vs 1 process = [bold]{rates[2] / rates[1]:.2f}x[/bold] "
                  f"({rates[2]:,.0f} vs {rates[1]:,.0f} items/s)")


if __name__ == "__main__":
    main()
