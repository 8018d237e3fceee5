"""Tokens to target (issue 50, Build 2-3): the rollout tokens each policy needs to reach its reference's final
score, paired by seed, with censoring; the pure functions by hand and by property, the table by hand, and
`compare --at tokens-to-target` against the report number for number."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pandas as pd
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats

from analysis.records import write_records
from analysis.tokens_to_target import first_crossing, mean_score_over, tokens_to_target_table
from tests.analysis.budget_records import SUITE, budget_records
from tests.analysis.cli_app import invoke

curve = st.lists(st.floats(0, 100, allow_nan=False), min_size=2, max_size=12)


@settings(max_examples=60, deadline=None)
@given(curve, st.floats(0, 100, allow_nan=False), st.floats(0, 100, allow_nan=False))
def test_first_crossing_is_the_first_checkpoint_at_or_above_and_monotone_in_the_target(scores, a, b) -> None:
    tokens = np.arange(1, len(scores) + 1, dtype=float) * 100
    s = np.asarray(scores)
    lo, hi = sorted((a, b))
    t_lo, t_hi = first_crossing(tokens, s, lo), first_crossing(tokens, s, hi)
    tol = 1e-9  # a score equal to the target up to float noise reaches it (the target is often the reference's score)
    if s.max() < hi - tol:
        assert math.isnan(t_hi)  # censored: never the budget, never zero
    else:
        i = int(t_hi / 100) - 1
        assert t_lo <= t_hi and s[i] >= hi - tol and (s[:i] < hi - tol).all()


@settings(max_examples=60, deadline=None)
@given(curve, st.floats(0, 1), st.floats(0, 1))
def test_the_area_is_a_mean_score_between_the_curves_extremes(scores, a, b) -> None:
    tokens = np.arange(len(scores), dtype=float) * 50
    s = np.asarray(scores)
    lo, hi = sorted((a * tokens[-1], b * tokens[-1]))
    m = mean_score_over(tokens, s, lo, hi)
    assert s.min() - 1e-9 <= m <= s.max() + 1e-9
    assert math.isclose(mean_score_over(tokens, np.full_like(s, 7.0), lo, hi), 7.0)


def _censor_greso_seed1(df: pd.DataFrame) -> pd.DataFrame:
    """greso's seed-1 run with only its first two checkpoints: it never reaches baseline's final score."""
    drop = (df["policy"] == "greso") & (df["seed"] == 1) & (df["step"] > 2)
    return df[~drop].reset_index(drop=True)


def test_tokens_to_target_by_hand() -> None:
    df = budget_records()
    t, dropped = tokens_to_target_table(df, SUITE, "DB-12")
    assert dropped == []
    row = t.set_index("policy").loc["mopps"]
    agg = df.groupby(["policy", "seed", "step"]).agg(score=("accuracy", "mean"), tok=("rollout_tokens", "first"))
    m_tok, r_tok = [], []
    for seed in (1, 2, 3):
        b = agg.loc[("baseline", seed)]
        goal = b["score"].iloc[-1]
        m = agg.loc[("mopps", seed)]
        m_tok.append(m["tok"][m["score"] >= goal - 1e-9].iloc[0])
        r_tok.append(b["tok"][b["score"] >= goal - 1e-9].iloc[0])
    logr = np.log(np.array(m_tok) / np.array(r_tok))
    half = stats.t.ppf(0.975, 2) * logr.std(ddof=1) / math.sqrt(3)
    assert math.isclose(row["ratio"], math.exp(logr.mean()))
    assert math.isclose(row["ratio_lo"], math.exp(logr.mean() - half))
    assert math.isclose(row["method_tokens"], np.mean(m_tok)) and row["n"] == 3 and row["n_reached"] == 3
    p_point = 2 * stats.t.sf(abs(logr.mean()) / (logr.std(ddof=1) / math.sqrt(3)), 2)
    assert math.isclose(row["p_point"], p_point) and p_point < 0.01 and row["ratio"] < 1
    # issue 58: each crossing lies in (previous checkpoint, crossing]; the verdict's p is the t test at the
    # least favourable ends for "fewer": the method as late, the reference as early as the brackets allow
    r_floor = [agg.loc[("baseline", s)]["tok"][agg.loc[("baseline", s)]["tok"] < r].max()
               for s, r in zip((1, 2, 3), r_tok, strict=True)]
    worst = np.log(np.array(m_tok) / np.array(r_floor))
    p_worst = 2 * stats.t.sf(abs(worst.mean()) / (worst.std(ddof=1) / math.sqrt(3)), 2)
    assert math.isclose(row["p"], p_worst) and row["p"] > 0.05  # the brackets touch at seed 3 (840 and 840)
    assert row["verdict"] == "undecided"


def test_a_target_reached_at_every_runs_first_checkpoint_never_gives_a_decided_verdict(tmp_path: Path) -> None:
    """issue 58 (Done when): every run reaches the target at its first evaluated checkpoint, at different token
    counts (greso's first checkpoint falls later than baseline's): the point ratio is far from 1 with a tiny p, but
    where each run crossed is only known to be below its first count, so the verdict is `left-censored`."""
    df = budget_records()
    t, _ = tokens_to_target_table(df, SUITE, "DB-12", target=30.0)
    g = t.set_index("policy").loc["greso"]
    assert g["ratio"] > 1.1 and g["p_point"] < 0.01  # what the table decided before: "more tokens"
    assert g["left_censored_seeds"] == "1,2,3" and g["reference_left_censored_seeds"] == "1,2,3"
    assert g["p"] == 1.0 and (t["verdict"] == "left-censored").all(), t[["policy", "verdict"]]
    path = write_records(df, tmp_path / "records.parquet")
    r = invoke("compare", str(path), "--at", "tokens-to-target", "--target", "30")
    assert r.exit_code == 0 and "left-censored" in r.output and "more tokens" not in r.output, r.output


def test_a_run_that_never_reaches_the_target_is_censored_not_zero_or_the_budget() -> None:
    t, _ = tokens_to_target_table(_censor_greso_seed1(budget_records()), SUITE, "DB-12")
    g = t.set_index("policy").loc["greso"]
    assert g["censored_seeds"] == "1" and g["n_reached"] == 2 and g["verdict"] == "censored"
    assert g["ratio_bound"] == ">=" and math.isnan(g["ratio_lo"]) and math.isnan(g["p"])
    # the method's mean tokens are over the seeds that reached it: the censored run counts as neither 0 nor 1000
    reached = t.set_index("policy").loc["greso", "method_tokens"]
    assert reached == (4 * 320 + 4 * 330) / 2  # seeds 2 and 3 cross at step 4 (320 and 330 tokens a step)
    # issue 58: the reference's mean is over the same seeds (2 and 3), not over all three; each seed is shown
    per = {s: (m, r, last) for s, m, r, last in g["tokens_per_seed"]}
    assert g["reference_tokens"] == (per[2][1] + per[3][1]) / 2 and per[1][0] is None and per[1][1] is not None
    from analysis.frontier_report import frontier_display

    shown = frontier_display(t).set_index(t["policy"]).loc["greso", "per seed (method / ref)"]
    assert shown.startswith(f"s1 ≥ {per[1][2]:,.0f} / {per[1][1]:,.0f} · s2 {per[2][0]:,.0f} / "), shown
    u, _ = tokens_to_target_table(budget_records(), SUITE, "DB-12", target=46.0)
    assert (u["verdict"] == "reference censored").all() and u.set_index("policy").loc["mopps", "censored_seeds"] == "2"


def test_compare_and_the_report_agree_on_tokens_to_target(tmp_path: Path) -> None:
    from analysis.frontier_report import frontier_display
    from analysis.report import build_report

    path = write_records(_censor_greso_seed1(budget_records()), tmp_path / "records.parquet")
    r = invoke("compare", str(path), "--at", "tokens-to-target", "--format", "json")
    assert r.exit_code == 0, r.output
    rows = json.loads(r.output)["tokens_to_target"]
    html = build_report(path, tmp_path / "report.html", n_resamples=200).read_text()
    section = html.split("id='tokens-to-target'")[1]
    cells = frontier_display(pd.DataFrame(rows).replace({None: np.nan}))
    for row in cells.itertuples(index=False):
        for cell in row:
            assert f"<td>{cell}</td>" in section.replace("&#x27;", "'"), cell
    r = invoke("compare", str(path), "--at", "tokens-to-target")
    assert r.exit_code == 0 and "≥ " in r.output and "censored" in r.output


def test_equal_compute_questions_of_equal_step_records_exit_2(tmp_path: Path) -> None:
    path = write_records(budget_records(budget=None), tmp_path / "plain.parquet")
    r = invoke("compare", str(path), "--at", "budget")
    assert r.exit_code == 2 and "no run trained to a rollout-token budget" in " ".join(r.output.split())
    r = invoke("compare", str(path), "--target", "40")
    assert r.exit_code == 2 and "--at tokens-to-target" in r.output
    r = invoke("compare", str(path), "--at", "tokens")
    assert r.exit_code == 2 and "budget, tokens-to-target" in r.output


def test_tokens_to_target_refuses_what_it_would_ignore_or_could_not_answer(tmp_path: Path) -> None:
    """issue 59: --format latex printed JSON, an unknown --reference-map entry was dropped, --items, --runs-dir and
    --margin were ignored, and records where nothing pairs gave an empty table and exit 0. Each is exit 2 naming
    what to change."""
    recs = budget_records()
    path = write_records(recs, tmp_path / "records.parquet")
    base = ["compare", str(path), "--at", "tokens-to-target"]
    for extra, names in ((["--format", "latex"], "--format latex"), (["--items", str(tmp_path)], "--items"),
                         (["--runs-dir", str(tmp_path)], "--runs-dir"), (["--margin", "1"], "--margin"),
                         (["--reference-map", "mopps=nosuch"], "nosuch")):
        r = invoke(*base, *extra)
        assert r.exit_code == 2 and names in " ".join(r.output.split()), (extra, r.output)
    alone = write_records(recs[recs["policy"] != "baseline"], tmp_path / "alone.parquet")
    r = invoke("compare", str(alone), "--at", "tokens-to-target")
    assert r.exit_code == 2 and "no policy could be paired" in " ".join(r.output.split()), r.output
