"""What every report figure shares: the `Figure` record and its rendering to SVG, PDF and PNG, the
matplotlib settings (fonts at least 10 pt, text kept as text in SVG), the colour-blind-safe palette and
per-policy styles, and the readable label columns of the row-per-comparison plots.
"""

from __future__ import annotations

import io
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
from matplotlib.artist import Artist
from matplotlib.patches import Patch
from matplotlib.typing import RcKeyType

PNG_DPI = 200
FORMATS = ("svg", "pdf", "png")
FONT = 10  # points; every text in a figure is at least this size
RC: dict[RcKeyType, Any] = {
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
    with plt.rc_context(RC):
        for fmt in formats:
            buf = io.BytesIO()
            f.fig.savefig(buf, format=fmt, dpi=PNG_DPI if fmt == "png" else None,
                          metadata={"Date": None} if fmt in ("svg", "pdf") else None)
            out[fmt] = buf.getvalue()
    plt.close(f.fig)
    return out


def label_frame(rows: pd.DataFrame, with_campaign: bool = False) -> pd.DataFrame:
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


def columns_layout(labels: pd.DataFrame) -> tuple[list[float], float]:
    """x offsets (inches from the figure's left edge) of each label column and the total width."""
    xs, x = [], 0.1
    for c in labels.columns:
        xs.append(x)
        x += _CHAR_IN * max(len(c), int(labels[c].str.len().max() if len(labels) else 1)) + 0.2
    return xs, x


def draw_labels(fig, ax, y: np.ndarray, labels: pd.DataFrame, xs: list[float], width_in: float,
                 header: bool) -> None:
    tr = matplotlib.transforms.blended_transform_factory(fig.transFigure, ax.transData)
    for x, c in zip(xs, labels.columns, strict=True):
        for yy, s in zip(y, labels[c], strict=True):
            ax.text(x / width_in, yy, s, transform=tr, ha="left", va="center", fontsize=FONT, clip_on=False)
        if header:
            ax.text(x / width_in, 1.0, c, transform=matplotlib.transforms.blended_transform_factory(
                fig.transFigure, ax.transAxes), ha="left", va="bottom", fontsize=FONT, fontweight="bold")


def slug(s: str) -> str:
    return "".join(ch if ch.isalnum() else "_" for ch in s).strip("_").lower()


# Okabe & Ito's colour-blind-safe palette: one hue per mechanism, a neutral grey for the references; within a
# mechanism, policies differ by line style and marker, so a figure also reads in greyscale.
OKABE_ITO = {"blue": "#0072B2", "vermillion": "#D55E00", "bluish green": "#009E73", "reddish purple": "#CC79A7",
             "orange": "#E69F00", "sky blue": "#56B4E9", "yellow": "#F0E442", "black": "#000000"}
MECHANISM_COLOR = {"select": OKABE_ITO["blue"], "reweight": OKABE_ITO["vermillion"], "mix": OKABE_ITO["bluish green"],
                   "unknown": OKABE_ITO["reddish purple"], "none": "#7F7F7F"}
REFERENCE_COLOR = "#7F7F7F"
_LINESTYLES = ("-", "--", "-.", ":", (0, (5, 1, 1, 1)))
_MARKERS = ("o", "s", "^", "D", "v", "P")


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


def mechanism_handles(mechs: Sequence[str]) -> list[Artist]:
    names = {"none": "reference", "select": "selection", "reweight": "reweighting", "mix": "mixing",
             "unknown": "other"}
    return [Patch(color=MECHANISM_COLOR[m] if m != "none" else REFERENCE_COLOR, alpha=0.6, label=names[m])
            for m in ("select", "reweight", "mix", "unknown", "none") if m in mechs]


def policy_colors(policies: Sequence[str]) -> dict[str, Any]:
    cmap = plt.get_cmap("tab10" if len(policies) <= 10 else "tab20")
    return {p: cmap(i % cmap.N) for i, p in enumerate(sorted(policies))}


def resamples_text(n_resamples: int, requested: int | None) -> str:
    """The resamples a figure used, and the command's when the figures capped it."""
    return f"{n_resamples:,} resamples" + (f"; the figures cap the command's {requested:,}" if requested
                                          and requested > n_resamples else "")
