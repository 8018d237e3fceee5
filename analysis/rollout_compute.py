"""Score against rollout compute: per policy, the rollout tokens and prompts its runs generated, the share of
zero-variance groups (rollouts that gave no gradient), and its paired Δ score against the reference of the same
seed with the paired-t 95% CI (the interval `benchmarks/interval_coverage.py` checks).

Why: a curriculum that rolls out fewer or cheaper prompts saves generation, and comparing at equal steps hides
that. Under a campaign `budget: {rollout_tokens: N}` every run stops within one step of N, so Δ is at equal
generation compute; without one the table says the runs compare at equal steps and shows the token ratio.
"""

from __future__ import annotations

import html
import math
from collections.abc import Mapping
from typing import Any

import matplotlib

matplotlib.use("Agg")  # before pyplot: no display needed
import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from analysis.figure_style import RC, Figure
from analysis.intervention import with_scores
from analysis.paired_stats import t_interval
from analysis.schema import DEFAULT_REFERENCE

_CONFIG = ("campaign", "model", "regime", "policy")
COLUMNS = ("campaign", "model", "regime", "policy", "mechanism", "reference", "n_pairs", "rollout_tokens",
           "rollout_tokens_ratio", "prompts_rolled_out", "zero_variance_frac", "score", "delta", "t_lo", "t_hi")


def rollout_table(summary: pd.DataFrame, scores: pd.DataFrame | None, score_col: str,
                  by_mechanism: Mapping[str, str] = DEFAULT_REFERENCE) -> pd.DataFrame:
    """One row per configuration but the references: means over seeds, and Δ = score − reference score paired
    by seed (`t_lo`–`t_hi`: paired-t 95% CI, df = n − 1; NaN below two pairs). `summary`: `run_summary` rows;
    `scores`: run_id + `score_col` (the final evaluated step); `by_mechanism`: each mechanism's reference
    (`analysis.schema.references` of the records)."""
    s = with_scores(summary, scores, score_col)
    for c in ("compute_rollout_tokens", "compute_prompts_rolled_out", "zero_variance_frac_mean"):
        if c not in s.columns:
            s[c] = np.nan
    refs = set(by_mechanism.values())
    out = []
    for key, g in s.groupby(list(_CONFIG), sort=True):
        mech = str(g["mechanism"].iloc[0])
        if key[-1] in refs or mech == "none":
            continue
        ref = by_mechanism.get(mech, "baseline")
        r = s[(s["campaign"] == key[0]) & (s["model"] == key[1]) & (s["regime"] == key[2]) & (s["policy"] == ref)]
        pair = g.merge(r[["seed", "score", "compute_rollout_tokens"]], on="seed", suffixes=("", "_ref"))
        d = (pair["score"] - pair["score_ref"]).dropna().to_numpy(dtype=float)
        lo, hi = t_interval(d[:, None]) if d.size >= 2 else (np.array([math.nan]), np.array([math.nan]))
        ref_tokens = float(pair["compute_rollout_tokens_ref"].mean()) if len(pair) else math.nan
        tokens = float(g["compute_rollout_tokens"].mean())
        out.append({
            **dict(zip(_CONFIG, key, strict=True)), "mechanism": mech, "reference": ref if len(r) else "",
            "n_pairs": int(d.size), "rollout_tokens": tokens,
            "rollout_tokens_ratio": tokens / ref_tokens if ref_tokens > 0 else math.nan,
            "prompts_rolled_out": float(g["compute_prompts_rolled_out"].mean()),
            "zero_variance_frac": float(g["zero_variance_frac_mean"].mean()), "score": float(g["score"].mean()),
            "delta": float(d.mean()) if d.size else math.nan, "t_lo": float(lo[0]), "t_hi": float(hi[0]),
        })
    return pd.DataFrame(out, columns=list(COLUMNS))


