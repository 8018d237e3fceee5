"""One verdict per claim: each method-vs-reference comparison is better, worse, equivalent within
+/- margin, or undecided, with the multiplicity-adjusted evidence behind it.

Per comparison (one metric, default the suite's first aggregate) two hypotheses are tested:
* superiority: two-sided paired t p (`p_t` of analysis.comparisons: the exact sign-flip p where the SD
  is below half the score resolution), H0: mean difference = 0;
* equivalence: TOST p against +/- margin with the same (floored) SD, H0: |mean difference| >= margin.
Holm's step-down procedure runs over all 2m hypotheses (m superiority + m equivalence) of one
family = campaign/model/regime/step, at alpha (default 0.05). This controls the family-wise error
over both kinds of claim. Verdict: "better"/"worse" when the adjusted superiority p < alpha (sign
of the mean), else "equivalent" when the adjusted TOST p < alpha, else "undecided". (A comparison
can pass both; it is then "better"/"worse", and the evidence says it is also within the margin.)

For "undecided": the seeds per arm needed for 80% power to detect a true difference of +/- margin
with a two-sided paired t test at alpha/(2m) (the first Holm step, so conservative), at the
floored SD, with the interval from the SD's chi-square 95% CI (analysis.paired_stats.sd_interval).

A/A noise floor: |mean difference| of the A/A row (static vs baseline: the same training
recipe through two code paths) at the same model/regime/step. A margin below it asks the
comparison to resolve differences smaller than what two identical recipes already show; such
rows are flagged (`margin_below_aa_floor`). NaN floor where the campaign has no A/A row.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
from scipy import stats

from analysis.budget import BUDGET_COLUMNS_OUT
from analysis.paired_stats import adjust, sd_interval, seeds_needed
from analysis.schema import GROUP_KEYS

VERDICTS = ("better", "worse", "equivalent", "undecided")
VERDICT_COLUMNS = [
    "campaign", "model", "regime", "step", "policy", "reference", "metric", "n", "mean_diff", "t_lo", "t_hi",
    "margin", "p_superiority", "p_equivalence", "p_superiority_holm", "p_equivalence_holm", "verdict",
    "evidence", "seeds_to_decide", "seeds_to_decide_lo", "seeds_to_decide_hi", "aa_floor", "margin_below_aa_floor",
]
METHOD_NOTE = ("verdict per comparison: Holm over the superiority (paired t; exact sign-flip p where SD < "
               "resolution/2) and TOST equivalence hypotheses of each campaign/model/regime/step, alpha = {alpha}; "
               "better/worse: adjusted superiority p < alpha; equivalent: adjusted TOST p < alpha (within "
               "±{margin:g}); "
               "else undecided, with the seeds per arm for 80% power at Δ = ±{margin:g} (alpha/2m) and its interval "
               "from the SD's chi-square 95% CI; ⚠ = margin below the A/A noise floor (|static − baseline|)")


def _tost(mean: np.ndarray, sd: np.ndarray, n: np.ndarray, margin: float) -> np.ndarray:
    se = sd / np.sqrt(n)
    with np.errstate(divide="ignore", invalid="ignore"):
        p = np.maximum(stats.t.sf((mean + margin) / se, n - 1), stats.t.cdf((mean - margin) / se, n - 1))
    return np.where(se == 0, np.where(np.abs(mean) < margin, 0.0, 1.0), np.where(n >= 2, p, np.nan))


def verdict_table(paired: pd.DataFrame, metric: str, margin: float, alpha: float = 0.05) -> pd.DataFrame:
    """paired: `paired_comparisons(...).table` -> one row per effect comparison of `metric` (VERDICT_COLUMNS)."""
    if not margin > 0:
        raise ValueError(f"margin {margin}: must be > 0 (points)")
    t = paired[paired["metric"] == metric]
    eff = t[t["kind"] == "effect"].reset_index(drop=True)
    if eff.empty:
        return pd.DataFrame(columns=VERDICT_COLUMNS + [c for c in BUDGET_COLUMNS_OUT if c in t.columns])
    n = eff["n"].to_numpy(float)
    mean = eff["mean_diff"].to_numpy(float)
    sd = eff["sd_used"].to_numpy(float)
    p_sup = eff["p_t"].to_numpy(float)
    p_eq = _tost(mean, sd, n, margin)
    fam = eff[list(GROUP_KEYS)].astype(str).agg("\x1f".join, axis=1).to_numpy()
    adj = adjust(np.concatenate([p_sup, p_eq]), "holm", np.concatenate([fam, fam]))
    a_sup, a_eq = adj[: len(eff)], adj[len(eff):]
    sig = a_sup < alpha
    verdict = np.where(sig & (mean > 0), "better", np.where(sig & (mean < 0), "worse",
                                                            np.where(a_eq < alpha, "equivalent", "undecided")))
    m_fam = pd.Series(fam).map(pd.Series(fam).value_counts()).to_numpy(float)
    alpha_first = alpha / (2 * m_fam)
    need = np.full(len(eff), np.nan)
    need_lo = np.full(len(eff), np.nan)
    need_hi = np.full(len(eff), np.nan)
    for a in np.unique(alpha_first):  # one vectorised call per family size
        for k in np.unique(n[~np.isnan(n)]):
            rows = (alpha_first == a) & (n == k) & (verdict == "undecided")
            if not rows.any():
                continue
            s_lo, s_hi = sd_interval(sd[rows], int(k))
            need[rows] = seeds_needed(margin, sd[rows], alpha=a)
            need_lo[rows] = seeds_needed(margin, s_lo, alpha=a)
            need_hi[rows] = seeds_needed(margin, s_hi, alpha=a)
    aa = t[t["kind"] == "aa_noise_floor"]
    floor_by = {tuple(r[k] for k in GROUP_KEYS[1:]): abs(float(r["mean_diff"])) for _, r in aa.iterrows()}
    floor = np.array([floor_by.get(tuple(r[k] for k in GROUP_KEYS[1:]), np.nan) for _, r in eff.iterrows()])
    evidence = [
        f"Holm p: superiority {ps:.3g}, TOST ±{margin:g} {pe:.3g}"
        + (f" (also within ±{margin:g})" if v in ("better", "worse") and pe < alpha else "")
        for ps, pe, v in zip(a_sup, a_eq, verdict, strict=True)]
    out = eff[list(GROUP_KEYS) + ["policy", "reference", "metric", "n", "mean_diff", "t_lo", "t_hi"]].copy()
    out["margin"] = margin
    out["p_superiority"] = p_sup
    out["p_equivalence"] = p_eq
    out["p_superiority_holm"] = a_sup
    out["p_equivalence_holm"] = a_eq
    out["verdict"] = verdict
    out["evidence"] = evidence
    out["seeds_to_decide"] = need
    out["seeds_to_decide_lo"] = need_lo
    out["seeds_to_decide_hi"] = need_hi
    out["aa_floor"] = floor
    out["margin_below_aa_floor"] = ~np.isnan(floor) & (margin < np.nan_to_num(floor))
    extra = [c for c in BUDGET_COLUMNS_OUT if c in eff.columns]  # runs paired at a rollout-token budget
    return pd.concat([out[VERDICT_COLUMNS], eff[extra]], axis=1) if extra else out[VERDICT_COLUMNS]


def verdict_counts(v: pd.DataFrame) -> dict[str, int]:
    """Number of comparisons per verdict, every verdict present (0 when none)."""
    return {k: int((v["verdict"] == k).sum()) for k in VERDICTS}
