"""Publication figures of the report (issue 17): forest plot, rliable-style plots, training curves,
domain trade-off, rank-correlation heat maps.

Each builder returns a `Figure` (name, title, caption, matplotlib figure) or None when its data does
not exist, so the report shows only what the campaign has. `render` turns a Figure into SVG, PDF and
PNG (200 dpi) bytes; SVG keeps its text as <text> elements (`svg.fonttype = 'none'`) so labels stay
searchable and editable. The numbers drawn come from pure functions (`relative_scores`,
`aggregate_estimates`, `performance_profile`, `improvement_probabilities`) that tests check
against the paired table.
"""

from __future__ import annotations

import io
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
from matplotlib.artist import Artist
from matplotlib.patches import Patch
from matplotlib.lines import Line2D
from matplotlib.typing import RcKeyType
from scipy import stats

from analysis.schema import GROUP_KEYS
from wtcommon.atomic import atomic_write_bytes

PNG_DPI = 200
FORMATS = ("svg", "pdf", "png")
FONT = 10  # points; every text in a figure is at least this size
_RC: dict[RcKeyType, Any] = {
    "svg.fonttype": "none", "font.size": FONT, "axes.titlesize": FONT + 1, "axes.labelsize": FONT,
    "xtick.labelsize": FONT, "ytick.labelsize": FONT, "legend.fontsize": FONT, "pdf.fonttype": 42,
    "svg.hashsalt": "windtunnel"}
_CHAR_IN = 0.085  # approximate width of one 10 pt character (inches), for the label columns
REFERENCES = ("baseline", "static")


@dataclass
class Figure:
    """One report figure: file stem, heading, caption (what is drawn and how it was computed)."""

    name: str
    title: str
    caption: str
    fig: Any


def render(f: Figure, formats: Sequence[str] = FORMATS) -> dict[str, bytes]:
    """SVG (text as text), PDF and PNG at PNG_DPI, in memory: nothing is written until all exist.
    Layouts are fixed by each builder (no bbox "tight": it draws every figure twice)."""
    out = {}
    with plt.rc_context(_RC):
        for fmt in formats:
            buf = io.BytesIO()
            f.fig.savefig(buf, format=fmt, dpi=PNG_DPI if fmt == "png" else None,
                          metadata={"Date": None} if fmt in ("svg", "pdf") else None)
            out[fmt] = buf.getvalue()
    plt.close(f.fig)
    return out


def _label_frame(rows: pd.DataFrame, with_campaign: bool = False) -> pd.DataFrame:
    """Readable label columns (model, regime, policy[, step]) instead of one raw id string."""
    cols: dict[str, Any] = {}
    if with_campaign:
        cols["campaign"] = rows["campaign"].astype(str)
    cols["model"] = rows["model"].astype(str)
    if (rows["regime"].astype(str) != "").any():
        cols["regime"] = rows["regime"].astype(str).replace("", "—")
    if rows["step"].nunique() > 1:
        cols["step"] = rows["step"].astype(str)
    aa = rows["kind"].eq("aa_noise_floor") if "kind" in rows else pd.Series(False, index=rows.index)
    ref = rows["reference"].astype(str) if "reference" in rows else pd.Series("", index=rows.index)
    pol = rows["policy"].astype(str)
    cols["policy"] = np.where(aa, "static vs baseline (A/A)", pol + " vs " + ref)
    return pd.DataFrame(cols, index=rows.index)


def _columns_layout(labels: pd.DataFrame) -> tuple[list[float], float]:
    """x offsets (inches from the figure's left edge) of each label column and the total width."""
    xs, x = [], 0.1
    for c in labels.columns:
        xs.append(x)
        x += _CHAR_IN * max(len(c), int(labels[c].str.len().max() if len(labels) else 1)) + 0.2
    return xs, x


def _draw_labels(fig, ax, y: np.ndarray, labels: pd.DataFrame, xs: list[float], width_in: float,
                 header: bool) -> None:
    tr = matplotlib.transforms.blended_transform_factory(fig.transFigure, ax.transData)
    for x, c in zip(xs, labels.columns, strict=True):
        for yy, s in zip(y, labels[c], strict=True):
            ax.text(x / width_in, yy, s, transform=tr, ha="left", va="center", fontsize=FONT, clip_on=False)
        if header:
            ax.text(x / width_in, 1.0, c, transform=matplotlib.transforms.blended_transform_factory(
                fig.transFigure, ax.transAxes), ha="left", va="bottom", fontsize=FONT, fontweight="bold")


# ----------------------------------------------------------------------------- forest plot

