"""The post-cutoff suite (issue 52): AIME 2025/2026 and HMMT February 2025/2026 built from rows in their hub
sources' schema (MathArena's `problem_idx`, `problem`, `answer`, HMMT's `problem_type`; the shipped fixture rows
are made up, evaluation/fixtures/make_post_cutoff.py) without network; every gold is credited by the math grader
at build time; a bad source row (missing answer, non-numeric AIME answer) exits 2 naming the file and row and
writes nothing; db12_post_cutoff keeps db12's aggregates, adds PostCutoff-4 and turns the memorization probe on."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest

from evaluation.builders import BUILDERS, POST_CUTOFF, SOURCES, BuildError, local_rows
from evaluation.suite import load_suite

FIXTURES = Path(__file__).resolve().parents[2] / "evaluation" / "fixtures" / "post_cutoff"
ONLY = [a for bid in POST_CUTOFF for a in ("--only", bid)]


@pytest.mark.parametrize("bid", POST_CUTOFF)
def test_each_builder_reads_its_sources_schema_and_keeps_the_suites_count(bid):
    rows, prov = local_rows(FIXTURES, bid)
    df = BUILDERS[bid](rows)
    suite = load_suite("db12_post_cutoff")
    assert len(df) == suite.benchmark(bid).n_items and prov["sha256"]
    assert list(df.item_id) == [f"{bid}-{r['problem_idx']}" for r in rows]
    assert all(str(r["problem"]) in p for r, p in zip(rows, df.prompt, strict=True))
    assert SOURCES[bid]["path"].startswith("MathArena/") and SOURCES[bid]["split"] == "train"
    assert re.fullmatch(r"[0-9a-f]{40}", SOURCES[bid]["revision"])  # pinned to a full commit sha
    if bid.startswith("aime"):  # int64 (aime26) or string (aime25) answers: one canonical integer string
        assert list(df.answer) == [str(int(r["answer"])) for r in rows]
    else:
        assert list(df.answer) == [r["answer"] for r in rows]


@pytest.mark.parametrize("answer, why", [(None, "no field 'answer'"), ("12.5", "not an AIME answer"),
                                         ("one hundred", "not an AIME answer"), (1000, "not an AIME answer"),
                                         ("", "is empty")])
def test_a_bad_aime_answer_is_refused_naming_the_row(answer, why):
    rows, _ = local_rows(FIXTURES, "aime26")
    rows[6] = {**rows[6], "answer": answer}
    with pytest.raises(BuildError, match=f"aime26: source row 6.*{why}"):
        BUILDERS["aime26"](rows)


def test_a_gold_the_math_grader_cannot_credit_is_refused_at_build_time():
    rows, _ = local_rows(FIXTURES, "hmmt_feb25")
    rows[2] = {**rows[2], "answer": "\\frac{1}{"}  # unbalanced: no model answer could ever match it
    with pytest.raises(BuildError, match="hmmt_feb25: source row 2 \\(hmmt_feb25-3\\).*math grader"):
        BUILDERS["hmmt_feb25"](rows)


def test_data_benchmarks_builds_the_four_offline_and_prints_plan_and_aggregates(tmp_path, campaign_cli):
    out = tmp_path / "d"
    r = campaign_cli(["data", "benchmarks", "--suite", "db12_post_cutoff", *ONLY, "--sources", str(FIXTURES),
                      "--out", str(out)])
    assert r.returncode == 0, r.stderr
    man = json.loads((out / "manifest.json").read_text())["benchmarks"]
    assert {k: v["n_items"] for k, v in man.items()} == {"aime25": 30, "aime26": 30, "hmmt_feb25": 30, "hmmt_feb26": 33}
    assert man["aime25"]["source"]["path"] == str(FIXTURES / "aime25.jsonl")
    text = " ".join(r.stdout.split())
    assert "memorization probe on by default" in text
    assert f"hmmt_feb26: 33 items from {FIXTURES / 'hmmt_feb26.jsonl'}; grader math, hmmt_feb26@avg4" in text
    assert "aggregate PostCutoff-4 (mean; 4 of 4 benchmarks built here): aime25, aime26, hmmt_feb25, hmmt_feb26" in text


@pytest.mark.parametrize("bid, row, change, words", [
    ("hmmt_feb26", 4, {"answer": None}, "source row 4 has no field 'answer'"),
    ("aime25", 11, {"answer": "7/2"}, "source row 11 (problem_idx 12) answer '7/2' is not an AIME answer"),
])
def test_a_bad_source_row_exits_2_naming_file_and_row_and_writes_nothing(tmp_path, campaign_cli, bid, row, change,
                                                                          words):
    src = tmp_path / "src"
    shutil.copytree(FIXTURES, src)
    lines = (src / f"{bid}.jsonl").read_text().splitlines()
    lines[row] = json.dumps({**json.loads(lines[row]), **change})
    (src / f"{bid}.jsonl").write_text("\n".join(lines) + "\n")
    out = tmp_path / "d"
    r = campaign_cli(["data", "benchmarks", "--suite", "db12_post_cutoff", *ONLY, "--sources", str(src), "--out",
                      str(out)])
    assert r.returncode == 2 and "Traceback" not in r.stderr
    err = " ".join(r.stderr.split())
    assert str(src / f"{bid}.jsonl") in err and words in err, err
    assert not out.exists() or not any(out.iterdir())


def test_a_missing_source_file_exits_2_naming_it(tmp_path, campaign_cli):
    r = campaign_cli(["data", "benchmarks", "--suite", "db12_post_cutoff", "--only", "aime26", "--sources",
                      str(tmp_path), "--out", str(tmp_path / "d")])
    assert r.returncode == 2 and str(tmp_path / "aime26.jsonl") in " ".join(r.stderr.split())


def test_the_suite_keeps_db12s_aggregates_and_adds_post_cutoff_4_with_the_probe_on():
    post, db12 = load_suite("db12_post_cutoff"), load_suite("db12")
    assert post.benchmark_ids == db12.benchmark_ids + list(POST_CUTOFF)
    for a in db12.aggregates:
        assert post.aggregate(a.name).benchmarks == a.benchmarks and post.aggregate(a.name).kind == a.kind
    assert [a.name for a in post.aggregates if set(a.benchmarks) & set(POST_CUTOFF)] == ["PostCutoff-4"]
    assert post.memorization_probe and not db12.memorization_probe
    assert {post.benchmark(b).metric_name for b in POST_CUTOFF} == {f"{b}@avg4" for b in POST_CUTOFF}
