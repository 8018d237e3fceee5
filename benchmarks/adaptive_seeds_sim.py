"""GPU-hours per conclusion of sequential seeds under the defaults users get, vs a fixed 12 seeds.

Simulates what the CLI runs on a real campaign (default campaigns/paper: its 113 comparisons in 15 cells, the
campaign's real family size): every design is tested family-wise over the whole campaign (the fixed design
with Holm's step-down, the sequential ones with the Holm step-down over group-sequential boundaries that is
the default, or Bonferroni, the earlier default), and runs are weighted by each model's GPU-hours from the
plan. SDs of paired differences come from the released records the way `campaign plan --prior` takes them
(`analysis.power`); a share P_REAL of comparisons has a real effect of +-2.5 DB-12 points; the comparisons of
a cell share their reference arm (paired differences correlated, rho 0.5). Everything goes through
`analysis.sequential.plan.evaluate`, the function `campaign plan --power` uses.

Prints (1) the operating table at the defaults with GPU-hours per correct decision and its ratio to fixed 12
(Holm); (2) the family-wise error of the procedures under the global null and under 20% real effects, with
independent and correlated comparisons, against 0.05 (Monte Carlo se shown); (3) the design `campaign plan
--power 0.8 --effect 2.5` recommends and its cost against the fixed 591-run program. "holm + recycling" (the
weight of comparisons stopped for equivalence or futility passed on too) is measured, not offered: it is not
covered by the closed-testing argument, and (2) shows why.

Usage: python benchmarks/adaptive_seeds_sim.py [--sims N] [--campaign DIR] [--seed S]

Why a sequential design may go beyond 12 seeds: no sequential design capped at the fixed n can have the fixed
test's power at the same alpha (Neyman-Pearson: the fixed-n t test is the most powerful test on n seeds;
every interim look costs a little); the group-sequential remedy (Jennison & Turnbull 2000, ch. 2-3) is a
larger maximum paid back by early stops.
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

from analysis.power import power_section  # noqa: E402
from analysis.sequential.plan import campaign_comparisons, evaluate, headline, recommend  # noqa: E402
from orchestrator.accounting import accounting  # noqa: E402
from orchestrator.session import plan  # noqa: E402

RECORDS = REPO.parent / "shared" / "data" / "released_runs_171.csv"
REAL_EFFECT = 2.5  # DB-12 points for the "real" comparisons
P_REAL = 0.2
RHO = 0.5  # correlation of two comparisons sharing a reference arm (equal arm variances)
FMT = {"fwer": "{:.4f}", "power": "{:.3f}", "decided": "{:.3f}", "eq_nulls": "{:.3f}", "runs": "{:,.0f}",
       "gpu_h": "{:,.0f}", "gpu_h_per_correct": "{:,.0f}", "vs_fixed12": "{:+.0%}", "gpu_h_vs_fixed12": "{:+.0%}"}


def show(rows: list[dict], cols: list[str]) -> str:
    df = pd.DataFrame(rows).set_index("design")[cols]
    return df.apply(lambda c: c.map(lambda v: FMT.get(c.name, "{}").format(v) if v == v else "NaN")).to_string()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sims", type=int, default=2000, help="simulated campaigns per scenario")
    ap.add_argument("--campaign", default=str(REPO / "campaigns" / "paper"))
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    if not RECORDS.is_file():
        sys.exit(f"{RECORDS}: released records not found; expected shared/ beside the repository")
    t0 = time.perf_counter()
    spec, rs = plan(args.campaign, [])
    ps = power_section([r.flat() for r in rs], margin=1.0, prior_path=str(RECORDS), suite=spec.suite)
    comp = campaign_comparisons([r.flat() for r in rs], ps["comparisons"])
    acc = accounting(spec, rs)
    sources = sorted({r["sd_source"] for r in ps["comparisons"]})
    print(f"{spec.name}: {acc.total_runs} runs, {acc.gpu_hours:,} GPU-h planned; {comp.m} comparisons in "
          f"{len(np.unique(comp.cell))} cells (the family); SD of paired {ps['metric']} differences "
          f"{', '.join(f'{v:.2f}' for v in np.unique(comp.sd))} ({'; '.join(sources)})")
    sc = dict(effect=REAL_EFFECT, rho=RHO, n_sims=args.sims, seed=args.seed)

    # (1) the operating table at the defaults
    designs = {"fixed 12 (Holm)": 12,
               "seq 3/look <=15, Bonferroni (earlier default)": headline(15, "bonferroni"),
               "seq 3/look <=15, Holm step-down (default)": headline(15, "holm"),
               "seq 3/look <=24, Bonferroni": headline(24, "bonferroni"),
               "seq 3/look <=24, Holm step-down (default)": headline(24, "holm"),
               "seq 3/look <=15, per-comparison alpha (no FWER control)": headline(15, "none"),
               "seq 3/look <=15, Holm + recycling (not offered)": headline(15, "holm")}
    rows = evaluate(comp, designs, p_real=P_REAL, recycle=[k for k in designs if "recycling" in k], **sc)
    base = rows[0]
    for r in rows:
        r["vs_fixed12"] = r["gpu_h_per_correct"] / base["gpu_h_per_correct"] - 1
        r["gpu_h_vs_fixed12"] = r["gpu_h"] / base["gpu_h"] - 1
    se = float(np.sqrt(0.05 * 0.95 / args.sims))
    print(f"\n(1) {args.sims} simulated campaigns; {P_REAL:.0%} of comparisons with a real effect of +-{REAL_EFFECT} "
          f"points; comparisons of a cell share their reference (rho {RHO}); equivalence margin 1.0, futility "
          "below conditional power 0.15, OBF spending, paired t boundaries.\n    fwer = P(any false efficacy "
          "claim in the campaign: a null declared better/worse or a real effect with the wrong sign), MC se "
          f"~{se:.4f}; power = share of real effects declared with their sign; decided = share of comparisons "
          "declared better/worse/equivalent;\n    GPU-h per correct decision = E[GPU-h] / E[real effects found + "
          "nulls declared equivalent]; vs_fixed12 = its ratio to fixed 12 (Holm) - 1")
    print(show(rows, ["fwer", "power", "decided", "runs", "gpu_h", "gpu_h_per_correct", "vs_fixed12",
                      "gpu_h_vs_fixed12"]))
    by = {r["design"]: r for r in rows}
    h15, b15 = by["seq 3/look <=15, Holm step-down (default)"], by["seq 3/look <=15, Bonferroni (earlier default)"]
    print(f"    Holm vs Bonferroni at <=15: power {h15['power']:.3f} vs {b15['power']:.3f}, GPU-h per correct "
          f"decision {h15['gpu_h_per_correct']:,.0f} vs {b15['gpu_h_per_correct']:,.0f} (same simulated campaigns)")

    # (2) family-wise error under the null and with real effects, independent and correlated comparisons
    checks = {"Bonferroni <=15": headline(15, "bonferroni"), "Holm <=15 (default)": headline(15, "holm"),
              "Holm <=24 (default)": headline(24, "holm"), "Holm + recycling <=15": headline(15, "holm")}
    print(f"\n(2) family-wise error (target <= 0.05; OK when below 0.05 + 2 MC se = {0.05 + 2 * se:.4f}), "
          f"{args.sims} campaigns each:")
    out = []
    for p_real in (0.0, P_REAL):
        for rho in (0.0, RHO, 0.9):
            res = evaluate(comp, checks, effect=REAL_EFFECT, p_real=p_real, rho=rho, n_sims=args.sims,
                           seed=args.seed + 1, recycle=["Holm + recycling <=15"])
            out.append({"scenario": f"{p_real:.0%} real, rho {rho}",
                        **{r["design"]: f"{r['fwer']:.4f} {'OK' if r['fwer'] <= 0.05 + 2 * se else 'FAIL'}"
                           for r in res}})
    print(pd.DataFrame(out).set_index("scenario").to_string())

    # (3) what `campaign plan --prior RECORDS --power 0.8 --effect 2.5` recommends, vs the fixed program
    rec = recommend(comp, power=0.8, effect=REAL_EFFECT, p_real=P_REAL, rho=RHO, n_sims=min(args.sims, 400),
                    seed=args.seed)
    prog = evaluate(comp, {"planned program (fixed)": "planned"}, p_real=P_REAL, **sc)[0]
    h = rec["recommended"]
    print(f"\n(3) campaign plan {Path(args.campaign).name} --prior RECORDS --power 0.8 --effect {REAL_EFFECT}: ")
    if h is None:
        print("    no searched design reaches power 0.8")
    else:
        print(f"    looks {h['looks']} (max {h['max_seeds']}), power {h['power']:.3f}, family-wise error "
              f"{h['fwer']:.4f}, expected {h['runs']:,.0f} runs and {h['gpu_h']:,.0f} GPU-h (95th percentile "
              f"{h['gpu_h_p95']:,.0f}), decided {h['decided']:.1%}; {h['gpu_h'] / acc.gpu_hours:.2f}x the fixed "
              f"{acc.total_runs}-run program's {acc.gpu_hours:,} GPU-h")
    print(f"    the fixed program itself (its planned seeds, Holm over {comp.m}): power {prog['power']:.3f} at "
          f"{REAL_EFFECT} points, family-wise error {prog['fwer']:.4f}")
    print(f"\nwall {time.perf_counter() - t0:.1f}s")


if __name__ == "__main__":
    main()
