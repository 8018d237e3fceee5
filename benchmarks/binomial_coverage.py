"""Coverage of the binomial intervals `campaign audit graders` prints (issue 39's agreement table): the
Clopper-Pearson exact 95% interval (statsmodels `proportion_confint(method="beta")`, what it prints) against
Wilson's score interval (what it printed before), simulated at the item counts a campaign's benchmarks have.

For each n and true rate p on a grid, `REPS` binomial draws; coverage = share of intervals holding p. Prints a
table per n (worst p, the worst and the mean coverage of each method) and the ratio of the exact interval's worst
coverage to the 0.94 floor the project sets for anything labelled 95%.
Usage: PYTHONPATH=. python benchmarks/binomial_coverage.py
"""

from __future__ import annotations

import numpy as np
from statsmodels.stats.proportion import proportion_confint

NS = (8, 16, 32, 64, 128, 500)
PS = np.round(np.linspace(0.01, 0.5, 50), 4)
REPS = 20_000
FLOOR = 0.94


def coverage(n: int, method: str, rng: np.random.Generator) -> np.ndarray:
    """(len(PS),) coverage at each p: every count 0..n is scored once, weighted by how often the draws hit it."""
    k = np.arange(n + 1)
    lo, hi = proportion_confint(k, n, alpha=0.05, method=method)
    draws = rng.binomial(n, PS[:, None], size=(len(PS), REPS))  # (P, REPS)
    held = (lo[draws] <= PS[:, None]) & (PS[:, None] <= hi[draws])
    return held.mean(axis=1)


def main() -> None:
    rng = np.random.default_rng(0)
    worst_exact = 1.0
    print(f"{'n':>5} {'exact worst':>12} {'at p':>6} {'exact mean':>11} {'wilson worst':>13} {'at p':>6} "
          f"{'wilson mean':>12}")
    for n in NS:
        ex, wi = coverage(n, "beta", rng), coverage(n, "wilson", rng)
        worst_exact = min(worst_exact, float(ex.min()))
        print(f"{n:>5} {ex.min():>12.4f} {PS[ex.argmin()]:>6.3f} {ex.mean():>11.4f} {wi.min():>13.4f} "
              f"{PS[wi.argmin()]:>6.3f} {wi.mean():>12.4f}")
    print(f"exact 95% interval: worst coverage {worst_exact:.4f} over n in {list(NS)} and {len(PS)} rates in "
          f"[{PS[0]}, {PS[-1]}], {REPS} draws each (ratio to the {FLOOR} floor: {worst_exact / FLOOR:.3f})")


if __name__ == "__main__":
    main()
