"""verl `custom_reward_function` entry: the evaluation graders, routed by `data_source`.

Point verl at it with both key sets (STUDY.md L3):
`custom_reward_function.path=pkg://evaluation.reward custom_reward_function.name=compute_score`
(and the same under `reward.custom_reward_function` / the reward-loop worker config).

Every call returns the same typed dict (STUDY.md L4). An unknown `data_source` raises
`ValueError` at once: a silent 0 reward lost the published study a campaign (L2).

Every grader runs within its time budget (`evaluation.graders.BUDGET_S`, enforced by the parent of the
grader pool, the same as in the evaluator and the local backend, which calls this function): a rollout that
exceeds it gets reward 0.0 with `status: "timeout"`, so a degenerate output never stalls a reward worker
and is told apart from a wrong answer in verl's reward metrics.
"""

from __future__ import annotations

from typing import Any

from evaluation.graders import DEFAULT_TAGS, ThinkTags, grade
from wtcommon.errors import UserError


class UnknownDataSource(UserError):
    """A training row's `data_source` has no grader route; names the known ones."""

# data_source -> (grader, default option count for multiple choice)
ROUTES: dict[str, tuple[str, int | None]] = {
    # math: the study's routing label and its sources, the suite ids, the synthetic corpus
    "HuggingFaceH4/MATH-500": ("math", None),
    "lighteval/MATH": ("math", None),
    "openai/gsm8k": ("math", None),
    "gsm8k": ("math", None),
    "deepscaler": ("math", None),
    "math_dapo": ("math", None),
    "math": ("math", None),
    "math500": ("math", None),
    "aime24": ("math", None),
    "olympiadbench": ("math", None),
    "minerva_math": ("math", None),
    "synthetic_math": ("math", None),
    # knights & knaves
    "kk_logic": ("knights_knaves", None),
    "knights-and-knaves": ("knights_knaves", None),
    "logic": ("knights_knaves", None),
    "kk_logic_hard": ("knights_knaves", None),
    "kk_hard": ("knights_knaves", None),
    "synthetic_logic": ("knights_knaves", None),
    # multiple choice, A-D
    "sciq": ("multiple_choice", 4),
    "science": ("multiple_choice", 4),
    "gpqa": ("multiple_choice", 4),
    "gpqa_diamond": ("multiple_choice", 4),
    "gpqa_main": ("multiple_choice", 4),
    "synthetic_science": ("multiple_choice", 4),
    # multiple choice, A-J
    "bbh_logical_deduction": ("multiple_choice", 10),
    "bbh_tracking": ("multiple_choice", 10),
    "zebra_logic_mc": ("multiple_choice", 10),
}
PREFIX_ROUTES: tuple[tuple[str, tuple[str, int | None]], ...] = (("mmlu_pro", ("multiple_choice", 10)),)


def route(data_source: str) -> tuple[str, int | None]:
    """(grader, default n_options) for a data source; UnknownDataSource (a UserError) naming the known sources
    otherwise."""
    if data_source in ROUTES:
        return ROUTES[data_source]
    for prefix, target in PREFIX_ROUTES:
        if data_source.startswith(prefix):
            return target
    known = sorted(ROUTES) + [f"{p}*" for p, _ in PREFIX_ROUTES]
    raise UnknownDataSource(
        f"reward: unknown data_source {data_source!r}; add it to evaluation/reward.py ROUTES. Known: {', '.join(known)}"
    )


def think_tags(extra_info: dict[str, Any] | None, override: str | None = None) -> ThinkTags | None:
    """The reasoning-block tags of a rollout: `override`, else the row's `extra_info["think_tags"]`, else the
    default `<think>…</think>`; UserError naming the field when the setting cannot be read."""
    spec = override if override is not None else (extra_info or {}).get("think_tags")
    if spec is None:
        return DEFAULT_TAGS
    try:
        return ThinkTags.parse(str(spec))
    except ValueError as e:
        raise UserError(f"reward: extra_info['think_tags'] = {spec!r}: {e}") from None


def compute_score(
    data_source: str,
    solution_str: str,
    ground_truth: str,
    extra_info: dict[str, Any] | None = None,
    **kwargs: Any,
) -> dict[str, Any]:
    """verl reward: `{"score": float, "acc": bool, "pred": str, "status": str}` for every source.

    `status` is one of `ok`, `no_answer`, `hedged` (the conclusion offers answers that disagree), `truncated`
    (the reasoning block never closed), `timeout` (the grader budget ran out), `error` (bad gold). The grader
    reads the response's conclusion (`evaluation.graders.conclusion`); a row's `extra_info["think_tags"]` (or
    the `think_tags` keyword) sets the model's reasoning-block tags: "OPEN,CLOSE", "CLOSE" or "none"."""
    grader, default_n = route(str(data_source))
    n_options = default_n
    if grader == "multiple_choice" and extra_info and extra_info.get("n_options") is not None:
        n_options = int(extra_info["n_options"])
    res = grade(grader, str(solution_str), str(ground_truth), n_options=n_options,
                tags=think_tags(extra_info, kwargs.get("think_tags")))
    return {"score": float(res.score), "acc": bool(res.score >= 1.0), "pred": res.parsed or "", "status": res.status}
