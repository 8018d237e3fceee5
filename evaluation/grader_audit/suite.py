"""The generated adversarial suite: a fixed, seeded number of examples per class, graded in this process.

Hypothesis drives the strategies through `@given` inside a function run under
`settings(database=None, derandomize=True, max_examples=N, phases=[generate])`: the same examples every run
(derandomised, no example database, no shrinking), with no use of `find`/`example`. A class's rate is
(responses graded against expectation) / (responses drawn): for a deny class (exploits, and since issue 49 the
hedges and non-answers of `reasoning`), a false positive is a response credited (score 1); for a credit class,
a false negative is a response not credited; for a reflect class (`reasoning`: an interim answer retracted
before one final answer), a response not credited is a reflection refused.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field

from hypothesis import HealthCheck, Phase, given, settings

from evaluation.grader_audit.reasoning import REASONING
from evaluation.grader_audit.strategies import CLASSES, FAMILIES, GRADER_OF, Case
from evaluation.graders.registry import get_grader

DEFAULT_N = 25  # examples per class (benchmarks/grader_audit.py times the whole suite at this N)
EXPECTS = ("deny", "credit", "reflect")
# family -> expectation -> class -> strategy: the exploit/equivalence classes and the reasoning-style ones
ALL_CLASSES = {fam: {"deny": {**CLASSES[fam]["deny"], **REASONING[fam][1]}, "credit": CLASSES[fam]["credit"],
                     "reflect": REASONING[fam][0]} for fam in FAMILIES}


@dataclass
class ClassResult:
    family: str
    cls: str
    expect: str  # "deny" (must not earn credit), "credit" or "reflect" (must earn it)
    n: int = 0
    wrong: int = 0
    example: Case | None = None  # one response graded against expectation
    statuses: dict[str, int] = field(default_factory=dict)
    digest: str = ""  # sha256 of the drawn responses in order: the same examples every run


def run_class(family: str, cls: str, expect: str, n: int) -> ClassResult:
    """Grade `n` seeded examples of one class (fewer when the strategy has fewer distinct values)."""
    grader = get_grader(GRADER_OF[family])
    res = ClassResult(family, cls, expect)
    strategy = ALL_CLASSES[family][expect][cls]
    seen: set[Case] = set()
    h = hashlib.sha256()

    @settings(database=None, derandomize=True, max_examples=n, phases=[Phase.generate], deadline=None,
              suppress_health_check=list(HealthCheck))
    @given(case=strategy)
    def draw(case: Case) -> None:
        if case in seen:
            return
        seen.add(case)
        h.update(case.response.encode() + b"\0")
        r = grader.grade_inprocess(case.response, case.gold, case.n_options)
        res.n += 1
        res.statuses[r.status] = res.statuses.get(r.status, 0) + 1
        bad = r.score >= 1.0 if expect == "deny" else r.score < 1.0
        if bad:
            res.wrong += 1
            res.example = res.example or case

    draw()
    res.digest = h.hexdigest()
    return res


def run_suite(families: list[str] | None = None, n: int = DEFAULT_N) -> list[ClassResult]:
    """Every class of every family in `families` (default: all), `n` examples each."""
    out = []
    for fam in families or list(FAMILIES):
        for expect in EXPECTS:
            for cls in ALL_CLASSES[fam][expect]:
                out.append(run_class(fam, cls, expect, n))
    return out


def family_rates(results: list[ClassResult]) -> list[dict[str, object]]:
    """Per family: exploit (false-positive), false-negative and reflection-refusal counts and rates."""
    rows = []
    def tally(fam: str, expect: str) -> tuple[int, int]:
        mine = [r for r in results if r.family == fam and r.expect == expect]
        return sum(r.n for r in mine), sum(r.wrong for r in mine)

    for fam in dict.fromkeys(r.family for r in results):
        (nd, fp), (nc, fn), (nr, rr) = tally(fam, "deny"), tally(fam, "credit"), tally(fam, "reflect")
        rows.append({"family": fam, "grader": GRADER_OF[fam], "exploit_n": nd, "false_positives": fp,
                     "fp_rate": fp / nd if nd else float("nan"), "credit_n": nc, "false_negatives": fn,
                     "fn_rate": fn / nc if nc else float("nan"), "reflect_n": nr, "reflections_refused": rr,
                     "refusal_rate": rr / nr if nr else float("nan")})
    return rows


__all__ = ["ALL_CLASSES", "DEFAULT_N", "EXPECTS", "ClassResult", "family_rates", "run_class", "run_suite"]