def aa_floor(paired: pd.DataFrame, metric: str) -> pd.Series:
    """Per campaign: the largest |Δ| of its A/A rows (static vs baseline, same model/regime/step).

    A method effect inside this band is no larger than what two arms with the same data produce.
    Campaigns without A/A rows are absent (missing is not zero)."""
    aa = paired[(paired["metric"] == metric) & (paired["kind"] == "aa_noise_floor")]
    return aa["mean_diff"].abs().groupby(aa["campaign"], sort=False).max().dropna()


def forest_figure(paired: pd.DataFrame, metric: str, margin: float | None = None) -> Figure | None:
    """One panel per campaign on one shared x-axis; rows sorted by effect; seed-only t 95% CI and, when
    item logs were given, the seed + item CI; equivalence margin and the campaign's A/A floor as bands."""
    d = paired[(paired["metric"] == metric) & paired["mean_diff"].notna()]
    if d.empty:
        return None
    campaigns = list(dict.fromkeys(d["campaign"]))
    floors = aa_floor(paired, metric)
    labels_all = _label_frame(d)
    xs, lab_w = _columns_layout(labels_all)
    plot_w = 5.5
    width = lab_w + plot_w + 0.3
    heights = [int((d["campaign"] == c).sum()) + 1 for c in campaigns]
    height = 1.4 + 0.27 * sum(heights) + 0.45 * len(campaigns)
    has_item = bool(d["item_lo"].notna().any())
    with plt.rc_context(_RC):
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
            _draw_labels(fig, ax, y, labels_all.loc[part.index], xs, width, header=i == 0)
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
    return Figure(f"forest_{_slug(metric)}", f"Forest plot: paired Δ {metric}, one shared axis", (
        f"{n_eff} method-vs-reference comparisons, sorted by effect within each campaign; one x-axis for all "
        "panels. Thick: seed-only paired-t 95% CI" + ("; thin orange: seed + item two-way clustered 95% CI" if has_item
                                                      else "")
        + (". Grey rows are A/A comparisons." if d["kind"].eq("aa_noise_floor").any() else ".")), fig)


def _slug(s: str) -> str:
    return "".join(ch if ch.isalnum() else "_" for ch in s).strip("_").lower()


# ----------------------------------------------------------------------------- rliable-style data

def relative_scores(runs: pd.DataFrame, paired: pd.DataFrame, metric: str) -> pd.DataFrame:
    """Per run: its score minus the seed-mean of its campaign-local reference in the same group.

    Methods use the reference of their paired rows; a reference's own runs are centred on their own
    mean (its seed noise). Columns: GROUP_KEYS, policy, seed, group (label), delta. Vectorised joins."""
    keys = list(GROUP_KEYS)
    eff = paired[(paired["kind"] == "effect") & (paired["metric"] == metric)][keys + ["policy", "reference"]]
    eff = eff.drop_duplicates()
    means = runs.groupby(keys + ["policy"], sort=False)[metric].mean().rename("ref_mean").reset_index()
    m = runs[keys + ["policy", "seed", metric]].merge(eff, on=keys + ["policy"])
    m = m.merge(means.rename(columns={"policy": "reference"}), on=keys + ["reference"])
    refs = set(eff["reference"])
    r = runs[runs["policy"].isin(refs)][keys + ["policy", "seed", metric]]
    r = r.merge(means, on=keys + ["policy"])
    out = pd.concat([m.drop(columns="reference"), r], ignore_index=True)
    out["delta"] = out[metric] - out["ref_mean"]
    out = out[out["delta"].notna()]
    out["group"] = out[keys].astype(str).agg("/".join, axis=1)
    return out[keys + ["policy", "seed", "group", "delta"]].reset_index(drop=True)


def _stratified_indices(strata: np.ndarray, n_resamples: int, rng: np.random.Generator) -> np.ndarray:
    """(B, N) indices that resample runs with replacement within each stratum (rliable's stratified
    bootstrap), without a loop over strata."""
    order = np.argsort(strata, kind="stable")
    s_sorted = strata[order]
    _, start, count = np.unique(s_sorted, return_index=True, return_counts=True)
    inv = np.searchsorted(s_sorted[start], s_sorted)
    u = rng.random((n_resamples, len(strata)))
    pos = start[inv] + np.floor(u * count[inv]).astype(int)
    out = np.empty_like(pos)
    out[:, order] = order[pos]  # column i resamples within the stratum of run i
    return out


def _iqm(x: np.ndarray, axis: int = -1) -> np.ndarray:
    return stats.trim_mean(x, 0.25, axis=axis)


