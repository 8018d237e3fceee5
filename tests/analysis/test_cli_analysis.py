"""`campaign tables|compare|sensitivity|report` on the released records, and the report rendered in Chromium."""

from __future__ import annotations

import csv
import io
import json
import re
import shutil
import statistics
import subprocess
from pathlib import Path

import pytest

from analysis.report import build_report
from analysis.tables import CONFIG_TABLES, EXTRA_TABLES, TABLE_NAMES
from tests.analysis.cli_app import invoke
from tests.released import DOMAINS, RELEASED, needs_released
from tests.components import started

pytestmark = needs_released


def _released(campaign: str, model: str, method: str) -> list[dict[str, str]]:
    with open(RELEASED, newline="") as f:
        return [r for r in csv.DictReader(f) if (r["campaign"], r["model"], r["method"]) == (campaign, model, method)]


def _db12(r: dict[str, str]) -> float:
    return sum(sum(float(r[b]) for b in bs) / len(bs) for bs in DOMAINS.values()) / 3


def test_tables_all_prints_every_table_with_hand_checked_cells() -> None:
    res = invoke("tables", str(RELEASED), "--table", "all", "--wide", "--resamples", "500")
    assert res.exit_code == 0, res.output
    for spec in CONFIG_TABLES:
        assert f"## {spec.title}" in res.output
    for title in EXTRA_TABLES.values():
        assert f"## {title}" in res.output
    # one cell per study table, computed here from the CSV: seed mean ± sample SD of DB-12
    vals = [_db12(r) for r in _released("crossfamily", "Llama-3.1-8B-base", "topk")]
    cell = f"{statistics.mean(vals):.2f} ± {statistics.stdev(vals):.2f}"
    section = res.output.split("## Cross-family")[1].split("\n## ")[0]
    line = next(ln for ln in section.splitlines() if "Llama-3.1-8B-base" in ln and "| topk" in ln)
    assert cell in line
    # the math domain mean of the mixer's 7B static configuration
    rows = _released("mixer", "Qwen2.5-7B-Instruct", "static")
    math_mean = statistics.mean(sum(float(r[b]) for b in DOMAINS["math"]) / 5 for r in rows)
    mixer = res.output.split("## Mixer round")[1].split("\n## ")[0]
    assert any(f"{math_mean:.2f} ±" in ln for ln in mixer.splitlines() if "7B" in ln and "| static" in ln)


@pytest.mark.parametrize("fmt", ["latex", "csv"])
def test_tables_other_formats(fmt: str, tmp_path: Path) -> None:
    tabs = "main_05b,paired" if fmt == "latex" else "main_05b"  # CSV on stdout holds one table
    res = invoke("tables", str(RELEASED), "--table", tabs, "--format", fmt, "--resamples", "200")
    assert res.exit_code == 0, res.output
    vals = [_db12(r) for r in _released("main", "Qwen2.5-0.5B-Instruct", "gfpo")]
    if fmt == "latex":
        assert "\\begin{table}" in res.output and "\\label{tab:main_05b}" in res.output
        assert f"{statistics.mean(vals):.2f} $\\pm$ {statistics.stdev(vals):.2f}" in res.output
    else:
        rows = list(csv.DictReader(io.StringIO(res.output)))
        g = next(r for r in rows if r["policy"] == "gfpo")
        assert float(g["DB-12_mean"]) == pytest.approx(statistics.mean(vals), abs=1e-9)
        assert float(g["DB-12_sd"]) == pytest.approx(statistics.stdev(vals), abs=1e-9)
    out = tmp_path / "tabs"
    res = invoke("tables", str(RELEASED), "--format", fmt, "--out", str(out), "--resamples", "200")
    assert res.exit_code == 0
    assert sorted(p.stem for p in out.iterdir()) == sorted(TABLE_NAMES)


