"""The report's diagnostic figures, beside the paired-effect plots of analysis.figures: training curves
from each run's metrics.jsonl and the rank-correlation heat map of the aggregates. Each builder returns a
`Figure` or None when its data does not exist.
"""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")  # before pyplot: no display needed
import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from analysis.figure_data import within_group_correlations
from analysis.figure_style import FONT, RC, Figure, policy_colors


def training_figure(tf: pd.DataFrame) -> Figure | None:
    """Panels: reward, kept fraction, weight std, realised domain proportions; mean over seeds per
    configuration (thick) and each seed (thin). Panels without data are left out."""
    if tf.empty:
        return None
    props = sorted(c for c in tf.columns if c.startswith("realised_prop_"))
    panels = [(c, t)
              for c, t in (("reward", "training reward (batch mean)"), ("kept_frac", "kept fraction (selectors)"),
                                  ("weight_std", "weight std (reweighters)")) if c in tf and tf[c].notna().any()]
    panels += [(c, f"realised proportion: {c.removeprefix('realised_prop_')}") for c in props if tf[c].notna().any()]
    if not panels:
        return None
    multi = tf[["campaign", "model", "regime"]].drop_duplicates().shape[0] > 1
    tf = tf.assign(config=(tf["campaign"].astype(str) + "/" + tf["model"].astype(str) + "/"
                           + tf["regime"].astype(str) + ": " if multi else "") + tf["policy"].astype(str))
    colors = policy_colors(tf["config"].unique())
    ncol = 2 if len(panels) > 1 else 1
    nrow = -(-len(panels) // ncol)
    with plt.rc_context(RC):
        fig, axes = plt.subplots(nrow, ncol, figsize=(6.2 * ncol, 3.2 * nrow + 0.8), squeeze=False, sharex=True)
        for ax, (c, t) in zip(axes.flat, panels, strict=False):  # spare grid cells are hidden below
            sub = tf[tf[c].notna()]
            for (cfg, _seed), g in sub.groupby(["config", "seed"], sort=True):
                ax.plot(g["step"], g[c], color=colors[cfg], lw=0.6, alpha=0.35)
            mean = sub.groupby(["config", "step"], sort=True)[c].mean().reset_index()
            for cfg, g in mean.groupby("config", sort=True):
                ax.plot(g["step"], g[c], color=colors[cfg], lw=2, label=cfg)
            ax.set_title(t)
            ax.grid(color="0.9", lw=0.6)
        for ax in axes.flat[len(panels):]:
            ax.set_visible(False)
        for ax in axes[-1]:
            ax.set_xlabel("training step")
        h, lab = axes.flat[0].get_legend_handles_labels()
        seen = dict(zip(lab, h, strict=True))
        for ax in axes.flat[1:len(panels)]:
            for hh, ll in zip(*ax.get_legend_handles_labels(), strict=True):
                seen.setdefault(ll, hh)
        fig.legend(list(seen.values()), list(seen), loc="lower center", ncol=min(4, len(seen)), frameon=False)
        fig.tight_layout(rect=(0, 0.06 + 0.03 * (len(seen) // 4), 1, 1))
    n_runs = tf.groupby(["config", "seed"]).ngroups
    return Figure("training_curves", "Training curves", (
        f"From each run's metrics.jsonl ({n_runs} runs): thick = mean over seeds per configuration, thin = each "
        "seed. Kept fraction and weight std are the policy's own diagnostics; realised proportions are the "
        "domain shares actually sampled."), fig)


def _matrix(pairs: pd.DataFrame, names: list[str], col: str) -> np.ndarray:
    m = pd.DataFrame(np.eye(len(names)), index=names, columns=names)
    m.loc[:, :] = np.where(np.eye(len(names)) == 1, 1.0, np.nan)
    for a, b, v in pairs[["aggregate_a", "aggregate_b", col]].itertuples(index=False):
        m.loc[a, b] = m.loc[b, a] = v
    return m.to_numpy(float)


def heatmap_figure(sens: pd.DataFrame, names: list[str]) -> Figure | None:
    """Within-group median rank correlation first, pooled (all configurations) beside it, labelled pooled."""
    if sens.empty:
        return None
    within = within_group_correlations(sens)
    pooled = sens[sens["scope"].astype(str).str.startswith("pooled")]
    views = []
    if len(within):
        views.append((_matrix(within, names, "median_spearman"),
                      f"within group: median over {int(within['n_groups'].max())} group(s)"))
    if len(pooled):
        views.append((_matrix(pooled, names, "spearman"), "pooled: all configurations"))
    if not views:
        return None
    k = len(names)
    with plt.rc_context(RC):
        from matplotlib.layout_engine import ConstrainedLayoutEngine

        fig, axes = plt.subplots(1, len(views), figsize=(2.4 + 3.4 * len(views) + 0.2 * k, 1.6 + 0.75 * k),
                                 squeeze=False)
        # rotated tick labels stay inside, with a margin (inches) that holds in svg, pdf and png alike
        fig.set_layout_engine(ConstrainedLayoutEngine(w_pad=0.2, h_pad=0.15))
        im = None
        for i, (ax, (mat, title)) in enumerate(zip(axes[0], views, strict=True)):
            im = ax.imshow(mat, vmin=-1, vmax=1, cmap="RdBu_r")
            ax.set_xticks(range(k), names, rotation=30, ha="right")
            ax.set_yticks(range(k), names if i == 0 else [])
            for (i, j), v in np.ndenumerate(mat):
                ax.text(j, i, "—" if np.isnan(v) else f"{v:.2f}", ha="center", va="center", fontsize=FONT,
                        color="white" if abs(np.nan_to_num(v)) > 0.6 else "black")
            ax.set_title(title, fontsize=FONT)
        assert im is not None  # views is not empty (returned above)
        fig.colorbar(im, ax=list(axes[0]), shrink=0.8, label="Spearman ρ")
    return Figure("rank_correlation", "Rank correlation between aggregates (within group, then pooled)", (
        "Spearman ρ between configuration rankings under two aggregates. Left: median over campaign/model/"
        "regime/step groups with at least 3 configurations; right: pooled over every configuration (labelled "
        "pooled: it mixes model sizes, which inflates ρ). — = undefined."), fig)
