"""The released study's tables, regenerated from records, plus sensitivity and paired tables.

Each table is a selection of configurations (grouped by campaign/model/regime/step) with the
study's method orders (STUDY.md §6.3). Cells are seed means +/- sample SD (n-1); the delta
column is the paired difference in DB-12 vs the campaign-local reference with its paired-t
95% CI. `Table.data` holds the numbers (CSV), `Table.display` the formatted cells (md, LaTeX); the
formats themselves are analysis.table_formats.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import pandas as pd

from analysis.aggregates import SD_LABEL, config_summary, run_table
from analysis.comparisons import SMALL_N_NOTE, PairedResult, paired_comparisons
from analysis.schema import CONFIG_KEYS, GROUP_KEYS, ORDER_MAIN, ORDER_MIXER, ORDER_OTHER
from analysis.sensitivity import leave_one_benchmark_out, rank_correlations
from analysis.table_formats import Table
from evaluation.suite import Suite


@dataclass(frozen=True)
class ConfigTableSpec:
    name: str
    title: str
    select: Callable[[pd.DataFrame], pd.Series]
    order: tuple[str, ...]


def _size(model: str) -> float:
    m = re.search(r"(\d+(?:\.\d+)?)\s*[bB]\b", model.replace("-", " "))
    return float(m.group(1)) if m else float("inf")


def _has(model: pd.Series, token: str) -> pd.Series:
    return model.str.contains(token, case=False, regex=False)


CONFIG_TABLES: tuple[ConfigTableSpec, ...] = (
    ConfigTableSpec("main_7b", "Main round, 7B (selection and reweighting vs baseline)",
                    lambda r: (r["campaign"] == "main") & _has(r["model"], "7B"), ORDER_MAIN),
    ConfigTableSpec("main_05b", "Main round, 0.5B (selection and reweighting vs baseline)",
                    lambda r: (r["campaign"] == "main") & _has(r["model"], "0.5B"), ORDER_MAIN),
    ConfigTableSpec("mixer", "Mixer round (adaptive mixers vs static)",
                    lambda r: r["campaign"] == "mixer", ORDER_MIXER),
    ConfigTableSpec("crossfamily", "Cross-family (base models)",
                    lambda r: r["campaign"] == "crossfamily", ORDER_OTHER),
    ConfigTableSpec("constrained", "Constrained data (25% subset and 20% label noise)",
                    lambda r: r["campaign"] == "constrained", ORDER_OTHER),
    ConfigTableSpec("scale_curve", "Scale curve (0.5B to 7B Instruct; 0.5B and 7B rows from the main round)",
                    lambda r: (r["campaign"] == "scale_curve")
                    | ((r["campaign"] == "main") & r["policy"].isin(ORDER_OTHER)), ORDER_OTHER),
    ConfigTableSpec("long_training", "Long training (1000 steps; 300-step main-round rows for reference)",
                    lambda r: (r["campaign"] == "long_training")
                    | ((r["campaign"] == "main") & _has(r["model"], "7B")
                       & r["policy"].isin(set(r.loc[r["campaign"] == "long_training", "policy"]))), ORDER_OTHER),
    ConfigTableSpec("three_domain", "Three-domain summary (per-domain seed means of every configuration)",
                    lambda r: pd.Series(True, index=r.index), ORDER_MAIN + ORDER_MIXER),
)
EXTRA_TABLES = {
    "verdicts": "Verdicts: one per method-vs-reference comparison",
    "random_effects": "Across groups: random-effects summary per policy (beside the per-group rows)",
    "aggregation_sensitivity": "Aggregation sensitivity (rank correlation of configuration rankings between "
                               "aggregates)",
    "leave_one_out": "Leave-one-benchmark-out (rank correlation with the full aggregate; worst benchmark per "
                     "aggregate)",
    "paired": "Paired comparisons vs campaign-local reference",
}
TABLE_NAMES = tuple(s.name for s in CONFIG_TABLES) + tuple(EXTRA_TABLES)


def _fmt(x: float, nd: int = 2) -> str:
    return "NaN" if x is None or (isinstance(x, float) and np.isnan(x)) else f"{x:.{nd}f}"


def _seeds_hi(v: float, hi: float) -> str:
    """Upper end of a seeds-needed interval: beyond the solver's 100,000 cap it is said so, not NaN."""
    return "> 100000" if np.isnan(hi) and not np.isnan(v) else _fmt(hi, 0)


