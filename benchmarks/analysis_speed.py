"""Analysis speed: every table + a 10,000-resample paired bootstrap for every comparison.

Runs on the released 171 runs (when ../shared/data is present) and on a synthetic 591-run record
set shaped like the published program (STUDY.md §1.2), generated here from a seed. Prints a table
with seconds, runs/s and the ratio to the 2 s target (ratio < 1 = faster than the target).

    .venv/bin/python benchmarks/analysis_speed.py [--repeat 3] [--resamples 10000]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
import warnings
from functools import partial
from pathlib import Path

import numpy as np
import pandas as pd

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from analysis.paired_stats import bootstrap_interval  # noqa: E402
from analysis.records import read_records, write_wide  # noqa: E402
from analysis.table_formats import render_tables  # noqa: E402
from analysis.tables import TABLE_NAMES, build_tables  # noqa: E402
from evaluation.suite import load_suite  # noqa: E402

TARGET_S = 2.0
RELEASED = REPO.parent / "shared" / "data" / "released_runs_171.csv"
SELECT4 = ["baseline", "difffilter", "maxvar", "topk"]
MAIN9 = ["baseline", "ar", "per", "softmax", "difffilter", "diffband", "maxvar", "gfpo", "topk"]
MIX4 = ["static", "reward_gap", "dump_ucb", "tscl"]
ALL13 = MAIN9 + MIX4


def program_591() -> list[tuple[str, str, str, str, int, int]]:
    """(campaign, model, regime, policy, seed, steps) for the 591 runs of STUDY.md §1.2."""
    runs = []

    def add(campaign, model, policies, seeds, regime="", steps=300):
        runs.extend((campaign, model, regime, p, s, steps) for p in policies for s in seeds)

    s3 = range(1, 4)
    # breadth (171): the released structure
    for m in ("Qwen2.5-7B-Instruct", "Qwen2.5-0.5B-Instruct"):
        add("main", m, MAIN9, s3)
        add("mixer", m, MIX4, s3)
    for m in ("Qwen2.5-7B-base", "Qwen2.5-14B-base", "Llama-3.1-8B-base"):
        add("crossfamily", m, SELECT4, s3)
    add("constrained", "Qwen2.5-7B-Instruct", SELECT4, s3, regime="sub25_25pct_data_subset")
    add("constrained", "Qwen2.5-7B-Instruct", SELECT4, s3, regime="noise20_20pct_label_noise")
    for m in ("Qwen2.5-1.5B-Instruct", "Qwen2.5-3B-Instruct"):
        add("scale_curve", m, SELECT4, s3)
    add("long_training", "Qwen2.5-7B-Instruct", ["baseline", "difffilter", "topk"], s3, steps=1000)
    # seed extension (108): three baseline-vs-selector groups from 3 to 12 seeds
    for c, m in (("crossfamily", "Qwen2.5-7B-base"), ("main", "Qwen2.5-7B-Instruct"),
                 ("main", "Qwen2.5-0.5B-Instruct")):
        add(c, m, SELECT4, range(4, 13))
    # mechanism / strength controls (33)
    add("crossfamily", "Qwen2.5-7B-base", ["matched_random", "matched_tokens", "alt_strength"], range(1, 12))
    # main-matrix completion (108): Qwen2.5-7B-base x the other 9 configurations x 12 seeds
    add("crossfamily", "Qwen2.5-7B-base", [p for p in ALL13 if p not in SELECT4], range(1, 13))
    # model scale / family (171): 19 further models x 3 configurations x 3 seeds
    for i in range(19):
        add("scale_family", f"Model-{i:02d}-{[1, 3, 7, 14, 32][i % 5]}B", ["baseline", "difffilter", "topk"], s3)
    return runs


def synthetic_records(seed: int = 0) -> pd.DataFrame:
    """Wide records for the 591-run program: binomial scores around a model level plus small policy effects."""
    suite = load_suite("db12")
    runs = pd.DataFrame(program_591(), columns=["campaign", "model", "regime", "method", "seed", "steps"])
    assert len(runs) == 591, len(runs)
    rng = np.random.default_rng(seed)
    n_items = np.array([suite.item_counts()[b] for b in suite.benchmark_ids])
    models = runs["model"].unique()
    level = dict(zip(models, rng.uniform(0.15, 0.7, len(models)), strict=True))
    bench_shift = rng.normal(0, 0.12, len(n_items))
    pol = {p: rng.normal(0, 0.01) for p in runs["method"].unique()}
    p = np.clip(runs["model"].map(level).to_numpy()[:, None] + bench_shift[None, :]
                + runs["method"].map(pol).to_numpy()[:, None] + rng.normal(0, 0.01, (len(runs), 1)), 0.01, 0.99)
    acc = 100.0 * rng.binomial(n_items[None, :], p) / n_items[None, :]
    run_id = (runs["campaign"] + "__" + runs["model"] + "__" + runs["regime"] + "__" + runs["method"]
              + "_s" + runs["seed"].astype(str))
    wide = pd.concat([pd.DataFrame({"run_id": run_id}), runs], axis=1)
    wide = wide[["run_id", "campaign", "model", "method", "seed", "steps", "regime"]]
    wide["mechanism"] = wide["method"].map(lambda m: "select" if m.startswith(("matched", "alt_")) else None)
    from analysis.schema import study_mechanism
    wide["mechanism"] = wide["mechanism"].fillna(wide["method"].map(study_mechanism))
    return pd.concat([wide, pd.DataFrame(acc, columns=suite.benchmark_ids)], axis=1)


def paired_shapes(recs: pd.DataFrame, suite) -> dict[int, int]:
    """{seed count n: number of comparison x metric columns with that n} of the paired analysis."""
    from analysis.comparisons import paired_comparisons

    t = paired_comparisons(recs, suite, n_resamples=100).table
    return {int(n): int(c) for n, c in t["n"].value_counts().items()}


def _time(fn, repeat: int) -> tuple[float, object]:
    best, out = float("inf"), None
    for _ in range(repeat):
        t0 = time.perf_counter()
        out = fn()
        best = min(best, time.perf_counter() - t0)
    return best, out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=3, help="timed repetitions (best is reported)")
    ap.add_argument("--resamples", type=int, default=10_000)
    args = ap.parse_args()
    suite = load_suite("db12")
    warnings.simplefilter("ignore")
    with tempfile.TemporaryDirectory() as tmp:
        synth_path = Path(tmp) / "synthetic_591.csv"
        synthetic_records(0).to_csv(synth_path, index=False)
        sets = [("synthetic 591", synth_path)]
        if RELEASED.is_file():
            sets.insert(0, ("released 171", RELEASED))
        rows = []
        for name, path in sets:
            t_read, recs = _time(partial(read_records, path, suite), args.repeat)

            def analyse(recs=recs):
                tables = build_tables(recs, suite, list(TABLE_NAMES), n_resamples=args.resamples)
                return tables, render_tables(tables, "md")

            t_an, (tables, _) = _time(analyse, args.repeat)
            n_runs = recs.groupby(["run_key", "step"]).ngroups
            n_cmp = int((tables[-1].data["metric"] == suite.aggregate_names[0]).sum())
            total = t_read + t_an
            # floor measured in the same run: the bare numpy bootstrap of every comparison x metric
            # (same seed counts and metric counts as the analysis), no pandas, no tables
            shapes = paired_shapes(recs, suite)

            def floor(shapes=shapes):
                return [bootstrap_interval(np.random.default_rng(0).normal(size=(n, m)), np.random.default_rng(n),
                                           args.resamples) for n, m in shapes.items()]

            t_floor, _ = _time(floor, args.repeat)
            rows.append({"records": name, "runs": n_runs, "comparisons": n_cmp, "tables": len(tables),
                         "read_s": round(t_read, 3), "tables+bootstrap_s": round(t_an, 3), "total_s": round(total, 3),
                         "runs_per_s": round(n_runs / total, 1), "bootstrap_floor_s": round(t_floor, 3),
                         "ratio_to_floor": round(total / t_floor, 1),
                         "ratio_to_2s_target": round(total / TARGET_S, 3)})
        # round-trip check of the synthetic wide export (not timed)
        write_wide(read_records(synth_path, suite), Path(tmp) / "roundtrip.csv", suite)
    df = pd.DataFrame(rows)
    print(f"analysis speed: {args.resamples} bootstrap resamples per comparison x metric "
          f"(aggregates, domains, benchmarks), all {len(TABLE_NAMES)} tables, best of {args.repeat}")
    print(df.to_markdown(index=False))
    worst = df["ratio_to_2s_target"].max()
    print(f"worst ratio to the {TARGET_S:g} s target: {worst:.3f} ({'within' if worst < 1 else 'OVER'} target)")


if __name__ == "__main__":
    main()
