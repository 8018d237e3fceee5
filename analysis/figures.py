"""Publication figures of the report (issue 17): forest plot, rliable-style plots and the domain
trade-off, all drawn from the paired table; `build_figures` adds the training curves and rank-correlation
heat map of analysis.diagnostic_figures and lists them in report order.

Each builder returns a `Figure` (analysis.figure_style: name, title, caption, matplotlib figure) or
None when its data does not exist, so the report shows only what the campaign has. The numbers drawn
come from the pure functions of analysis.figure_data, which tests check against the paired table.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")  # before pyplot: no display needed
import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
from matplotlib.artist import Artist
from matplotlib.lines import Line2D
from matplotlib.patches import Patch

from analysis.diagnostic_figures import heatmap_figure, training_figure
from analysis.figure_data import (
    aa_floor,
    aggregate_estimates,
    improvement_probabilities,
    performance_profile,
    relative_scores,
    training_frame,
)
from analysis.figure_style import (
    FONT,
    OKABE_ITO,
    RC,
    REFERENCES,
    Figure,
    columns_layout,
    draw_labels,
    label_frame,
    mechanism_handles,
    policy_mechanisms,
    policy_styles,
    resamples_text,
    slug,
)
from analysis.schema import GROUP_KEYS
from wtcommon.atomic import atomic_write_bytes

# ----------------------------------------------------------------------------- forest plot

def forest_figure(paired: pd.DataFrame, metric: str, margin: float | None = None) -> Figure | None:
    """One panel per campaign on one shared x-axis; rows sorted by effect; seed-only t 95% CI and, when
    item logs were given, the seed + item CI; equivalence margin and the campaign's A/A floor as bands."""
    d = paired[(paired["metric"] == metric) & paired["mean_diff"].notna()]
    if d.empty:
        return None
    campaigns = list(dict.fromkeys(d["campaign"]))
    floors = aa_floor(paired, metric)
    labels_all = label_frame(d)
    xs, lab_w = columns_layout(labels_all)
    plot_w = 5.5
    width = lab_w + plot_w + 0.3
    heights = [int((d["campaign"] == c).sum()) + 1 for c in campaigns]
    height = 1.4 + 0.27 * sum(heights) + 0.45 * len(campaigns)
    has_item = bool(d["item_lo"].notna().any())
    with plt.rc_context(RC):
        fig, axes = plt.subplots(len(campaigns), 1, figsize=(width, height), sharex=True, squeeze=False,
                                 gridspec_kw={"height_ratios": heights})
        fig.subplots_adjust(left=lab_w / width, right=1 - 0.3 / width, top=1 - 0.55 / height,
                            bottom=1.05 / height, hspace=0.35 * 6 / max(6, sum(heights) / len(campaigns)))
        for i, (ax, c) in enumerate(zip(axes[:, 0], campaigns, strict=True)):
            part = d[d["campaign"] == c].sort_values("mean_diff", kind="stable")
            y = np.arange(len(part), dtype=float)
            if margin:
                ax.axvspan(-margin, margin, color="tab:green", alpha=0.12, lw=0)
            if c in floors.index:
                f = float(floors[c])
                ax.axvspan(-f, f, facecolor="0.5", alpha=0.22, lw=0, hatch="//", edgecolor="0.55")
            aa = part["kind"].eq("aa_noise_floor").to_numpy()
            col = np.where(aa, "0.45", "tab:blue")
            ax.hlines(y, part["t_lo"], part["t_hi"], colors=col, lw=3.2, alpha=0.8)
            if has_item:
                ok = part["item_lo"].notna().to_numpy()
                ax.hlines(y[ok] - 0.28, part["item_lo"][ok], part["item_hi"][ok], colors="tab:orange", lw=1.6)
            ax.scatter(part["mean_diff"], y, c=list(col), zorder=3, s=22)
            ax.axvline(0, color="k", lw=0.8)
            ax.set_yticks([])
            ax.set_ylim(-0.8, len(part) - 0.2)
            ax.set_title(f"campaign: {c}" + ("" if c in floors.index else "  (no A/A rows: no noise-floor band)"),
                         loc="right", fontsize=FONT)
            draw_labels(fig, ax, y, labels_all.loc[part.index], xs, width, header=i == 0)
            ax.grid(axis="x", color="0.9", lw=0.6)
        axes[-1, 0].set_xlabel(f"Δ {metric} vs campaign-local reference (points; same seeds paired)")
        handles: list[Artist] = [
            Line2D([], [], color="tab:blue", lw=3.2, marker="o", label="mean Δ, seed-only paired-t 95% CI")]
        if has_item:
            handles.append(Line2D([], [], color="tab:orange", lw=1.6, label="seed + item 95% CI"))
        has_aa = bool(d["kind"].eq("aa_noise_floor").any())
        if has_aa:  # the legend names only what is drawn
            handles.append(Line2D([], [], color="0.45", lw=3.2, marker="o", label="A/A: static vs baseline"))
        if margin:
            handles.append(Patch(color="tab:green", alpha=0.12, label=f"equivalence margin ±{margin:g}"))
        if len(floors):
            handles.append(Patch(facecolor="0.5", alpha=0.22, hatch="//", edgecolor="0.55",
                                 label="campaign A/A noise floor (largest |Δ| A/A)"))
        fig.legend(handles=handles, loc="lower center", bbox_to_anchor=(0.5, 0.0), ncol=2, frameon=False,
                   fontsize=FONT)
    n_eff = int(d["kind"].eq("effect").sum())
    return Figure(f"forest_{slug(metric)}", f"Forest plot: paired Δ {metric}, one shared axis", (
        f"{n_eff} method-vs-reference comparisons, sorted by effect within each campaign; one x-axis for all "
        "panels. Thick: seed-only paired-t 95% CI" + ("; thin orange: seed + item two-way clustered 95% CI" if has_item
                                                      else "")
        + (". Grey rows are A/A comparisons." if d["kind"].eq("aa_noise_floor").any() else ".")), fig)


