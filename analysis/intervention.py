"""Intervention evidence: did each policy change what it claims to change (DESIGN.md rule 7)?

Input: each run's per-step diagnostics (`<run_out>/metrics.jsonl`, one JSON object per step,
written by the training backends from `PolicyResult.diagnostics` and `DomainSampler
.last_diagnostics`) and its compute account (`TrainResult.compute`: wall_s, gpu_s,
rollout_tokens, update_tokens). Output: one summary row per run, flags per policy checked
*before* its scores are compared, and a compute-normalised comparison.

Flags (per configuration = campaign, model, regime, policy; references are never flagged):
* `inert_mixer`: a mixer whose realised domain proportions never moved more than `prop_tol`
  from their first value in any run (the published mixers' failure, STUDY.md section 3.3);
  without realised proportions the mixer is `unverified`, not passed.
* `keeps_everything`: a selector whose mean kept fraction is >= 1 - `keep_tol` (e.g. gfpo k=8).
* `flat_weights`: a reweighter whose mean weight_std is <= `weight_tol` (every weight equal).
* `same_prompts`: a curriculum whose runs rolled out, at every step, the same prompts as the reference run of
  the same seed (`rollout_ids.jsonl` beside each run's metrics); without either log it is `unverified`.
* `unverified`: the policy's runs have no diagnostics at all.

Beside the flag, every configuration (references included) gets `watch`: `reward-suspect` when its training
reward may measure a grader's hole rather than skill (analysis/reward_watch.py states the tests and thresholds),
with `watch_reason`; it never replaces the flag or drops the configuration's comparisons.

Missing stays NaN: a CPU run has gpu_s = 0, so score per GPU-hour is NaN, not infinite.
"""

from __future__ import annotations

import html
import json
import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from analysis.reward_watch import DEFAULT_WATCH, WatchThresholds, watch_summary, watch_verdict
from analysis.prompt_changes import prompts_changed, same_prompts  # noqa: F401 - same_prompts: API here too
from analysis.compute_compare import (COMPUTE_SPLIT, build_note_html, compare_to_reference,  # noqa: F401 - API
                                      with_scores)
from analysis.schema import DEFAULT_REFERENCE
from wtcommon.metrics import MetricsFileError, read_metrics_jsonl
from wtcommon.prompt_ids import IDS_FILE, PromptIdsError, read_prompt_ids
from wtcommon.errors import UserError

# Prefixes the verl trainer / MLflow use in front of the policy's own keys.
# (training/local.py writes policy/<k>, mix/target_prop_<d>, mix/realised_prop_<d>,
# data/realised_prop_<d>; the verl plugin windtunnel/<k>; the reference code dataflex/<k>).
_PREFIXES = ("windtunnel/", "dataflex/", "policy/", "train/", "mix/", "data/")
_REFERENCES = tuple(dict.fromkeys(DEFAULT_REFERENCE.values()))  # ("baseline", "static")
_IDENT = ("run_key", "run_id", "campaign", "model", "regime", "policy", "mechanism", "seed")
POLICY_KEYS = ("campaign", "model", "regime", "policy")


class InterventionError(UserError):
    """Diagnostics that cannot be read; the message names the file, the line and the fix."""


@dataclass(frozen=True)
class Tolerances:
    prop_tol: float = 0.02
    keep_tol: float = 0.01
    weight_tol: float = 1e-3


def _clean_key(k: str) -> str:
    for p in _PREFIXES:
        if k.startswith(p):
            k = k[len(p):]
    if k.startswith("prop_"):  # the reference code's `dataflex/prop_<d>` is a target proportion
        k = "target_" + k
    return k


def read_metrics(path: str | Path) -> pd.DataFrame:
    """One row per step from a metrics JSONL. Numeric values only; NaN where a key is absent.

    Raises InterventionError naming the file and line for a line that is not a JSON object.
    """
    p = Path(path)
    if not p.is_file():
        raise InterventionError(f"{p}: metrics file not found; the training backend writes <run_out>/metrics.jsonl")
    try:  # a finished run's file: a torn last line is an error too
        objs, _ = read_metrics_jsonl(p, torn_tail="raise")
    except MetricsFileError as e:
        raise InterventionError(str(e)) from e
    rows: list[dict[str, float]] = []
    for obj in objs:
        row = {}
        for k, v in obj.items():
            if isinstance(v, bool):
                v = float(v)
            if isinstance(v, (int, float)):
                row[_clean_key(str(k))] = float(v)
        rows.append(row)
    df = pd.DataFrame(rows)
    if "step" not in df.columns:
        df["step"] = np.arange(1, len(df) + 1, dtype=float)
    return df.sort_values("step").reset_index(drop=True)


