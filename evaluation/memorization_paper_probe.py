"""The paper protocol's probe rows: one per item and ratio, planned (prefix, generation request), scored
(evaluation/memorization_paper.py) and summarised per benchmark and ratio, as Table 2 and Fig. 5 of arXiv
2507.10532 report them (mean ROUGE-L, EM rate, answer accuracy), each rate with its exact interval."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any

from evaluation.intervals import clopper_pearson
from evaluation.memorization_paper import score_completion

if TYPE_CHECKING:
    from evaluation.memorization import ProbeItem, ProbeSettings

ITEM_COLUMNS = ("benchmark", "item_id", "grader", "ratio", "skipped", "n_prefix_tokens", "max_new_tokens",
                "rouge_l", "exact", "answer", "extracted", "answer_status", "gold", "problem", "prefix", "target",
                "completion", "prediction")


def plan(items: list[ProbeItem], lm: Any, settings: ProbeSettings) -> tuple[list[dict[str, Any]], list[Any]]:
    """One row per item and ratio (with its prefix, or skipped with why) and the generation requests: greedy,
    raw text, up to `max_new_tokens` (fewer when the model's context is shorter), stopping at end of text."""
    from lm_eval.api.instance import Instance

    from evaluation.memorization_paper import cut, target_of

    rows: list[dict[str, Any]] = []
    requests: list[Any] = []
    for it in items:
        for ratio in settings.ratios:
            row: dict[str, Any] = {**asdict(it), "ratio": ratio, "skipped": None}
            prefix = cut(it.problem, ratio)
            if not prefix:
                rows.append({**row, "skipped": "no problem text"})
                continue
            n = len(lm.tokenizer(prefix, add_special_tokens=False)["input_ids"])
            budget = min(settings.max_new_tokens, lm.max_length - n)
            if budget < 1:
                rows.append({**row, "skipped": "longer than the model's context"})
                continue
            rows.append({**row, "prefix": prefix, "target": None if ratio >= 1 else target_of(it.problem, prefix),
                         "n_prefix_tokens": n, "max_new_tokens": budget})
            kwargs = {"until": [], "max_gen_toks": budget, "do_sample": False, "temperature": 0.0}
            requests.append(Instance("generate_until", {}, (prefix, kwargs), len(requests),
                                     (f"memorization/{it.benchmark}", f"{it.item_id}@{ratio:g}", 1)))
    return rows, requests


def score(rows: list[dict[str, Any]], completions: list[str], processes: int = 2) -> None:
    """Fill each probed row (in order, one completion each): the clipped prediction, ROUGE-L and EM below ratio 1,
    and the answer extracted and graded by the item's grader."""
    from evaluation.graders import grade_batch

    probed = [r for r in rows if r["skipped"] is None]
    for r, text in zip(probed, completions, strict=True):
        r["completion"] = text
        if r["ratio"] < 1:
            s = score_completion(r["problem"], r["ratio"], text)
            r.update(prediction=s.prediction, rouge_l=s.rouge_l, exact=s.exact)
        else:
            r.update(prediction=None, rouge_l=None, exact=None)
    for grader in dict.fromkeys(r["grader"] for r in probed):
        mine = [r for r in probed if r["grader"] == grader]
        results = grade_batch(grader, [r["completion"] for r in mine], [r["gold"] for r in mine],
                              [r.get("n_options") or None for r in mine], processes=processes)
        for r, g in zip(mine, results, strict=True):
            r.update(answer=g.score >= 1.0, extracted=g.parsed, answer_status=g.status)


@dataclass
class RatioSummary:
    """One benchmark at one ratio: probed items, mean ROUGE-L and EM (ratios < 1), answer accuracy, intervals."""

    benchmark: str
    ratio: float
    n_items: int
    n_probed: int
    skipped: dict[str, int]
    mean_rouge_l: float | None
    exact: int | None
    answer: int
    intervals: dict[str, tuple[float, float]]

    def rate(self, what: str) -> float | None:
        k = self.exact if what == "exact" else self.answer
        return None if k is None or not self.n_probed else k / self.n_probed


def summarise(rows: list[dict[str, Any]]) -> list[RatioSummary]:
    """Per benchmark (in the order the rows came), per ratio (in the settings' order)."""
    out: list[RatioSummary] = []
    for bid in dict.fromkeys(r["benchmark"] for r in rows):
        for ratio in dict.fromkeys(r["ratio"] for r in rows if r["benchmark"] == bid):
            mine = [r for r in rows if r["benchmark"] == bid and r["ratio"] == ratio]
            probed = [r for r in mine if r["skipped"] is None]
            skipped: dict[str, int] = {}
            for r in mine:
                if r["skipped"] is not None:
                    skipped[r["skipped"]] = skipped.get(r["skipped"], 0) + 1
            n = len(probed)
            answer = sum(bool(r["answer"]) for r in probed)
            ci = {"answer": clopper_pearson(answer, n)}
            exact = mean = None
            if ratio < 1:
                exact = sum(bool(r["exact"]) for r in probed)
                ci["exact"] = clopper_pearson(exact, n)
                mean = sum(r["rouge_l"] for r in probed) / n if n else None
            out.append(RatioSummary(bid, ratio, len(mine), n, skipped, mean, exact, answer, ci))
    return out


def summary_row(s: RatioSummary) -> dict[str, Any]:
    """The flat per-benchmark-and-ratio record (the CSV's row; the JSON's entry without `skipped`)."""
    row: dict[str, Any] = {"benchmark": s.benchmark, "ratio": s.ratio, "n_items": s.n_items, "n_probed": s.n_probed,
                           "n_skipped": sum(s.skipped.values()), "mean_rouge_l": s.mean_rouge_l}
    for what in ("exact", "answer"):
        lo, hi = s.intervals.get(what, (None, None))
        nan = lo is not None and lo != lo
        row.update({what: getattr(s, what), f"{what}_rate": s.rate(what), f"{what}_ci_low": None if nan else lo,
                    f"{what}_ci_high": None if nan else hi})
    return row


__all__ = ["ITEM_COLUMNS", "RatioSummary", "plan", "score", "summarise", "summary_row"]