def test_unknown_table_and_bad_format_exit_2() -> None:
    assert invoke("tables", str(RELEASED), "--table", "figure9").exit_code == 2
    assert invoke("tables", str(RELEASED), "--format", "xlsx").exit_code == 2
    assert invoke("compare", str(RELEASED), "--reference-map", "topk").exit_code == 2
    assert invoke("compare", str(RELEASED), "--aggregate", "Nope-3").exit_code == 2
    assert invoke("sensitivity", str(RELEASED), "--model", "GPT-5").exit_code == 2


COMPARISON_KEYS = {
    "campaign", "model", "regime", "step", "policy", "reference", "reference_campaign", "mechanism", "kind",
    "metric_type", "metric", "n", "seeds", "method_mean", "reference_mean", "mean_diff", "sd", "t_lo", "t_hi",
    "boot_lo", "boot_hi", "p_t", "p_perm", "p_holm", "p_bh", "margin", "p_tost", "mde", "effect", "seeds_needed",
    "p_improve_seeds", "p_improve_posterior", "resolution", "sd_used", "sd_floored", "boot_method", "boot_coverage",
    "p_perm_floor", "mde_lo", "mde_hi", "seeds_needed_lo", "seeds_needed_hi", "item_lo", "item_hi", "item_se",
    "item_note"}


def test_compare_json_shape_and_values() -> None:
    res = invoke("compare", str(RELEASED), "--campaign", "main", "--model", "Qwen2.5-7B-Instruct",
                  "--aggregate", "DB-12", "--margin", "1.0", "--json", "--resamples", "500")
    assert res.exit_code == 0, res.output
    doc = json.loads(res.output)
    assert set(doc) == {"suite", "aggregates", "margin", "effect", "n_resamples", "seed", "sd", "family",
                        "small_n", "comparisons", "dropped"}
    assert "0.75 at n = 3" in doc["small_n"] and "2/2^n" in doc["small_n"]
    assert doc["aggregates"] == ["DB-12"] and len(doc["comparisons"]) == 8
    for c in doc["comparisons"]:
        assert set(c) == COMPARISON_KEYS and c["reference"] == "baseline" and isinstance(c["n"], int)
    gfpo = next(c for c in doc["comparisons"] if c["policy"] == "gfpo")
    base = {r["seed"]: _db12(r) for r in _released("main", "Qwen2.5-7B-Instruct", "baseline")}
    d = [_db12(r) - base[r["seed"]] for r in _released("main", "Qwen2.5-7B-Instruct", "gfpo")]
    assert gfpo["mean_diff"] == pytest.approx(statistics.mean(d), abs=1e-9)
    assert gfpo["sd"] == pytest.approx(statistics.stdev(d), abs=1e-9)
    assert 0 <= gfpo["p_tost"] <= 1
    # n = 3: the second CI is the seed range with its exact coverage 1 - 2^(1-3), never "95%"
    assert gfpo["boot_method"] == "seed range" and gfpo["boot_coverage"] == pytest.approx(0.75)
    assert (gfpo["boot_lo"], gfpo["boot_hi"]) == (pytest.approx(min(d)), pytest.approx(max(d)))
    assert gfpo["p_perm_floor"] == pytest.approx(0.25) and gfpo["p_perm"] >= 0.25
    assert gfpo["seeds_needed_lo"] <= gfpo["seeds_needed"] <= gfpo["seeds_needed_hi"]


