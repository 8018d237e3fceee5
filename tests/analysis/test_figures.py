"""Report figures (analysis/figures.py and the figure_* modules) and the report built around them (issue 17).

A tiny synthetic campaign (4 policies x 3 seeds, records + each run's metrics.jsonl and
train_done.json in the orchestrator's layout) stands in for a user's own campaign such as the demo;
the released records stand in for the paper campaigns."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import warnings
import xml.etree.ElementTree as ET
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from PIL import Image
from typer.testing import CliRunner

from analysis.aggregates import run_table
from analysis.figure_data import (
    _stratified_indices,
    aa_floor,
    aggregate_estimates,
    improvement_probabilities,
    relative_scores,
)
from analysis.comparisons import paired_comparisons
from analysis.records import read_records
from analysis.report import build_report
from evaluation.suite import load_suite
from cli import analysis_commands
from tests.released import RELEASED, needs_released

SUITE = load_suite("db12")
POLICIES = {"baseline": 0.0, "topk": 2.0, "static": 0.0, "reward_gap": -1.0}  # true effect (points)
# every figure the synthetic campaign has data for (it has an A/A pair, items are absent)
FIGURES = ["forest_db_12", "forest_macro_12", "forest_item_12", "forest_math_heavy_6", "p_improve_db_12",
           "aggregate_estimates_db_12", "performance_profile_db_12", "domain_tradeoff", "training_curves",
           "rank_correlation"]


def _campaign(root: Path) -> tuple[Path, Path]:
    """records.csv and runs/<campaign>/<run_key>/{train_done.json, metrics.jsonl}."""
    rng = np.random.default_rng(7)
    rows = []
    for pol, eff in POLICIES.items():
        for seed in (1, 2, 3):
            rk = f"{pol}_s{seed}"
            for b in SUITE.benchmark_ids:
                rows.append({"run_id": rk, "run_key": rk, "campaign": "mine", "model": "tiny-lm", "policy": pol,
                             "seed": seed, "step": 8, "benchmark": b,
                             "accuracy": float(np.clip(40 + eff + rng.normal(0, 1.5), 0, 100))})
            d = root / "runs" / "mine" / rk
            d.mkdir(parents=True)
            steps = []
            for s in range(1, 6):
                m = {"step": s, "reward/mean": 0.1 + 0.02 * s + 0.01 * rng.random(),
                     "policy/kept_frac": 0.5 if pol == "topk" else 1.0,
                     "policy/weight_std": 0.0}
                mix = [1 / 3] * 3 if pol != "reward_gap" else list(rng.dirichlet([5, 5, 5]))
                m.update({f"data/realised_prop_{dm}": p for dm, p in zip(SUITE.domains, mix, strict=True)})
                steps.append(json.dumps(m))
            (d / "metrics.jsonl").write_text("\n".join(steps) + "\n")
            (d / "train_done.json").write_text(json.dumps({"metrics_path": "metrics.jsonl",
                                                           "compute": {"wall_s": 10.0, "gpu_s": 0.0}}))
    rec = root / "records.csv"
    pd.DataFrame(rows).to_csv(rec, index=False)
    return rec, root / "runs"


def _invoke(*args: str):
    import typer

    app = typer.Typer()
    analysis_commands.register(app)
    return CliRunner().invoke(app, list(args))


def _sections(doc: str) -> list[tuple[str, str]]:
    """(heading, body up to the next h2) for every <h2>."""
    out = []
    for chunk in doc.split("<h2")[1:]:
        head, _, body = chunk.partition("</h2>")
        out.append((re.sub(r"<[^>]+>|^[^>]*>", "", head), body))
    return out


def _assert_no_empty_section(doc: str) -> None:
    for head, body in _sections(doc):
        assert re.search(r"<(table|img|ul|li)\b", body) or re.sub(r"<[^>]+>", "", body).strip(), head
        assert "<table" not in body or re.search(r"<tbody>\s*<tr", body), f"empty table under {head!r}"
    assert "no records match" not in doc


def _svg_texts(svg: Path) -> list[str]:
    root = ET.parse(svg).getroot()
    return ["".join(t.itertext()) for t in root.iter("{http://www.w3.org/2000/svg}text")]


@pytest.fixture(scope="module")
def mine(tmp_path_factory):
    root = tmp_path_factory.mktemp("mine")
    rec, runs = _campaign(root)
    res = _invoke("report", str(rec), "--out", str(root / "report.html"), "--runs-dir", str(runs),
                  "--figures", str(root / "fig"), "--resamples", "100")
    assert res.exit_code == 0, res.output
    return root


def test_every_figure_is_written_as_svg_pdf_and_200dpi_png(mine: Path) -> None:
    for name in FIGURES:
        for fmt in ("svg", "pdf", "png"):
            assert (mine / "fig" / f"{name}.{fmt}").stat().st_size > 1000, (name, fmt)
        assert (mine / "fig" / f"{name}.pdf").read_bytes().startswith(b"%PDF")
        with Image.open(mine / "fig" / f"{name}.png") as im:
            assert round(im.info["dpi"][0]) >= 200 and im.size[0] >= 1000, name
    assert sorted(p.stem for p in (mine / "fig").glob("*.svg")) == sorted(FIGURES)


def test_svg_text_is_real_text_with_readable_labels(mine: Path) -> None:
    forest = _svg_texts(mine / "fig" / "forest_db_12.svg")
    # label columns instead of one raw id string, the bands named in the legend
    for label in ("model", "policy", "tiny-lm", "topk vs baseline", "reward_gap vs static", "static vs baseline (A/A)",
                  "equivalence margin ±1", "campaign A/A noise floor (largest |Δ| A/A)"):
        assert label in forest, (label, forest)
    assert not any(":" in t and "tiny-lm" in t for t in forest)  # no "model regime: policy" strings
    assert "kept fraction (selectors)" in _svg_texts(mine / "fig" / "training_curves.svg")
    assert "realised proportion: math" in _svg_texts(mine / "fig" / "training_curves.svg")
    assert any("pooled" in t for t in _svg_texts(mine / "fig" / "rank_correlation.svg"))
    for name in FIGURES:  # every text >= 10 pt (SVG user units are points)
        sizes = [float(s) for s in re.findall(r"font-size: ([0-9.]+)px", (mine / "fig" / f"{name}.svg").read_text())]
        assert sizes and min(sizes) >= 10, (name, sorted(set(sizes)))


def test_forest_rows_are_sorted_by_effect_on_one_axis(mine: Path) -> None:
    texts = _svg_texts(mine / "fig" / "forest_db_12.svg")
    root = ET.parse(mine / "fig" / "forest_db_12.svg").getroot()
    ys = {"".join(t.itertext()): float(t.get("y")) for t in root.iter("{http://www.w3.org/2000/svg}text")}
    recs = read_records(mine / "records.csv", SUITE)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        p = paired_comparisons(recs, SUITE, n_resamples=100).table
    d = p[p["metric"] == "DB-12"].sort_values("mean_diff", ascending=False)
    labels = ["static vs baseline (A/A)" if k == "aa_noise_floor" else f"{pol} vs {ref}"
              for k, pol, ref in zip(d["kind"], d["policy"], d["reference"], strict=True)]
    assert all(lab in texts for lab in labels)
    assert [ys[lab] for lab in labels] == sorted(ys[lab] for lab in labels)  # largest effect on top (smallest y)


def test_report_of_a_users_campaign_has_every_figure_and_no_empty_section(mine: Path) -> None:
    doc = (mine / "report.html").read_text()
    assert doc.count("<img") == len(FIGURES) == doc.count("data:image/svg+xml;base64,")
    for name in FIGURES:
        assert f'id="fig-{name}"' in doc
    _assert_no_empty_section(doc)
    # the findings lead (verdict table, then the forest plots), then the detail (sensitivity), collapsible
    assert doc.index('id="verdicts"') < doc.index('id="fig-forest_db_12"') < doc.index('id="within_group_sensitivity"')
    assert '<details id="within_group_sensitivity">' in doc and "NaN" not in re.sub(r"base64,[^\"]+", "", doc)
    assert doc.index("<table") > doc.index('id="verdicts"')
    # paper sections the campaign has no data for are not there at all
    for paper in ("main_7b", "main_05b", "mixer", "crossfamily", "constrained", "scale_curve", "long_training"):
        assert f'id="{paper}"' not in doc
    assert "Aggregate interval estimates per policy (DB-12, pooled)" in doc
    assert not re.search(r"""(src|href)=["']?(https?:)?//""", doc)


