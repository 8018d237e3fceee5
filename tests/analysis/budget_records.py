"""Records of a synthetic budgeted campaign, as the evaluate stage writes them (orchestrator/engine/stages.py
`with_budget_columns`): every checkpoint evaluated, each run stopped at the step its rollout tokens reached the
budget, so runs of one policy stop at different steps. Shared by the budget tests."""

from __future__ import annotations

import numpy as np
import pandas as pd

from analysis.records import normalise_records
from evaluation.suite import load_suite

SUITE = load_suite("db12")
BUDGET = 1000.0
# policy -> (rollout tokens per step, score gain per 1000 tokens, per-seed offsets)
POLICIES = {"baseline": (250.0, 10.0), "mopps": (180.0, 14.0), "greso": (300.0, 9.0)}
SEEDS = (1, 2, 3)


def budget_records(budget: float | None = BUDGET, step_cap: int = 8) -> pd.DataFrame:
    """baseline, mopps, greso x 3 seeds; a run generates `tok` (+ 10 x seed) tokens a step and stops after the
    step whose cumulative tokens reach `budget` (or at `step_cap`); its score rises `gain` points per 1000
    rollout tokens from a base of 30 + seed. `budget=None`: the equal-step campaign (every run `step_cap` steps,
    its last checkpoint only, no budget columns)."""
    rng = np.random.default_rng(7)
    noise = rng.normal(0, 0.3, (len(SEEDS), len(SUITE.benchmark_ids)))
    rows = []
    for pol, (tok, gain) in POLICIES.items():
        for i, seed in enumerate(SEEDS):
            per = tok + 10.0 * seed
            steps = range(1, step_cap + 1)
            if budget is not None:
                cum = np.cumsum(np.full(step_cap, per))
                stop = int(np.argmax(cum >= budget)) + 1 if (cum >= budget).any() else step_cap
                steps = range(1, stop + 1)
            else:
                steps = range(step_cap, step_cap + 1)
            for st in steps:
                for j, b in enumerate(SUITE.benchmark_ids):
                    row = {"run_id": f"c/m/{pol}/s{seed}", "campaign": "c", "model": "m", "policy": pol,
                           "mechanism": "none" if pol == "baseline" else "curriculum", "seed": seed, "step": st,
                           "benchmark": b, "accuracy": float(30 + seed + gain * per * st / 1000 + noise[i, j])}
                    if budget is not None:
                        row.update(rollout_token_budget=budget, rollout_tokens=per * st)
                    rows.append(row)
    return normalise_records(pd.DataFrame(rows), SUITE)
