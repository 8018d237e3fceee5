"""Adaptive seed allocation vs the fixed 12-seed design, on campaigns shaped like the release.

Seed SDs of paired differences come from `shared/data/released_runs_171.csv` (45 method-vs-
reference comparisons, 3 seeds each): every simulated comparison keeps the SD of its
(campaign, model, regime) group, pooled over that group's comparisons. Effects: most zero,
a few real ones (P_REAL of comparisons, |delta| = REAL_EFFECT aggregate points, random sign).
The declared equivalence margin is MARGIN points of the aggregate.

Runs are counted honestly: a reference arm is shared by all comparisons of its group, so it
needs as many seeds as the longest-running comparison of the group.

Prints a table per design and the ratios the issue asks for: type-I error <= 5%, power >=
the fixed design, runs saved >= 30%.  Usage: python benchmarks/adaptive_seeds_sim.py [--sims N]

Why the headline design may go to 15 seeds: with the same maximum (12) no sequential design can
have the fixed 12-seed test's power at the same alpha. For a normal mean, the fixed-n test is the
most powerful (unbiased) level-alpha test on n observations (Neyman-Pearson), and a sequential test
that never uses more than 12 seeds is one such test, so its power is at most the fixed test's
(every interim look costs a little of it). The standard group-sequential remedy (Jennison &
Turnbull 2000, ch. 2-3) is a maximum slightly above the fixed n, paid back many times over by
early stops; the table shows both: the best design capped at 12 and the headline with max 15.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from analysis.sequential import SequentialDesign  # noqa: E402
from analysis.sequential_sim import fixed_t_test, simulate  # noqa: E402
from evaluation.suite import load_suite  # noqa: E402

RECORDS = REPO.parent / "shared" / "data" / "released_runs_171.csv"
AGGREGATE = "DB-12"
MARGIN = 1.0  # DB-12 points: a difference smaller than this is declared practically irrelevant
REAL_EFFECT = 2.5  # DB-12 points for the "real" comparisons
P_REAL = 0.2
FIXED_N = 12
HEADLINE = "seq 3x5<=15 +equiv +fut.15"
CAPPED = "seq 3x4<=12 +equiv +fut.15"


def aggregate_columns(df: pd.DataFrame) -> pd.DataFrame:
    """Per-run aggregates (computed per run first, STUDY.md section 6.1) from the wide CSV."""
    suite = load_suite("db12")
    counts = suite.item_counts()
    out = {}
    for a in suite.aggregates:
        cols = list(a.benchmarks)
        if a.kind == "domain_mean":
            doms = {}
            for b in cols:
                doms.setdefault(suite.domain_of()[b], []).append(b)
            out[a.name] = sum(df[v].mean(axis=1) for v in doms.values()) / len(doms)
        elif a.kind == "mean":
            out[a.name] = df[cols].mean(axis=1)
        else:
            w = np.array([counts[b] for b in cols], dtype=float)
            out[a.name] = (df[cols].to_numpy() * w).sum(axis=1) / w.sum()
    return pd.DataFrame(out, index=df.index)


def paired_sds(path: Path) -> pd.DataFrame:
    """One row per comparison: group key, method, reference and the SD of paired differences per column."""
    df = pd.read_csv(path, keep_default_na=False)
    suite = load_suite("db12")
    df = pd.concat([df, aggregate_columns(df)], axis=1)
    cols = suite.aggregate_names + suite.benchmark_ids
    rows = []
    for key, g in df.groupby(["campaign", "model", "regime", "steps"]):
        ref = "static" if "static" in set(g["method"]) else "baseline"
        r = g[g["method"] == ref].set_index("seed")
        for meth, gm in g[g["method"] != ref].groupby("method"):
            gm = gm.set_index("seed")
            seeds = r.index.intersection(gm.index)
            d = gm.loc[seeds, cols] - r.loc[seeds, cols]
            rows.append({"group": "/".join(map(str, key)), "method": meth, "reference": ref, "n": len(seeds),
                         **{f"sd:{c}": d[c].std(ddof=1) for c in cols}, **{f"mean:{c}": d[c].mean() for c in cols}})
    return pd.DataFrame(rows)


def campaign_runs(seeds: np.ndarray, groups: np.ndarray) -> np.ndarray:
    """Runs per simulated campaign: seeds (n_camp, n_comp), shared reference per group. Returns (n_camp,)."""
    total = seeds.sum(axis=1).astype(float)
    for g in np.unique(groups):
        total += seeds[:, groups == g].max(axis=1)
    return total


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sims", type=int, default=3000, help="simulated campaigns (each has all comparisons)")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    if not RECORDS.is_file():
        sys.exit(f"{RECORDS}: released records not found; expected shared/ beside the repository")
    t0 = time.perf_counter()
    comp = paired_sds(RECORDS)
    sd_cols = [c for c in comp.columns if c.startswith("sd:")]
    print(f"released comparisons: {len(comp)} (paired by seed, {int(comp['n'].min())}-{int(comp['n'].max())} seeds)")
    summary = pd.DataFrame({
        "median_sd": comp[sd_cols].median(), "rms_sd": np.sqrt((comp[sd_cols] ** 2).mean()),
        "median_|mean|": comp[[c.replace("sd:", "mean:") for c in sd_cols]].abs().median().to_numpy(),
    })
    summary.index = [c[3:] for c in sd_cols]
    print("\nseed SD of paired differences (points), released records:")
    print(summary.round(2).to_string())

    # group-pooled SDs of the chosen aggregate
    sdcol = f"sd:{AGGREGATE}"
    pooled = comp.groupby("group")[sdcol].apply(lambda s: float(np.sqrt((s**2).mean())))
    sds = comp["group"].map(pooled).to_numpy()
    groups = comp["group"].astype("category").cat.codes.to_numpy()
    n_comp, n_sims = len(comp), args.sims
    rng = np.random.default_rng(args.seed)
    real = rng.random((n_sims, n_comp)) < P_REAL
    sign = rng.choice([-1.0, 1.0], size=(n_sims, n_comp))
    delta = np.where(real, sign * REAL_EFFECT, 0.0)
    max_n = 15
    noise = rng.standard_normal((n_sims, n_comp, max_n)) * sds[None, :, None]
    diffs = (delta[:, :, None] + noise).reshape(n_sims * n_comp, max_n)
    real_f, sign_f = real.ravel(), sign.ravel()

    designs = {
        "fixed 12": None,
        "seq 3+3+3+3 efficacy only": SequentialDesign(looks=(3, 6, 9, 12)),
        "seq 3+3+3+3 +equiv": SequentialDesign(looks=(3, 6, 9, 12), equivalence_margin=MARGIN),
        "seq 3+3+3+3 +equiv +fut.05": SequentialDesign(looks=(3, 6, 9, 12), equivalence_margin=MARGIN,
                                                       futility_cp=0.05),
        CAPPED: SequentialDesign(looks=(3, 6, 9, 12), equivalence_margin=MARGIN, futility_cp=0.15),
        HEADLINE: SequentialDesign(looks=(3, 6, 9, 12, 15), equivalence_margin=MARGIN, futility_cp=0.15),
    }
    rows = []
    hits: dict[str, np.ndarray] = {}
    for name, d in designs.items():
        if d is None:
            dec = fixed_t_test(diffs, FIXED_N)
            seeds = np.full(dec.shape, FIXED_N)
        else:
            r = simulate(diffs, d)
            dec, seeds = r.decision, r.seeds_used
        seeds2 = seeds.reshape(n_sims, n_comp)
        hits[name] = (dec[real_f] == sign_f[real_f]).astype(float)
        rows.append({
            "design": name,
            "type_I": float(np.isin(dec[~real_f], [1, -1]).mean()),
            "power": float((dec[real_f] == sign_f[real_f]).mean()),
            "eq_nulls": float((dec[~real_f] == 2).mean()),
            "futile_nulls": float((dec[~real_f] == 3).mean()),
            "eq_reals": float((dec[real_f] == 2).mean()),
            "seeds/comp": float(seeds.mean()),
            "runs/campaign": float(campaign_runs(seeds2, groups).mean()),
        })
    tab = pd.DataFrame(rows).set_index("design")
    base = tab.loc["fixed 12"]
    tab["runs_saved"] = 1.0 - tab["runs/campaign"] / base["runs/campaign"]
    tab["power_ratio"] = tab["power"] / base["power"]
    mc_se = float(np.sqrt(0.05 * 0.95 / max(1, (~real_f).sum())))
    print(f"\nscenario: {n_sims} campaigns x {n_comp} comparisons; {P_REAL:.0%} real (|delta| = {REAL_EFFECT} "
          f"{AGGREGATE} points), margin {MARGIN}; alpha 0.05 two-sided; MC se of type-I ~ {mc_se:.4f}")
    print(tab.round(4).to_string())
    seq = tab.loc[HEADLINE]
    d_pow = hits[HEADLINE] - hits["fixed 12"]
    se_pow = float(d_pow.std(ddof=1) / np.sqrt(d_pow.size))
    print(f"\nratios ({HEADLINE} vs fixed 12; OBF efficacy spending, t bounds, equivalence margin {MARGIN}):")
    print(f"  type-I error {seq['type_I']:.4f} (target <= 0.05): "
          f"{'OK' if seq['type_I'] <= 0.05 + 2 * mc_se else 'FAIL'}")
    print(f"  power ratio {seq['power_ratio']:.3f}, difference {d_pow.mean():+.4f} +- {se_pow:.4f} (paired MC se) "
          f"(target >= 1): {'OK' if seq['power_ratio'] >= 1 else 'FAIL'}")
    print(f"  runs saved {seq['runs_saved']:.1%} (target >= 30%): {'OK' if seq['runs_saved'] >= 0.30 else 'FAIL'}")
    cap = tab.loc[CAPPED]
    d_cap = hits[CAPPED] - hits["fixed 12"]
    print(f"\ncapped at 12 seeds ({CAPPED}): type-I {cap['type_I']:.4f}, power ratio {cap['power_ratio']:.3f} "
          f"(difference {d_cap.mean():+.4f} +- {float(d_cap.std(ddof=1) / np.sqrt(d_cap.size)):.4f}), "
          f"runs saved {cap['runs_saved']:.1%}.\n  With the fixed design's own maximum, power below the fixed test's "
          "is "
          "unavoidable (Neyman-Pearson: the fixed 12-seed t test is the most powerful test on 12 seeds);\n"
          "  a maximum of 15 recovers it while the early stops still save the runs.")
    print(f"\nwall {time.perf_counter() - t0:.1f}s")


if __name__ == "__main__":
    main()