def test_figures_flag_refuses_a_file_and_existing_figures_without_force(mine: Path, tmp_path: Path) -> None:
    f = tmp_path / "afile"
    f.write_text("x")
    res = _invoke("report", str(mine / "records.csv"), "--out", str(tmp_path / "r.html"), "--figures", str(f))
    assert res.exit_code == 2 and "takes a folder" in res.output and not (tmp_path / "r.html").exists()
    res = _invoke("report", str(mine / "records.csv"), "--out", str(tmp_path / "r.html"), "--figures",
                  str(mine / "fig"))
    assert res.exit_code == 2 and "--force" in res.output


# ----------------------------------------------------------------------------- pure functions

@pytest.fixture(scope="module")
def tables(mine: Path):
    recs = read_records(mine / "records.csv", SUITE)
    runs = run_table(recs, SUITE)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return runs, paired_comparisons(recs, SUITE, runs=runs, n_resamples=100).table


def test_p_improve_equals_the_paired_table_and_its_interval_holds_it(tables) -> None:
    runs, paired = tables
    pi = improvement_probabilities(runs, paired, "DB-12", n_resamples=300)
    assert len(pi) == 2 and set(pi["policy"]) == {"topk", "reward_gap"}
    np.testing.assert_allclose(pi["p_improve"], pi["p_improve_seeds"])
    assert ((pi["lo"] <= pi["p_improve"]) & (pi["p_improve"] <= pi["hi"])).all()
    assert ((pi["lo"] >= 0) & (pi["hi"] <= 1)).all() and (pi["n"] == 3).all()