def _domains(df: pd.DataFrame, prefix: str) -> list[str]:
    return sorted(c[len(prefix):] for c in df.columns if c.startswith(prefix))


def _col(df: pd.DataFrame, name: str) -> pd.Series:
    return df[name] if name in df.columns else pd.Series(np.nan, index=df.index)


def summarise_metrics(df: pd.DataFrame) -> dict[str, float]:
    """Per-run summary of one run's per-step diagnostics (all floats; NaN where not logged)."""
    active = _col(df, "active")
    on = df[active > 0] if active.notna().any() else df
    out: dict[str, float] = {
        "n_steps": float(len(df)),
        "active_steps": float(len(on)),
        "kept_frac_mean": float(_col(on, "kept_frac").mean()),
        "kept_frac_min": float(_col(on, "kept_frac").min()),
        "weight_std_mean": float(_col(on, "weight_std").mean()),
        "weight_max_max": float(_col(on, "weight_max").max()),
        "update_tokens_sum": float(_col(df, "update_tokens").sum(min_count=1)),
        "zero_variance_frac_mean": float(_col(df, "zero_variance_frac").mean()),
        # dynamic sampling: what a step generated against what it kept (the kept batch alone has no zero-variance
        # group by construction, so its zero_variance_frac says nothing about what was drawn and dropped)
        "ds_generated_groups_mean": float(_col(df, "ds/generated_prompts").mean()),
        "ds_kept_groups_mean": float(_col(df, "ds/kept_groups").mean()),
        "ds_generated_zero_variance_frac": float((1 - _col(df, "ds/informative_groups")
                                                   / _col(df, "ds/generated_prompts")).mean()),
        "valid_tokens_sum": float(_col(df, "valid_tokens").sum(min_count=1)),
    }
    out["update_token_frac"] = (out["update_tokens_sum"] / out["valid_tokens_sum"] if out["valid_tokens_sum"] > 0
                                else math.nan)
    for kind in ("target", "realised"):
        doms = _domains(df, f"{kind}_prop_")
        if not doms:
            out[f"{kind}_prop_move"] = math.nan
            continue
        h = df[[f"{kind}_prop_{d}" for d in doms]].to_numpy(dtype=float)
        h = h[~np.isnan(h).all(axis=1)]
        out[f"{kind}_prop_move"] = float(np.nanmax(np.abs(h - h[0]))) if len(h) >= 2 else math.nan
        for j, d in enumerate(doms):
            out[f"{kind}_prop_mean_{d}"] = float(np.nanmean(h[:, j])) if len(h) else math.nan
    out.update(watch_summary(df))
    return out


def _ids_of(path: Any) -> dict[int, np.ndarray]:
    try:
        return read_prompt_ids(path) if path else {}
    except PromptIdsError as e:
        raise InterventionError(str(e)) from e


def run_summary(runs: Iterable[Mapping[str, Any]]) -> pd.DataFrame:
    """One row per run. Each run: identity (run_key, run_id, campaign, model, regime, policy,
    mechanism, seed), `metrics_path` (may be missing: diagnostics NaN) and `compute` (dict)."""
    rows = []
    for r in runs:
        row: dict[str, Any] = {k: r.get(k, "" if k != "seed" else -1) for k in _IDENT}
        mp = r.get("metrics_path")
        diag = summarise_metrics(read_metrics(mp)) if mp and Path(mp).is_file() else {}
        row["has_diagnostics"] = bool(diag)
        ids = Path(mp).parent / IDS_FILE if mp else None
        row["rollout_ids_path"] = str(ids) if ids is not None and ids.is_file() else ""
        row.update(diag)
        comp = dict(r.get("compute") or {})
        for k in ("wall_s", "gpu_s", "rollout_tokens", "update_tokens", "prompts_rolled_out", "rollout_token_budget",
                  *COMPUTE_SPLIT):
            v = comp.get(k)
            row[f"compute_{k}"] = float(v) if v is not None else math.nan
        rows.append(row)
    df = pd.DataFrame(rows)
    for c in ("kept_frac_mean", "weight_std_mean", "realised_prop_move", "target_prop_move", "update_tokens_sum",
              *watch_summary(pd.DataFrame({"step": []}))):
        if c not in df.columns:
            df[c] = np.nan
    if "rollout_ids_path" not in df.columns:
        df["rollout_ids_path"] = ""
    return df