# ----------------------------------------------------------------------------- rliable-style plots

PROFILE_TOP = 5  # performance-profile curves: the best PROFILE_TOP policies by mean Δ, plus the references


def aggregate_figure(rel: pd.DataFrame, metric: str, *, n_resamples: int, seed: int = 0,
                     mechanisms: Mapping[str, str] | None = None, requested: int | None = None) -> Figure | None:
    """rliable's aggregate interval estimates (mean, IQM) per policy, pooled over groups as Δ vs reference;
    coloured by mechanism (grey: references)."""
    if rel.empty:
        return None
    est = aggregate_estimates(rel, n_resamples=n_resamples, seed=seed)
    pols = list(est.loc[est["estimator"] == "mean"].sort_values("value")["policy"])
    styles = policy_styles(pols, mechanisms or {})
    colors = {p: st["color"] for p, st in styles.items()}
    n_groups = rel["group"].nunique()
    with plt.rc_context(RC):
        fig, axes = plt.subplots(1, 2, figsize=(9.5, 1.4 + 0.42 * len(pols)), sharey=True, sharex=True)
        for ax, e in zip(axes, ("mean", "IQM"), strict=True):
            s = est[est["estimator"] == e].set_index("policy").loc[pols]
            y = np.arange(len(pols))
            for yy, p in zip(y, pols, strict=True):
                ax.barh(yy, s.loc[p, "hi"] - s.loc[p, "lo"], left=s.loc[p, "lo"], height=0.6, color=colors[p],
                        alpha=0.45)
                ax.vlines(s.loc[p, "value"], yy - 0.3, yy + 0.3, color="k", lw=1.5)
            ax.axvline(0, color="k", lw=0.8, ls=":")
            ax.set_yticks(y, pols)
            ax.set_title(e)
            ax.set_xlabel(f"Δ {metric} vs reference (points)")
            ax.grid(axis="x", color="0.9", lw=0.6)
        fig.suptitle(f"Aggregate estimates per policy, pooled over {n_groups} group(s)", fontsize=FONT + 1)
        handles = mechanism_handles(sorted({st["mechanism"] for st in styles.values()}))
        fig.legend(handles=handles, loc="lower center", ncol=len(handles), frameon=False)
        fig.tight_layout(rect=(0, 0.45 / (1.4 + 0.42 * len(pols)), 1, 1))  # room for the mechanism legend
    return Figure(f"aggregate_estimates_{slug(metric)}",
                  f"Aggregate interval estimates per policy ({metric}, pooled)", (
        f"rliable-style: per policy, the mean and interquartile mean of each run's {metric} minus its campaign-"
        f"local reference's seed mean, pooled over {n_groups} campaign/model/regime/step group(s); bars are 95% "
        f"stratified-bootstrap intervals ({resamples_text(n_resamples, requested)}, seeds resampled within each "
        "group). Colour = mechanism (Okabe-Ito palette), grey = references."), fig)


