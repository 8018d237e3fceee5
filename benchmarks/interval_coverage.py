"""Coverage of every interval the analysis report prints, by fixed-seed simulation (issue 12).

For n = 3, 5, 12 seeds and normal or heavy-tailed (Student t, 3 df) paired seed noise, draws
`--reps` comparisons with true mean difference 0 and computes, with the report's own functions:

* paired t CI (labelled 95%),
* the second CI: seed range [min d, max d] at n <= 5 (labelled with its exact coverage
  1 - 2^(1-n)), expanded percentile bootstrap at n >= 6 (labelled 95%),
* the plain percentile bootstrap the report used to print as "95%" (for reference only),
* sigma's chi-square 95% CI behind the MDE / seeds-needed intervals (labelled "if normal"),
* the sequential section's repeated CI at the stopping look and the bias-adjusted (median-unbiased,
  stage-wise ordering) CI, looks after 3/6/9/12 seeds, true difference 0.5 sigma (n column = 12 max),
* the seed + item (two-way clustered) CI of analysis/items.py on 100 items with item effects
  shared by the seeds (labelled 95%),
* the same CI as the seed + item + sample interval of sampled decoding: 40 items, k = 1, 4, 16 samples per
  item whose mean is the item score, sample noise normal or t3 (heavy-tailed) and dominant at k = 1, and
  0/1 outcomes ("binary": per-item logit = item + seed + seed x item effects, as graded samples are)
  (labelled 95%),
* across groups (k = 4 groups of n seeds, seed-noise scales 0.5, 1, 1, 2, true between-group
  SD 0.5): the t CI of the group means (labelled 95%), the DerSimonian-Laird z CI (labelled
  "nominal 95%, undercovers") and, for reference, the HKSJ CI (not printed).

Each row prints the label's claim, the measured coverage, and the ratio measured / 0.94 for
intervals labelled 95% (>= 1 required) or measured / claimed for intervals whose label states a
different coverage. Everything is vectorised over replications (seconds on one core).

    .venv/bin/python benchmarks/interval_coverage.py [--reps 4000] [--resamples 1000]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from analysis.paired_stats import (  # noqa: E402
    RANGE_MAX_N,
    bootstrap_interval,
    range_coverage,
    sd_interval,
    t_interval,
)

TARGET = 0.94


def _noise(kind: str, rng: np.random.Generator, shape: tuple[int, ...]) -> tuple[np.ndarray, float]:
    """(draws with mean 0, true SD)."""
    if kind == "normal":
        return rng.standard_normal(shape), 1.0
    return rng.standard_t(3, shape), float(np.sqrt(3.0))


def _covers(lo: np.ndarray, hi: np.ndarray, truth: float | np.ndarray) -> float:
    return float(np.mean((lo <= truth) & (truth <= hi)))


def three_level_coverage(rng: np.random.Generator, noise: str, n: int, k: int, reps: int, n_items: int = 40,
                         sd: tuple[float, float, float, float] = (0.5, 1.0, 0.5, 2.0)) -> float:
    """Coverage of `two_way_clustered` when each item score is a k-sample mean (true difference 0).

    sd: (seed, item, seed x item, one sample) standard deviations of the paired difference's parts; the seed
    and sample parts draw from `noise` (normal or t3 scaled to the same SD); `binary` draws 0/1 samples."""
    from analysis.items import two_way_clustered

    s_seed, s_item, s_sxi, s_sample = sd
    hits = 0
    if noise == "binary":  # 0/1 outcomes: logit p = item + seed + seed x item, method and reference alike
        for _ in range(reps):
            item = rng.normal(0, 1.5, (1, n_items))
            logit = item[None] + rng.normal(0, 0.3, (2, n, 1)) + rng.normal(0, 0.5, (2, n, n_items))
            p = 1.0 / (1.0 + np.exp(-logit))
            y = (rng.random((2, n, n_items, k)) < p[..., None]).mean(axis=3)
            r = two_way_clustered(y[0] - y[1])
            hits += r["two_way_lo"] <= 0 <= r["two_way_hi"]
        return hits / reps
    for _ in range(reps):
        seed_eff, scale = _noise(noise, rng, (n, 1))
        samp, scale_s = _noise(noise, rng, (2, n, n_items, k))
        d = (s_item * rng.standard_normal((1, n_items)) + s_seed * seed_eff / scale
             + s_sxi * rng.standard_normal((n, n_items))
             + s_sample * (samp[0].mean(axis=2) - samp[1].mean(axis=2)) / scale_s)
        r = two_way_clustered(d)
        hits += r["two_way_lo"] <= 0 <= r["two_way_hi"]
    return hits / reps


def _seed_rows(rng: np.random.Generator, reps: int, resamples: int) -> list[dict]:
    """The seed-level intervals (t, range, bootstraps, sigma) and the random-effects ones across 4 groups."""
    from analysis.meta import dersimonian_laird

    rows = []
    for noise in ("normal", "t3"):
        for n in (3, 5, 12):
            d, sigma = _noise(noise, rng, (n, reps))  # columns are replications
            lo, hi = t_interval(d)
            rows.append({"interval": "paired t CI", "label": "95%", "claim": 0.95, "noise": noise, "n": n,
                         "coverage": _covers(lo, hi, 0.0)})
            if n <= RANGE_MAX_N:
                claim = float(range_coverage(n))
                rows.append({"interval": "seed range (2nd CI)", "label": f"{claim:.1%} exact", "claim": claim,
                             "noise": noise, "n": n, "coverage": _covers(d.min(axis=0), d.max(axis=0), 0.0)})
            else:
                blo, bhi = bootstrap_interval(d, rng, resamples, expanded=True)
                rows.append({"interval": "expanded bootstrap (2nd CI)", "label": "95%", "claim": 0.95,
                             "noise": noise, "n": n, "coverage": _covers(blo, bhi, 0.0)})
            plo, phi = bootstrap_interval(d, rng, resamples)
            rows.append({"interval": "plain percentile bootstrap (old, not printed)", "label": "(was 95%)",
                         "claim": float("nan"), "noise": noise, "n": n, "coverage": _covers(plo, phi, 0.0)})
            slo, shi = sd_interval(d.std(axis=0, ddof=1), n)
            rows.append({"interval": "sigma chi2 CI (MDE/seeds interval)", "label": "95% if normal",
                         "claim": 0.95 if noise == "normal" else float("nan"), "noise": noise, "n": n,
                         "coverage": _covers(slo, shi, sigma)})
            # random effects across k = 4 groups: group effects ~ N(0, 0.5^2), n seeds each
            k, tau = 4, 0.5
            g = rng.standard_normal((reps, k)) * tau
            e, _ = _noise(noise, rng, (reps, k, n))
            e = e * np.array([0.5, 1.0, 1.0, 2.0])[None, :, None]  # groups differ in seed noise
            dd = g[:, :, None] + e
            est = dd.mean(axis=2)
            var = dd.var(axis=2, ddof=1) / n
            re = dersimonian_laird(est, var)
            rows.append({"interval": "random-effects DL z CI (k=4 groups)", "label": "nominal, under",
                         "claim": float("nan"),
                         "noise": noise, "n": n, "coverage": _covers(re["lo"], re["hi"], 0.0)})
            rows.append({"interval": "random-effects HKSJ CI (not printed)", "label": "(95% nominal)",
                         "claim": float("nan"),
                         "noise": noise, "n": n, "coverage": _covers(re["lo_hksj"], re["hi_hksj"], 0.0)})
            rows.append({"interval": "across-group t CI of group means (k=4)", "label": "95%", "claim": 0.95,
                         "noise": noise, "n": n, "coverage": _covers(re["lo_u"], re["hi_u"], 0.0)})
    return rows


def _item_rows(rng: np.random.Generator, reps: int) -> list[dict]:
    """The seed + item and seed + item + sample intervals."""
    rows = []
    # seed + item CI (analysis.items.two_way_clustered): D[s, i] = item effect (shared by the seeds: the
    # benchmark's items) + seed effect + residual; 100 items; fewer replications (one call per replication)
    from analysis.items import two_way_clustered

    for noise in ("normal", "t3"):
        for n in (3, 5, 12):
            reps_i = max(reps // 4, 200)
            hits = 0
            for _ in range(reps_i):
                seed_eff, _ = _noise(noise, rng, (n, 1))
                d = rng.normal(0, 1.0, (1, 100)) + 0.1 * seed_eff + rng.normal(0, 0.5, (n, 100))
                r = two_way_clustered(d)
                hits += r["two_way_lo"] <= 0 <= r["two_way_hi"]
            rows.append({"interval": "seed + item two-way CI (100 items)", "label": "95%", "claim": 0.95,
                         "noise": noise, "n": n, "coverage": hits / reps_i})
    # seed + item + sample: D[s, i] = item effect + seed effect + seed x item + (mean of k method samples - mean of
    # k reference samples); the two-way clustered CI on the cell means carries the sample noise in its cells
    for noise in ("normal", "t3", "binary"):
        for n in (3, 5, 12):
            for k in (1, 4, 16):
                rows.append({"interval": f"seed + item + sample CI (k={k})", "label": "95%", "claim": 0.95,
                             "noise": noise, "n": n,
                             "coverage": three_level_coverage(rng, noise, n, k, max(reps // 4, 200))})
    return rows


def _sequential_rows(rng: np.random.Generator, reps: int) -> list[dict]:
    """The sequential design's repeated and bias-adjusted intervals at the stopping look."""
    rows = []
    # sequential report section (looks after 3, 6, 9, 12 seeds, OBF): the repeated CI at the stopping look and
    # the bias-adjusted (median-unbiased, stage-wise) CI, true difference 0.5 sigma so some comparisons stop early
    from analysis.sequential.design import SequentialDesign
    from analysis.sequential.estimates import stagewise_estimate
    from analysis.sequential.simulation import simulate

    design = SequentialDesign(looks=(3, 6, 9, 12))
    crit = design.stat_bounds()
    for noise in ("normal", "t3"):
        e, sigma = _noise(noise, rng, (reps, 12))
        delta = 0.5 * sigma
        x = delta + e
        res = simulate(x, design)
        rci = np.zeros(reps, bool)
        adj = np.zeros(reps, bool)
        for k, n in enumerate(design.looks):
            m = res.stop_look == k
            if not m.any():
                continue
            mean, sd = x[m, :n].mean(axis=1), x[m, :n].std(axis=1, ddof=1)
            se = sd / np.sqrt(n)
            rci[m] = np.abs(mean - delta) <= crit[k] * se
            _, lo, hi = stagewise_estimate(design, k, mean / se, sd)
            adj[m] = (lo <= delta) & (delta <= hi)
        rows.append({"interval": "sequential repeated CI (at the stop)", "label": "95%", "claim": 0.95,
                     "noise": noise, "n": 12, "coverage": float(rci.mean())})
        rows.append({"interval": "sequential bias-adjusted CI (stage-wise)", "label": "95%", "claim": 0.95,
                     "noise": noise, "n": 12, "coverage": float(adj.mean())})
    return rows


