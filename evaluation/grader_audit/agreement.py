"""Agreement of our grades with the field's other verifiers on a campaign's stored evaluation generations.

The evaluator writes every graded generation to `<run dir>/eval/step_N.items.jsonl.gz` (benchmark, item_id,
response, gold, score; sampled items under `samples`). Each is re-graded by verl's own
`verl.utils.reward_score` function for the dataset (gsm8k: `gsm8k`, MATH-style: `math_reward`, AIME:
`math_dapo`) and by lm-eval's task answer check where lm-eval has one and it imports here (MMLU-Pro's
`answer is (X)` regex filter, through lm-eval's `RegexFilter`; minerva_math's check needs antlr4 4.11, which the
pinned math-verify excludes, so it is not used). Disagreement rate per benchmark and verifier,
over responses and over items. The interval is over *items*, the independent draws (a campaign's runs answer the
same items, so its responses are not): the share of items with at least one disagreeing response, with the
Clopper-Pearson exact 95% interval (statsmodels `proportion_confint(method="beta")`), whose coverage is at least
95% at every rate and n by construction (`benchmarks/binomial_coverage.py`: worst simulated 0.948 at n 8-500,
within its Monte Carlo error; Wilson's, printed before, fell to 0.85 at small n and rare disagreement).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from evaluation import item_log
from wtcommon.errors import UserError

Verifier = Callable[[str, str], float]


def _verl(module: str) -> Verifier:
    def score(response: str, gold: str) -> float:
        import importlib

        fn = importlib.import_module(f"verl.utils.reward_score.{module}").compute_score
        res = fn(response, gold)
        return float(res["score"] if isinstance(res, dict) else res) >= 1.0

    return score


_MMLU_PRO = re.compile(r"answer is \(?([ABCDEFGHIJ])\)?")  # lm_eval/tasks/mmlu_pro/_default_template_yaml


def _lm_eval_mmlu_pro(response: str, gold: str) -> float:
    from lm_eval.filters.extraction import RegexFilter

    got = RegexFilter(regex_pattern=_MMLU_PRO.pattern).apply([[response]], [{}])[0][0]
    return float(got.strip() == gold.strip().strip("()"))


def verifiers_for(benchmark: str) -> dict[str, Verifier]:
    """The other verifiers that apply to a benchmark (none for Knights & Knaves, BBH, GPQA, ZebraLogic)."""
    out: dict[str, Verifier] = {}
    if benchmark == "gsm8k":
        out["verl.gsm8k"] = _verl("gsm8k")
    elif benchmark in ("math500", "minerva_math", "olympiadbench"):
        out["verl.math_reward"] = _verl("math_reward")
    elif benchmark.startswith("aime"):
        out["verl.math_dapo"] = _verl("math_dapo")
    if benchmark.startswith("mmlu_pro"):
        out["lm_eval.mmlu_pro"] = _lm_eval_mmlu_pro
    return out


@dataclass(frozen=True)
class Generation:
    benchmark: str
    item_id: str
    response: str
    gold: str
    score: float
    source: str = ""  # the item log it was read from (which run and checkpoint)


def item_logs(root: Path) -> list[Path]:
    """The stored item logs under a campaign's run folder; UserError when there are none."""
    logs = sorted(root.rglob(item_log.GLOB)) if root.is_dir() else []
    if not logs:
        raise UserError(f"{root}: no stored evaluation generations (*.items.jsonl.gz) found; pass the --workdir "
                        "and --campaign of an evaluated campaign (the evaluate stage writes them)")
    return logs


def read_generations(path: Path) -> list[Generation]:
    """Every graded generation of one item log; UserError naming the file, line and field otherwise."""
    try:
        lines = item_log.read_lines(path)
    except item_log.UnreadableItemLog as e:
        raise UserError(f"{path}: not a readable gzip JSON-lines item log ({e.reason}); re-run `campaign eval` for "
                        "this checkpoint or remove the file") from None
    out = []
    for line in lines:
        i, r = line.number, line.row
        if r is None:
            raise UserError(f"{path}:{i}: {line.problem}; fix or remove this line")
        for key in ("benchmark", "item_id", "response", "gold", "score"):
            if key not in r:
                raise UserError(f"{path}:{i}: field {key!r} is missing; every item-log line needs benchmark, "
                                "item_id, response, gold and score")
        samples = r.get("samples") or [{"response": r["response"], "score": r["score"]}]
        out += [Generation(str(r["benchmark"]), str(r["item_id"]), str(s.get("response", "")), str(r["gold"]),
                           float(s.get("score", 0.0)), str(path)) for s in samples]
    return out


def agreement(generations: list[Generation], benchmarks: list[str] | None = None) -> tuple[list[dict], list[dict]]:
    """(per benchmark x verifier rows: responses `n` and `disagree`, their `rate`, items `items` and
    `items_disagree` and the exact 95% interval of the item share `ci_low`-`ci_high`; the disagreeing samples).
    Benchmarks without another verifier get a row with n 0."""
    from evaluation.intervals import clopper_pearson

    by: dict[str, list[Generation]] = {}
    for g in generations:
        if benchmarks is None or g.benchmark in benchmarks:
            by.setdefault(g.benchmark, []).append(g)
    rows, diffs = [], []
    for bid in sorted(by):
        vs = verifiers_for(bid)
        if not vs:
            rows.append({"benchmark": bid, "verifier": "none", "n": 0, "disagree": 0, "rate": float("nan"),
                         "items": 0, "items_disagree": 0, "ci_low": float("nan"), "ci_high": float("nan")})
        for name, fn in vs.items():
            k, items, differing = 0, {g.item_id for g in by[bid]}, set()
            for g in by[bid]:
                theirs = float(fn(g.response, g.gold))
                ours = 1.0 if g.score >= 1.0 else 0.0
                if theirs != ours:
                    k += 1
                    differing.add(g.item_id)
                    diffs.append({"benchmark": bid, "item_id": g.item_id, "response": g.response, "our_grade": ours,
                                  "their_grade": theirs, "verifier": name, "item_log": g.source})
            n = len(by[bid])
            lo, hi = clopper_pearson(len(differing), len(items))
            rows.append({"benchmark": bid, "verifier": name, "n": n, "disagree": k, "rate": k / n,
                         "items": len(items), "items_disagree": len(differing), "ci_low": lo, "ci_high": hi})
    return rows, diffs


__all__ = ["Generation", "agreement", "item_logs", "read_generations", "verifiers_for"]