def _pm(mean: float, sd: float) -> str:
    if np.isnan(mean):
        return "NaN"
    return f"{mean:.2f} ± {sd:.2f}" if not np.isnan(sd) else f"{mean:.2f}"


def _ci(lo: float, hi: float) -> str:
    return "" if np.isnan(lo) else f"[{lo:+.2f}, {hi:+.2f}]"


def _sort_configs(df: pd.DataFrame, order: tuple[str, ...]) -> pd.DataFrame:
    rank = {p: i for i, p in enumerate(order)}
    key = pd.DataFrame({
        "c": df["campaign"], "m": df["model"].map(_size), "mn": df["model"], "r": df["regime"], "s": df["step"],
        "p": df["policy"].map(lambda p: rank.get(p, len(rank))), "pn": df["policy"]})
    return df.loc[key.sort_values(list(key.columns), kind="stable").index]


def _config_table(spec: ConfigTableSpec, summ_all: pd.DataFrame, suite: Suite, paired: pd.DataFrame) -> Table:
    """summ_all: `config_summary` of every configuration over domains + aggregates (computed once)."""
    keys = summ_all.index.to_frame(index=False)
    summ = summ_all[spec.select(keys).to_numpy(bool)]
    if summ.empty:
        return Table(spec.name, spec.title, pd.DataFrame(), pd.DataFrame(), note="no records match this table")
    domain_only = spec.name == "three_domain"
    metrics = list(suite.domains) + ([suite.aggregate_names[0]] if domain_only else suite.aggregate_names)
    data = pd.DataFrame(index=summ.index)
    data["n_seeds"] = summ[(metrics[0], "n")]
    for m in metrics:
        data[f"{m}_mean"] = summ[(m, "mean")]
        data[f"{m}_sd"] = summ[(m, "sd")]
    data = data.reset_index()
    head = suite.aggregate_names[0]
    d = paired[(paired["metric"] == head) & (paired["kind"] == "effect")]
    d = d[list(CONFIG_KEYS) + ["reference", "mean_diff", "t_lo", "t_hi"]].rename(columns={
        "mean_diff": f"delta_{head}", "t_lo": f"delta_{head}_lo", "t_hi": f"delta_{head}_hi"})
    data = data.merge(d, on=list(CONFIG_KEYS), how="left")
    data["reference"] = data["reference"].fillna("")
    data = _sort_configs(data, spec.order).reset_index(drop=True)
    shown = [k for k in GROUP_KEYS if data[k].nunique() > 1]
    disp = pd.DataFrame({k: data[k].astype(str) for k in shown})
    disp["policy"] = data["policy"]
    disp["n"] = data["n_seeds"].astype(int).astype(str)
    for m in metrics:
        disp[m] = [_pm(a, b) for a, b in zip(data[f"{m}_mean"], data[f"{m}_sd"], strict=True)]
    disp[f"Δ {head} vs ref [95% CI]"] = [
        "" if np.isnan(v) else f"{v:+.2f} {_ci(lo, hi)} vs {ref}"
        for v, lo, hi, ref in zip(data[f"delta_{head}"], data[f"delta_{head}_lo"], data[f"delta_{head}_hi"],
                                  data["reference"], strict=True)]
    note = (f"cells: seed mean ± {SD_LABEL}; Δ: paired difference vs the campaign-local reference, "
            "paired t 95% CI (df = n-1)")
    return Table(spec.name, spec.title, data, disp, note,
                 keep=(("policy", "model", "campaign", "n", *suite.domains, head) if domain_only else
                       ("policy", "model", "regime", "n", f"Δ {head} vs ref [95% CI]", head,
                        *suite.aggregate_names)))