def test_relative_scores_centre_references_and_subtract_the_reference_mean(tables) -> None:
    runs, paired = tables
    rel = relative_scores(runs, paired, "DB-12")
    assert len(rel) == 12  # 4 policies x 3 seeds, each run once
    for ref in ("baseline", "static"):
        assert rel.loc[rel["policy"] == ref, "delta"].mean() == pytest.approx(0, abs=1e-9)
    base = runs.loc[runs["policy"] == "baseline", "DB-12"].mean()
    topk = runs.loc[runs["policy"] == "topk"].sort_values("seed")["DB-12"].to_numpy() - base
    np.testing.assert_allclose(rel[rel["policy"] == "topk"].sort_values("seed")["delta"], topk)
    est = aggregate_estimates(rel, n_resamples=200).set_index(["policy", "estimator"])
    assert est.loc[("topk", "mean"), "value"] == pytest.approx(topk.mean())
    assert est.loc[("topk", "mean"), "lo"] <= topk.mean() <= est.loc[("topk", "mean"), "hi"]


def test_aa_floor_is_the_largest_aa_difference_per_campaign(tables) -> None:
    _, paired = tables
    aa = paired[(paired["metric"] == "DB-12") & (paired["kind"] == "aa_noise_floor")]
    assert aa_floor(paired, "DB-12").to_dict() == {"mine": pytest.approx(aa["mean_diff"].abs().max())}
    assert aa_floor(paired[paired["kind"] == "effect"], "DB-12").empty  # no A/A rows: no band, not zero


@settings(max_examples=50, deadline=None)
@given(st.lists(st.integers(0, 4), min_size=1, max_size=30))
def test_stratified_bootstrap_resamples_within_strata(strata: list[int]) -> None:
    s = np.array([str(v) for v in strata])
    idx = _stratified_indices(s, 20, np.random.default_rng(0))
    assert idx.shape == (20, len(s))
    assert (s[idx] == s[None, :]).all()  # every resampled run comes from its own stratum


# ----------------------------------------------------------------------------- released records

