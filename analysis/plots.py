"""Figures of the report, as PNG bytes (matplotlib, Agg backend: no display needed).

Each function takes the analysis tables it draws and returns PNG bytes, so the report can
embed them and tests can open them without a file system round trip.
"""

from __future__ import annotations

import io

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402


def _png(fig) -> bytes:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=90, bbox_inches="tight")
    plt.close(fig)
    return buf.getvalue()


def _label(df: pd.DataFrame) -> pd.Series:
    extra = df["regime"].where(df["regime"] == "", " " + df["regime"])
    steps = df["step"].astype(str).where(df["campaign"] == "long_training", "")
    steps = steps.where(steps == "", " @" + steps)
    vs = np.where(df["kind"] == "aa_noise_floor", " (A/A: static vs baseline)", "")
    return df["model"] + extra + steps + ": " + df["policy"] + vs


def forest_plot(paired: pd.DataFrame, metric: str) -> bytes:
    """paired: `paired_comparisons(...).table`. One panel per campaign: mean difference per seed pair
    with the paired-t 95% CI (thick) and bootstrap CI (thin); A/A noise-floor rows in grey."""
    d = paired[paired["metric"] == metric]
    campaigns = list(dict.fromkeys(d["campaign"])) or ["(none)"]
    heights = [max(1, (d["campaign"] == c).sum()) for c in campaigns]
    fig, axes = plt.subplots(len(campaigns), 1, figsize=(8, 1.0 + 0.28 * sum(heights) + 0.5 * len(campaigns)),
                             gridspec_kw={"height_ratios": heights}, squeeze=False)
    for ax, c in zip(axes[:, 0], campaigns):
        part = d[d["campaign"] == c].iloc[::-1]
        y = np.arange(len(part))
        aa = (part["kind"] == "aa_noise_floor").to_numpy()
        color = np.where(aa, "0.55", "C0")
        ax.hlines(y, part["boot_lo"], part["boot_hi"], color=color, lw=1)
        ax.hlines(y, part["t_lo"], part["t_hi"], color=color, lw=3, alpha=0.5)
        ax.scatter(part["mean_diff"], y, color=color, zorder=3, s=16)
        ax.axvline(0, color="k", lw=0.8)
        ax.set_yticks(y, _label(part), fontsize=7)
        ax.set_title(f"{c}", fontsize=9, loc="left")
        ax.tick_params(axis="x", labelsize=7)
    axes[-1, 0].set_xlabel(f"Δ {metric} vs campaign-local reference (points): t 95% CI thick, bootstrap thin",
                           fontsize=8)
    fig.subplots_adjust(hspace=0.6)  # fixed layout: tight_layout costs seconds on tall figures
    return _png(fig)


def domain_tradeoff(paired: pd.DataFrame, domains: list[str]) -> bytes:
    """Mean paired difference per domain for every method-vs-reference comparison (grouped bars)."""
    d = paired[(paired["metric_type"] == "domain") & (paired["kind"] == "effect")]
    keys = ["campaign", "model", "regime", "step", "policy"]
    wide = d.pivot_table(index=keys, columns="metric", values="mean_diff", sort=False).reindex(columns=domains)
    wide = wide.iloc[::-1]
    labels = [f"{c}/{m}{'/' + r if r else ''}: {p}" for c, m, r, _, p in wide.index]
    fig, ax = plt.subplots(figsize=(8, 1.0 + 0.3 * max(1, len(wide))))
    y = np.arange(len(wide))
    h = 0.8 / max(1, len(domains))
    for i, dom in enumerate(domains):
        ax.barh(y + (i - (len(domains) - 1) / 2) * h, wide[dom].to_numpy(float), height=h, label=dom)
    ax.axvline(0, color="k", lw=0.8)
    ax.set_yticks(y, labels, fontsize=7)
    ax.set_xlabel("Δ domain mean vs reference (points, seed-paired mean)", fontsize=8)
    ax.legend(fontsize=7, loc="lower right")
    return _png(fig)


def rank_heatmap(corr: pd.DataFrame, title: str = "Spearman rho between configuration rankings") -> bytes:
    """corr: square (aggregates x aggregates) rank-correlation matrix, annotated."""
    fig, ax = plt.subplots(figsize=(1.6 + 0.9 * len(corr), 1.2 + 0.8 * len(corr)))
    im = ax.imshow(corr.to_numpy(float), vmin=-1, vmax=1, cmap="RdBu_r")
    ax.set_xticks(range(len(corr)), corr.columns, rotation=30, ha="right", fontsize=8)
    ax.set_yticks(range(len(corr)), corr.index, fontsize=8)
    for (i, j), v in np.ndenumerate(corr.to_numpy(float)):
        ax.text(j, i, "NaN" if np.isnan(v) else f"{v:.2f}", ha="center", va="center", fontsize=8,
                color="white" if abs(np.nan_to_num(v)) > 0.6 else "black")
    fig.colorbar(im, ax=ax, shrink=0.8)
    ax.set_title(title, fontsize=9)
    fig.tight_layout()
    return _png(fig)


def correlation_matrix(pairs: pd.DataFrame, names: list[str], col: str = "spearman") -> pd.DataFrame:
    """Square matrix from `rank_correlations` rows (diagonal 1)."""
    m = pd.DataFrame(np.eye(len(names)), index=names, columns=names)
    for a, b, v in pairs[["aggregate_a", "aggregate_b", col]].itertuples(index=False):
        m.loc[a, b] = m.loc[b, a] = v
    return m