def test_released_records_have_no_zero_p_and_no_95_label_at_n3() -> None:
    """issue 12 "done when": no p = 0 anywhere, no bootstrap row labelled 95% at n = 3 (tables and JSON)."""
    res = invoke("compare", str(RELEASED), "--detail", "--margin", "0.5", "--json", "--resamples", "200")
    assert res.exit_code == 0, res.output
    rows = json.loads(res.output)["comparisons"]
    assert len(rows) == 893
    for key in ("p_t", "p_perm", "p_holm", "p_bh", "p_tost"):
        vals = [r[key] for r in rows if r["kind"] == "effect" or key not in ("p_holm", "p_bh")]
        assert all(v is not None and v > 0 for v in vals), key
    # main / 0.5B / ar / kk_hard: differences (0.5, 0.5, 0.5) -> the exact sign-flip p, not 0
    kk = next(r for r in rows if (r["campaign"], r["model"], r["policy"], r["metric"])
              == ("main", "Qwen2.5-0.5B-Instruct", "ar", "kk_hard"))
    assert kk["sd"] == 0 and kk["sd_floored"] and kk["p_t"] == pytest.approx(0.25) and kk["t_lo"] < kk["t_hi"]
    assert kk["sd_used"] == pytest.approx(100 / 200 / 2)
    tab = invoke("tables", str(RELEASED), "--table", "paired", "--wide", "--resamples", "200")
    header = tab.output.split("| policy")[1].split("\n")[0]
    assert tab.exit_code == 0 and "bootstrap 95%" not in tab.output and "range / bootstrap CI (coverage)" in header
    assert "(range 75.0%)" in tab.output and "≥ 0.250" in tab.output and "small n:" in tab.output


def test_sensitivity_json_shape() -> None:
    res = invoke("sensitivity", str(RELEASED), "--campaign", "crossfamily", "--json", "--resamples", "200")
    assert res.exit_code == 0, res.output
    doc = json.loads(res.output)
    assert [g["model"] for g in doc["groups"]] == sorted(["Llama-3.1-8B-base", "Qwen2.5-14B-base", "Qwen2.5-7B-base"])
    g = doc["groups"][0]
    assert g["n_configs"] == 4 and len(g["aggregate_correlations"]) == 6
    assert set(g["seed_stability"]) == {"aggregate", "n_resamples", "mean_kendall_tau", "configs"}
    assert sum(c["p_top1"] for c in g["seed_stability"]["configs"]) == pytest.approx(1.0)


@pytest.mark.component("chromium")
def test_report_is_self_contained_and_renders_in_chromium(tmp_path: Path) -> None:
    out = tmp_path / "report.html"
    build_report(RELEASED, out, extra_sections=[("Intervention evidence", "<p id='extra'>kept_frac moved</p>")],
                 n_resamples=500)
    doc = out.read_text()
    # 4 forest plots, P(improve), aggregate estimates, performance profile, domain trade-off, rank heat map
    assert doc.count("<img") == 9 and doc.count("data:image/svg+xml;base64,") == 9
    assert not re.search(r"""(src|href)=["']?(https?:)?//""", doc)  # no external URL
    assert "<p id='extra'>kept_frac moved</p>" in doc and "Main round, 7B" in doc
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    if chromium is None:
        pytest.skip("chromium not installed (.ci/run installs it)")
    prof = tmp_path / "profile"
    res = subprocess.run([chromium, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                          "--disable-background-networking", "--disable-component-update", "--disable-sync",
                          f"--user-data-dir={prof}", "--virtual-time-budget=5000", "--dump-dom", out.as_uri()],
                         capture_output=True, text=True, timeout=120)
    body = re.search(r"<body[^>]*>", res.stdout)
    assert body, res.stderr[-2000:]
    assert 'data-figures-rendered="yes"' in body.group(0) and 'data-figures-count="9"' in body.group(0)
    started("chromium", f"{Path(chromium).name} rendered the report's 9 figures")


def test_report_command_writes_file_with_the_verdict_table_first(tmp_path: Path) -> None:
    out = tmp_path / "r.html"
    res = invoke("report", str(RELEASED), "--out", str(out), "--resamples", "200", "--margin", "0.5")
    assert res.exit_code == 0, res.output
    assert out.stat().st_size > 10_000 and out.read_text().startswith("<!DOCTYPE html>")
    doc = out.read_text()
    first_table = doc.index("<table")
    assert doc.index('id="verdicts"') < first_table < doc.index("Forest plot")
    assert "undecided 45 of 45 comparisons" in doc and "0.75 at n = 3" in doc
    assert 'id="random_effects"' in doc and "DerSimonian-Laird" in doc
    assert "no item logs" in doc  # the seed + item CI is NaN on the released CSV, and says why


