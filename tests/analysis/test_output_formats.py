"""One output vocabulary (issue 17): `--format md|csv|latex|json` on tables/compare/sensitivity/verdicts,
machine formats without comment lines, Markdown alignment and missing values, 120-column compare, LaTeX that
pdflatex compiles, one meaning of --out, one resample default."""

from __future__ import annotations

import inspect
import io
import json
import shutil
import subprocess
from functools import cache
from pathlib import Path

import pandas as pd
import pytest
from hypothesis import given
from hypothesis import strategies as st
from typer.testing import CliRunner

from analysis.table_formats import LATEX_REQUIRES, MISSING, Table, _md, latex_escape, render_table
from cli import analysis_commands
from tests.analysis.cli_app import analysis_app, invoke
from tests.released import RELEASED, needs_released
from tests.components import started

REPO = Path(__file__).resolve().parents[2]


@cache
def _out(*args: str) -> str:
    """stdout of a successful command on the released records (cached: several tests read one output)."""
    res = CliRunner().invoke(analysis_app(), [args[0], str(RELEASED), *args[1:], "--resamples", "200"])
    assert res.exit_code == 0, res.output
    return res.stdout


# --- pure rendering -----------------------------------------------------------------------------------


def test_markdown_right_aligns_numbers_and_prints_missing_as_a_dash() -> None:
    df = pd.DataFrame({"policy": ["gfpo", "topk"], "n": ["3", "3"], "DB-12": ["18.30 ± 0.09", "NaN"],
                       "Δ [CI]": ["+0.40 [-1.20, +2.00]", ""], "p": [0.25, float("nan")]})
    lines = _md(df).splitlines()
    sep = [c.strip() for c in lines[1].strip("|").split("|")]
    assert [c.endswith(":") for c in sep] == [False, True, True, True, True]
    assert "NaN" not in _md(df) and "nan" not in _md(df)
    assert lines[3].count(MISSING) == 3
    # right-aligned: the number ends at the column's right edge, text starts at the left one
    assert lines[2].split("|")[2] == "   3 " and lines[2].split("|")[1] == " gfpo   "


def test_missing_inside_a_cell_is_a_dash() -> None:
    df = pd.DataFrame({"MDE": ["NaN [NaN, NaN]", "2.10 [1.00, 9.00]"]})
    text = _md(df)
    assert f"{MISSING} [{MISSING}, {MISSING}]" in text and "NaN" not in text


@given(st.text(max_size=40))
def test_latex_escape_never_emits_raw_unicode(text: str) -> None:
    assert latex_escape(text).isascii()


def test_latex_escape_maps_the_symbols_the_tables_use() -> None:
    assert latex_escape("Δ mean ± sd") == r"$\Delta$ mean $\pm$ sd"
    assert latex_escape("p ≥ 0.25 — σ χ² τ²") == (r"p $\geq$ 0.25 --- $\sigma$ $\chi$\textsuperscript{2} "
                                                  r"$\tau$\textsuperscript{2}")
    assert latex_escape("100% of a_b & #1 {x} ~ ^") == (r"100\% of a\_b \& \#1 \{x\} \textasciitilde{} "
                                                        r"\textasciicircum{}")


def test_latex_table_names_booktabs_and_puts_numbers_in_r_columns() -> None:
    disp = pd.DataFrame({"policy": ["gfpo", "topk"], "n": ["3", "3"], "Δ mean": ["+0.40", "NaN"]})
    tex = render_table(Table("x", "Title Δ", disp, disp, note="±1"), "latex")
    assert tex.splitlines()[0] == LATEX_REQUIRES == r"% requires \usepackage{booktabs}"
    assert r"\begin{tabular}{lrr}" in tex and r"\toprule" in tex and r"\bottomrule" in tex
    assert tex.isascii() and "NaN" not in tex and "---" in tex


# --- the commands -------------------------------------------------------------------------------------