def _group_label(key: tuple) -> str:
    return "/".join(str(v) for v in key if str(v) not in ("", "nan"))


def _sensitivity_table(summ_all: pd.DataFrame, suite: Suite) -> Table:
    """Rank correlation between aggregates within each campaign/model/regime/step group, then pooled."""
    aggs = suite.aggregate_names
    summ = summ_all.xs("mean", axis=1, level=1)[aggs]
    keys = summ.index.to_frame(index=False)[list(GROUP_KEYS)]
    codes, uniq = pd.MultiIndex.from_frame(keys).factorize()
    values = summ.to_numpy(float)
    parts = []
    for g in range(len(uniq)):
        rows = codes == g
        if rows.sum() >= 3:
            rc = rank_correlations(pd.DataFrame(values[rows], columns=aggs))
            rc.insert(0, "scope", _group_label(uniq[g]))
            parts.append(rc)
    pooled = rank_correlations(summ)
    pooled.insert(0, "scope", f"pooled: all {len(summ)} configurations")
    data = pd.concat(parts + [pooled], ignore_index=True)
    disp = data.copy()
    for c in ("spearman", "kendall"):
        disp[c] = disp[c].map(lambda v: _fmt(v, 3))
    note = ("Spearman rho / Kendall tau-b between configuration rankings within each campaign/model/regime/step "
            "group (>= 3 configurations), then pooled over every configuration (labelled pooled: it mixes models "
            "and regimes). With 4 configurations rho takes only 11 values and tau 7: read the group rows as coarse")
    return Table("aggregation_sensitivity", EXTRA_TABLES["aggregation_sensitivity"], data, disp, note,
                 lead="per group first; the pooled rows are labelled pooled")


def _lobo_rows(lobo: pd.DataFrame, scope: str) -> pd.DataFrame:
    ranked = lobo.dropna(subset=["spearman"])
    worst = ranked.loc[ranked.groupby("aggregate", sort=False)["spearman"].idxmin()] if len(ranked) else ranked
    data = lobo.groupby("aggregate", sort=False).agg(spearman_min=("spearman", "min"),
                                                      spearman_median=("spearman", "median"),
                                                      kendall_min=("kendall", "min"), n_configs=("n_configs", "max"))
    data["most_influential_benchmark"] = worst.set_index("aggregate")["benchmark"]
    data = data.reset_index()
    data.insert(0, "scope", scope)
    return data


def _lobo_table(runs: pd.DataFrame, suite: Suite) -> Table:
    """Leave-one-benchmark-out per campaign/model/regime/step group (>= 3 configurations), then pooled."""
    lobo = leave_one_benchmark_out(runs, suite)
    if lobo.empty:
        return Table("leave_one_out", EXTRA_TABLES["leave_one_out"], lobo, lobo, note="no configurations")
    parts = []
    for key, part in runs.groupby(list(GROUP_KEYS), sort=True):
        if part["policy"].nunique() >= 3:
            parts.append(_lobo_rows(leave_one_benchmark_out(part, suite), _group_label(key)))
    n_cfg = runs.groupby(list(CONFIG_KEYS)).ngroups
    parts.append(_lobo_rows(lobo, f"pooled: all {n_cfg} configurations"))
    data = pd.concat(parts, ignore_index=True)
    disp = data.copy()
    for c in ("spearman_min", "spearman_median", "kendall_min"):
        disp[c] = disp[c].map(lambda v: _fmt(v, 3))
    return Table("leave_one_out", EXTRA_TABLES["leave_one_out"], data, disp,
                 note="rank correlation of each aggregate's configuration ranking without one benchmark vs with all, "
                      "within each group (>= 3 configurations), then pooled over all configurations (labelled pooled)",
                 lead="per group first; the pooled rows are labelled pooled")