def test_tables_all_on_a_two_policy_campaign(tmp_path: Path) -> None:
    """A small campaign (two policies, as a first CPU demo has) still gets every table; rank correlations
    that are undefined with two configurations are reported as missing, not a crash."""
    rows = [r for r in csv.DictReader(open(RELEASED, newline=""))
            if r["campaign"] == "main" and r["model"] == "Qwen2.5-7B-Instruct" and r["method"] in ("baseline", "gfpo")]
    f = tmp_path / "two.csv"
    with open(f, "w", newline="") as out:
        w = csv.DictWriter(out, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)
    res = invoke("tables", str(f), "--table", "all")
    assert res.exit_code == 0, res.output
    assert "gfpo" in res.output and "leave" in res.output.lower()


def _subset_csv(tmp_path: Path, name: str, keep, edit=None) -> Path:
    rows = [r for r in csv.DictReader(open(RELEASED, newline="")) if keep(r)]
    for r in rows:
        if edit:
            edit(r)
    f = tmp_path / name
    with open(f, "w", newline="") as out:
        w = csv.DictWriter(out, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)
    return f


def _nan_scores(r: dict[str, str]) -> None:
    for b in sum(DOMAINS.values(), []):
        r[b] = ""


def _baseline_at_200(r: dict[str, str]) -> None:
    if r["method"] == "baseline":
        r["steps"] = "200"


@pytest.mark.parametrize("case,edit,why", [
    ("no_reference", None, "reference 'baseline' has no runs at step 300"),
    ("reference_other_step", _baseline_at_200, "it has runs at step(s) [200]"),
    ("all_nan", _nan_scores, "missing for"),
])
def test_no_formable_pair_exits_2_with_the_reason(tmp_path: Path, case: str, edit, why: str) -> None:
    methods = ("topk",) if case == "no_reference" else ("baseline", "topk")
    f = _subset_csv(tmp_path, f"{case}.csv", lambda r: r["campaign"] == "main" and r["model"] == "Qwen2.5-7B-Instruct"
                    and r["method"] in methods, edit)
    for args in (["compare", str(f)], ["verdicts", str(f)], ["tables", str(f), "--table", "paired"],
                 ["tables", str(f)], ["report", str(f), "--out", str(tmp_path / f"{case}.html")]):
        res = invoke(*args)
        assert res.exit_code == 2, (args, res.output)
        assert "no method-vs-reference pair" in res.output and why in res.output, res.output
        assert "Traceback" not in res.output
    assert not (tmp_path / f"{case}.html").exists()


def test_out_never_clobbers_and_never_equals_an_input(tmp_path: Path) -> None:
    f = _subset_csv(tmp_path, "two.csv", lambda r: r["campaign"] == "main" and r["model"] == "Qwen2.5-7B-Instruct"
                    and r["method"] in ("baseline", "gfpo"))
    before = f.read_bytes()
    res = invoke("report", str(f), "--out", str(f), "--force")
    assert res.exit_code == 2 and "is an input" in res.output and f.read_bytes() == before
    out = tmp_path / "r.html"
    out.write_text("keep me")
    res = invoke("report", str(f), "--out", str(out), "--resamples", "100")
    assert res.exit_code == 2 and "--force" in res.output and out.read_text() == "keep me"
    assert invoke("report", str(f), "--out", str(out), "--resamples", "100", "--force").exit_code == 0
    assert out.read_text().startswith("<!DOCTYPE html>")
    tabs = tmp_path / "tabs"
    assert invoke("tables", str(f), "--table", "paired", "--out", str(tabs), "--resamples", "100").exit_code == 0
    res = invoke("tables", str(f), "--table", "paired", "--out", str(tabs), "--resamples", "100")
    assert res.exit_code == 2 and "paired.md" in res.output and "--force" in res.output
    assert invoke("tables", str(f), "--table", "paired", "--out", str(tabs), "--force", "--resamples",
                   "100").exit_code == 0
    res = invoke("tables", str(f), "--out", str(f))
    assert res.exit_code == 2 and "takes a folder" in res.output
