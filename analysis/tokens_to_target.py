"""Tokens to target: how many rollout tokens a policy needs to reach its reference's score, paired by seed.

Why: the efficiency claims of curricula (GRESO's "2.4x rollout speed-up at equal accuracy", MoPPS' and prompt
replay's "the baseline's accuracy with fewer rollouts") are about generation compute, not steps. With every
checkpoint evaluated (`evaluation: {all_checkpoints: true}`) and a rollout-token budget, each run is a curve of
score against cumulative rollout tokens (the records' `rollout_tokens`, analysis/budget.py). Per policy and seed:

* target: the reference run's final score at that seed (or a user's `target`, the same for every run);
* tokens to target: the run's rollout tokens at its first evaluated checkpoint scoring at or above the target
  (resolution: the checkpoint spacing). A run that never reaches it within its budget is **censored**: its
  tokens are only known to exceed its last count, so it is reported as censored, never as zero or the budget;
* ratio: the geometric mean over seeds of method / reference tokens, with the paired-t 95% interval on the log
  ratios (df = n - 1) and its p (`p_point`, H0: ratio 1); the verdict's p is the same test at the least
  favourable ends of each crossing's bracket (previous checkpoint, crossing], so checkpoint spacing alone cannot
  decide it and a target reached at the first checkpoint (left-censored) never does; Holm over the policies of
  one campaign/model/regime; with a
  censored method run the ratio is a lower bound (`>=`, its last count standing in) and has no interval;
* area: the mean score over the rollout tokens both runs of a seed cover (trapezoid under score vs tokens,
  divided by the range), paired Δ with its paired-t 95% interval.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
from scipy import stats

from analysis.aggregates import run_table
from analysis.paired_stats import adjust
from analysis.schema import references
from evaluation.suite import Suite
from wtcommon.errors import UserError

COLUMNS = ["campaign", "model", "regime", "policy", "reference", "metric", "target", "n", "n_reached",
           "censored_seeds", "reference_censored_seeds", "left_censored_seeds", "reference_left_censored_seeds",
           "method_tokens", "reference_tokens", "ratio", "ratio_bound", "ratio_lo", "ratio_hi", "p", "p_point",
           "p_holm", "verdict", "area_method", "area_reference", "area_delta", "area_lo", "area_hi",
           "tokens_per_seed"]
METHOD_NOTE = ("tokens to target = rollout tokens at a run's first evaluated checkpoint scoring at or above the "
               "target (the reference run's final score at the same seed, or --target), averaged over the seeds where "
               "both runs reached it (per seed: s<seed> method / reference, ≥ last count where censored); ratio = "
               "geometric mean over "
               "seeds of method / reference tokens, 95% CI = paired t on the log ratios (df = n - 1: at n = 3 "
               "t = 4.30, so it can exclude 1 only when the seeds agree closely), p_point the same t test; Holm "
               "over the policies of one campaign/model/regime on the verdict's p (below); censored = never "
               "reached the target within its budget: "
               "the ratio is then a lower bound (>=) with no interval, never zero or the budget; each crossing lies "
               "between the checkpoint before it and its own, and the verdict's p is the t test at the brackets' least "
               "favourable ends: a target reached at a run's first evaluated checkpoint leaves its bracket "
               "open at 0 (left-censored), so no verdict is decided from it; area = mean score over "
               "the rollout tokens both runs of a seed cover, paired Δ with its paired-t 95% CI")
_CONFIG = ("campaign", "model", "regime")


class NoTokenCurves(UserError):
    """The records hold no rollout tokens per checkpoint (a campaign without a budget, or older records): exit 2."""


def curves(records: pd.DataFrame, suite: Suite, metric: str) -> pd.DataFrame:
    """One row per run x evaluated checkpoint with a token count: run_key, campaign, model, regime, policy,
    mechanism, seed, step, rollout_tokens, score (`metric`), sorted by run and tokens."""
    if "rollout_tokens" not in records.columns or records["rollout_tokens"].isna().all():
        raise NoTokenCurves("no rollout tokens per checkpoint in these records: train with a campaign "
                            "`budget: {rollout_tokens: N}` (its records carry them) and `evaluation: "
                            "{all_checkpoints: true}` for a curve")
    runs = run_table(records, suite)
    tok = records.groupby(["run_key", "step"], sort=False)["rollout_tokens"].first()
    runs["rollout_tokens"] = tok.reindex(pd.MultiIndex.from_frame(runs[["run_key", "step"]])).to_numpy()
    out = runs[["run_key", *_CONFIG, "policy", "mechanism", "seed", "step", "rollout_tokens", metric]]
    out = out.rename(columns={metric: "score"}).dropna(subset=["rollout_tokens", "score"])
    return out.sort_values(["run_key", "rollout_tokens"]).reset_index(drop=True)


def first_crossing(tokens: np.ndarray, scores: np.ndarray, target: float) -> float:
    """Tokens at the first point (in token order) with score >= target; NaN when none (censored)."""
    hit = np.flatnonzero(scores >= target - 1e-9)
    return float(tokens[hit[0]]) if hit.size else math.nan


def crossing_floor(tokens: np.ndarray, scores: np.ndarray, target: float) -> float:
    """The lower end of the bracket the crossing lies in: the tokens of the evaluated checkpoint before the first
    one at or above the target (the crossing is in (floor, first_crossing]); NaN when the first evaluated
    checkpoint already reaches it (left-censored: anywhere from 0 tokens, unless that checkpoint is the base
    model at 0 tokens), or when the target is never reached."""
    hit = np.flatnonzero(scores >= target - 1e-9)
    if not hit.size:
        return math.nan
    if hit[0] == 0:
        return 0.0 if tokens[0] == 0 else math.nan
    return float(tokens[hit[0] - 1])


def mean_score_over(tokens: np.ndarray, scores: np.ndarray, lo: float, hi: float) -> float:
    """Mean of the piecewise-linear score-vs-tokens curve over [lo, hi] (trapezoid / range); NaN for an empty
    range; the point value when lo == hi."""
    if not hi >= lo:
        return math.nan
    if hi == lo:
        return float(np.interp(lo, tokens, scores))
    grid = np.concatenate([[lo], tokens[(tokens > lo) & (tokens < hi)], [hi]])
    return float(np.trapezoid(np.interp(grid, tokens, scores), grid) / (hi - lo))


def _pair_seed(m: pd.DataFrame, r: pd.DataFrame, target: float | None) -> dict[str, float]:
    """One seed's numbers: target, tokens of each side (NaN = censored), each side's last count, areas."""
    mt, ms = m["rollout_tokens"].to_numpy(float), m["score"].to_numpy(float)
    rt, rs = r["rollout_tokens"].to_numpy(float), r["score"].to_numpy(float)
    goal = float(r.sort_values("step")["score"].iloc[-1]) if target is None else float(target)
    lo, hi = max(mt[0], rt[0]), min(mt[-1], rt[-1])
    return {"target": goal, "m_tok": first_crossing(mt, ms, goal), "r_tok": first_crossing(rt, rs, goal),
            "m_floor": crossing_floor(mt, ms, goal), "r_floor": crossing_floor(rt, rs, goal),
            "m_last": float(mt[-1]), "area_m": mean_score_over(mt, ms, lo, hi),
            "area_r": mean_score_over(rt, rs, lo, hi)}


def _or_none(v: float) -> float | None:
    """A per-seed token count, None where the run never reached the target (censored: missing, not zero)."""
    return None if v != v else float(v)


def _bracket_p(per: pd.DataFrame, logr: np.ndarray) -> float:
    """The p a verdict may use: the paired t test on the log ratios at the end of each seed's crossing brackets
    least favourable to the direction the point estimate shows (fewer tokens: the method's crossing as late and
    the reference's as early as their brackets allow, m / r_floor; more: m_floor / r). A bracket open at 0 (a
    target reached at the first evaluated checkpoint) makes that end 0 or infinite: p 1, never a decided verdict
    from where checkpoints fall (issue 58). With a checkpoint at every step the brackets are one step wide."""
    if not logr.size or not np.isfinite(logr).all():
        return math.nan
    fewer = logr.mean() < 0
    with np.errstate(divide="ignore"):
        worst = np.log(per["m_tok"].to_numpy(float) / per["r_floor"].to_numpy(float)) if fewer else \
            np.log(per["m_floor"].to_numpy(float) / per["r_tok"].to_numpy(float))
    if np.isnan(worst).any() or not np.isfinite(worst).all() or (worst.mean() < 0) != fewer:
        return 1.0
    return _t(worst)[2]


def _t(d: np.ndarray) -> tuple[float, float, float]:
    """(lo, hi, p) of the paired-t 95% interval and two-sided p of mean d; NaN below two values."""
    d = d[~np.isnan(d)]
    if d.size < 2:
        return math.nan, math.nan, math.nan
    sd = float(d.std(ddof=1))
    if sd == 0:
        return float(d.mean()), float(d.mean()), 0.0 if d.mean() != 0 else 1.0
    half = stats.t.ppf(0.975, d.size - 1) * sd / math.sqrt(d.size)
    p = 2 * stats.t.sf(abs(d.mean()) / (sd / math.sqrt(d.size)), d.size - 1)
    return float(d.mean() - half), float(d.mean() + half), float(p)


def _summarise(key: tuple, pol: str, ref: str, metric: str, per: pd.DataFrame, target: float | None) -> dict:
    """One policy's row from its per-seed pairs."""
    reached = per["m_tok"].notna() & per["r_tok"].notna()
    censored = per["m_tok"].isna()
    both = per["r_tok"].notna()  # a reference that never reached a user target leaves its pair out
    m_tok = per["m_tok"].where(~censored, per["m_last"])
    logr = np.log(m_tok[both].to_numpy(float) / per.loc[both, "r_tok"].to_numpy(float))
    lo, hi, p_point = _t(logr) if not censored[both].any() else (math.nan, math.nan, math.nan)
    p = _bracket_p(per[both], logr) if not censored[both].any() else math.nan
    left = per["m_tok"].notna() & per["m_floor"].isna()
    r_left = per["r_tok"].notna() & per["r_floor"].isna()
    area = (per["area_m"] - per["area_r"]).to_numpy(float)
    a_lo, a_hi, _ = _t(area)
    return {
        **dict(zip(_CONFIG, key, strict=True)), "policy": pol, "reference": ref, "metric": metric,
        "target": "reference's final score" if target is None else f"{target:g}", "n": int(len(per)),
        "n_reached": int(reached.sum()),
        "censored_seeds": ",".join(str(s) for s in per.index[censored]),
        "reference_censored_seeds": ",".join(str(s) for s in per.index[~both]),
        # means over the same seeds on both sides: those where both runs reached the target (issue 58)
        "method_tokens": float(per.loc[reached, "m_tok"].mean()) if reached.any() else math.nan,
        "reference_tokens": float(per.loc[reached, "r_tok"].mean()) if reached.any() else math.nan,
        "tokens_per_seed": [[int(s), _or_none(per.at[s, "m_tok"]), _or_none(per.at[s, "r_tok"]),
                             float(per.at[s, "m_last"])] for s in per.index],
        "ratio": float(np.exp(logr.mean())) if logr.size else math.nan,
        "ratio_bound": ">=" if censored[both].any() else "=", "ratio_lo": math.exp(lo) if lo == lo else math.nan,
        "ratio_hi": math.exp(hi) if hi == hi else math.nan, "p": p, "p_point": p_point,
        "left_censored_seeds": ",".join(str(s) for s in per.index[left]),
        "reference_left_censored_seeds": ",".join(str(s) for s in per.index[r_left]),
        "area_method": float(np.nanmean(per["area_m"])), "area_reference": float(np.nanmean(per["area_r"])),
        "area_delta": float(np.nanmean(area)) if np.isfinite(area).any() else math.nan,
        "area_lo": a_lo, "area_hi": a_hi,
    }