def verdicts_table(paired: pd.DataFrame, metric: str, margin: float = 1.0, alpha: float = 0.05) -> Table:
    """The verdict table (analysis.verdicts): one row per comparison, the counts in the lead line."""
    from analysis.verdicts import METHOD_NOTE, verdict_counts, verdict_table

    data = verdict_table(paired, metric, margin, alpha)
    disp = _group_columns(data)
    disp["policy"] = data["policy"]
    disp["vs"] = data["reference"]
    disp["n"] = data["n"].map(lambda v: _fmt(v, 0))
    disp["Δ mean [t 95% CI]"] = [f"{v:+.2f} {_ci(a, b)}"
                                 for v, a, b in zip(data["mean_diff"], data["t_lo"], data["t_hi"], strict=True)]
    disp["verdict"] = data["verdict"] + np.where(data["margin_below_aa_floor"], " ⚠", "")
    disp["evidence"] = data["evidence"]
    disp["seeds to decide [σ 95% CI if normal]"] = [
        "" if np.isnan(v) else f"{v:.0f} [{_fmt(lo, 0)}, {_seeds_hi(v, hi)}]"
        for v, lo, hi in zip(data["seeds_to_decide"], data["seeds_to_decide_lo"], data["seeds_to_decide_hi"],
                             strict=True)]
    disp["A/A floor"] = data["aa_floor"].map(_fmt)
    _add_stopped_steps(disp, data)
    counts = verdict_counts(data)
    lead = (f"{metric}, margin ±{margin:g}: " + ", ".join(f"{v} {c}" for v, c in counts.items())
            + f" of {len(data)} comparisons"
            + (f"; margin below the A/A noise floor for {int(data['margin_below_aa_floor'].sum())}"
               if data["margin_below_aa_floor"].any() else ""))
    note = METHOD_NOTE.format(alpha=alpha, margin=margin)
    if STOPPED in disp.columns:
        note += ("; runs trained to a rollout-token budget are paired at it (each run's last checkpoint), so their "
                 "family is campaign/model/regime/budget")
    return Table("verdicts", f"{EXTRA_TABLES['verdicts']} ({metric}, ±{margin:g})", data, disp, note, lead=lead)


def random_effects_display(paired: pd.DataFrame, metric: str) -> Table:
    """Per policy across the groups it was run in: DL estimate, heterogeneity, and the 95% interval."""
    from analysis.meta import random_effects_table

    data = random_effects_table(paired, metric)
    disp = pd.DataFrame({"policy": data["policy"], "vs": data["reference"],
                         "groups": data["k_groups"].astype(str)})
    disp["mean of group Δ [t 95% CI, k−1 df]"] = [f"{m:+.2f} {_ci(a, b)}" for m, a, b in
                                                  zip(data["mean_groups"], data["lo_t"], data["hi_t"], strict=True)]
    disp["DL μ [z CI: nominal 95%, undercovers]"] = [f"{m:+.2f} {_ci(a, b)}" for m, a, b in
                                                     zip(data["mu"], data["lo_dl"], data["hi_dl"], strict=True)]
    disp["τ²"] = data["tau2"].map(lambda v: _fmt(v, 3))
    disp["I²"] = data["i2"].map(lambda v: f"{v:.0%}")
    disp["Q (p)"] = [f"{q:.2f} ({p:.3f})" for q, p in zip(data["q"], data["p_q"], strict=True)]
    note = (f"{metric}: one estimate per group (campaign/model/regime/step) = mean paired Δ, variance sd²/n (SD "
            "floored at resolution/2); DerSimonian-Laird τ², I², Q; the 95% interval is the t interval of the group "
            "estimates (measured 0.95-0.97 in benchmarks/interval_coverage.py; the DL z interval 0.82-0.87 at 4 "
            "groups)")
    lead = ("across groups: DerSimonian-Laird random effects per policy with heterogeneity; the per-group rows are "
            "in the paired table")
    return Table("random_effects", f"{EXTRA_TABLES['random_effects']} ({metric})", data, disp, note, lead=lead)