def flag_policies(summary: pd.DataFrame, tol: Tolerances = Tolerances(),
                  references: tuple[str, ...] = _REFERENCES, watch: WatchThresholds = DEFAULT_WATCH
                  ) -> pd.DataFrame:
    """Per configuration (campaign, model, regime, policy): evidence columns and `flag`.

    flag is "" (acted), "inert_mixer", "keeps_everything", "flat_weights", "same_prompts" or "unverified";
    `reason` says which number triggered it. `watch` is "reward-suspect" or "" (references too), with
    `watch_reason`.
    """
    out = []
    for key, g in summary.groupby(list(POLICY_KEYS), sort=True):
        mech = str(g["mechanism"].iloc[0])
        row = dict(zip(POLICY_KEYS, key, strict=True), mechanism=mech, n_runs=len(g),
                   kept_frac=float(g["kept_frac_mean"].mean()), weight_std=float(g["weight_std_mean"].mean()),
                   target_prop_move=float(g["target_prop_move"].max()),
                   realised_prop_move=float(g["realised_prop_move"].max()))
        flag, reason = "", ""
        if key[-1] in references or mech == "none":
            pass
        elif not g["has_diagnostics"].any():
            flag, reason = "unverified", "no per-step diagnostics for any run"
        elif mech == "mix":
            move = row["realised_prop_move"]
            if math.isnan(move):
                flag, reason = "unverified", "no realised_prop_<domain> logged: cannot show the data changed"
            elif move <= tol.prop_tol:
                flag = "inert_mixer"
                reason = (f"realised proportions moved at most {move:.3f} (tolerance {tol.prop_tol}); "
                          f"target moved {row['target_prop_move']:.3f}")
        elif mech == "select":
            if math.isnan(row["kept_frac"]):
                flag, reason = "unverified", "no kept_frac logged"
            elif row["kept_frac"] >= 1 - tol.keep_tol:
                flag, reason = "keeps_everything", f"mean kept fraction {row['kept_frac']:.3f}"
        elif mech == "reweight":
            if math.isnan(row["weight_std"]):
                flag, reason = "unverified", "no weight_std logged"
            elif row["weight_std"] <= tol.weight_tol:
                flag, reason = "flat_weights", f"mean weight_std {row['weight_std']:.2g}"
        elif mech == "curriculum":
            ref = DEFAULT_REFERENCE.get(mech, "baseline")
            compared, changed = prompts_changed(g, summary, ref, _ids_of)
            row["prompts_changed_runs"] = changed
            if not compared:
                flag, reason = "unverified", (f"no rollout_ids.jsonl for its runs or the {ref!r} runs of the same "
                                              "seeds: cannot show the prompts changed")
            elif not changed:
                flag, reason = "same_prompts", (f"rolled out the same prompts as {ref!r} at every step in all "
                                                f"{compared} seed(s) compared")
        row["flag"], row["reason"] = flag, reason
        row["watch"], row["watch_reason"] = watch_verdict(g, watch)
        out.append(row)
    return pd.DataFrame(out)


def _fmt(v: Any) -> str:
    if isinstance(v, float):
        return "—" if math.isnan(v) else f"{v:.4g}"  # missing is never shown as NaN
    return html.escape(str(v))


def _is_num(v: Any) -> bool:
    return isinstance(v, (int, float, np.integer, np.floating)) and not isinstance(v, bool)