def tokens_to_target_table(records: pd.DataFrame, suite: Suite, metric: str, *, target: float | None = None,
                           reference_map: dict[str, str] | None = None, alpha: float = 0.05
                           ) -> tuple[pd.DataFrame, list[str]]:
    """(one row per policy vs its reference (COLUMNS), dropped-pair messages). Records must hold every checkpoint
    with its rollout tokens (NoTokenCurves otherwise); `target`: an absolute score (points) instead of the
    reference's final score."""
    by_mechanism = references(records)
    c = curves(records, suite, metric)
    by_run = {str(k): g for k, g in c.groupby("run_key", sort=False)}
    runs = c.drop_duplicates("run_key").set_index(list(_CONFIG) + ["policy", "seed"])["run_key"]
    rows, dropped = [], []
    for key, g in c.drop_duplicates("run_key").groupby(list(_CONFIG), sort=True):
        mech_of = g.groupby("policy")["mechanism"].first().to_dict()
        for pol, mech in sorted(mech_of.items()):
            ref = (reference_map or {}).get(pol, by_mechanism.get(mech))
            if ref is None or ref == pol or ref not in mech_of:
                continue
            seeds = sorted(set(g.loc[g["policy"] == pol, "seed"]) & set(g.loc[g["policy"] == ref, "seed"]))
            lonely = sorted(set(g.loc[g["policy"].isin([pol, ref]), "seed"]) - set(seeds))
            if lonely:
                dropped.append(f"{'/'.join(map(str, key))}/{pol}: no partner at seed(s) {lonely}; left out")
            if not seeds:
                continue
            per = pd.DataFrame({s: _pair_seed(by_run[runs[(*key, pol, s)]], by_run[runs[(*key, ref, s)]], target)
                                for s in seeds}).T
            rows.append(_summarise(key, pol, ref, metric, per, target))
    table = pd.DataFrame(rows, columns=COLUMNS)
    return _verdicts(table, alpha), dropped


def _verdicts(table: pd.DataFrame, alpha: float) -> pd.DataFrame:
    """Holm over the policies of one campaign/model/regime; fewer / more tokens, undecided or censored."""
    if table.empty:
        return table
    fam = table[list(_CONFIG)].astype(str).agg("\x1f".join, axis=1).to_numpy()
    table["p_holm"] = adjust(table["p"].to_numpy(float), "holm", fam)
    sig = table["p_holm"].to_numpy(float) < alpha
    left = (table["left_censored_seeds"] != "") | (table["reference_left_censored_seeds"] != "")
    ref_never = np.array([len([x for x in str(c).split(",") if x]) == n for c, n in
                          zip(table["reference_censored_seeds"], table["n"], strict=True)])
    table["verdict"] = np.where(ref_never, "reference censored",
        np.where(table["ratio_bound"] == ">=", "censored", np.where(
        sig & (table["ratio"] < 1), "fewer tokens", np.where(sig & (table["ratio"] > 1), "more tokens",
                                                             np.where(left, "left-censored", "undecided")))))
    return table