def aggregate_estimates(rel: pd.DataFrame, *, n_resamples: int = 2000, seed: int = 0,
                        level: float = 0.95) -> pd.DataFrame:
    """Per policy: mean and IQM of `delta` over its runs with stratified-bootstrap CIs (strata = groups)."""
    rows = []
    a = (1 - level) / 2
    for pol, g in rel.groupby("policy", sort=True):
        v = g["delta"].to_numpy(float)
        idx = _stratified_indices(g["group"].to_numpy(str), n_resamples, np.random.default_rng([seed, len(v)]))
        boot = v[idx]
        for est, fn in (("mean", np.mean), ("IQM", _iqm)):
            b = fn(boot, axis=1)
            rows.append({"policy": pol, "estimator": est, "value": float(fn(v)), "lo": float(np.quantile(b, a)),
                         "hi": float(np.quantile(b, 1 - a)), "n_runs": len(v), "n_groups": g["group"].nunique()})
    return pd.DataFrame(rows)


def performance_profile(rel: pd.DataFrame, taus: np.ndarray, *, n_resamples: int = 2000, seed: int = 0,
                        level: float = 0.95) -> pd.DataFrame:
    """Per policy and tau: fraction of runs with delta > tau, with a stratified-bootstrap band."""
    rows = []
    a = (1 - level) / 2
    for pol, g in rel.groupby("policy", sort=True):
        v = g["delta"].to_numpy(float)
        idx = _stratified_indices(g["group"].to_numpy(str), n_resamples, np.random.default_rng([seed, len(v), 1]))
        frac = (v[:, None] > taus[None, :]).mean(axis=0)
        bfrac = (v[idx][:, :, None] > taus[None, None, :]).mean(axis=1)
        rows.append(pd.DataFrame({"policy": pol, "tau": taus, "fraction": frac,
                                  "lo": np.quantile(bfrac, a, axis=0), "hi": np.quantile(bfrac, 1 - a, axis=0)}))
    if not rows:
        return pd.DataFrame(columns=["policy", "tau", "fraction", "lo", "hi"])
    return pd.concat(rows, ignore_index=True)


def improvement_probabilities(runs: pd.DataFrame, paired: pd.DataFrame, metric: str, *, n_resamples: int = 2000,
                              seed: int = 0, level: float = 0.95) -> pd.DataFrame:
    """Per effect comparison: P(improve) = share of paired seeds with d > 0 (ties 1/2; equals the paired
    table's p_improve_seeds) and its percentile interval from resampling the seed pairs."""
    keys = list(GROUP_KEYS)
    eff = paired[(paired["kind"] == "effect") & (paired["metric"] == metric) & paired["mean_diff"].notna()]
    eff = eff[keys + ["policy", "reference", "p_improve_seeds", "p_improve_posterior",
                      "mean_diff"]].reset_index(drop=True)
    if eff.empty:
        return eff.assign(p_improve=[], lo=[], hi=[], n=[])
    eff["cmp"] = np.arange(len(eff))
    base = runs[keys + ["policy", "seed", metric]]
    m = base.merge(eff[keys + ["policy", "reference", "cmp"]], on=keys + ["policy"])
    r = base.rename(columns={"policy": "reference", metric: "ref_value"})
    pairs = m.merge(r, on=keys + ["reference", "seed"])
    d = (pairs[metric] - pairs["ref_value"]).to_numpy(float)
    ok = ~np.isnan(d)
    pairs, d = pairs[ok], d[ok]
    win = np.where(d > 0, 1.0, np.where(d == 0, 0.5, 0.0))
    strata = pairs["cmp"].to_numpy()
    idx = _stratified_indices(strata.astype(str), n_resamples, np.random.default_rng(seed))
    a = (1 - level) / 2
    # per resample and comparison: mean of the resampled wins (columns keep their stratum)
    boot_w = win[idx]
    out = eff.copy()
    out["p_improve"] = pd.Series(win).groupby(strata).mean().reindex(out["cmp"]).to_numpy()
    out["n"] = pd.Series(win).groupby(strata).size().reindex(out["cmp"]).to_numpy()
    codes = pd.Categorical(strata, categories=out["cmp"]).codes
    sums = np.zeros((boot_w.shape[0], len(out)))
    for_cols = np.arange(len(out))[codes]
    np.add.at(sums.T, for_cols, boot_w.T)  # columns of the same comparison summed
    means = sums / out["n"].to_numpy(float)[None, :]
    out["lo"] = np.quantile(means, a, axis=0)
    out["hi"] = np.quantile(means, 1 - a, axis=0)
    return out.drop(columns="cmp")


