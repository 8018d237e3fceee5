"""Equal generation compute (issue 50, Build 1): runs trained to a rollout-token budget pair at the budget, not by
step, in `compare`, `verdicts` and the tables; equal-step records and tables keep their bytes."""

from __future__ import annotations

import json
import warnings
from pathlib import Path

import numpy as np
import pandas as pd

from analysis.budget import AT_BUDGET, at_budget
from analysis.comparisons import TABLE_COLUMNS, paired_comparisons
from analysis.records import read_records, write_records
from analysis.schema import RECORD_COLUMNS
from tests.analysis.budget_records import SUITE, budget_records
from tests.analysis.cli_app import invoke


def _paired(df: pd.DataFrame) -> pd.DataFrame:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        res = paired_comparisons(df, SUITE, n_resamples=200)
    assert res.dropped == []
    return res.table


def test_budget_columns_round_trip_and_equal_step_records_keep_their_columns(tmp_path: Path) -> None:
    df = budget_records()
    write_records(df, tmp_path / "b.parquet")
    back = read_records(tmp_path / "b.parquet", SUITE)
    assert list(back.columns) == [*RECORD_COLUMNS, "rollout_token_budget", "rollout_tokens"]
    pd.testing.assert_frame_equal(back, df)
    plain = budget_records(budget=None)
    write_records(plain, tmp_path / "p.parquet")
    assert list(read_records(tmp_path / "p.parquet", SUITE).columns) == list(RECORD_COLUMNS)
    assert at_budget(plain) is None


def test_runs_stopped_at_different_steps_pair_at_the_budget_with_n_equal_to_the_seeds() -> None:
    df = budget_records()
    assert df.groupby("policy")["step"].max().to_dict() == {"baseline": 4, "greso": 4, "mopps": 6}
    view, stops = at_budget(df)
    assert set(view["step"]) == {AT_BUDGET} and len(stops) == 9
    assert stops.set_index(["policy", "seed"]).loc[("mopps", 1), "stopped_step"] == 6  # 190 a step: 6 x 190 >= 1000
    t = _paired(df)
    agg = t[(t["metric"] == "DB-12") & (t["kind"] == "effect")].set_index("policy")
    assert sorted(agg.index) == ["greso", "mopps"] and (agg["n"] == 3).all() and (agg["step"] == AT_BUDGET).all()
    assert agg.loc["mopps", "method_steps"] == "s1:6 s2:5 s3:5"  # 190, 200, 210 tokens a step
    assert agg.loc["mopps", "reference_steps"] == "s1:4 s2:4 s3:4"
    assert agg.loc["mopps", "rollout_token_budget"] == 1000.0 and agg.loc["mopps", "below_budget"] == ""
    # by hand: Δ at each run's last checkpoint, paired by seed
    last = df[df["step"] == df.groupby("run_key")["step"].transform("max")]
    score = last.groupby(["policy", "seed"])["accuracy"].mean()
    d = (score["mopps"] - score["baseline"]).to_numpy()
    assert np.isclose(agg.loc["mopps", "mean_diff"], d.mean())


def test_a_run_stopped_by_the_step_cap_below_its_budget_is_marked() -> None:
    t = _paired(budget_records(budget=5000.0, step_cap=6))
    row = t[(t["metric"] == "DB-12") & (t["policy"] == "mopps")].iloc[0]
    assert row["below_budget"] == "mopps, baseline"


def test_a_budget_no_run_reached_is_not_reported_as_the_budget(tmp_path: Path) -> None:
    """Issue 59: with a budget above what the step cap let any run generate, the heading names the policies that
    did not reach it instead of reading "at the budget (5,000 rollout tokens)" alone."""
    path = write_records(budget_records(budget=5000.0, step_cap=6), tmp_path / "records.parquet")
    for wide in ([], ["--wide"]):  # the narrow view's heading and --wide's title say the same
        r = invoke("compare", str(path), "--resamples", "200", *wide)
        assert r.exit_code == 0, r.output
        assert "at the budget (5,000 rollout tokens; not reached by greso, baseline, mopps" in r.output, r.output
    reached = write_records(budget_records(), tmp_path / "reached.parquet")
    r = invoke("compare", str(reached), "--resamples", "200", "--wide")
    assert r.exit_code == 0 and "at the budget (1,000 rollout tokens)" in r.output, r.output