def profile_figure(rel: pd.DataFrame, metric: str, *, n_resamples: int, seed: int = 0,
                   mechanisms: Mapping[str, str] | None = None, requested: int | None = None,
                   top: int = PROFILE_TOP) -> Figure | None:
    """Performance profiles: fraction of runs whose Δ vs reference exceeds tau, with bootstrap bands; only the
    `top` policies by mean Δ and the references are drawn (more curves overlap into noise)."""
    if rel.empty:
        return None
    means = rel.groupby("policy")["delta"].mean().sort_values(ascending=False)
    methods = [p for p in means.index if p not in REFERENCES]
    keep = methods[:top] + [p for p in means.index if p in REFERENCES]
    rel = rel[rel["policy"].isin(keep)]
    lo, hi = float(rel["delta"].min()), float(rel["delta"].max())
    pad = max(0.5, 0.05 * (hi - lo))
    taus = np.linspace(lo - pad, hi + pad, 121)
    prof = performance_profile(rel, taus, n_resamples=n_resamples, seed=seed)
    styles = policy_styles(keep, mechanisms or {})
    with plt.rc_context(RC):
        fig, ax = plt.subplots(figsize=(8, 4.6))
        for p in keep:
            g = prof[prof["policy"] == p]
            st = styles[p]
            ax.plot(g["tau"], g["fraction"], color=st["color"], ls=st["ls"], lw=2, label=p)
            ax.fill_between(g["tau"], g["lo"], g["hi"], color=st["color"], alpha=0.12, lw=0)
        ax.axvline(0, color="k", lw=0.8, ls=":")
        ax.set_xlabel(f"τ: Δ {metric} vs reference (points)")
        ax.set_ylabel("fraction of runs with Δ > τ")
        ax.set_ylim(-0.02, 1.02)
        ax.set_title(f"Performance profiles, pooled over {rel['group'].nunique()} group(s)")
        ax.legend(loc="lower left", frameon=False, ncol=2 if len(keep) > 6 else 1)
        ax.grid(color="0.9", lw=0.6)
        fig.tight_layout()
    left = len(methods) - len(methods[:top])
    return Figure(f"performance_profile_{slug(metric)}", f"Performance profiles ({metric}, pooled)", (
        f"Fraction of runs whose {metric} minus the campaign-local reference's seed mean exceeds τ; "
        f"bands are 95% stratified-bootstrap intervals ({resamples_text(n_resamples, requested)}). "
        + (f"The {top} policies with the largest mean Δ of {len(methods)} are drawn ({left} more in the aggregate "
           "estimates); " if left > 0 else "")
        + "colour = mechanism, line style tells policies of one mechanism apart; references (grey) appear centred "
        "on their own mean (their seed noise)."), fig)