STOPPED = "stopped at step (method / reference)"


def _group_columns(data: pd.DataFrame) -> pd.DataFrame:
    """The group keys that vary among `data`'s rows, as text; a step seen at a rollout-token budget reads as
    such (analysis.budget.step_label), never as a negative step."""
    from analysis.budget import step_label

    budget = data["rollout_token_budget"] if "rollout_token_budget" in data.columns else pd.Series(np.nan,
                                                                                                  index=data.index)
    cols = {k: data[k].astype(str) for k in GROUP_KEYS if data[k].nunique() > 1}
    if "step" in cols:
        below = data["below_budget"] if "below_budget" in data.columns else pd.Series("", index=data.index)
        cols["step"] = pd.Series([step_label(s, b, w) for s, b, w in zip(data["step"], budget, below, strict=True)],
                                 index=data.index)
    return pd.DataFrame(cols, index=data.index)


def _add_stopped_steps(disp: pd.DataFrame, data: pd.DataFrame) -> None:
    """Runs paired at a rollout-token budget: the step each run stopped at, seed by seed, per side (a run the step
    cap stopped below its budget is marked †)."""
    if "method_steps" not in data.columns or not (data["method_steps"].astype(str) != "").any():
        return
    disp[STOPPED] = [f"{m} / {r}" + (f" † below budget: {b}" if b else "") for m, r, b in zip(
        data["method_steps"], data["reference_steps"], data["below_budget"], strict=True)]


def paired_table(paired: pd.DataFrame, metric: str) -> Table:
    """The paired-comparison table for one metric (aggregate, domain or benchmark)."""
    data = paired[paired["metric"] == metric].reset_index(drop=True)
    disp = _group_columns(data)
    disp["policy"] = data["policy"]
    disp["vs"] = np.where(data["kind"] == "aa_noise_floor",
                          data["reference"].astype(str) + " (" + data["reference_campaign"].astype(str)
                          + ", A/A noise floor)",
                          data["reference"].astype(str))  # astype: an empty table's columns are float
    disp["n"] = data["n"].map(lambda v: _fmt(v, 0))
    if "watch" in data.columns:  # the reward watch of the method's runs (analysis/reward_watch.py), when read
        disp["watch"] = data["watch"].astype(str)
    disp["Δ mean"] = data["mean_diff"].map(lambda v: f"{v:+.2f}")
    disp["sd"] = data["sd"].map(_fmt)
    disp["t 95% CI"] = [_ci(a, b) for a, b in zip(data["t_lo"], data["t_hi"], strict=True)]
    disp["seed + item 95% CI"] = [_ci(a, b) if not np.isnan(a) else "NaN"
                                  for a, b in zip(data["item_lo"], data["item_hi"], strict=True)]
    disp["range / bootstrap CI (coverage)"] = [
        "" if np.isnan(a) else f"{_ci(a, b)} ({'range' if m == 'seed range' else 'boot'} {c:.1%})"
        for a, b, m, c in zip(data["boot_lo"], data["boot_hi"], data["boot_method"], data["boot_coverage"],
                              strict=True)]
    floored = data["sd_floored"].astype(bool).to_numpy() if len(data) else np.zeros(0, bool)
    disp["p (t)"] = [_fmt(v, 3) + (" ‡" if f else "") for v, f in zip(data["p_t"], floored, strict=True)]
    disp["p (sign-flip) ≥ floor"] = [f"{_fmt(v, 3)} ≥ {_fmt(fl, 3)}"
                                     for v, fl in zip(data["p_perm"], data["p_perm_floor"], strict=True)]
    for c, lab in (("p_holm", "p Holm"), ("p_bh", "p BH")):
        disp[lab] = data[c].map(lambda v: _fmt(v, 3))
    if data["p_tost"].notna().any():
        disp[f"p TOST (±{data['margin'].iloc[0]:g})"] = data["p_tost"].map(lambda v: _fmt(v, 3))
    disp["MDE [σ 95% CI if normal]"] = [f"{_fmt(v)} [{_fmt(lo)}, {_fmt(hi)}]"
                              for v, lo, hi in zip(data["mde"], data["mde_lo"], data["mde_hi"], strict=True)]
    if len(data):
        disp[f"seeds for Δ={data['effect'].iloc[0]:g} [σ 95% CI if normal]"] = [
            f"{_fmt(v, 0)} [{_fmt(lo, 0)}, {_seeds_hi(v, hi)}]"
            for v, lo, hi in zip(data["seeds_needed"], data["seeds_needed_lo"], data["seeds_needed_hi"], strict=True)]
    disp["P(d>0) seeds"] = data["p_improve_seeds"].map(lambda v: _fmt(v, 2))
    note = (f"{metric}: d = method − reference per seed; sd = {SD_LABEL}; Holm/BH over the methods of one "
            "campaign/model/regime/step; A/A rows (static vs baseline) estimate the noise floor and are "
            "excluded from the family; ‡ = SD below half the score resolution: p (t) is the exact sign-flip p and "
            "the SD is floored at resolution/2 for the t CI, TOST, MDE and seeds; seed + item CI: two-way clustered "
            "over seeds and items, paired on items (analysis/items.py)"
            + (f"; seed + item CI missing (—): {data['item_note'].iloc[0]}"
               if len(data) and data["item_lo"].isna().all() and data["item_note"].iloc[0] else ""))
    _add_stopped_steps(disp, data)
    has_items = bool(len(data)) and bool(data["item_lo"].notna().any())
    keep = ("policy", "vs", *(["watch"] if "watch" in data.columns else []), "n", "Δ mean", "t 95% CI",
            *(["seed + item 95% CI"] if has_items else []), "p Holm",
            "range / bootstrap CI (coverage)", "P(d>0) seeds", *([STOPPED] if STOPPED in disp.columns else []),
            "model", "campaign", "regime", "step")
    return Table("paired", f"{EXTRA_TABLES['paired']} ({metric})", data, disp, note, lead=SMALL_N_NOTE, keep=keep)


