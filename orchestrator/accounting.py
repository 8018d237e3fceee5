"""What a planned campaign costs, before any compute: run counts by sub-campaign, model, policy, seed and regime,
training and evaluation GPU-hours, the seed matrix, the YAMLs' assumptions, the runs lacking their reference
(`accounting`), and the wall hours of the runs on the cluster (`makespan_hours`). Grid expansion itself is
orchestrator/engine/grid.py; `campaign plan` prints this (orchestrator/plan_report.py)."""

from __future__ import annotations

import copy
from collections import Counter, defaultdict
from dataclasses import dataclass, fields
from typing import TYPE_CHECKING, Any

from orchestrator.engine.grid import RunSpec

if TYPE_CHECKING:
    from orchestrator.engine.spec import CampaignSpec


def missing_references(runs: list[RunSpec]) -> list[str]:
    """Runs whose campaign-local reference (same group, model, regime, steps, seed) is not planned."""
    have = {(r.group, r.model, r.regime, r.steps, r.seed, r.policy.name) for r in runs}
    return [
        r.run_id for r in runs
        if r.reference and (r.group, r.model, r.regime, r.steps, r.seed, r.reference) not in have
    ]


@dataclass(frozen=True)
class Accounting:
    """What a planned campaign holds and costs (`accounting`): run counts by sub-campaign, record campaign,
    model, policy, seed and regime; training GPU-hours (total, by sub-campaign, by model); the checkpoints
    evaluated and their GPU-hours; the seeds of each policy x model; the YAMLs' assumptions; runs lacking their
    reference; and the sub-campaigns whose declared run count the (overridden) grid no longer has."""

    campaign: str
    total_runs: int
    by_sub_campaign: dict[str, int]
    expected_runs_mismatch: dict[str, dict[str, int]]
    by_campaign_label: dict[str, int]
    by_model: dict[str, int]
    by_policy: dict[str, int]
    by_seed: dict[str, int]
    by_regime: dict[str, int]
    gpu_hours: float
    gpu_hours_by_sub_campaign: dict[str, float]
    gpu_hours_by_model: dict[str, float]
    eval_checkpoints: int
    eval_sample_factor: float | None
    eval_gpu_hours: float | None
    matrix: dict[str, dict[str, list[int]]]
    assumptions: list[dict[str, Any]]
    missing_references: list[str]
    budget: dict[str, Any] | None = None  # `budget_steps`: only a budgeted campaign's plan has it

    def to_dict(self) -> dict[str, Any]:
        """The JSON form (`campaign plan --format json`), keys in field order; `budget` only when set (an equal-step
        campaign's plan keeps its keys)."""
        return {f.name: copy.deepcopy(getattr(self, f.name)) for f in fields(self)
                if not (f.name == "budget" and self.budget is None)}


def accounting(spec: CampaignSpec, runs: list[RunSpec]) -> Accounting:
    """Counts by sub-campaign, model, policy, seed; GPU-hours = Σ per-model hours × GPUs.

    The estimate uses `compute.models.<m>.{gpus,hours}` (defaults `compute.gpus_per_run`,
    `compute.hours_per_run`): wall hours per run on its GPUs, times the GPUs it holds.
    """
    by = lambda attr: dict(sorted(Counter(getattr(r, attr) for r in runs).items()))  # noqa: E731
    gpu_h: defaultdict[str, float] = defaultdict(float)
    for r in runs:
        gpu_h[r.sub_campaign] += r.gpus * r.est_hours
    subs = spec.resolved_sub_campaigns()
    by_sub = {s: sum(1 for r in runs if r.sub_campaign == s) for s in subs}
    mismatch = {s: {"expected": sub.expected_runs, "planned": by_sub[s]} for s, sub in subs.items()
                if sub.expected_runs is not None and sub.expected_runs != by_sub[s]}
    if spec.expected_runs is not None and spec.expected_runs != len(runs):
        mismatch["total"] = {"expected": spec.expected_runs, "planned": len(runs)}
    gpu_h_model: defaultdict[str, float] = defaultdict(float)
    for r in runs:
        gpu_h_model[r.model] += r.gpus * r.est_hours
    ckpts = sum(checkpoints_evaluated(r) for r in runs)
    per_ckpt = spec.compute.eval_gpu_hours_per_checkpoint  # one greedy single pass of the suite
    factor = eval_sample_factor(spec.suite)
    matrix: dict[str, dict[str, list[int]]] = {}
    for r in runs:
        matrix.setdefault(r.policy.name, {}).setdefault(r.model, []).append(r.seed)
    assumptions = [{"where": "campaign", **a.model_dump()} for a in spec.assumptions]
    for name, sub in spec.sub_campaigns.items():
        assumptions += [{"where": f"sub_campaigns.{name}", **a.model_dump()} for a in sub.assumptions]
    return Accounting(
        campaign=spec.name,
        total_runs=len(runs),
        by_sub_campaign=by_sub,
        expected_runs_mismatch=mismatch,
        by_campaign_label=by("group"),
        by_model=by("model"),
        by_policy=dict(sorted(Counter(r.policy.name for r in runs).items())),
        by_seed={str(k): v for k, v in by("seed").items()},
        by_regime={k or "standard": v for k, v in by("regime").items()},
        gpu_hours=round(sum(gpu_h.values()), 1),
        gpu_hours_by_sub_campaign={k: round(v, 1) for k, v in gpu_h.items()},
        gpu_hours_by_model={k: round(v, 1) for k, v in sorted(gpu_h_model.items())},
        eval_checkpoints=ckpts,
        eval_sample_factor=factor,
        eval_gpu_hours=None if per_ckpt is None else round(ckpts * per_ckpt * (factor or 1.0), 1),
        matrix={p: {m: sorted(s) for m, s in ms.items()} for p, ms in matrix.items()},
        assumptions=assumptions,
        missing_references=missing_references(runs),
        budget=budget_steps(runs),
    )