def _table(df: pd.DataFrame, cols: list[str]) -> str:
    """Numbers right-aligned (class num), text left; wide tables scroll inside their box."""
    cols = [c for c in cols if c in df.columns]
    num = {c: bool(len(df)) and all(_is_num(v) for v in df[c]) for c in cols}
    cls = {c: ' class="num"' if num[c] else "" for c in cols}
    head = "".join(f"<th{cls[c]}>{html.escape(c)}</th>" for c in cols)
    body = []
    for _, r in df.iterrows():
        flag = ' class="flagged"' if str(r.get("flag", "")) not in ("", "nan") else ""
        body.append(f"<tr{flag}>" + "".join(f"<td{cls[c]}>{_fmt(r[c])}</td>" for c in cols) + "</tr>")
    return f'<div class="scroll"><table><thead><tr>{head}</tr></thead><tbody>{"".join(body)}</tbody></table></div>'


def intervention_section_html(summary: pd.DataFrame, scores: pd.DataFrame | None = None,
                              score_col: str = "DB-12", tol: Tolerances = Tolerances()) -> tuple[str, str]:
    """(title, HTML body) for `analysis.report.build_report(..., extra_sections=[...])`."""
    flags = flag_policies(summary, tol)
    comp = compare_to_reference(summary, scores, score_col)
    bad = flags[flags["flag"] != ""]
    if len(bad):
        items = "".join(
            f"<li><b>{html.escape(r.policy)}</b> ({html.escape(r.campaign)}/{html.escape(r.model)}): "
            f"{html.escape(r.flag)} — {html.escape(r.reason)}. Its score differences are not evidence about "
            f"the policy.</li>" for r in bad.itertuples())
        warn = (f"<p><b>{len(bad)} configuration(s) show no effect; read their comparisons with this in mind:</b></p>"
                f"<ul>{items}</ul>")
    else:
        warn = "<p>Every policy's diagnostics show that it acted.</p>"
    body = (
        warn
        + "<h3>What each policy changed (per configuration, means over seeds)</h3>"
        + _table(flags, ["campaign", "model", "regime", "policy", "mechanism", "n_runs", "kept_frac", "weight_std",
                         "target_prop_move", "realised_prop_move", "prompts_changed_runs", "flag", "reason",
                         "watch", "watch_reason"])
        + f"<h3>Compute and compute-normalised {html.escape(score_col)}</h3>"
        + "<p>Ratios are to the campaign-local reference (baseline for select/reweight, static for mix). "
          "Score per GPU-hour is undefined (—) for CPU runs (gpu_s = 0). compute_train_wall_s: training alone "
          "(the base model's build taken out where the trainer timed it). "
          + _basis_note(comp) + "</p>" + build_note_html(summary)
        + _table(comp, _compute_columns(comp))
    )
    return "Intervention evidence and compute", body


def _budgeted(comp: pd.DataFrame) -> bool:
    return "rollout_token_budget" in comp.columns and bool(comp["rollout_token_budget"].notna().any())


def _basis_note(comp: pd.DataFrame) -> str:
    """Which compute the scores are normalised by: the one the campaign compares at (issue 58)."""
    if _budgeted(comp):
        return ("This campaign compares policies at equal rollout tokens (its budget), so scores are normalised by "
                "the rollout tokens each run generated (score_per_Mrollout_token), not by update tokens.")
    return "Scores are normalised by the tokens each policy updated on (score_per_Mtoken)."


def _compute_columns(comp: pd.DataFrame) -> list[str]:
    """The compute table's columns: normalised by rollout tokens in a budgeted campaign, else by update tokens;
    generated vs kept groups where a policy sampled dynamically."""
    head = ["campaign", "model", "policy", "reference"]
    if _budgeted(comp):
        cols = [*head, "rollout_tokens", "rollout_tokens_ratio", "update_tokens", "compute_train_wall_s",
                "compute_train_wall_s_ratio", "score", "score_delta", "score_per_Mrollout_token",
                "score_per_Mrollout_token_ratio"]
    else:
        cols = [*head, "update_tokens", "update_tokens_ratio", "compute_wall_s", "compute_train_wall_s",
                "compute_train_wall_s_ratio", "compute_gpu_s", "score", "score_delta", "score_per_gpu_hour",
                "score_per_Mtoken", "score_per_Mtoken_ratio"]
    if "ds_generated_groups_mean" in comp.columns and comp["ds_generated_groups_mean"].notna().any():
        cols += ["ds_generated_groups_mean", "ds_kept_groups_mean", "ds_generated_zero_variance_frac"]
    return cols