def improvement_figure(probs: pd.DataFrame, metric: str, *, n_resamples: int | None = None,
                       requested: int | None = None) -> Figure | None:
    """P(improve) per comparison with its seed-pair bootstrap interval; sorted; 0.5 = no difference."""
    if probs.empty:
        return None
    p = probs.sort_values(["p_improve", "mean_diff"], kind="stable").reset_index(drop=True)
    labels = label_frame(p.assign(kind="effect"), with_campaign=True)
    xs, lab_w = columns_layout(labels)
    width = lab_w + 5.0
    height = 2.0 + 0.27 * len(p)
    with plt.rc_context(RC):
        fig, ax = plt.subplots(figsize=(width, height))
        fig.subplots_adjust(left=lab_w / width, right=1 - 0.2 / width, top=1 - 0.45 / height, bottom=1.5 / height)
        y = np.arange(len(p), dtype=float)
        ax.hlines(y, p["lo"], p["hi"], color="tab:purple", lw=3, alpha=0.6, label="95% interval (seed pairs resampled)")
        ax.scatter(p["p_improve"], y, color="tab:purple", zorder=3, s=24, label="share of seeds with Δ > 0")
        ax.scatter(p["p_improve_posterior"], y, marker="x", color="k", zorder=3, s=24,
                   label="P(mean Δ > 0), flat-prior t posterior")
        ax.axvline(0.5, color="k", lw=0.8, ls=":")
        ax.set_xlim(-0.03, 1.03)
        ax.set_yticks([])
        ax.set_ylim(-0.8, len(p) - 0.2)
        draw_labels(fig, ax, y, labels, xs, width, header=True)
        ax.set_xlabel(f"probability of improvement on {metric} (method > reference)")
        ax.grid(axis="x", color="0.9", lw=0.6)
        n_max = int(p["n"].max())
        ax.set_title(f"n = {n_max} seeds: a share takes {n_max + 1} values; an interval spanning [0, 1] is all "
                     f"{n_max} seeds can say", loc="right", fontsize=FONT)
        fig.legend(loc="lower center", bbox_to_anchor=(0.5, 0.0), ncol=1, frameon=False)
    n = int(p["n"].max())
    res = f" ({resamples_text(n_resamples, requested)})" if n_resamples else ""
    return Figure(f"p_improve_{slug(metric)}", f"Probability of improvement ({metric})", (
        f"Per comparison: share of paired seeds where the method beats its reference (ties 1/2; the paired "
        f"table's p_improve_seeds) with a 95% percentile interval from resampling the seed pairs{res} (at n = {n} "
        f"seeds it takes only {n + 1} values, so an interval spanning [0, 1] is what {n} seeds allow, not a "
        "finding), and the posterior P(mean Δ > 0) as ×."), fig)


# ----------------------------------------------------------------------------- domain trade-off