@needs_released
@pytest.mark.parametrize("args", [
    ("tables", "--table", "paired", "--format", "csv"),
    ("compare", "--format", "csv", "--campaign", "crossfamily"),
    ("verdicts", "--format", "csv", "--campaign", "crossfamily"),
    ("sensitivity", "--table", "rank_correlations", "--format", "csv", "--campaign", "crossfamily"),
])
def test_csv_has_no_comment_lines_and_pandas_reads_it(args: tuple[str, ...]) -> None:
    text = _out(*args)
    assert not any(ln.startswith("#") for ln in text.splitlines())
    df = pd.read_csv(io.StringIO(text))
    assert len(df) > 0 and not any(str(c).startswith("Unnamed") for c in df.columns)


@needs_released
def test_compare_csv_holds_the_same_numbers_as_json() -> None:
    df = pd.read_csv(io.StringIO(_out("compare", "--format", "csv", "--campaign", "crossfamily")))
    doc = json.loads(_out("compare", "--format", "json", "--campaign", "crossfamily"))
    assert len(df) == len(doc["comparisons"])
    js = pd.DataFrame(doc["comparisons"])
    assert df["mean_diff"].to_numpy() == pytest.approx(js["mean_diff"].astype(float).to_numpy(), abs=1e-9)


@needs_released
@pytest.mark.parametrize("cmd", ["compare", "verdicts", "sensitivity"])
def test_json_flag_is_an_alias_of_format_json(cmd: str) -> None:
    assert _out(cmd, "--json", "--campaign", "crossfamily") == _out(cmd, "--format", "json", "--campaign",
                                                                    "crossfamily")
    json.loads(_out(cmd, "--json", "--campaign", "crossfamily"))
    res = invoke(cmd, str(RELEASED), "--json", "--format", "csv")
    assert res.exit_code == 2 and "--json means --format json" in res.output


@needs_released
def test_tables_json_is_one_document_with_every_table() -> None:
    doc = json.loads(_out("tables", "--format", "json"))
    names = [t["name"] for t in doc["tables"]]
    assert "paired" in names and "verdicts" in names and all("rows" in t for t in doc["tables"])


@needs_released
@pytest.mark.parametrize("cmd", ["tables", "sensitivity"])
def test_several_csv_tables_on_stdout_are_refused_with_the_fix(cmd: str) -> None:
    res = invoke(cmd, str(RELEASED), "--format", "csv")
    assert res.exit_code == 2 and "--table NAME" in res.output and "--out FOLDER" in res.output


@needs_released
def test_markdown_tables_have_no_nan_and_right_aligned_numbers() -> None:
    text = _out("tables", "--table", "main_05b,paired,leave_one_out")
    assert "NaN" not in text and "| nan" not in text
    assert MISSING in text  # the released CSV has no item logs: the seed + item CI is missing, shown as —
    head = next(ln for ln in text.splitlines() if ln.startswith("| policy"))
    sep = text.splitlines()[text.splitlines().index(head) + 1]
    cols = [c.strip() for c in head.strip("|").split("|")]
    align = dict(zip(cols, [c.strip() for c in sep.strip("|").split("|")], strict=True))
    assert align["n"].endswith(":") and align["DB-12"].endswith(":") and not align["policy"].endswith(":")


@needs_released
def test_compare_fits_120_columns_unless_wide() -> None:
    narrow = _out("compare")
    assert max(len(ln) for ln in narrow.splitlines()) <= 120
    assert "Δ mean" in narrow and "--wide" in narrow and "NaN" not in narrow
    wide = _out("compare", "--wide")
    assert max(len(ln) for ln in wide.splitlines()) > 120 and "p BH" in wide and "NaN" not in wide


@needs_released
def test_out_is_a_file_for_single_output_commands_and_a_folder_for_multi_table_ones(tmp_path: Path) -> None:
    f = tmp_path / "a_file.txt"
    f.write_text("keep me")
    for cmd in ("compare", "verdicts", "report"):
        res = invoke(cmd, str(RELEASED), "--out", str(tmp_path), "--resamples", "200")
        assert res.exit_code == 2 and ("is a folder" in res.output or "is a directory" in res.output), res.output
    for cmd in ("tables", "sensitivity"):
        res = invoke(cmd, str(RELEASED), "--out", str(f), "--resamples", "200")
        assert res.exit_code == 2 and "takes a folder" in res.output, (cmd, res.output)
    assert f.read_text() == "keep me"
    target = tmp_path / "v.csv"
    res = invoke("verdicts", str(RELEASED), "--format", "csv", "--out", str(target), "--resamples", "200")
    assert res.exit_code == 0 and res.stdout == "" and len(pd.read_csv(target)) == 45
    res = invoke("verdicts", str(RELEASED), "--format", "csv", "--out", str(target), "--resamples", "200")
    assert res.exit_code == 2 and "--force" in res.output
    folder = tmp_path / "sens"
    res = invoke("sensitivity", str(RELEASED), "--campaign", "crossfamily", "--format", "csv", "--out", str(folder),
                  "--resamples", "200")
    assert res.exit_code == 0, res.output
    assert sorted(p.name for p in folder.iterdir()) == ["leave_one_out.csv", "rank_correlations.csv",
                                                         "seed_stability.csv"]
    for cmd in ("tables", "compare", "sensitivity", "verdicts", "report"):
        assert "--out" in invoke(cmd, "--help").output