def run(reps: int, resamples: int, seed: int = 20261130) -> list[dict]:
    rng = np.random.default_rng(seed)  # one stream, drawn in this order: the table is the same for a seed
    rows = _seed_rows(rng, reps, resamples) + _item_rows(rng, reps) + _sequential_rows(rng, reps)
    for r in rows:
        if r["label"] == "95%":
            r["ratio"] = r["coverage"] / TARGET
            r["ok"] = "yes" if r["coverage"] >= TARGET else "NO"
        elif r["claim"] == r["claim"]:
            r["ratio"] = r["coverage"] / r["claim"]
            tol = 3 * np.sqrt(r["claim"] * (1 - r["claim"]) / reps) + 0.005
            r["ok"] = "yes" if abs(r["coverage"] - r["claim"]) < tol else "NO"
        else:
            r["ratio"] = float("nan")
            r["ok"] = "n/a (label makes no claim here)"
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--reps", type=int, default=4000)
    ap.add_argument("--resamples", type=int, default=1000)
    args = ap.parse_args()
    t0 = time.perf_counter()
    rows = run(args.reps, args.resamples)
    secs = time.perf_counter() - t0
    head = f"{'interval':46s} {'label':14s} {'noise':6s} {'n':>3s} {'coverage':>9s} {'ratio':>6s}  ok"
    print(f"coverage of the report's intervals, {args.reps} replications each, true difference 0")
    print("ratio = coverage / 0.94 for intervals labelled 95%, coverage / claim for intervals labelled otherwise")
    print(head)
    print("-" * len(head))
    for r in rows:
        print(f"{r['interval']:46s} {r['label']:14s} {r['noise']:6s} {r['n']:3d} {r['coverage']:9.3f} "
              f"{r['ratio']:6.3f}  {r['ok']}")
    print(f"\n{secs:.1f} s")
    bad = [r for r in rows if r["ok"] == "NO"]
    if bad:
        print(f"{len(bad)} interval(s) do not cover what their label says")


if __name__ == "__main__":
    main()