def budget_steps(runs: list[RunSpec]) -> dict[str, Any] | None:
    """Where a rollout-token budget stops the runs: each step generates at most prompts_per_step x rollout.n x
    max_new_tokens tokens (times oversample x max_rounds under dynamic sampling), so a run stops after at least
    ceil(budget / that) steps and at most its step cap. The time estimate (`compute.hours_per_run`, scaled by
    steps) is for the cap: an upper bound, `lower_share` of it the lower one. None without a budget."""
    budgeted = [r for r in runs if r.rollout_token_budget is not None]
    if not budgeted:
        return None
    at_least: list[int] = []
    for r in budgeted:
        assert r.rollout_token_budget is not None
        at_least.append(min(r.steps, -(-int(r.rollout_token_budget) // max(1, int(_per_step(r))))))
    budgets = sorted({int(r.rollout_token_budget or 0) for r in budgeted})
    cap = max(r.steps for r in budgeted)
    low = sum(a / r.steps * r.est_hours for a, r in zip(at_least, budgeted, strict=True))
    high = sum(r.est_hours for r in budgeted)
    grid = token_grid(budgeted, at_least)
    return {"rollout_tokens": budgets[0] if len(budgets) == 1 else budgets, "runs": len(budgeted),
            "steps_at_least": min(at_least), "steps_cap": cap,
            "lower_share": round(low / high, 4) if high > 0 else None,
            "grid": grid, "grid_warnings": grid_warnings(grid)}


MIN_GRID = 4  # evaluated checkpoints under the budget below which a tokens-to-target claim cannot be resolved


def _per_step(r: RunSpec) -> float:
    """At most this many rollout tokens a step: prompts_per_step x rollout.n x max_new_tokens, x oversample x
    max_rounds under dynamic sampling."""
    ro, ds = r.recipe_cfg.rollout, r.policy.cfg.get("dynamic_sampling") or {}
    per_step = float(r.recipe_cfg.actor.prompts_per_step * ro.n * ro.max_new_tokens)
    return per_step * float(ds.get("oversample", 1.0)) * int(ds.get("max_rounds", 1)) if ds else per_step


def token_grid(budgeted: list[RunSpec], at_least: list[int]) -> dict[str, dict[str, Any]]:
    """Per budgeted policy, where its evaluated checkpoints fall (issue 58): the first one after at least
    `first_rollouts_at_least` rollouts (save_freq steps of prompts_per_step x rollout.n, x oversample under dynamic
    sampling, whose first round always runs), and at least `evaluated` of them before the budget stops it (1
    unless `evaluation.all_checkpoints`: only the final one is scored). A tokens-to-target crossing is known only
    to lie between two evaluated checkpoints."""
    out: dict[str, dict[str, Any]] = {}
    for r, steps in zip(budgeted, at_least, strict=True):
        if r.policy.name in out:
            continue
        ds = r.policy.cfg.get("dynamic_sampling") or {}
        per_step = r.recipe_cfg.actor.prompts_per_step * r.recipe_cfg.rollout.n * float(ds.get("oversample", 1.0))
        every = r.evaluation.all_checkpoints
        out[r.policy.name] = {"first_rollouts_at_least": int(r.save_freq * per_step),
                              "evaluated": max(1, steps // max(1, r.save_freq)) if every else 1,
                              "all_checkpoints": every}
    return out


def grid_warnings(grid: dict[str, dict[str, Any]]) -> list[str]:
    """What the checkpoint grid cannot resolve: a target reached at a policy's first evaluated checkpoint is
    left-censored (no decided verdict), so only the final checkpoint scored, too few checkpoints under the
    budget, or first checkpoints that come after very different amounts of rollout (dynamic sampling's
    oversampled steps) limit every tokens-to-target claim; said before anything runs."""
    warn = []
    final_only = sorted(p for p, g in grid.items() if not g["all_checkpoints"])
    if final_only:
        warn.append(f"only the final checkpoint is evaluated for {', '.join(final_only)}: tokens-to-target cannot "
                    "be estimated (a target is reached at the budget or not at all); set evaluation.all_checkpoints: "
                    "true and a save_freq of a few steps")
    coarse = sorted(p for p, g in grid.items() if g["all_checkpoints"] and g["evaluated"] < MIN_GRID)
    if coarse:
        warn.append(f"maybe fewer than {MIN_GRID} evaluated checkpoints under the budget for {', '.join(coarse)} "
                    "(every response at max_new_tokens): a crossing is then bracketed by a quarter of the budget or "
                    "more; a lower save_freq gives tokens-to-target a finer grid")
    firsts = {p: g["first_rollouts_at_least"] for p, g in grid.items() if g["all_checkpoints"]}
    if len(firsts) > 1 and max(firsts.values()) >= 1.5 * max(1, min(firsts.values())):
        hi, lo = max(firsts, key=lambda p: firsts[p]), min(firsts, key=lambda p: firsts[p])
        k = firsts[hi] / max(1, firsts[lo])
        warn.append(f"{hi}'s first evaluated checkpoint comes after at least {k:.1f}x the rollouts of {lo}'s "
                    f"({firsts[hi]:,} against {firsts[lo]:,}): a target reached at a first checkpoint is left-censored "
                    f"(no verdict), and a tokens ratio below {k:.1f}x near the start is checkpoint spacing, not "
                    "learning")
    return warn


def eval_sample_factor(suite: str) -> float | None:
    """Evaluation tokens of the suite's decoding relative to a greedy single pass (k samples cost k x the tokens
    of their benchmark), which scales `compute.eval_gpu_hours_per_checkpoint`; None if the suite cannot be read
    (preflight reports that)."""
    from evaluation.suite import SuiteError, load_suite

    try:
        return round(load_suite(suite).sample_token_factor(), 4)
    except (SuiteError, OSError):
        return None


def checkpoints_evaluated(r: RunSpec) -> int:
    """Checkpoints the evaluate stage scores for a run: every saved one with `evaluation.all_checkpoints`,
    else the final one."""
    if r.evaluation.all_checkpoints:
        return max(1, r.steps // max(1, r.save_freq))
    return 1


CPU_SLOTS = 2  # concurrent jobs of a GPU-less campaign (the scheduler's default, orchestrator.session)


def makespan_hours(runs: list[RunSpec], gpus: int, cpu_slots: int = CPU_SLOTS, ndigits: int = 1) -> float | None:
    """Wall hours to run every training job on `gpus` GPUs: longest-first list scheduling, each run holding its
    GPUs for its estimated hours (what the scheduler does, without failures), rounded to `ndigits`. None when a
    run needs more GPUs than exist. A campaign whose runs need no GPU (CPU) runs `cpu_slots` jobs at a time."""
    import heapq

    if any(r.gpus > gpus for r in runs):
        return None
    cpu = all(r.gpus == 0 for r in runs)
    slots = cpu_slots if cpu else gpus
    if slots <= 0:
        return None
    free = [0.0] * slots  # time each GPU (or CPU slot) becomes free
    for r in sorted(runs, key=lambda r: (-r.est_hours * max(r.gpus, 1), r.run_id)):
        need = 1 if cpu else max(r.gpus, 1)
        picked = [heapq.heappop(free) for _ in range(need)]
        start = max(picked)
        for _ in range(need):
            heapq.heappush(free, start + r.est_hours)
    return round(max(free), ndigits)
