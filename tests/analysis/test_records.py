"""Records I/O: the released wide CSV, long Parquet/CSV round trips, and every malformed-file case."""

from __future__ import annotations

import csv
import math
import warnings
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from analysis.record_checks import UnknownPolicyWarning
from analysis.records import read_records, recover_n_correct, to_wide, write_records, write_wide
from analysis.schema import RECORD_COLUMNS, RecordsError
from evaluation.suite import load_suite
from tests.released import RELEASED, needs_released

REPO = Path(__file__).resolve().parents[2]
SUITE = load_suite("db12")
BENCH = SUITE.benchmark_ids


def _released_rows() -> tuple[list[str], list[list[str]]]:
    with open(RELEASED, newline="") as f:
        rows = list(csv.reader(f))
    return rows[0], rows[1:]


def _write_rows(path: Path, header: list[str], rows: list[list[str]]) -> Path:
    with open(path, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(header)
        w.writerows(rows)
    return path


@needs_released
def test_released_wide_reads_into_long_records() -> None:
    header, rows = _released_rows()
    df = read_records(RELEASED)
    assert list(df.columns) == list(RECORD_COLUMNS)
    assert len(df) == len(rows) * 12
    assert df.groupby(["run_key", "step"]).ngroups == len(rows)
    first = dict(zip(header, rows[0], strict=True))
    r = df[(df["run_id"] == first["run_id"]) & (df["benchmark"] == "olympiadbench")].iloc[0]
    assert r["policy"] == first["method"] and r["step"] == int(first["steps"]) and r["seed"] == int(first["seed"])
    assert r["accuracy"] == float(first["olympiadbench"])
    assert r["domain"] == "math" and r["n_items"] == 675
    # 40.0 % of 675 items is exactly 270 correct; a 1,319-item gsm8k value printed to one decimal is ambiguous
    assert r["n_correct"] == round(float(first["olympiadbench"]) * 675 / 100)
    assert df[df["benchmark"] == "gsm8k"]["n_correct"].isna().all()
    mech = df.drop_duplicates("policy").set_index("policy")["mechanism"].to_dict()
    assert mech["baseline"] == "none" and mech["gfpo"] == "select" and mech["ar"] == "reweight"
    assert mech["tscl"] == "mix"


@needs_released
def test_wide_export_matches_released_csv(tmp_path: Path) -> None:
    out = write_wide(read_records(RELEASED), tmp_path / "wide.csv")
    a = pd.read_csv(RELEASED, keep_default_na=False)
    b = pd.read_csv(out, keep_default_na=False)
    assert list(b.columns) == list(a.columns)
    key = ["run_id", "steps"]
    a, b = a.sort_values(key).reset_index(drop=True), b.sort_values(key).reset_index(drop=True)
    pd.testing.assert_frame_equal(a, b, check_dtype=False)


def _tiny_long() -> pd.DataFrame:
    rows = []
    for seed in (1, 2):
        for i, b in enumerate(BENCH):
            acc = 0.0 if b == "aime24" else 10.0 + i + seed
            rows.append({"run_id": f"r{seed}", "campaign": "c", "model": "m", "policy": "baseline", "seed": seed,
                         "step": 10, "benchmark": b, "accuracy": acc})
    df = pd.DataFrame(rows)
    df.loc[(df["run_id"] == "r2") & (df["benchmark"] == "kk_hard"), "accuracy"] = np.nan
    return df


def _tiny_csv(path: Path) -> Path:
    _tiny_long().to_csv(path, index=False)  # NaN -> blank cell
    return path


@pytest.mark.parametrize("ext", ["parquet", "csv"])
def test_long_round_trip_keeps_nan_and_zero(tmp_path: Path, ext: str) -> None:
    df = read_records(_tiny_csv(tmp_path / "in.csv"))
    assert df.loc[(df["run_id"] == "r2") & (df["benchmark"] == "kk_hard"), "accuracy"].isna().all()
    assert (df.loc[df["benchmark"] == "aime24", "accuracy"] == 0.0).all()
    out = write_records(df, tmp_path / f"rec.{ext}")
    back = read_records(out)
    pd.testing.assert_frame_equal(back, df)
    assert back["accuracy"].isna().sum() == 1 and (back["accuracy"] == 0.0).sum() == 2


def test_write_refuses_duplicates_and_writes_nothing(tmp_path: Path) -> None:
    df = read_records(_tiny_csv(tmp_path / "in.csv"))
    bad = pd.concat([df, df.iloc[[0]]], ignore_index=True)
    with pytest.raises(RecordsError, match="duplicate of row 1"):
        write_records(bad, tmp_path / "out.parquet")
    assert not (tmp_path / "out.parquet").exists() and not list(tmp_path.glob(".out.parquet*"))


def test_recover_n_correct() -> None:
    acc = np.array([100 * 7 / 30, 13.3, 92.3, 33.8, np.nan, 0.0, 50.03])
    n = np.array([30, 30, 1319, 272, 500, 500, 500])
    got = recover_n_correct(acc, n)
    assert got[0] == 7 and got[1] == 4 and math.isnan(got[2]) and got[3] == 92
    assert math.isnan(got[4]) and got[5] == 0.0
    assert got[6] == 250  # 50.03 is within 0.05 of exactly one multiple of 100/500 = 0.2


def test_unknown_policy_gets_unknown_mechanism_with_warning(tmp_path: Path) -> None:
    df = _tiny_long()
    df["policy"] = "my_new_policy"
    path = tmp_path / "x.parquet"
    df.to_parquet(path)
    with pytest.warns(UnknownPolicyWarning, match="my_new_policy"):
        out = read_records(path)
    assert set(out["mechanism"]) == {"unknown"}


# ----------------------------------------------------------------------------- malformed files

def _bad(tmp_path: Path, case: str) -> tuple[Path, list[str]]:
    """A malformed copy of the released CSV and the fragments its error must contain."""
    header, rows = _released_rows()
    rows = [r[:] for r in rows[:20]]
    p = tmp_path / f"{case}.csv"
    if case == "truncated":
        _write_rows(p, header, rows)
        text = p.read_text().rstrip("\n")
        p.write_text(text[: text.rfind(",", 0, len(text) - 30)])  # cut the last line mid-row
        return p, [str(p), "row 20", "fields but the header has 19"]
    if case == "wrong_header":
        header = [("gsm8k_acc" if h == "gsm8k" else h) for h in header]
        _write_rows(p, header, rows)
        return p, [str(p), "column 'gsm8k_acc'", "unknown column", "column 'gsm8k'", "missing column for benchmark"]
    if case == "text_score":
        rows[4][header.index("bbh_tracking")] = "n/a%"
        _write_rows(p, header, rows)
        return p, [str(p), "row 5", "column 'bbh_tracking'", "not a number"]
    if case == "duplicate":
        rows.append(rows[2][:])
        _write_rows(p, header, rows)
        return p, [str(p), "row 21", "column 'run_id'", "duplicate of row 3"]
    if case == "missing_benchmark":
        k = header.index("zebra_logic_mc")
        _write_rows(p, header[:k] + header[k + 1:], [r[:k] + r[k + 1:] for r in rows])
        return p, [str(p), "column 'zebra_logic_mc'", "missing column for benchmark"]
    if case == "out_of_range":
        rows[0][header.index("gsm8k")] = "123.4"
        _write_rows(p, header, rows)
        return p, [str(p), "row 1", "column 'gsm8k'", "outside [0, 100]"]
    if case == "bad_seed":
        rows[6][header.index("seed")] = "2.5"
        _write_rows(p, header, rows)
        return p, [str(p), "row 7", "column 'seed'", "not an integer"]
    raise AssertionError(case)


CASES = ["truncated", "wrong_header", "text_score", "duplicate", "missing_benchmark", "out_of_range", "bad_seed"]


@needs_released
@pytest.mark.parametrize("case", CASES)
def test_malformed_records_raise_with_location(tmp_path: Path, case: str) -> None:
    p, fragments = _bad(tmp_path, case)
    with pytest.raises(RecordsError) as ei:
        read_records(p)
    msg = str(ei.value)
    for f in fragments:
        assert f in msg, (f, msg)


@needs_released
@pytest.mark.parametrize("case", CASES)
@pytest.mark.parametrize("command", ["tables", "report"])
def test_malformed_records_exit_2_and_write_nothing(tmp_path: Path, case: str, command: str) -> None:
    import typer
    from typer.testing import CliRunner

    from cli import analysis_commands

    app = typer.Typer()
    analysis_commands.register(app)
    p, fragments = _bad(tmp_path, case)
    out = tmp_path / "out"
    args = [command, str(p), "--out", str(out / "report.html") if command == "report" else str(out)]
    res = CliRunner().invoke(app, args)
    assert res.exit_code == 2, res.output
    text = res.output + (res.stderr if hasattr(res, "stderr") and res.stderr else "")
    for f in fragments:
        assert f in " ".join(text.split()), (f, text)
    assert "Traceback" not in text
    assert not out.exists() or not any(out.iterdir())


@needs_released
def test_truncated_file_exit_code_via_the_cli(tmp_path: Path, campaign_cli) -> None:
    p, _ = _bad(tmp_path, "truncated")
    out = tmp_path / "r.html"
    res = campaign_cli(["report", str(p), "--out", str(out)], cwd=REPO)
    assert res.returncode == 2
    assert "row 20" in res.stderr and str(p) in " ".join(res.stderr.split())
    assert not out.exists()


@needs_released
def test_every_problem_is_reported_not_just_the_first(tmp_path: Path) -> None:
    header, rows = _released_rows()
    rows = [r[:] for r in rows[:10]]
    rows[1][header.index("math500")] = "abc"
    rows[3][header.index("seed")] = "x"
    rows[5][header.index("kk_hard")] = "-1"
    p = _write_rows(tmp_path / "many.csv", header, rows)
    with pytest.raises(RecordsError) as ei:
        read_records(p)
    got = {(e.row, e.column) for e in ei.value.problems}
    assert got == {(2, "math500"), (4, "seed"), (6, "kk_hard")}


@needs_released
def test_blank_score_cell_is_missing_not_zero(tmp_path: Path) -> None:
    header, rows = _released_rows()
    rows = [r[:] for r in rows[:5]]
    rows[0][header.index("aime24")] = ""
    p = _write_rows(tmp_path / "blank.csv", header, rows)
    df = read_records(p)
    cell = df[(df["run_id"] == rows[0][0]) & (df["benchmark"] == "aime24")]
    assert cell["accuracy"].isna().all() and cell["n_correct"].isna().all()


def test_long_validation_unknown_benchmark_and_duplicate(tmp_path: Path) -> None:
    df = _tiny_long()
    df.loc[3, "benchmark"] = "mmlu_pro_biology"
    df = pd.concat([df, df.iloc[[7]]], ignore_index=True)
    p = tmp_path / "bad.parquet"
    df.to_parquet(p)
    with pytest.raises(RecordsError) as ei:
        read_records(p)
    probs = {(e.row, e.column): e.message for e in ei.value.problems}
    assert "not a benchmark of suite 'db12'" in probs[(4, "benchmark")]
    assert "duplicate of row 8" in probs[(len(df), "benchmark")]
    assert all(e.file == str(p) for e in ei.value.problems)


def test_unsupported_extension_and_missing_file(tmp_path: Path) -> None:
    with pytest.raises(RecordsError, match="file not found"):
        read_records(tmp_path / "nope.csv")
    (tmp_path / "x.json").write_text("{}")
    with pytest.raises(RecordsError, match="unsupported extension"):
        read_records(tmp_path / "x.json")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with pytest.raises(RecordsError, match="unsupported extension"):
            write_records(read_records(_tiny_csv(tmp_path / "ok.csv")), tmp_path / "out.txt")
    assert not (tmp_path / "out.txt").exists()


def test_to_wide_puts_missing_as_blank(tmp_path: Path) -> None:
    wide = to_wide(read_records(_tiny_csv(tmp_path / "in.csv")))
    assert list(wide.columns[:7]) == ["run_id", "campaign", "model", "method", "seed", "steps", "regime"]
    assert math.isnan(wide.set_index("run_id").loc["r2", "kk_hard"])
    assert wide.set_index("run_id").loc["r1", "aime24"] == 0.0