def attach_to_records(records: pd.DataFrame, summary: pd.DataFrame) -> pd.DataFrame:
    """Records with the run-level diagnostic summary joined on run_id (columns prefixed `diag_`)."""
    cols = [c for c in summary.columns if c not in _IDENT and c not in ("has_diagnostics", "rollout_ids_path")]
    right = summary[["run_id"] + cols].rename(columns={c: f"diag_{c}" for c in cols})
    return records.merge(right, on="run_id", how="left")


def runs_from_dir(records: pd.DataFrame, runs_dir: str | Path) -> list[dict[str, Any]]:
    """The run list for `run_summary`: identity from the records, metrics path and compute from each
    run's `train_done.json` (the orchestrator's layout `<runs_dir>/<campaign>/<run_key>/`, or
    `<runs_dir>/<run_key>/`). A run without a manifest keeps NaN diagnostics (flagged `unverified`).

    Raises InterventionError when runs_dir is not a folder or holds no manifest for any run.
    """
    root = Path(runs_dir)
    if not root.is_dir():
        raise InterventionError(f"{root}: runs folder not found; pass <workdir>/runs (it holds "
                                "<campaign>/<run_key>/train_done.json)")
    ident = records.drop_duplicates("run_id")[[c for c in _IDENT if c in records.columns]]
    out, found = [], 0
    for r in ident.to_dict("records"):
        cands = [root / str(r.get("campaign", "")) / str(r.get("run_key", "")) / "train_done.json",
                 root / str(r.get("run_key", "")) / "train_done.json"]
        man = next((c for c in cands if c.is_file()), None)
        run = dict(r)
        if man is not None:
            try:
                m = json.loads(man.read_text(encoding="utf-8"))
            except json.JSONDecodeError as e:
                raise InterventionError(f"{man}: not valid JSON ({e.msg}); rerun the run's training stage") from e
            mp = Path(str(m.get("metrics_path", "")))
            run["metrics_path"] = mp if mp.is_absolute() else man.parent / mp
            run["compute"] = m.get("compute") or {}
            found += 1
        out.append(run)
    if out and not found:
        raise InterventionError(f"{root}: no train_done.json for any of the {len(out)} runs in the records "
                                f"(looked in <runs_dir>/<campaign>/<run_key>/); pass the work directory's runs/ folder")
    return out


def final_scores(records: pd.DataFrame, suite: Any) -> pd.DataFrame:
    """Per run: the aggregates at its last evaluated step (run_id + aggregate columns)."""
    from analysis.aggregates import run_table

    rt = run_table(records, suite)
    return rt.sort_values("step").groupby("run_id", sort=True).tail(1).reset_index(drop=True)


def flags_banner_html(summary: pd.DataFrame, tol: Tolerances = Tolerances()) -> str:
    """The flag list that goes at the top of the report, before any score comparison."""
    flags = flag_policies(summary, tol)
    bad = flags[flags["flag"] != ""]
    suspect = flags[flags["watch"] != ""]
    watch = "" if not len(suspect) else (
        f"<h2>Reward watch: {len(suspect)} configuration(s) <code>reward-suspect</code></h2>"
        "<p><b>Their training reward may measure a grader's hole rather than skill; their comparisons below are "
        "kept, to be read beside this flag.</b></p><ul class='flags'>" + "".join(
            f"<li><b>{html.escape(r.policy)}</b> ({html.escape(r.campaign)}/{html.escape(r.model)}"
            f"{'/' + html.escape(r.regime) if r.regime else ''}): {html.escape(r.watch_reason)}</li>"
            for r in suspect.itertuples()) + "</ul>")
    if not len(bad):
        return watch + ("<h2>Intervention check</h2><p>Every policy's diagnostics show that it acted; "
                        "details in <a href='#intervention'>Intervention evidence and compute</a>.</p>")
    items = "".join(f"<li><b>{html.escape(r.policy)}</b> ({html.escape(r.campaign)}/{html.escape(r.model)}"
                    f"{'/' + html.escape(r.regime) if r.regime else ''}): <code>{html.escape(r.flag)}</code> — "
                    f"{html.escape(r.reason)}</li>" for r in bad.itertuples())
    return (f"<h2>Intervention check: {len(bad)} policy configuration(s) flagged</h2>"
            "<p><b>Their diagnostics show no effect: their score differences below are not evidence about the "
            "policy.</b></p>" f"<ul class='flags'>{items}</ul>" + watch)