def domain_figure(paired: pd.DataFrame, domains: Sequence[str], sort_metric: str,
                  margin: float | None = None) -> Figure | None:
    """Per comparison and domain: paired mean Δ with the seed-only t 95% CI; one shared x-axis."""
    eff = paired[(paired["kind"] == "effect") & (paired["metric_type"] == "domain") & paired["mean_diff"].notna()]
    if eff.empty:
        return None
    keys = list(GROUP_KEYS) + ["policy", "reference"]
    order = paired[(paired["kind"] == "effect") & (paired["metric"] == sort_metric)][keys + ["mean_diff"]]
    comps = eff[keys].drop_duplicates().merge(order, on=keys, how="left").sort_values("mean_diff", kind="stable")
    comps = comps.reset_index(drop=True)
    comps["row"] = np.arange(len(comps), dtype=float)
    e = eff.merge(comps[keys + ["row"]], on=keys)
    labels = label_frame(comps.assign(kind="effect"), with_campaign=comps["campaign"].nunique() > 1)
    xs, lab_w = columns_layout(labels)
    doms = [dm for dm in domains if dm in set(e["metric"])]
    width = lab_w + 2.6 * len(doms) + 0.3
    height = 2.0 + 0.3 * len(comps)
    has_item = bool(e["item_lo"].notna().any())
    with plt.rc_context(RC):
        fig, axes = plt.subplots(1, len(doms), figsize=(width, height), sharey=True, sharex=True, squeeze=False)
        fig.subplots_adjust(left=lab_w / width, right=1 - 0.3 / width, top=1 - 0.5 / height, bottom=1.0 / height,
                            wspace=0.08)
        for j, (ax, dm) in enumerate(zip(axes[0], doms, strict=True)):
            part = e[e["metric"] == dm]
            if margin:
                ax.axvspan(-margin, margin, color=OKABE_ITO["bluish green"], alpha=0.12, lw=0)
            ax.hlines(part["row"], part["t_lo"], part["t_hi"], color=f"C{j}", lw=3, alpha=0.7)
            if has_item:
                ok = part["item_lo"].notna()
                ax.hlines(part["row"][ok] - 0.28, part["item_lo"][ok], part["item_hi"][ok], color="tab:orange", lw=1.4)
            ax.scatter(part["mean_diff"], part["row"], color=f"C{j}", zorder=3, s=20)
            ax.axvline(0, color="k", lw=0.8)
            ax.set_title(dm)
            ax.set_yticks([])
            ax.grid(axis="x", color="0.9", lw=0.6)
        axes[0, 0].set_ylim(-0.8, len(comps) - 0.2)
        draw_labels(fig, axes[0, 0], comps["row"].to_numpy(), labels, xs, width, header=True)
        fig.supxlabel("Δ domain mean vs reference (points), seed-only paired-t 95% CI"
                      + ("; orange: seed + item CI" if has_item else ""), fontsize=FONT)
    return Figure("domain_tradeoff", "Domain trade-off with 95% CIs", (
        f"Per comparison (rows sorted by Δ {sort_metric}, largest on top) and domain: paired mean Δ with the "
        "seed-only t 95% CI, one shared x-axis across domains"
        + (f"; green band: the equivalence margin ±{margin:g}." if margin else ".")), fig)


def build_figures(paired: pd.DataFrame, runs: pd.DataFrame, suite: Any, *, margin: float | None,
                  n_resamples: int, sensitivity: pd.DataFrame | None = None,
                  training_runs: Sequence[Mapping[str, Any]] | None = None, seed: int = 0,
                  requested_resamples: int | None = None) -> list[Figure]:
    """Every figure the campaign has data for, in report order. `requested_resamples`: the command's resamples
    when the figures use fewer (`n_resamples`): the captions say both."""
    aggs = list(suite.aggregate_names)
    head = aggs[0]
    req = requested_resamples
    mechs = policy_mechanisms(runs)
    figs: list[Figure | None] = [forest_figure(paired, a, margin) for a in aggs]
    rel = relative_scores(runs, paired, head)
    figs.append(improvement_figure(improvement_probabilities(runs, paired, head, n_resamples=n_resamples, seed=seed),
                                   head, n_resamples=n_resamples, requested=req))
    figs.append(aggregate_figure(rel, head, n_resamples=n_resamples, seed=seed, mechanisms=mechs, requested=req))
    figs.append(profile_figure(rel, head, n_resamples=n_resamples, seed=seed, mechanisms=mechs, requested=req))
    figs.append(domain_figure(paired, list(suite.domains), head, margin))
    if training_runs:
        figs.append(training_figure(training_frame(training_runs)))
    if sensitivity is not None:
        figs.append(heatmap_figure(sensitivity, aggs))
    return [f for f in figs if f is not None]


def write_figures(rendered: Mapping[str, Mapping[str, bytes]], out_dir: str | Path) -> list[Path]:
    """Write <name>.svg/.pdf/.png per figure (each atomically: temp file then rename)."""
    d = Path(out_dir)
    d.mkdir(parents=True, exist_ok=True)
    paths = []
    for name, formats in rendered.items():
        for fmt, data in formats.items():
            p = d / f"{name}.{fmt}"
            atomic_write_bytes(p, data)
            paths.append(p)
    return paths