@pytest.mark.slow
@needs_released
def test_report_of_the_released_records_has_every_figure_and_no_empty_section(tmp_path: Path) -> None:
    build_report(RELEASED, tmp_path / "r.html", n_resamples=100, figures_dir=tmp_path / "fig")
    doc = (tmp_path / "r.html").read_text()
    expected = [n for n in FIGURES if n != "training_curves"]  # no run dirs for the released records
    assert sorted(p.stem for p in (tmp_path / "fig").glob("*.png")) == sorted(expected)
    assert doc.count("<img") == len(expected)
    _assert_no_empty_section(doc)
    assert doc.index('id="verdicts"') < doc.index('id="fig-forest_db_12"') < doc.index('id="within_group_sensitivity"')
    forest = _svg_texts(tmp_path / "fig" / "forest_db_12.svg")
    assert "noise20_20pct_label_noise" in forest and "Qwen2.5-7B-Instruct" in forest and "regime" in forest
    assert "campaign: mixer" in forest and "campaign: crossfamily  (no A/A rows: no noise-floor band)" in forest


# ----------------------------------------------------------------------------- Chromium

def test_report_screenshot_in_headless_chromium_is_not_blank(mine: Path, tmp_path: Path) -> None:
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    if chromium is None:
        pytest.skip("chromium not installed (.ci/run installs it; apt-get install -y chromium)")
    shot = tmp_path / "report.png"
    args = [chromium, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-sync",
            "--disable-background-networking", "--disable-component-update", f"--user-data-dir={tmp_path / 'p'}",
            "--hide-scrollbars", "--virtual-time-budget=5000", "--window-size=1280,6000"]
    subprocess.run(args + [f"--screenshot={shot}", (mine / "report.html").as_uri()], capture_output=True,
                   timeout=120, check=False)
    assert shot.is_file(), "chromium wrote no screenshot"
    with Image.open(shot) as im:
        px = np.asarray(im.convert("L"))
    # a blank page is one colour; the report has text, tables and figures all the way down
    assert px.std() > 10 and (px < 128).mean() > 0.005
    dom = subprocess.run(args + ["--dump-dom", (mine / "report.html").as_uri()], capture_output=True, text=True,
                         timeout=120, check=False).stdout
    body = re.search(r"<body[^>]*>", dom)
    assert body and 'data-figures-rendered="yes"' in body.group(0)
    assert f'data-figures-count="{len(FIGURES)}"' in body.group(0)


def test_forest_draws_the_seed_plus_item_interval_only_when_present(tables) -> None:
    from analysis.figure_style import render
    from analysis.figures import forest_figure

    _, paired = tables
    without = render(forest_figure(paired, "DB-12", 1.0), ("svg",))["svg"].decode()
    assert "seed-only paired-t 95% CI" in without and "seed + item 95% CI" not in without
    with_items = paired.assign(item_lo=paired["mean_diff"] - 0.5, item_hi=paired["mean_diff"] + 0.5)
    svg = render(forest_figure(with_items, "DB-12", 1.0), ("svg",))["svg"].decode()
    assert "seed + item 95% CI" in svg


# ----------------------------------------------------------------------------- issue 27: fit for a paper


def _figures_of(records: Path | pd.DataFrame, n_resamples: int = 100, requested: int | None = None):
    from analysis.figures import build_figures
    from analysis.tables import build_tables

    recs = read_records(records, SUITE) if isinstance(records, Path) else records
    runs = run_table(recs, SUITE)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        paired = paired_comparisons(recs, SUITE, runs=runs, n_resamples=n_resamples)
        sens = build_tables(recs, SUITE, ["aggregation_sensitivity"], paired=paired, runs=runs)[0].data
        return build_figures(paired.table, runs, SUITE, margin=1.0, n_resamples=n_resamples, sensitivity=sens,
                             requested_resamples=requested)


def _outside(fig) -> list[str]:
    """What reaches past the figure's edges: each axes with everything it draws (tick labels, titles, axis
    labels: matplotlib's tight bbox holds only what is drawn), each figure legend, title and free text."""
    fig.canvas.draw()
    r = fig.canvas.get_renderer()
    box = fig.bbox
    parts = [(f"axes {i} ({ax.get_title() or ax.get_xlabel()})", ax.get_tightbbox(r)) for i, ax in enumerate(fig.axes)]
    parts += [(f"legend {i}", lg.get_window_extent(r)) for i, lg in enumerate(fig.legends)]
    parts += [(t.get_text(), t.get_window_extent(r)) for t in fig.texts if t.get_visible() and t.get_text().strip()]
    return [name for name, e in parts if e is not None and (e.x0 < box.x0 - 1 or e.y0 < box.y0 - 1
                                                            or e.x1 > box.x1 + 1 or e.y1 > box.y1 + 1)]


