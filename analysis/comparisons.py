"""Paired, seed-matched comparison of each policy with its campaign-local reference: the table.

Assembles what analysis.paired_stats computes: pairs each policy's runs with its reference's at the
same seed (dropping and reporting runs without a partner), groups comparisons by seed count so each
statistic is one vectorised pass, adds the seed + item CI when item logs are given, and applies
Holm / BH over the family = all method-vs-reference comparisons of one (campaign, model, regime,
step) and one metric (A/A rows excluded), to the paired-t p-values. Runs trained to a rollout-token budget pair
at it (analysis.budget: step `AT_BUDGET`, the step each run stopped at in the budget columns), so a budgeted
campaign's family is (campaign, model, regime, budget). The definition of every
statistic is in analysis.paired_stats.
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from analysis.aggregates import run_table
from analysis.budget import add_budget_columns, at_budget
from analysis.items import NO_ITEMS_REASON
from analysis.paired_stats import (
    RANGE_MAX_N,
    adjust,
    range_coverage,
    sd_interval,
    seeds_needed,
    sign_flip_floor,
    stats_block,
)
from analysis.record_checks import check_one_grader
from analysis.schema import DEFAULT_AA_PAIR, GROUP_KEYS, extra_pairs, references
from evaluation.suite import Suite

SMALL_N_NOTE = ("small n: at n <= 5 the second CI is the seed range [min d, max d] with its exact coverage "
                "1 - 2^(1-n) (0.75 at n = 3; percentile bootstrap = this range at n = 3), not 95%; the sign-flip "
                "p cannot go below 2/2^n (0.25 at n = 3); an SD below half the score resolution is floored there "
                "and p_t falls back to the exact sign-flip p; MDE and seeds needed carry the 95% interval "
                "from the chi-square CI of the SD (normal noise).")


class UnpairedWarning(UserWarning):
    """Runs without a partner at the same seed were dropped from a paired comparison."""


@dataclass
class PairedResult:
    """table: one row per comparison x metric; dropped: one message per dropped run/seed/comparison;
    references: the mechanism -> reference policy map the pairing used (defaults or the campaign's `baselines:`)."""

    table: pd.DataFrame
    dropped: list[str] = field(default_factory=list)
    references: dict[str, str] = field(default_factory=dict)


def metric_columns(suite: Suite, aggregates: list[str] | None = None) -> list[tuple[str, str]]:
    """(metric_type, name) for aggregates, domains and benchmarks, in report order."""
    aggs = aggregates or suite.aggregate_names
    return ([("aggregate", a) for a in aggs] + [("domain", d) for d in suite.domains]
            + [("benchmark", b) for b in suite.benchmark_ids])


def metric_resolution(suite: Suite, metrics: list[tuple[str, str]]) -> np.ndarray:
    """Score step (points) of each metric: 100/n_items for a benchmark; the smallest weighted step of its
    benchmarks for a domain mean or an aggregate (one item more on the finest benchmark)."""
    from analysis.aggregates import aggregate_weights

    ids = suite.benchmark_ids
    step = np.array([100.0 / suite.item_counts()[b] for b in ids])
    dom = suite.domain_of()
    out = []
    for kind, name in metrics:
        if kind == "benchmark":
            out.append(step[ids.index(name)])
            continue
        if kind == "domain":
            members = np.array([dom[b] == name for b in ids])
            w = members / members.sum()
        else:
            w = aggregate_weights(suite.aggregate(name), suite)
        nz = w > 0
        out.append(float(np.min(w[nz] * step[nz])) if nz.any() else np.nan)
    return np.asarray(out, dtype=float)


def _pair(mrows: np.ndarray, rrows: np.ndarray, seeds: np.ndarray, run_ids: np.ndarray, label: str,
          dropped: list[str]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Align two configurations' run rows on seed -> (method rows, reference rows, seeds), sorted by seed.

    Runs without a partner at the same seed (and extra runs at a repeated seed) are reported.
    """
    out = []
    for name, rows in (("method", mrows), ("reference", rrows)):
        _, first = np.unique(seeds[rows], return_index=True)
        if len(first) < len(rows):
            extra = np.setdiff1d(np.arange(len(rows)), first)
            dropped.append(f"{label}: {name} has several runs at seed(s) {sorted(set(seeds[rows[extra]].tolist()))}; "
                           f"kept the first, dropped {sorted(run_ids[rows[extra]].tolist())}")
        out.append(rows[np.sort(first)])
    m, r = out
    common, im, ir = np.intersect1d(seeds[m], seeds[r], return_indices=True)
    lonely = sorted(run_ids[np.setdiff1d(m, m[im])].tolist() + run_ids[np.setdiff1d(r, r[ir])].tolist())
    if lonely:
        dropped.append(f"{label}: no partner at the same seed, dropped {lonely}")
    return m[im], r[ir], common


def _jobs(runs: pd.DataFrame, overrides: dict[str, str], dropped: list[str], aa_pair: tuple[str, str],
          by_mechanism: dict[str, str], pairs: Sequence[tuple[str, str]] = ()
          ) -> list[tuple[dict, np.ndarray, np.ndarray]]:
    """(identity, method run rows, reference run rows) for every comparison, plus the A/A rows. The reference
    of a policy: `overrides` (--reference-map), else its mechanism's in `by_mechanism`; `pairs` (--vs A:B) add
    A vs B in every group holding both, as effects in the same Holm family."""
    cfg = runs.groupby(list(GROUP_KEYS) + ["policy"], sort=True).indices
    groups: dict[tuple, dict[str, np.ndarray]] = {}
    for key, rows in cfg.items():
        groups.setdefault(key[:-1], {})[key[-1]] = rows
    mech_col = runs["mechanism"].to_numpy()
    jobs = []
    for gkey, pols in groups.items():
        ident = dict(zip(GROUP_KEYS, gkey, strict=True))
        label0 = "/".join(str(v) for v in gkey if v != "")
        for pol, rows in pols.items():
            mech = mech_col[rows[0]]
            ref = overrides.get(pol, by_mechanism.get(mech))
            if ref is None or ref == pol:
                if mech == "unknown" and pol not in overrides:
                    dropped.append(f"{label0}/{pol}: mechanism unknown and no --reference-map entry; not compared")
                continue
            if ref not in pols:
                elsewhere = sorted({int(k[3]) for k, p in groups.items() if k[:3] == gkey[:3] and ref in p})
                where = (f"; it has runs at step(s) {elsewhere} (compare checkpoints at the same step)" if elsewhere
                         else " at any step")
                dropped.append(f"{label0}/{pol}: reference {ref!r} has no runs at step {gkey[3]} in this campaign "
                               f"group{where}; not compared")
                continue
            jobs.append(({**ident, "policy": pol, "reference": ref, "reference_campaign": ident["campaign"],
                          "mechanism": mech, "kind": "effect"}, rows, pols[ref]))
        done = {(pol, overrides.get(pol, by_mechanism.get(mech_col[rows[0]]))) for pol, rows in pols.items()}
        for a, b in pairs:
            if a in pols and b in pols and (a, b) not in done:
                jobs.append(({**ident, "policy": a, "reference": b, "reference_campaign": ident["campaign"],
                              "mechanism": mech_col[pols[a][0]], "kind": "effect"}, pols[a], pols[b]))
    # A/A noise floor: `aa_pair` (by default static, the mixer trainer, vs baseline) at the same
    # model/regime/step, any campaign.
    a, b = aa_pair
    for gkey, pols in groups.items():
        if a not in pols:
            continue
        ident = dict(zip(GROUP_KEYS, gkey, strict=True))
        for hkey, hpols in groups.items():
            if hkey[1:] == gkey[1:] and b in hpols:
                jobs.append(({**ident, "policy": a, "reference": b, "reference_campaign": hkey[0],
                              "mechanism": mech_col[pols[a][0]], "kind": "aa_noise_floor"}, pols[a], hpols[b]))
    return jobs


def _item_block(block: dict, items: pd.DataFrame, suite: Suite, metrics: list[tuple[str, str]],
                method_runs: np.ndarray, reference_runs: np.ndarray, level: float) -> None:
    """Seed + item (two-way clustered) CI of every metric of one comparison, in points."""
    from analysis.aggregates import aggregate_weights
    from analysis.items import paired_item_matrix, two_way_clustered

    ids = suite.benchmark_ids
    dom = suite.domain_of()
    n_m = len(metrics)
    for key in ("item_lo", "item_hi", "item_se"):
        block[key] = np.full(n_m, np.nan)
    try:
        d_all, bench = paired_item_matrix(items, list(method_runs), list(reference_runs), ids)
    except KeyError as exc:
        block["item_note"][:] = str(exc).strip("'\"")
        return
    for j, (kind, name) in enumerate(metrics):
        if kind == "benchmark":
            w_b = {name: 1.0}
        elif kind == "domain":
            members = [b for b in ids if dom[b] == name]
            w_b = {b: 1.0 / len(members) for b in members}
        else:
            w = aggregate_weights(suite.aggregate(name), suite)
            w_b = {b: float(w[k]) for k, b in enumerate(ids) if w[k] > 0}
        cols = np.isin(bench, list(w_b))
        present = set(bench[cols])
        if present != set(w_b):
            block["item_note"][j] = f"no paired item logs for {sorted(set(w_b) - present)}"
            continue
        counts = pd.Series(bench[cols]).value_counts()
        a = np.array([w_b[b] / counts[b] for b in bench[cols]])
        r = two_way_clustered(100.0 * d_all[:, cols], a, bench[cols], level)
        block["item_lo"][j], block["item_hi"][j] = r["two_way_lo"], r["two_way_hi"]
        block["item_se"][j] = r["se_two_way"]


@dataclass
class _Collected:
    """Per-comparison identities and metric blocks, and each block's differences grouped by seed count n."""

    idents: list[dict] = field(default_factory=list)
    blocks: list[dict[str, np.ndarray]] = field(default_factory=list)
    # n -> [(block index, metric columns, differences d (n, k))]
    pieces: dict[int, list[tuple[int, np.ndarray, np.ndarray]]] = field(default_factory=dict)


def _means_block(label: str, x: np.ndarray, y: np.ndarray, common: np.ndarray, cols: list[str], has_items: bool,
                 out: _Collected, dropped: list[str]) -> dict[str, np.ndarray]:
    """One comparison's means and seeds per metric; queues its paired differences in `out.pieces` by n."""
    n_m = len(cols)
    d = x - y
    valid = ~np.isnan(d)
    block: dict[str, np.ndarray] = {"method_mean": np.full(n_m, np.nan), "reference_mean": np.full(n_m, np.nan),
                                    "seeds": np.full(n_m, "", dtype=object),
                                    "item_note": np.full(n_m, "" if has_items else NO_ITEMS_REASON, dtype=object)}
    # Columns sharing a pattern of valid seeds share n (usually one pattern for all metrics).
    patterns, inverse = np.unique(valid.T, axis=0, return_inverse=True)
    for k, rows_ok in enumerate(patterns):
        j = np.flatnonzero(inverse.reshape(-1) == k)
        if not rows_ok.all():
            dropped.append(f"{label}: seed(s) {common[~rows_ok].tolist()} missing for "
                           f"{[cols[c] for c in j][:6]}{' ...' if len(j) > 6 else ''}; dropped from those metrics")
        if not rows_ok.any():
            continue
        out.pieces.setdefault(int(rows_ok.sum()), []).append((len(out.blocks), j, d[np.ix_(rows_ok, j)]))
        block["method_mean"][j] = x[np.ix_(rows_ok, j)].mean(axis=0)
        block["reference_mean"][j] = y[np.ix_(rows_ok, j)].mean(axis=0)
        block["seeds"][j] = ",".join(str(v) for v in common[rows_ok])
    return block


def _collect(jobs: list[tuple[dict, np.ndarray, np.ndarray]], runs: pd.DataFrame, suite: Suite,
             metrics: list[tuple[str, str]], items: pd.DataFrame | None, level: float,
             dropped: list[str]) -> _Collected:
    """Pair every job's runs on seed and build its metric block (means, seeds, item CI)."""
    cols = [name for _, name in metrics]
    values = runs[cols].to_numpy(float)
    seeds = runs["seed"].to_numpy()
    run_ids = runs["run_id"].to_numpy().astype(str)
    out = _Collected()
    for ident, mrows, rrows in jobs:
        label = "/".join(str(ident[k]) for k in GROUP_KEYS if ident[k] != "") + \
            f"/{ident['policy']} vs {ident['reference']}"
        m, r, common = _pair(mrows, rrows, seeds, run_ids, label, dropped)
        if len(common) == 0:
            dropped.append(f"{label}: no seed pairs; not compared")
            continue
        block = _means_block(label, values[m], values[r], common, cols, items is not None, out, dropped)
        if items is not None:
            _item_block(block, items, suite, metrics, run_ids[m], run_ids[r], level)
        out.idents.append(ident)
        out.blocks.append(block)
    return out


def _add_stats(got: _Collected, resolution: np.ndarray, *, seed: int, n_resamples: int, level: float,
               margin: float | None, effect: float) -> None:
    """Fill every block's statistics, one vectorised `stats_block` pass per seed count n."""
    n_m = len(resolution)
    # The resampling generator is seeded by (seed, n), so a comparison's intervals never depend on
    # which other comparisons are in the same call.
    for n, group in got.pieces.items():
        big = np.concatenate([g[2] for g in group], axis=1)
        res = stats_block(big, np.random.default_rng([seed, n]), n_resamples=n_resamples, level=level,
                          margin=margin, effect=effect,
                          resolution=np.concatenate([resolution[g[1]] for g in group]))
        offsets = np.cumsum([0] + [g[2].shape[1] for g in group])
        for (b, j, _), lo, hi in zip(group, offsets[:-1], offsets[1:], strict=True):
            for key, v in res.items():
                got.blocks[b].setdefault(key, np.full(n_m, np.nan))[j] = v[lo:hi]


def _stack(idents: list[dict], blocks: list[dict[str, np.ndarray]], metrics: list[tuple[str, str]],
           items: pd.DataFrame | None) -> pd.DataFrame:
    """One row per comparison x metric from the blocks (an empty, typed frame when there are none)."""
    n_m = len(metrics)
    if not blocks:
        table = pd.DataFrame({c: pd.Series(dtype=float) for c in TABLE_COLUMNS})
    else:
        data: dict[str, np.ndarray] = {k: np.repeat(np.array([i[k] for i in idents], dtype=object), n_m)
                                       for k in idents[0]}
        data["metric_type"] = np.tile(np.array([t for t, _ in metrics], dtype=object), len(blocks))
        data["metric"] = np.tile(np.array([name for _, name in metrics], dtype=object), len(blocks))
        for key in blocks[0]:
            data[key] = np.concatenate([b.get(key, np.full(n_m, np.nan)) for b in blocks])
        data["n"] = np.concatenate([b["n"] for b in blocks])
        table = pd.DataFrame(data)
        table["step"] = table["step"].astype(np.int64)
    for c in ("item_lo", "item_hi", "item_se"):
        if c not in table:
            table[c] = np.nan
    if "item_note" not in table or not len(table):
        table["item_note"] = NO_ITEMS_REASON if items is None else ""
    return table


def _add_small_n_columns(table: pd.DataFrame, cols: list[str], resolution: np.ndarray, *, margin: float | None,
                         effect: float, level: float) -> None:
    """Margin, effect, seeds needed (with its interval from sigma's) and what each interval and p can be at n."""
    table["margin"] = np.nan if margin is None else margin
    table["effect"] = effect
    sd_used = table["sd_used"].to_numpy(float) if len(table) else np.zeros(0)
    table["seeds_needed"] = seeds_needed(effect, sd_used) if len(table) else np.nan
    table["seeds_needed_lo"] = np.nan
    table["seeds_needed_hi"] = np.nan
    table["sd_floored"] = table["sd_floored"].fillna(0).astype(bool) if len(table) else False
    if len(table):
        # sigma's CI per n; seeds needed is increasing in sigma, so its bounds come from sigma's bounds
        nn = table["n"].to_numpy(float)
        for n in np.unique(nn[~np.isnan(nn)]):
            rows = nn == n
            s_lo, s_hi = sd_interval(sd_used[rows], int(n))
            table.loc[rows, "seeds_needed_lo"] = seeds_needed(effect, s_lo)
            table.loc[rows, "seeds_needed_hi"] = seeds_needed(effect, s_hi)
    nvals = table["n"].to_numpy(float) if len(table) else np.zeros(0)
    table["resolution"] = pd.Series(dict(zip(cols, resolution, strict=True))).reindex(table["metric"]).to_numpy() \
        if len(table) else np.nan
    table["boot_method"] = np.where(nvals <= RANGE_MAX_N, "seed range", "expanded percentile bootstrap")
    table["boot_coverage"] = np.where(nvals <= RANGE_MAX_N, range_coverage(nvals), level)
    table["p_perm_floor"] = [sign_flip_floor(int(v)) if v == v else np.nan for v in nvals]


def _add_adjusted_p(table: pd.DataFrame) -> None:
    """Holm and BH p over each family: the effect rows of one (campaign, model, regime, step, metric)."""
    table["p_holm"] = np.nan
    table["p_bh"] = np.nan
    eff = (table["kind"] == "effect").to_numpy()
    if eff.any():
        sub = table[eff]
        fam = (sub["campaign"].astype(str) + "\x1f" + sub["model"].astype(str) + "\x1f" + sub["regime"].astype(str)
               + "\x1f" + sub["step"].astype(str) + "\x1f" + sub["metric"].astype(str)).to_numpy()
        table.loc[eff, "p_holm"] = adjust(sub["p_t"].to_numpy(float), "holm", fam)
        table.loc[eff, "p_bh"] = adjust(sub["p_t"].to_numpy(float), "fdr_bh", fam)


def paired_comparisons(records: pd.DataFrame, suite: Suite, *, reference_map: dict[str, str] | None = None,
                       aggregates: list[str] | None = None, margin: float | None = None, effect: float = 1.0,
                       n_resamples: int = 10_000, level: float = 0.95, seed: int = 0,
                       runs: pd.DataFrame | None = None, items: pd.DataFrame | None = None,
                       aa_pair: tuple[str, str] = DEFAULT_AA_PAIR, allow_mixed_graders: bool = False) -> PairedResult:
    """Every policy vs its campaign-local reference, per aggregate, domain and benchmark.

    reference_map: policy -> reference policy, overriding the default by mechanism (select/reweight/curriculum
    -> baseline, mix -> static, or the `baselines:` of the campaign that collected the records:
    `analysis.schema.references`). `aa_pair` (method, reference; a campaign's `aa_pair`,
    by default `static` vs `baseline`) at the same (model, regime, step) is added as
    kind="aa_noise_floor", never as a method effect.
    Unpaired runs are dropped, listed in `.dropped` and warned about (UnpairedWarning).
    `runs` (a precomputed `run_table`) skips recomputing the per-run aggregates.
    `items` (analysis.items layer: run_id, benchmark, item_id, score, ...) adds the seed + item
    two-way clustered CI (`item_lo`, `item_hi`); without it those are NaN and `item_note` says why.
    Records of one group in which a benchmark was scored under two grader versions are refused (RecordsError
    naming the runs and versions, `analysis.record_checks.check_one_grader`) unless `allow_mixed_graders`.
    """
    if not allow_mixed_graders:
        check_one_grader(records)
    by_mechanism = references(records)  # before any view: the campaign's `baselines:` ride on the records' attrs
    pairs = extra_pairs(records)
    budget = at_budget(records)  # runs trained to a rollout-token budget pair at it, not by step
    if budget is not None:
        records, runs = budget[0], None
    runs = run_table(records, suite) if runs is None else runs
    metrics = metric_columns(suite, aggregates)
    cols = [name for _, name in metrics]
    dropped: list[str] = []
    jobs = _jobs(runs, reference_map or {}, dropped, aa_pair, by_mechanism, pairs)
    resolution = metric_resolution(suite, metrics)
    got = _collect(jobs, runs, suite, metrics, items, level, dropped)
    _add_stats(got, resolution, seed=seed, n_resamples=n_resamples, level=level, margin=margin, effect=effect)
    keep = [i for i, b in enumerate(got.blocks) if "n" in b]
    table = _stack([got.idents[i] for i in keep], [got.blocks[i] for i in keep], metrics, items)
    _add_small_n_columns(table, cols, resolution, margin=margin, effect=effect, level=level)
    _add_adjusted_p(table)
    for msg in dropped:
        warnings.warn(msg, UnpairedWarning, stacklevel=2)
    table = table[TABLE_COLUMNS].reset_index(drop=True)
    return PairedResult(table if budget is None else add_budget_columns(table, budget[1]), dropped, by_mechanism)


TABLE_COLUMNS = [
    "campaign", "model", "regime", "step", "policy", "reference", "reference_campaign", "mechanism", "kind",
    "metric_type", "metric", "n", "seeds", "method_mean", "reference_mean", "mean_diff", "sd", "t_lo", "t_hi",
    "boot_lo", "boot_hi", "p_t", "p_perm", "p_holm", "p_bh", "margin", "p_tost", "mde", "effect",
    "seeds_needed", "p_improve_seeds", "p_improve_posterior",
    # small-n honesty (analysis.paired_stats): what each interval and p can be at this n
    "resolution", "sd_used", "sd_floored", "boot_method", "boot_coverage", "p_perm_floor", "mde_lo", "mde_hi",
    "seeds_needed_lo", "seeds_needed_hi",
    # seed + item evidence (analysis.items): NaN with the reason in item_note when there are no item logs
    "item_lo", "item_hi", "item_se", "item_note",
]