def test_equal_step_tables_keep_their_columns() -> None:
    t = _paired(budget_records(budget=None))
    assert list(t.columns) == TABLE_COLUMNS and set(t["step"]) == {8}


def test_compare_and_verdicts_agree_number_for_number_at_the_budget(tmp_path: Path) -> None:
    path = write_records(budget_records(), tmp_path / "records.parquet")
    r = invoke("compare", str(path), "--format", "json", "--resamples", "200")
    assert r.exit_code == 0, r.output
    comp = {c["policy"]: c for c in json.loads(r.output)["comparisons"] if c["metric"] == "DB-12"}
    r = invoke("verdicts", str(path), "--json", "--resamples", "200")
    assert r.exit_code == 0, r.output
    verd = {v["policy"]: v for v in json.loads(r.output)["verdicts"]}
    assert sorted(comp) == sorted(verd) == ["greso", "mopps"]
    for pol in comp:
        for key in ("n", "mean_diff", "t_lo", "t_hi", "method_steps", "reference_steps", "rollout_token_budget"):
            assert comp[pol][key] == verd[pol][key], (pol, key)
    r = invoke("compare", str(path), "--resamples", "200")
    assert r.exit_code == 0, r.output
    text = " ".join(r.output.split())
    assert "at the budget (1,000 rollout tokens)" in text and "s1:6 s2:5 s3:5 / s1:4 s2:4 s3:4" in text
    assert "/ -1" not in text and "no partner" not in r.output


def test_the_report_shows_the_verdicts_compare_prints_at_the_budget(tmp_path: Path) -> None:
    """The report's verdict table (its first table) holds the same n, Δ and t CI as `compare --format json`."""
    from analysis.report import build_report

    path = write_records(budget_records(), tmp_path / "records.parquet")
    r = invoke("compare", str(path), "--format", "json", "--resamples", "200")
    comp = [c for c in json.loads(r.output)["comparisons"] if c["metric"] == "DB-12"]
    html = build_report(path, tmp_path / "report.html", n_resamples=200).read_text()
    for c in comp:
        cell = f"{c['mean_diff']:+.2f} [{c['t_lo']:+.2f}, {c['t_hi']:+.2f}]"
        steps = [" ".join(f"s{s}:{v}" for s, v in zip(c["seeds"], c[k], strict=True))
                 for k in ("method_steps", "reference_steps")]  # JSON's lists, as the report shows them
        assert cell in html and f"{steps[0]} / {steps[1]}" in html, cell
    assert ">-1<" not in html and "/ -1" not in html and "s1:-1" not in html


