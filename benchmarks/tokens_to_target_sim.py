"""Type-I error and power of tokens-to-target verdicts under coarse and fine checkpoint grids (issue 58).

A run is a curve of score against cumulative rollout tokens, observed only at its evaluated checkpoints. Where a
policy's checkpoints fall further apart (dynamic sampling: three times the rollout tokens a step), the first
checkpoint at or above the target comes later in tokens although the run learns no slower, and a t test on the
crossing tokens (`p_point`, the rule before issue 58) decides "more tokens" from the spacing alone. The verdict's
rule (analysis/tokens_to_target.py) tests the least favourable ends of each crossing's bracket (previous
checkpoint, crossing] and never decides from a target reached at a first checkpoint (left-censored).

Each scenario draws `SIMS` campaigns of n seeds: per seed a reference and a method curve
score(t) = 30 + seed offset + 0.1 x gain x t / 100 + N(0, 0.3) at each checkpoint, the target the reference's final
observed score (the product's default), a fixed 32 points, or (`target at first checkpoint`) 25, below every
first checkpoint. Under H0 both learn
at the same rate per token; in `faster` the method needs 0.6x the tokens. Prints, per scenario and n, the share
of campaigns with a decided verdict (fewer / more tokens, alpha 0.05) under each rule, and the ratio of the
product rule's worst type-I error to alpha.
Usage: PYTHONPATH=. python benchmarks/tokens_to_target_sim.py
"""

from __future__ import annotations

import warnings

import numpy as np
import pandas as pd

from analysis.tokens_to_target import _pair_seed, _summarise, _verdicts

SIMS = 1000
ALPHA = 0.05
# name -> (method tokens per checkpoint, reference tokens per checkpoint, method gain / reference gain, target)
SCENARIOS = {
    "fine, H0": (250.0, 250.0, 1.0, None),
    "method 3x coarser, H0": (750.0, 250.0, 1.0, None),
    "method 3x coarser, target 32, H0": (750.0, 250.0, 1.0, 32.0),
    "target at first checkpoint, H0": (750.0, 250.0, 1.0, 25.0),
    "fine, method 0.6x tokens": (250.0, 250.0, 1 / 0.6, None),
    "method 3x coarser, 0.6x tokens": (750.0, 250.0, 1 / 0.6, None),
}
TOTAL = 3000.0  # rollout tokens of every run (its budget)
GAIN = 0.1  # reference: score points per 100 rollout tokens (0.25 a fine checkpoint, against noise of SD 0.3)


def _curve(rng: np.random.Generator, step: float, gain: float, offset: float) -> pd.DataFrame:
    tok = np.arange(step, TOTAL + 1e-9, step)
    score = 30.0 + offset + gain * GAIN * tok / 100.0 + rng.normal(0.0, 0.3, tok.size)
    return pd.DataFrame({"step": np.arange(1, tok.size + 1), "rollout_tokens": tok, "score": score})


def decided(rng: np.random.Generator, n: int, m_step: float, r_step: float, ratio: float,
            target: float | None) -> tuple[bool, bool]:
    """(decided under the crossing-point t test, decided under the product's verdict) for one simulated campaign."""
    per = {}
    for s in range(1, n + 1):
        offset = rng.normal(0.0, 1.0)
        per[s] = _pair_seed(_curve(rng, m_step, ratio, offset), _curve(rng, r_step, 1.0, offset), target)
    row = _summarise(("c", "m", ""), "method", "reference", "DB-12", pd.DataFrame(per).T, target)
    table = _verdicts(pd.DataFrame([row]), ALPHA)
    point = bool(row["p_point"] < ALPHA) if row["p_point"] == row["p_point"] else False
    return point, bool(table["verdict"].iloc[0] in ("fewer tokens", "more tokens"))


def main() -> None:
    rng = np.random.default_rng(0)
    worst = 0.0
    print(f"{'scenario':<34} {'n':>3} {'decided: crossing t test':>25} {'decided: verdict rule':>22}")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for name, (m_step, r_step, ratio, target) in SCENARIOS.items():
            for n in (3, 5):
                got = np.array([decided(rng, n, m_step, r_step, ratio, target) for _ in range(SIMS)])
                point, rule = got.mean(axis=0)
                if "H0" in name:
                    worst = max(worst, float(rule))
                print(f"{name:<34} {n:>3} {point:>25.3f} {rule:>22.3f}")
    print(f"worst type-I error of the verdict rule under H0: {worst:.3f}; ratio to alpha {ALPHA}: "
          f"{worst / ALPHA:.2f} (<= 1: the rule holds its level on every grid simulated)")


if __name__ == "__main__":
    main()