def test_one_resample_default_for_every_command() -> None:
    for fn in (analysis_commands.tables, analysis_commands.compare, analysis_commands.sensitivity,
               analysis_commands.verdicts, analysis_commands.report):
        assert inspect.signature(fn).parameters["resamples"].default == analysis_commands.RESAMPLES == 10_000


# --- pdflatex -----------------------------------------------------------------------------------------


@needs_released
@pytest.mark.component("pdflatex")
def test_every_latex_table_of_the_released_records_compiles(tmp_path: Path) -> None:
    tex = [_out("tables", "--format", "latex"), _out("compare", "--format", "latex"),
           _out("verdicts", "--format", "latex"), _out("sensitivity", "--format", "latex", "--campaign", "crossfamily")]
    body = "\n".join(tex)
    assert body.isascii(), sorted({c for c in body if not c.isascii()})
    assert body.count(LATEX_REQUIRES) >= 13
    pdflatex = shutil.which("pdflatex")
    if pdflatex is None:
        pytest.skip("pdflatex not installed (.ci/run installs texlive-latex-base and texlive-latex-recommended)")
    (tmp_path / "doc.tex").write_text("\\documentclass{article}\n\\usepackage{booktabs}\n\\begin{document}\n"
                                      + body.replace("\\begin{table}", "\\clearpage\\begin{table}")
                                      + "\n\\end{document}\n")
    res = subprocess.run([pdflatex, "-interaction=nonstopmode", "-halt-on-error", "doc.tex"], cwd=tmp_path,
                         capture_output=True, text=True, timeout=240)
    assert res.returncode == 0, res.stdout[-3000:]
    assert (tmp_path / "doc.pdf").stat().st_size > 10_000
    started("pdflatex", f"compiled {body.count(LATEX_REQUIRES)} tables, {(tmp_path / 'doc.pdf').stat().st_size} B")


# --- status -------------------------------------------------------------------------------------------


def test_status_format_json_is_the_json_flag_and_table_is_the_matrix(tmp_path: Path) -> None:
    from cli import app
    from orchestrator.session import Session, plan

    spec, runs = plan(REPO / "campaigns" / "demo.yaml", ["policies=[baseline,gfpo]", "seeds=[1]"])
    sess = Session(workdir=tmp_path / "w")
    sess.submit(spec, runs)
    sess.close()
    base = ["status", "demo", "--workdir", str(tmp_path / "w")]
    as_fmt = CliRunner().invoke(app, [*base, "--format", "json"])
    assert as_fmt.exit_code == 0, as_fmt.output
    doc = json.loads(as_fmt.stdout)
    assert doc["total"] == 2 and len(doc["runs"]) == 2 and {r["state"] for r in doc["runs"]} == {"planned"}
    assert json.loads(CliRunner().invoke(app, [*base, "--json"]).stdout)["total"] == 2
    table = CliRunner().invoke(app, [*base, "--format", "table"])
    assert table.exit_code == 0 and "planned=2" in table.output and "gfpo" in table.output
    bad = CliRunner().invoke(app, [*base, "--format", "xml"])
    assert bad.exit_code == 2 and "use table or json" in bad.output