# Okabe & Ito's colour-blind-safe palette: one hue per mechanism, a neutral grey for the references; within a
# mechanism, policies differ by line style and marker, so a figure also reads in greyscale.
OKABE_ITO = {"blue": "#0072B2", "vermillion": "#D55E00", "bluish green": "#009E73", "reddish purple": "#CC79A7",
             "orange": "#E69F00", "sky blue": "#56B4E9", "yellow": "#F0E442", "black": "#000000"}
MECHANISM_COLOR = {"select": OKABE_ITO["blue"], "reweight": OKABE_ITO["vermillion"], "mix": OKABE_ITO["bluish green"],
                   "unknown": OKABE_ITO["reddish purple"], "none": "#7F7F7F"}
REFERENCE_COLOR = "#7F7F7F"
_LINESTYLES = ("-", "--", "-.", ":", (0, (5, 1, 1, 1)))
_MARKERS = ("o", "s", "^", "D", "v", "P")
PROFILE_TOP = 5  # performance-profile curves: the best PROFILE_TOP policies by mean Δ, plus the references


def policy_mechanisms(runs: pd.DataFrame) -> dict[str, str]:
    """Each policy's mechanism: the records' `mechanism` column when present, else the study's table."""
    from analysis.schema import POLICY_MECHANISM

    out = {p: POLICY_MECHANISM.get(p, "unknown") for p in runs["policy"].unique()}
    if "mechanism" in runs.columns:
        for p, m in runs.groupby("policy")["mechanism"].first().items():
            if isinstance(m, str) and m in MECHANISM_COLOR:
                out[p] = m
    return out


def policy_styles(policies: Sequence[str], mechanisms: Mapping[str, str]) -> dict[str, dict[str, Any]]:
    """color (the mechanism's hue; grey for references), linestyle and marker (distinct within a mechanism)."""
    out: dict[str, dict[str, Any]] = {}
    by_mech: dict[str, list[str]] = {}
    for p in sorted(policies):
        mech = "none" if p in REFERENCES else mechanisms.get(p, "unknown")
        by_mech.setdefault(mech, []).append(p)
    for mech, pols in by_mech.items():
        color = REFERENCE_COLOR if mech == "none" else MECHANISM_COLOR.get(mech, MECHANISM_COLOR["unknown"])
        for i, p in enumerate(pols):
            out[p] = {"color": color, "ls": _LINESTYLES[i % len(_LINESTYLES)], "marker": _MARKERS[i % len(_MARKERS)],
                      "mechanism": mech}
    return out


def _mechanism_handles(mechs: Sequence[str]) -> list[Artist]:
    names = {"none": "reference", "select": "selection", "reweight": "reweighting", "mix": "mixing",
             "unknown": "other"}
    return [Patch(color=MECHANISM_COLOR[m] if m != "none" else REFERENCE_COLOR, alpha=0.6, label=names[m])
            for m in ("select", "reweight", "mix", "unknown", "none") if m in mechs]


def _policy_colors(policies: Sequence[str]) -> dict[str, Any]:
    cmap = plt.get_cmap("tab10" if len(policies) <= 10 else "tab20")
    return {p: cmap(i % cmap.N) for i, p in enumerate(sorted(policies))}