def build_tables(records: pd.DataFrame, suite: Suite, names: list[str] | None = None, *,
                 paired: PairedResult | None = None, metric: str | None = None,
                 n_resamples: int = 10_000, runs: pd.DataFrame | None = None, margin: float = 1.0,
                 allow_mixed_graders: bool = False) -> list[Table]:
    """Build the named tables (default: all, in TABLE_NAMES order) from long records (`allow_mixed_graders`:
    as `paired_comparisons`)."""
    wanted = list(names or TABLE_NAMES)
    unknown = [n for n in wanted if n not in TABLE_NAMES]
    if unknown:
        raise KeyError(f"unknown table(s) {unknown}; choose from {', '.join(TABLE_NAMES)} or 'all'")
    if runs is None:
        from analysis.budget import budget_view

        records = budget_view(records)  # budgeted runs at their budget, as the paired comparisons see them
        runs = run_table(records, suite)
    if paired is None:
        paired = paired_comparisons(records, suite, runs=runs, n_resamples=n_resamples,
                                    allow_mixed_graders=allow_mixed_graders)
    specs = {s.name: s for s in CONFIG_TABLES}
    summ_all = config_summary(runs, list(suite.domains) + suite.aggregate_names)
    out = []
    for name in wanted:
        if name in specs:
            out.append(_config_table(specs[name], summ_all, suite, paired.table))
        elif name == "aggregation_sensitivity":
            out.append(_sensitivity_table(summ_all, suite))
        elif name == "leave_one_out":
            out.append(_lobo_table(runs, suite))
        elif name == "verdicts":
            out.append(verdicts_table(paired.table, metric or suite.aggregate_names[0], margin))
        elif name == "random_effects":
            out.append(random_effects_display(paired.table, metric or suite.aggregate_names[0]))
        else:
            out.append(paired_table(paired.table, metric or suite.aggregate_names[0]))
    return out