# the released records' 9 figures at 200 dpi: ~30 s of rendering, in the slow tier beside the released report
@pytest.mark.parametrize("which", ["mine", pytest.param("released", marks=pytest.mark.slow)])
def test_no_figure_clips_a_label(which: str, tmp_path: Path) -> None:
    """Tick labels, titles and legends lie inside the figure bounds (rank_correlation clipped one before)."""
    import matplotlib.pyplot as plt

    if which == "released" and not RELEASED.is_file():
        pytest.skip("released records not present")
    import io

    from analysis.figure_style import FORMATS, render

    rec = _campaign(tmp_path)[0] if which == "mine" else RELEASED
    for f in _figures_of(rec):
        assert not _outside(f.fig), (f.name, _outside(f.fig))
        png = render(f, FORMATS)["png"]  # as the report writes it: svg, pdf, then png
        with Image.open(io.BytesIO(png)) as im:
            ink = np.asarray(im.convert("L")) < 200
        rows, cols = np.where(ink.any(axis=1))[0], np.where(ink.any(axis=0))[0]
        margins = (cols.min(), ink.shape[1] - 1 - cols.max(), rows.min(), ink.shape[0] - 1 - rows.max())
        assert min(margins) > 0, (f.name, margins)  # nothing drawn touches the image's edge: nothing clipped
        plt.close(f.fig)


def test_colours_carry_the_mechanism_and_profiles_show_the_top_policies_only() -> None:
    """One Okabe-Ito hue per mechanism, grey for references; at most PROFILE_TOP methods plus the references in a
    performance profile; captions state the resamples used (and the command's when capped)."""
    import matplotlib.pyplot as plt

    from analysis.figure_style import MECHANISM_COLOR, OKABE_ITO, REFERENCE_COLOR, policy_styles
    from analysis.figures import PROFILE_TOP

    st_ = policy_styles(["baseline", "topk", "gfpo", "ar", "static", "reward_gap"],
                        {"topk": "select", "gfpo": "select", "ar": "reweight", "reward_gap": "mix"})
    assert st_["topk"]["color"] == st_["gfpo"]["color"] == MECHANISM_COLOR["select"] == OKABE_ITO["blue"]
    assert st_["topk"]["ls"] != st_["gfpo"]["ls"]  # told apart in greyscale too
    assert st_["baseline"]["color"] == st_["static"]["color"] == REFERENCE_COLOR
    assert len({st_[p]["color"] for p in ("topk", "ar", "reward_gap", "baseline")}) == 4
    if not RELEASED.is_file():
        pytest.skip("released records not present")
    figs = {f.name: f for f in _figures_of(RELEASED, n_resamples=100, requested=10_000)}
    prof = figs["performance_profile_db_12"]
    labels = [t.get_text() for t in prof.fig.axes[0].get_legend().get_texts()]
    assert len(labels) <= PROFILE_TOP + 2 and "baseline" in labels and "static" in labels
    assert f"The {PROFILE_TOP} policies with the largest mean Δ" in prof.caption
    for name in ("performance_profile_db_12", "aggregate_estimates_db_12", "p_improve_db_12"):
        assert "100 resamples; the figures cap the command's 10,000" in figs[name].caption, name
    assert "all 3 seeds can say" in figs["p_improve_db_12"].fig.axes[0].get_title(loc="right")
    for f in figs.values():
        plt.close(f.fig)


def test_forest_legend_names_the_aa_row_only_when_there_is_one(tmp_path: Path) -> None:
    import matplotlib.pyplot as plt

    rec = read_records(_campaign(tmp_path)[0], SUITE)
    no_aa = rec[rec["policy"] != "static"]  # reward_gap then has no reference either: one comparison left
    figs = {f.name: f for f in _figures_of(no_aa)}
    texts = [t.get_text() for t in figs["forest_db_12"].fig.legends[0].get_texts()]
    assert "A/A: static vs baseline" not in texts and "Grey rows" not in figs["forest_db_12"].caption
    for f in figs.values():
        plt.close(f.fig)