@pytest.mark.parametrize("cmd", ["tables", "compare", "sensitivity", "verdicts", "report"])
def test_help_metavars_read_as_values(cmd: str) -> None:
    text = CliRunner().invoke(analysis_app(), [cmd, "--help"], env={"COLUMNS": "160"}).output
    assert "RECORDS" in text and "{records}" not in text
    opts = [ln for ln in text.splitlines() if "--" in ln and "--help" not in ln]
    assert opts and not [ln for ln in opts if any(t in ln for t in ("<bool>", "<str>", "<int>", "<float>", "<list"))]
    assert "N [100<=x<=1000000]" in text


# --- issue 27: terminal answers, clean CSV numbers, LaTeX minus ------------------------------------------------


def test_csv_writes_counts_as_integers_and_floats_without_binary_noise() -> None:
    from analysis.table_formats import clean_csv

    data = pd.DataFrame({"n": [3.0, 2.0, float("nan")], "mean": [53.120000000000005, 0.1 + 0.2, float("nan")],
                         "sd": [0.524213696883412, 1.0, 2.5]})
    text = clean_csv(data)
    assert text.splitlines()[1:] == ["3,53.12,0.524213696883", "2,0.3,1.0", ",,2.5"]
    back = pd.read_csv(io.StringIO(text))
    assert back["mean"].iloc[0] == 53.12 and back["n"].iloc[0] == 3


@given(st.floats(min_value=-1e6, max_value=1e6, allow_nan=False))
def test_clean_csv_round_trips_every_float_to_12_significant_digits(v: float) -> None:
    from analysis.table_formats import clean_csv

    back = float(clean_csv(pd.DataFrame({"x": [v, 0.5]})).splitlines()[1])
    assert back == pytest.approx(v, rel=1e-11, abs=1e-300)


@needs_released
def test_csv_tables_of_the_released_records_have_integer_counts() -> None:
    text = _out("tables", "--table", "main_7b", "--format", "csv")
    assert ",300,baseline,3," in text and "0000000" not in text and "9999999" not in text
    assert pd.read_csv(io.StringIO(text))["n_seeds"].dtype.kind == "i"


def test_latex_sets_negative_numbers_in_math_mode() -> None:
    assert latex_escape("-2.20 [-10.91, +6.51]") == "$-$2.20 [$-$10.91, +6.51]"
    assert latex_escape("noise20_20pct-label") == r"noise20\_20pct-label"  # a hyphen in a name stays a hyphen
    assert latex_escape("Qwen2.5-7B") == "Qwen2.5-7B"


@needs_released
def test_tables_on_a_terminal_print_an_index_in_one_screen_and_fit_120_columns() -> None:
    index = _out("tables")
    assert len(index.splitlines()) <= 40 and max(map(len, index.splitlines())) <= 120
    assert "verdicts: DB-12" in index and "main_7b" in index and "--all" in index and "| policy" not in index
    some = _out("tables", "--table", "main_7b,three_domain,paired")
    assert max(map(len, some.splitlines())) <= 120
    assert "columns left out to fit 120 characters" in some and "three_domain: " in some
    assert some.count("small n:") == 1
    wide = _out("tables", "--table", "three_domain", "--wide")
    assert max(map(len, wide.splitlines())) > 120 and "columns left out" not in wide


@needs_released
def test_compare_prints_its_notes_once() -> None:
    text = _out("compare")
    assert text.count("small n:") == 1 and text.count("d = method − reference per seed") == 1
    assert text.count("columns left out") == 1 and text.count("## Paired comparisons") == 4


@needs_released
def test_compare_of_a_small_campaign_fits_one_screen(tmp_path: Path) -> None:
    """One comparison, four aggregates (the demo's shape): ≤ 40 lines of ≤ 120 characters, the group named in each
    title, the notes once, and a footnote that says there are no item logs only because there are none."""
    df = pd.read_csv(RELEASED)
    small = tmp_path / "small.csv"
    df[(df["campaign"] == "main") & (df["model"] == "Qwen2.5-7B-Instruct") & df["method"].isin(["baseline", "gfpo"])
       ].to_csv(small, index=False)
    res = invoke("compare", str(small), "--resamples", "200")
    assert res.exit_code == 0, res.output
    lines = res.stdout.splitlines()
    assert len(lines) <= 40 and max(map(len, lines)) <= 120, (len(lines), res.stdout)
    assert res.stdout.count("): main / Qwen2.5-7B-Instruct / 300") == 4 and "###" not in res.stdout
    assert "no item logs" in res.stdout
