"""Agreement of our graders with verl's own `verl.utils.reward_score` before and after a grader change (issue 49).

Two sets of responses, each graded three ways: by verl's reward function for the benchmark (gsm8k: `gsm8k`,
MATH-style: `math_reward`, AIME: `math_dapo`; `evaluation.grader_audit.agreement.verifiers_for`), by the graders
of this tree ("after") and by the graders of an older tree ("before", `--baseline DIR`, in its own process):

* `--items GLOB`: stored evaluation generations (`*.items.jsonl.gz`, what `campaign eval` and a campaign's
  evaluate stage write), every sample of every benchmark verl has a verifier for;
* the generated reasoning-style math responses of the grader audit (`evaluation/grader_audit/reasoning.py`:
  reflections, hedges, unclosed reasoning; 25 per class, seeded), scored against a MATH-style gold, so verl's
  `math_reward` (last box) and `math_dapo` ("Answer:" line) read them.

Prints per set and verifier: responses, agreement before, agreement after, and each response class whose
agreement changed with an example. Asserts nothing; a disagreement is a difference of rules, explained in
docs/guide/evaluation.md.
"""

from __future__ import annotations

import argparse
import glob
import json
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, sys.argv[sys.argv.index("--root") + 1] if "--root" in sys.argv
                else str(Path(__file__).resolve().parent.parent))

Item = tuple[str, str, str, str, str]  # (set, grader, response, gold, class)


def _grade_file(path: str) -> None:
    """--grade-json: grade the items of `path` with this process's graders; print the scores as JSON."""
    from evaluation.graders.pool import grade_inprocess

    items = json.loads(Path(path).read_text())
    print(json.dumps([grade_inprocess(g, r, gold, 10 if g == "multiple_choice" else None).score
                      for _, g, r, gold, _ in items]))


def _stored(pattern: str) -> list[Item]:
    from evaluation.grader_audit.agreement import read_generations, verifiers_for
    from evaluation.suite import load_suite

    suite = load_suite("db12")
    out: list[Item] = []
    for path in sorted(glob.glob(pattern, recursive=True)):
        for g in read_generations(Path(path)):
            if verifiers_for(g.benchmark):
                out.append((g.benchmark, suite.benchmark(g.benchmark).grader, g.response, g.gold, "stored"))
    return out


def _draw(cls: str, strategy, n: int) -> list[Item]:
    """`n` seeded distinct responses of one class (the audit's settings: derandomised, no database)."""
    from hypothesis import HealthCheck, Phase, given, settings

    out: list[Item] = []

    @settings(database=None, derandomize=True, max_examples=n, phases=[Phase.generate], deadline=None,
              suppress_health_check=list(HealthCheck))
    @given(case=strategy)
    def draw(case) -> None:
        if all(case.response != it[2] for it in out):
            out.append(("generated", "math", case.response, case.gold, cls))

    draw()
    return out


def _generated(n: int) -> list[Item]:
    from evaluation.grader_audit.reasoning import REASONING

    reflect, hedge = REASONING["math"]
    return [it for cls, strategy in {**reflect, **hedge}.items() for it in _draw(cls, strategy, n)]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--baseline", help="a tree of the older commit (e.g. `git archive b653ab6 | tar -x -C DIR`)")
    ap.add_argument("--items", default=None, help="glob of stored item logs (*.items.jsonl.gz)")
    ap.add_argument("--n", type=int, default=25, help="generated responses per reasoning class")
    ap.add_argument("--grade-json", default=None, help=argparse.SUPPRESS)
    ap.add_argument("--root", default=None, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.grade_json:
        _grade_file(args.grade_json)
        return
    from evaluation.grader_audit.agreement import verifiers_for
    from evaluation.graders.pool import grade_inprocess

    items = (_stored(args.items) if args.items else []) + _generated(args.n)
    after = [grade_inprocess(g, r, gold, 10 if g == "multiple_choice" else None).score for _, g, r, gold, _ in items]
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
        json.dump(items, f)
    done = subprocess.run([sys.executable, str(Path(__file__).resolve()), "--grade-json", f.name, "--root",
                           str(Path(args.baseline).resolve())], capture_output=True, text=True, check=True)
    Path(f.name).unlink()
    before = json.loads(done.stdout.strip().splitlines()[-1])
    rows: dict[tuple[str, str], list[int]] = {}
    changed: dict[tuple[str, str, str], list[object]] = {}
    left: dict[tuple[str, str, str], list[object]] = {}
    for (bench, _, resp, gold, cls), b, a in zip(items, before, after, strict=True):
        key_set = "stored" if bench != "generated" else "generated"
        verifiers = verifiers_for(bench) if bench != "generated" else {
            **verifiers_for("math500"), **verifiers_for("aime24")}
        for name, fn in verifiers.items():
            theirs = float(fn(resp, gold))
            agree_b, agree_a = float(b >= 1.0) == theirs, float(a >= 1.0) == theirs
            r = rows.setdefault((key_set if key_set == "generated" else bench, name), [0, 0, 0])
            r[0] += 1
            r[1] += agree_b
            r[2] += agree_a
            if not agree_a:
                left.setdefault((name, cls, f"theirs {theirs:.0f}, ours {a:.0f}"), [0, resp])[0] += 1  # type: ignore
            if agree_b != agree_a:
                c = changed.setdefault((name, cls, "gained" if agree_a else "lost"), [0, resp, gold, theirs])
                c[0] = int(c[0]) + 1  # type: ignore[call-overload]
    print(f"{'set / benchmark':18s} {'verifier':18s} {'n':>5s} {'agree before':>13s} {'agree after':>12s}")
    for (bench, name), (n, ab, aa) in sorted(rows.items()):
        print(f"{bench:18s} {name:18s} {n:5d} {ab / n:13.3f} {aa / n:12.3f}")
    for (name, cls, how), (k, resp) in sorted(left.items()):
        print(f"still disagreeing after with {name}: {k} {cls} responses ({how}), e.g. {str(resp)[-120:]!r}")
    for (name, cls, how), (k, resp, gold, theirs) in sorted(changed.items()):
        print(f"agreement {how} with {name} on {k} {cls} responses, e.g. gold {gold!r}, theirs {theirs:.0f}: "
              f"{str(resp)[-140:]!r}")


if __name__ == "__main__":
    main()
