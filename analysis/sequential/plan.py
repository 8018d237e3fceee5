"""What a campaign can decide, and at what cost, under sequential seeds with family-wise control.

Shared by `campaign plan --prior RECORDS --power P --effect E` and benchmarks/adaptive_seeds_sim.py, so the
benchmark measures what the CLI recommends. A campaign is its comparisons (policy vs campaign-local reference
in one group/model/regime cell), each with the SD of its paired differences (prior records, as the power table)
and the GPU-hours of one run of the policy and of its reference (the plan's gpus x estimated hours). Simulated
campaigns: a share `p_real` of comparisons has a real effect of +-effect points, the rest none; the
comparisons of a cell share one reference arm, so their paired differences are correlated (`rho`: 0.5 when
reference and policy runs have the same seed noise). Counting is honest: a cell's reference runs as many seeds
as its longest-running comparison. A correct decision is a true effect declared with its sign, or a null
comparison declared equivalent (margin); GPU-hours per correct decision = E[GPU-h] / E[correct decisions].
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from analysis.sequential import SequentialError
from analysis.sequential.design import SequentialDesign
from analysis.sequential.family import fixed_holm, simulate_family

#: the design family `campaign plan --power` searches: batches of 3 seeds, equivalence margin 1 point and
#: futility below conditional power 0.15 (the benchmark's headline design), maximum seeds varied
SEARCH_MAX = tuple(range(6, 37, 3))
BATCH, MARGIN, FUTILITY = 3, 1.0, 0.15


@dataclass(frozen=True)
class Comparisons:
    """A campaign's comparisons as arrays (m,): cell index, SD of paired differences, GPU-h of one policy run,
    GPU-h of one run of the cell's reference (the same for every comparison of the cell)."""

    cell: np.ndarray
    sd: np.ndarray
    gh_policy: np.ndarray
    gh_ref: np.ndarray
    planned_seeds: np.ndarray

    @property
    def m(self) -> int:
        return int(self.cell.size)


def campaign_comparisons(runs: Iterable[Any], power_rows: list[dict[str, Any]]) -> Comparisons:
    """From the plan's runs (`RunSpec.flat()`) and `analysis.power.plan_power` rows (one per comparison,
    with its SD): the arrays a simulated campaign needs. ValueError when a comparison has no SD."""
    gh: dict[tuple, list[float]] = {}
    for r in runs:
        gh.setdefault((r.group, r.model, r.regime, r.policy), []).append(float(r.gpus) * float(r.est_hours))
    cells: dict[tuple, int] = {}
    cell, sd, gp, gr, n = [], [], [], [], []
    for row in power_rows:
        key = (row["campaign"], row["model"], row["regime"])
        if row["sd"] is None or not np.isfinite(row["sd"]):
            raise SequentialError(f"comparison {'/'.join(map(str, key))}:{row['policy']}: no SD of paired differences "
                             "(no prior comparison); give --sd or prior records covering it")
        cell.append(cells.setdefault(key, len(cells)))
        sd.append(float(row["sd"]))
        gp.append(float(np.mean(gh.get(key + (row["policy"],), [0.0]))))
        gr.append(float(np.mean(gh.get(key + (row["reference"],), [0.0]))))
        n.append(int(row["n_pairs"]))
    return Comparisons(np.asarray(cell), np.asarray(sd), np.asarray(gp), np.asarray(gr), np.asarray(n))


