"""Each policy's compute against its reference's: the per-configuration compute table of the report's intervention
section (`compare_to_reference`), the runs' scores joined on (`with_scores`), and the base model's build named once
for the campaign (`build_note_html`). Split from analysis.intervention (what each policy changed) by job."""

from __future__ import annotations

import html
import math

import numpy as np
import pandas as pd

from analysis.schema import DEFAULT_REFERENCE

POLICY_KEYS = ("campaign", "model", "regime", "policy")

# the trainers' split of a run's compute (local: training/local.py; verl: training/launches.py): the base model's
# build (paid once per cache, by whichever run found it cold) apart from the training itself, wall and CPU seconds
COMPUTE_SPLIT = ("build_s", "build_cpu_s", "cpu_s", "train_wall_s", "train_cpu_s")
DS_COLUMNS = ("ds_generated_groups_mean", "ds_kept_groups_mean", "ds_generated_zero_variance_frac")
BUILT_S = 1.0  # below this a run found the base model cached (a build and warm-up takes minutes)


def _reference_of(policy: str, mechanism: str) -> str:
    return DEFAULT_REFERENCE.get(mechanism, "baseline")


def with_scores(summary: pd.DataFrame, scores: pd.DataFrame | None, score_col: str) -> pd.DataFrame:
    """A copy of `summary` with each run's `score` (its `score_col` in `scores`, by run_id; NaN without one)."""
    s = summary.copy()
    if scores is not None and score_col in scores.columns:
        s = s.merge(scores[["run_id", score_col]].drop_duplicates("run_id"), on="run_id", how="left")
        s["score"] = s[score_col]
    else:
        s["score"] = np.nan
    return s


def compare_to_reference(summary: pd.DataFrame, scores: pd.DataFrame | None = None,
                         score_col: str = "DB-12") -> pd.DataFrame:
    """Per policy vs its campaign-local reference: what changed, and compute-normalised scores.

    summary: `run_summary` rows. scores: optional per-run frame with run_id and `score_col`
    (e.g. `analysis.aggregates.run_table` at the final step). Returns one row per
    configuration with means over seeds and ratios to the reference (NaN when not computable).
    """
    s = with_scores(summary, scores, score_col)
    gpu_h = s["compute_gpu_s"] / 3600.0
    s["score_per_gpu_hour"] = np.where(gpu_h > 0, s["score"] / gpu_h.where(gpu_h > 0), np.nan)
    upd = s["compute_update_tokens"].where(s["compute_update_tokens"].notna(), s["update_tokens_sum"])
    s["score_per_Mtoken"] = np.where(upd > 0, s["score"] / (upd.where(upd > 0) / 1e6), np.nan)
    s["update_tokens"] = upd
    roll = s["compute_rollout_tokens"] if "compute_rollout_tokens" in s.columns else pd.Series(np.nan, index=s.index)
    s["rollout_tokens"] = roll
    s["score_per_Mrollout_token"] = np.where(roll > 0, s["score"] / (roll.where(roll > 0) / 1e6), np.nan)
    budget = s["compute_rollout_token_budget"] if "compute_rollout_token_budget" in s.columns else \
        pd.Series(np.nan, index=s.index)
    s["rollout_token_budget"] = budget
    # training alone where the trainer split it off (else the whole wall): a cold base-model build inside one seed's
    # run would make every other policy look cheaper than the one that paid for it
    train = s["compute_train_wall_s"] if "compute_train_wall_s" in s.columns else pd.Series(np.nan, index=s.index)
    s["compute_train_wall_s"] = train.where(train.notna(), s["compute_wall_s"])
    cols = ["kept_frac_mean", "weight_std_mean", "update_tokens", "compute_wall_s", "compute_train_wall_s",
            "compute_gpu_s", "realised_prop_move", "score", "score_per_gpu_hour", "score_per_Mtoken",
            "rollout_tokens", "score_per_Mrollout_token", "rollout_token_budget",
            *[c for c in DS_COLUMNS if c in s.columns]]
    per = s.groupby(list(POLICY_KEYS) + ["mechanism"], sort=True)[cols].mean().reset_index()
    out = []
    for _, r in per.iterrows():
        ref = _reference_of(r["policy"], r["mechanism"])
        m = per[(per["campaign"] == r["campaign"]) & (per["model"] == r["model"]) & (per["regime"] == r["regime"])
                & (per["policy"] == ref)]
        row = r.to_dict()
        row["reference"] = ref if len(m) else ""
        for c in ("update_tokens", "compute_wall_s", "compute_train_wall_s", "compute_gpu_s", "score_per_gpu_hour",
                  "score_per_Mtoken", "rollout_tokens", "score_per_Mrollout_token"):
            base = float(m[c].iloc[0]) if len(m) else math.nan
            row[f"{c}_ratio"] = float(r[c]) / base if base and not math.isnan(base) else math.nan
        row["score_delta"] = float(r["score"]) - float(m["score"].iloc[0]) if len(m) else math.nan
        out.append(row)
    return pd.DataFrame(out)


def build_note_html(summary: pd.DataFrame) -> str:
    """One line for the base model's build: counted once for the campaign (the run that found the cache cold paid
    it), never as one policy's compute; empty when no run timed a build."""
    if "compute_build_s" not in summary.columns or not summary["compute_build_s"].notna().any():
        return ""
    if summary["compute_build_s"].max() < BUILT_S:
        return "<p>Base model: taken from the cache by every run (no run built it in this campaign).</p>"
    i = summary["compute_build_s"].idxmax()
    r = summary.loc[i]
    return (f"<p>Base-model build: {r['compute_build_s']:.1f} s wall, {r.get('compute_build_cpu_s', math.nan):.1f} "
            f"CPU-s, counted once for the campaign (paid by {html.escape(str(r['run_id']))}, the run that found the "
            "cache cold) and left out of every run's compute_train_wall_s.</p>")