def _resamples_text(n_resamples: int, requested: int | None) -> str:
    """The resamples a figure used, and the command's when the figures capped it."""
    return f"{n_resamples:,} resamples" + (f"; the figures cap the command's {requested:,}" if requested
                                          and requested > n_resamples else "")


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
    with plt.rc_context(_RC):
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
        handles = _mechanism_handles(sorted({st["mechanism"] for st in styles.values()}))
        fig.legend(handles=handles, loc="lower center", ncol=len(handles), frameon=False)
        fig.tight_layout(rect=(0, 0.45 / (1.4 + 0.42 * len(pols)), 1, 1))  # room for the mechanism legend
    return Figure(f"aggregate_estimates_{_slug(metric)}",
                  f"Aggregate interval estimates per policy ({metric}, pooled)", (
        f"rliable-style: per policy, the mean and interquartile mean of each run's {metric} minus its campaign-"
        f"local reference's seed mean, pooled over {n_groups} campaign/model/regime/step group(s); bars are 95% "
        f"stratified-bootstrap intervals ({_resamples_text(n_resamples, requested)}, seeds resampled within each "
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
    with plt.rc_context(_RC):
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
    return Figure(f"performance_profile_{_slug(metric)}", f"Performance profiles ({metric}, pooled)", (
        f"Fraction of runs whose {metric} minus the campaign-local reference's seed mean exceeds τ; "
        f"bands are 95% stratified-bootstrap intervals ({_resamples_text(n_resamples, requested)}). "
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
    labels = _label_frame(p.assign(kind="effect"), with_campaign=True)
    xs, lab_w = _columns_layout(labels)
    width = lab_w + 5.0
    height = 2.0 + 0.27 * len(p)
    with plt.rc_context(_RC):
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
        _draw_labels(fig, ax, y, labels, xs, width, header=True)
        ax.set_xlabel(f"probability of improvement on {metric} (method > reference)")
        ax.grid(axis="x", color="0.9", lw=0.6)
        n_max = int(p["n"].max())
        ax.set_title(f"n = {n_max} seeds: a share takes {n_max + 1} values; an interval spanning [0, 1] is all "
                     f"{n_max} seeds can say", loc="right", fontsize=FONT)
        fig.legend(loc="lower center", bbox_to_anchor=(0.5, 0.0), ncol=1, frameon=False)
    n = int(p["n"].max())
    res = f" ({_resamples_text(n_resamples, requested)})" if n_resamples else ""
    return Figure(f"p_improve_{_slug(metric)}", f"Probability of improvement ({metric})", (
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
    labels = _label_frame(comps.assign(kind="effect"), with_campaign=comps["campaign"].nunique() > 1)
    xs, lab_w = _columns_layout(labels)
    doms = [dm for dm in domains if dm in set(e["metric"])]
    width = lab_w + 2.6 * len(doms) + 0.3
    height = 2.0 + 0.3 * len(comps)
    has_item = bool(e["item_lo"].notna().any())
    with plt.rc_context(_RC):
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
        _draw_labels(fig, axes[0, 0], comps["row"].to_numpy(), labels, xs, width, header=True)
        fig.supxlabel("Δ domain mean vs reference (points), seed-only paired-t 95% CI"
                      + ("; orange: seed + item CI" if has_item else ""), fontsize=FONT)
    return Figure("domain_tradeoff", "Domain trade-off with 95% CIs", (
        f"Per comparison (rows sorted by Δ {sort_metric}, largest on top) and domain: paired mean Δ with the "
        "seed-only t 95% CI, one shared x-axis across domains"
        + (f"; green band: the equivalence margin ±{margin:g}." if margin else ".")), fig)


# ----------------------------------------------------------------------------- training curves

_REWARD_KEYS = ("reward/mean", "critic/score/mean", "reward_mean", "reward", "score/mean")


def training_frame(runs: Sequence[Mapping[str, Any]]) -> pd.DataFrame:
    """Per run and step: reward, kept_frac, weight_std and realised_prop_<domain> from each run's
    metrics.jsonl (runs as `analysis.intervention.runs_from_dir` lists them); runs without a file are skipped."""
    from analysis.intervention import read_metrics

    frames = []
    for r in runs:
        mp = r.get("metrics_path")
        if not mp or not Path(mp).is_file():
            continue
        m = read_metrics(mp)
        out = pd.DataFrame({"step": m["step"]})
        rk = next((k for k in _REWARD_KEYS if k in m.columns and m[k].notna().any()), None)
        out["reward"] = m[rk] if rk else np.nan
        for c in ("kept_frac", "weight_std"):
            out[c] = m[c] if c in m.columns else np.nan
        for c in m.columns:
            if c.startswith("realised_prop_"):
                out[c] = m[c]
        for k in ("campaign", "model", "regime", "policy", "seed"):
            out[k] = r.get(k, "")
        frames.append(out)
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()


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
    colors = _policy_colors(tf["config"].unique())
    ncol = 2 if len(panels) > 1 else 1
    nrow = -(-len(panels) // ncol)
    with plt.rc_context(_RC):
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


# ----------------------------------------------------------------------------- rank correlation

def within_group_correlations(sens: pd.DataFrame) -> pd.DataFrame:
    """Median within-group Spearman per aggregate pair from the aggregation_sensitivity table data
    (rows whose scope is not pooled), with the number of groups."""
    g = sens[~sens["scope"].astype(str).str.startswith("pooled")].dropna(subset=["spearman"])
    if g.empty:
        return pd.DataFrame(columns=["aggregate_a", "aggregate_b", "median_spearman", "n_groups"])
    return (g.groupby(["aggregate_a", "aggregate_b"], sort=False)["spearman"]
            .agg(median_spearman="median", n_groups="size").reset_index())


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
    with plt.rc_context(_RC):
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