def test_csv_and_json_carry_numbers_as_numbers_and_lists_as_lists(tmp_path: Path) -> None:
    """issue 58 (Why 8): `n` was written 3.0, floats unrounded, and the per-seed budget columns were the terminal's
    display strings ("s1:1,240 s2:1,280") in CSV and JSON; docs/guide/cli.md promises integers for counts,
    12 significant digits, and lists in JSON (CSV cells: the numbers joined with ';')."""
    import io

    path = write_records(budget_records(budget=5000.0, step_cap=6), tmp_path / "records.parquet")
    r = invoke("compare", str(path), "--format", "json", "--resamples", "200")
    assert r.exit_code == 0, r.output
    row = next(c for c in json.loads(r.output)["comparisons"] if c["metric"] == "DB-12" and c["policy"] == "mopps")
    assert row["n"] == 3 and isinstance(row["n"], int) and row["seeds"] == [1, 2, 3]
    assert row["method_steps"] == [6, 6, 6] and row["below_budget"] == ["mopps", "baseline"]
    assert row["method_rollout_tokens"] == [6 * 190, 6 * 200, 6 * 210]  # 180 + 10 x seed tokens a step
    r = invoke("compare", str(path), "--format", "csv", "--resamples", "200")
    assert r.exit_code == 0, r.output
    text = r.output
    csv = pd.read_csv(io.StringIO(text), dtype=str).set_index(["metric", "policy"]).loc[("DB-12", "mopps")]
    assert csv["n"] == "3" and csv["seeds"] == "1;2;3" and csv["method_rollout_tokens"] == "1140;1200;1260"
    for v in csv[["mean_diff", "sd", "t_lo", "t_hi", "p_t"]]:  # 12 significant digits at most, no binary noise
        assert len(v.lstrip("-").replace(".", "").split("e")[0].lstrip("0")) <= 12, csv


def test_two_methods_compared_with_each_other_beside_their_references_in_one_family(tmp_path: Path) -> None:
    """issue 58: `--vs A:B` adds A vs B (two methods, neither the other's reference) beside each policy's own
    comparison, in compare, verdicts, tables and the report with the same numbers, and inside the Holm family."""
    from analysis.report import build_report
    from analysis.schema import PAIRS_ATTR

    path = write_records(budget_records(), tmp_path / "records.parquet")
    r = invoke("compare", str(path), "--format", "json", "--resamples", "200", "--vs", "mopps:greso")
    assert r.exit_code == 0, r.output
    rows = [c for c in json.loads(r.output)["comparisons"] if c["metric"] == "DB-12"]
    assert sorted((c["policy"], c["reference"]) for c in rows) == [("greso", "baseline"), ("mopps", "baseline"),
                                                                   ("mopps", "greso")]
    pair = next(c for c in rows if c["reference"] == "greso")
    # by hand: the seed-paired difference of the two methods, and Holm over the three comparisons of the family
    df = read_records(path, SUITE)
    last = df[df["step"] == df.groupby("run_key")["step"].transform("max")]
    score = last.groupby(["policy", "seed"])["accuracy"].mean()
    assert np.isclose(pair["mean_diff"], (score["mopps"] - score["greso"]).mean())
    p = sorted(c["p_t"] for c in rows)
    assert np.isclose(min(c["p_holm"] for c in rows), min(1.0, 3 * p[0]))
    r = invoke("verdicts", str(path), "--json", "--resamples", "200", "--vs", "mopps:greso")
    verd = {(v["policy"], v["reference"]): v for v in json.loads(r.output)["verdicts"]}
    assert verd[("mopps", "greso")]["mean_diff"] == pair["mean_diff"]
    assert len(verd) == 3 and verd[("mopps", "greso")]["t_lo"] == pair["t_lo"]  # in the verdicts' family too
    r = invoke("tables", str(path), "--table", "paired", "--format", "csv", "--resamples", "200",
               "--vs", "mopps:greso")
    assert r.exit_code == 0 and ",mopps,greso," in r.output, r.output[-2000:]
    recs = read_records(path, SUITE)
    recs.attrs[PAIRS_ATTR] = [("mopps", "greso")]
    html = build_report(recs, tmp_path / "r.html", n_resamples=200).read_text()
    assert f"{pair['mean_diff']:+.2f} [{pair['t_lo']:+.2f}, {pair['t_hi']:+.2f}]" in html
    for bad, says in ((["--vs", "mopps"], "METHOD:REFERENCE"), (["--vs", "mopps:nosuch"], "nosuch"),
                      (["--vs", "mopps:mopps"], "two different policies")):
        r = invoke("compare", str(path), *bad)
        assert r.exit_code == 2 and says in " ".join(r.output.split()), r.output