def simulate_diffs(comp: Comparisons, n_sims: int, max_seeds: int, *, effect: float, p_real: float, rho: float,
                   seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Paired differences (n_sims, m, max_seeds) and true effects (n_sims, m). Within a cell, comparisons share
    the reference's noise: diff = delta + sd*(sqrt(1-rho)*e_policy - sqrt(rho)*e_reference)."""
    rng = np.random.default_rng(seed)
    real = rng.random((n_sims, comp.m)) < p_real
    delta = np.where(real, rng.choice([-1.0, 1.0], size=(n_sims, comp.m)) * effect, 0.0)
    n_cells = int(comp.cell.max()) + 1
    ref = rng.standard_normal((n_sims, n_cells, max_seeds))[:, comp.cell, :]
    own = rng.standard_normal((n_sims, comp.m, max_seeds))
    noise = np.sqrt(1 - rho) * own - np.sqrt(rho) * ref
    return delta[:, :, None] + comp.sd[None, :, None] * noise, delta


def campaign_cost(comp: Comparisons, seeds: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Runs and GPU-hours per simulated campaign, seeds (n_sims, m): policies' seeds plus each cell's reference
    at the cell's largest seed count."""
    runs = seeds.sum(axis=1).astype(float)
    gpu = (seeds * comp.gh_policy[None, :]).sum(axis=1)
    for c in np.unique(comp.cell):
        sel = comp.cell == c
        top = seeds[:, sel].max(axis=1)
        runs += top
        gpu += top * comp.gh_ref[sel][0]
    return runs, gpu


def operating(comp: Comparisons, decision: np.ndarray, seeds: np.ndarray, delta: np.ndarray) -> dict[str, float]:
    """Family-wise and per-comparison operating characteristics of simulated campaigns (decision codes as in
    `simulate_family`)."""
    real, null = delta != 0, delta == 0
    sign = np.sign(delta)
    rej = np.isin(decision, (1, -1))
    false_claim = (rej & null) | (rej & real & (decision != sign))
    correct = (rej & real & (decision == sign)) | ((decision == 2) & null)
    runs, gpu = campaign_cost(comp, seeds)
    return {
        "fwer": float(false_claim.any(axis=1).mean()),
        "power": float((rej & real & (decision == sign)).sum() / max(1, real.sum())),
        "eq_nulls": float(((decision == 2) & null).sum() / max(1, null.sum())),
        "eq_reals": float(((decision == 2) & real).sum() / max(1, real.sum())),
        "decided": float(np.isin(decision, (1, -1, 2)).mean()),
        "runs": float(runs.mean()),
        "gpu_h": float(gpu.mean()),
        "gpu_h_p95": float(np.quantile(gpu, 0.95)),
        "correct": float(correct.sum(axis=1).mean()),
        "gpu_h_per_correct": float(gpu.mean() / c) if (c := float(correct.sum(axis=1).mean())) > 0 else float("nan"),
    }


def headline(max_seeds: int, familywise: str = "holm") -> SequentialDesign:
    """The searched design: batches of BATCH seeds up to max_seeds, equivalence margin, futility stop."""
    return SequentialDesign(looks=tuple(range(BATCH, max_seeds + 1, BATCH)), equivalence_margin=MARGIN,
                            futility_cp=FUTILITY, familywise=familywise)  # type: ignore[arg-type]


def evaluate(comp: Comparisons, designs: Mapping[str, SequentialDesign | int | str], *, effect: float,
             p_real: float, rho: float, n_sims: int, seed: int, recycle: Iterable[str] = ()) -> list[dict[str, Any]]:
    """One row per design on the same simulated campaigns (common random numbers). An int is a fixed number
    of seeds and "planned" each comparison's planned seeds, tested with Holm over the campaign's comparisons;
    a design runs its own `familywise` procedure over the campaign's m comparisons; names in `recycle` also
    pass on the weight of comparisons stopped for equivalence/futility."""
    def top_of(d: SequentialDesign | int | str) -> int:
        return int(comp.planned_seeds.max()) if isinstance(d, str) else d if isinstance(d, int) else d.max_seeds

    diffs, delta = simulate_diffs(comp, n_sims, max(top_of(d) for d in designs.values()), effect=effect,
                                  p_real=p_real, rho=rho, seed=seed)
    rows = []
    for name, d in designs.items():
        if isinstance(d, SequentialDesign):
            res = simulate_family(diffs, d, d.familywise, recycle=name in set(recycle))
            dec, seeds = res.decision, res.seeds_used
            method = (f"looks {list(d.looks)}, {d.spending} spending, {d.familywise} over {comp.m}"
                      + (" + recycling" if name in set(recycle) else ""))
        else:
            n = comp.planned_seeds if isinstance(d, str) else np.full(comp.m, d)
            dec, seeds = fixed_holm(diffs, n), np.broadcast_to(n, delta.shape)
            method = f"fixed {'planned' if isinstance(d, str) else d} seeds, paired t, Holm over {comp.m}"
        rows.append({"design": name, "method": method, **operating(comp, dec, seeds, delta)})
    return rows


def recommend(comp: Comparisons, *, power: float, effect: float, p_real: float = 0.2, rho: float = 0.5,
              budget: float | None = None, n_sims: int = 400, seed: int = 0, familywise: str = "holm",
              search: Iterable[int] = SEARCH_MAX) -> dict[str, Any]:
    """The cheapest design of the searched family (expected GPU-hours) whose power at `effect` reaches `power`,
    under the family-wise default over the campaign's comparisons; the search stops at the first maximum that
    reaches it (power and cost both grow with the maximum). `reachable` is False when no searched design
    reaches the target, `within_budget` False when the one that does costs more than `budget` GPU-hours
    (expected), in which case `best_in_budget` is the most powerful design that fits."""
    tried = []
    for mx in search:
        row = evaluate(comp, {f"{BATCH} per look, up to {mx}": headline(mx, familywise)}, effect=effect,
                       p_real=p_real, rho=rho, n_sims=n_sims, seed=seed)[0]
        tried.append({"max_seeds": mx, "looks": list(range(BATCH, mx + 1, BATCH)), **row})
        if row["power"] >= power:
            break
    hit = next((t for t in tried if t["power"] >= power), None)
    fits = [t for t in tried if budget is None or t["gpu_h"] <= budget]
    fixed = evaluate(comp, {"fixed 12": 12}, effect=effect, p_real=p_real, rho=rho, n_sims=n_sims, seed=seed)[0]
    return {"target_power": power, "effect": effect, "p_real": p_real, "rho": rho, "n_sims": n_sims,
            "family_size": comp.m, "familywise": familywise, "budget_gpu_h": budget,
            "design_family": f"batches of {BATCH} seeds, equivalence margin {MARGIN}, futility below conditional "
                             f"power {FUTILITY}, OBF spending, paired t boundaries (exact null law by MC)",
            "method": (f"{n_sims} simulated campaigns of the {comp.m} comparisons: {p_real:.0%} with a real effect "
                       f"of +-{effect} points, SDs from the prior records, comparisons of a cell sharing their "
                       f"reference (correlation {rho}); power = share of real effects declared with their sign; "
                       f"family-wise control: {familywise} over the {comp.m} comparisons"),
            "recommended": hit, "reachable": hit is not None,
            "within_budget": hit is not None and (budget is None or hit["gpu_h"] <= budget),
            "best_in_budget": max(fits, key=lambda t: t["power"]) if fits else None,
            "tried": tried, "fixed_12_holm": fixed}



def plan_lines(doc: dict[str, Any], program_gpu_h: float, program_runs: int) -> tuple[Any, list[str]]:
    """Rich table of the designs `recommend` tried and the verdict lines `campaign plan --power` prints."""
    from rich.table import Table

    t = Table(title=f"sequential designs for power {doc['target_power']:g} at ±{doc['effect']:g} points, family-wise "
                    f"({doc['familywise']} over {doc['family_size']} comparisons)")
    for c in ("max", "looks", "power", "FWER", "decided", "runs", "GPU-h", "GPU-h p95", "GPU-h/correct"):
        t.add_column(c, justify="right")
    for r in doc["tried"] + [{**doc["fixed_12_holm"], "max_seeds": "12", "looks": ["fixed"]}]:
        looks = r["looks"] if len(r["looks"]) < 3 else [r["looks"][0], "..", r["looks"][-1]]
        t.add_row(str(r["max_seeds"]), " ".join(map(str, looks)), f"{r['power']:.3f}", f"{r['fwer']:.3f}",
                  f"{r['decided']:.1%}", f"{r['runs']:,.0f}", f"{r['gpu_h']:,.0f}", f"{r['gpu_h_p95']:,.0f}",
                  f"{r['gpu_h_per_correct']:,.0f}")
    lines = ["expected values (runs, GPU-h) over simulated campaigns; FWER = P(any false efficacy claim); "
             "GPU-h/correct = E[GPU-h] / E[real effects found + nulls declared equivalent]. "
             f"Method: {doc['method']}; design family: {doc['design_family']}"]
    h, budget = doc["recommended"], doc["budget_gpu_h"]
    if h is None:
        best = max(doc["tried"], key=lambda r: r["power"])
        lines.append(f"OUT OF REACH: no design up to {doc['tried'][-1]['max_seeds']} seeds reaches power "
                     f"{doc['target_power']:g} at ±{doc['effect']:g} points (best {best['power']:.3f} with max "
                     f"{best['max_seeds']}); a larger effect, fewer comparisons or a lower target can")
    else:
        lines.append(f"recommended: seeds: {{design: sequential, batch: {BATCH}, max: {h['max_seeds']}, "
                     f"equivalence_margin: {MARGIN}, futility_cp: {FUTILITY}, familywise: {doc['familywise']}}} — "
                     f"power {h['power']:.3f}, expected {h['runs']:,.0f} runs and {h['gpu_h']:,.0f} GPU-h "
                     f"(95th percentile {h['gpu_h_p95']:,.0f}), {h['decided']:.1%} of comparisons decided; "
                     + (f"{h['gpu_h'] / program_gpu_h:.2f}x the fixed {program_runs}-run plan's {program_gpu_h:,.0f} "
                        "GPU-h" if program_gpu_h > 0 else f"the fixed plan has {program_runs} runs and declares no "
                        "GPU-hours"))
    if budget is not None and not doc["within_budget"]:
        b = doc["best_in_budget"]
        lines.append(f"OUT OF REACH within {budget:,.0f} GPU-h: "
                     + (f"the recommended design expects {h['gpu_h']:,.0f}; " if h is not None else "")
                     + (f"the most powerful design that fits (max {b['max_seeds']}, {b['gpu_h']:,.0f} GPU-h "
                        f"expected) has power {b['power']:.3f}" if b is not None else
                        "no searched design fits the budget"))
    elif budget is not None:
        lines.append(f"within the budget of {budget:,.0f} GPU-h (expected cost)")
    return t, lines