def rollout_figure(table: pd.DataFrame, score_col: str) -> Figure | None:
    """Paired Δ (paired-t 95% CI) against the policy's rollout tokens relative to its reference, one panel per
    campaign × model; None when no policy has a Δ and a token count."""
    d = table[table["delta"].notna() & table["rollout_tokens_ratio"].notna()]
    if d.empty:
        return None
    panels = list(dict.fromkeys(zip(d["campaign"], d["model"], strict=True)))
    with plt.rc_context(RC):
        fig, axes = plt.subplots(1, len(panels), figsize=(4.2 * len(panels) + 0.6, 3.6), squeeze=False)
        for ax, (c, m) in zip(axes[0], panels, strict=True):
            p = d[(d["campaign"] == c) & (d["model"] == m)]
            x, y = p["rollout_tokens_ratio"].to_numpy(), p["delta"].to_numpy()
            err = np.vstack([y - p["t_lo"].to_numpy(), p["t_hi"].to_numpy() - y])
            ax.errorbar(x, y, yerr=np.where(np.isfinite(err), err, 0.0), fmt="o", color="tab:blue", capsize=3)
            for xi, yi, name in zip(x, y, p["policy"], strict=True):
                ax.annotate(str(name), (xi, yi), textcoords="offset points", xytext=(4, 4), fontsize=7)
            ax.axhline(0, color="k", lw=0.8)
            ax.axvline(1, color="0.6", lw=0.8, ls="--")
            ax.set_title(f"{c} / {m}", fontsize=9)
            ax.set_xlabel("rollout tokens / reference's")
            ax.grid(color="0.9", lw=0.6)
        axes[0, 0].set_ylabel(f"Δ {score_col} vs reference (paired by seed)")
        fig.tight_layout()
    return Figure(f"rollout_tokens_{score_col.lower().replace('-', '')}", f"{score_col} against rollout tokens", (
        "One point per policy: its mean paired Δ against its reference (same seeds) with the paired-t 95% CI, "
        "placed at its rollout tokens as a share of the reference's (left of the dashed line: it generated less)."
        " Under a rollout-token budget every run stops within one step of it, so Δ is at equal generation "
        "compute."), fig)


def _fmt(v: Any) -> str:
    if isinstance(v, float):
        return "—" if math.isnan(v) else f"{v:.4g}"
    return html.escape(str(v))


def run_budget(summary: pd.DataFrame) -> int | None:
    """The rollout-token budget every run trained to, or None (no budget, or runs with different ones)."""
    col = summary["compute_rollout_token_budget"] if "compute_rollout_token_budget" in summary.columns else None
    vals = set() if col is None else set(col.tolist())
    return int(vals.pop()) if len(vals) == 1 and not any(math.isnan(float(v)) for v in vals) else None


def rollout_section_html(table: pd.DataFrame, svg: bytes | None, budget: int | None, score_col: str) -> str:
    """The report section body: the rule the comparison follows, the table and the figure (when drawn)."""
    import base64

    rule = (f"Every run trained to a budget of {budget:,} rollout tokens (stopping within one step of it): Δ is "
            "at equal generation compute." if budget else
            "No rollout-token budget: runs compare at equal steps; the token ratio shows what each policy "
            "generated relative to its reference.")
    head = "".join(f"<th>{html.escape(c)}</th>" for c in COLUMNS)
    body = "".join("<tr>" + "".join(f"<td>{_fmt(r[c])}</td>" for c in COLUMNS) + "</tr>"
                   for _, r in table.iterrows())
    img = ("" if svg is None else
           f'<img alt="{html.escape(score_col)} against rollout tokens" '
           f'src="data:image/svg+xml;base64,{base64.b64encode(svg).decode()}">')
    return (f"<p>{html.escape(rule)} Δ = {html.escape(score_col)} − the reference's at the same seed; t_lo–t_hi: "
            "paired-t 95% CI (df = n − 1). zero_variance_frac: the share of groups whose rollouts all agreed "
            "(generated for no gradient).</p>"
            f'<div class="scroll"><table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table></div>{img}')
