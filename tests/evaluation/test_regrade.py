"""`campaign eval --regrade` (issue 39): stored generations re-scored under the current graders, no new generation.

The pure re-scoring runs on hand-written item logs (greedy and sampled rows, multiple choice reading its option
count from the log or the benchmark data); one slow test evaluates the gsm8k fixture for real, rewinds its
scores to an "older grader", regrades through the CLI and checks the generation cache gained nothing."""

from __future__ import annotations

import gzip
import json
import sqlite3
from pathlib import Path

import pandas as pd
import pytest
from typer.testing import CliRunner

from cli import app
from evaluation.gates import GateOverrides
from evaluation.benchmark_data import FIXTURE_DIR
from evaluation.graders import grade, grader_version
from evaluation.regrade import (RegradeError, read_item_log, regrade_records, regrade_rows, regraded_hash)
from evaluation.suite import load_suite

runner = CliRunner()
SUITE = load_suite("db12")


def _row(bid: str, item: str, response: str, gold: str, score: float, **kw) -> dict:
    return {"benchmark": bid, "item_id": item, "prompt": "p", "response": response, "gold": gold, "parsed": None,
            "score": score, "status": "ok", "finish_reason": "stop", "response_tokens": 5, "prompt_tokens": 3,
            "max_gen_toks": 32, "grader_version": "math-v0", **kw}


def test_regrade_rescores_every_stored_response_with_the_current_grader() -> None:
    rows = [_row("gsm8k", "gsm8k-0", "so \\boxed{8}", "8", 0.0),       # an older grader refused it: now 1
            _row("gsm8k", "gsm8k-1", "The answer is 47.", "48", 1.0),  # wrongly credited before: now 0
            _row("gpqa_diamond", "gpqa_diamond-0", "Answer: C", "C", 0.0, n_options=4, grader_version="mc-v0")]
    new, health, changes = regrade_rows(rows, SUITE, processes=0)
    by_item = {r["item_id"]: r for r in new}
    for r in rows:
        want = grade(SUITE.benchmark(r["benchmark"]).grader, r["response"], r["gold"], n_options=r.get("n_options"))
        assert by_item[r["item_id"]]["score"] == want.score and by_item[r["item_id"]]["status"] == want.status
    assert by_item["gsm8k-0"]["score"] == 1.0 and by_item["gsm8k-1"]["score"] == 0.0
    assert {r["grader_version"] for r in new if r["benchmark"] == "gsm8k"} == {grader_version("math")}
    ch = {c.benchmark: c for c in changes}
    assert (ch["gsm8k"].accuracy_before, ch["gsm8k"].accuracy_after, ch["gsm8k"].changed) == (50.0, 50.0, 2)
    assert ch["gpqa_diamond"].delta == 100.0 and ch["gpqa_diamond"].grader_before == "mc-v0"
    assert health["gsm8k"].parse_rate == 1.0 and health["gsm8k"].grader_version == grader_version("math")
    # the input rows are left as they were (a failed write leaves nothing changed)
    assert rows[0]["score"] == 0.0 and rows[0]["grader_version"] == "math-v0"


def test_sampled_rows_regrade_every_sample_and_rebuild_the_metric() -> None:
    samples = [{"response": t, "score": 0.0, "status": "ok", "parsed": None, "finish_reason": "stop",
                "response_tokens": 4} for t in ("\\boxed{7}", "\\boxed{6}", "\\boxed{7}")]
    sampled = load_suite("db12_sampled")  # aime24: 4 samples at temperature 0.8, metric avg@4
    samples.append({**samples[0], "response": "no idea"})
    rows = [_row("aime24", "aime24-0", "\\boxed{7}", "7", 0.0, n_samples=4, samples=samples)]
    new, health, _ = regrade_rows(rows, sampled, processes=0)
    assert [s["score"] for s in new[0]["samples"]] == [1.0, 0.0, 1.0, 0.0]
    assert sampled.benchmark("aime24").metric == "avg" and new[0]["score"] == 0.5
    assert health["aime24"].accuracy == 50.0 and health["aime24"].metrics["aime24@pass4"] == 100.0
    assert health["aime24"].parse_rate == 0.75  # "no idea" has no answer
    with pytest.raises(RegradeError, match="decodes 1"):  # the log's decoding is not the suite's
        regrade_rows(rows, SUITE, processes=0)


def test_multiple_choice_without_option_counts_reads_the_benchmark_data_or_says_how() -> None:
    rows = [_row("gpqa_diamond", "gpqa_diamond-0", "Answer: C", "C", 0.0)]
    with pytest.raises(RegradeError, match="--data-dir"):
        regrade_rows(rows, SUITE, processes=0)
    new, _, _ = regrade_rows(rows, SUITE, data_dir=FIXTURE_DIR, processes=0)
    assert new[0]["score"] == 1.0
    with pytest.raises(RegradeError, match="not in suite"):
        regrade_rows([_row("nosuch", "x", "a", "b", 0.0)], SUITE, processes=0)


def test_bad_item_logs_name_the_file_and_the_fix(tmp_path: Path) -> None:
    with pytest.raises(RegradeError, match="no item log.*evaluate the checkpoint first"):
        read_item_log(tmp_path / "r.items.jsonl.gz")
    bad = tmp_path / "b.items.jsonl.gz"
    with gzip.open(bad, "wt") as f:
        f.write(json.dumps(_row("gsm8k", "gsm8k-0", "x", "8", 0.0)) + "\n{torn\n")
    with pytest.raises(RegradeError, match=r"b.items.jsonl.gz: line 2: not valid JSON"):
        read_item_log(bad)
    bad.write_bytes(b"not gzip at all")
    with pytest.raises(RegradeError, match="not a readable gzip"):
        read_item_log(bad)
    good = gzip.compress(json.dumps(_row("gsm8k", "gsm8k-0", "x", "8", 0.0)).encode() * 50)
    bad.write_bytes(good[:10] + b"\xff" * 40 + good[50:])  # gzip's header, then an invalid deflate block type
    with pytest.raises(RegradeError, match="not a readable gzip"):  # issue 59: was a zlib.error traceback
        read_item_log(bad)


def test_a_partial_item_log_is_refused_and_the_health_files_tasks_are_kept(tmp_path: Path) -> None:
    """issue 59: an item log holding some of the records' benchmarks rewrote records.health.json with those
    alone, and every regrade blanked each benchmark's `task` there."""
    from evaluation import item_log
    from evaluation.regrade import regrade_output

    rows = [_row("gsm8k", "gsm8k-0", "\\boxed{8}", "8", 0.0)]
    rp = tmp_path / "records.parquet"
    ip = item_log.items_path_of(rp)
    _, health, _ = regrade_rows(rows, SUITE, processes=0)
    health["gsm8k"].task = "windtunnel_gsm8k"
    item_log.write_item_log(ip, rows, health.values())
    recs = pd.DataFrame([{"benchmark": b, "n_correct": 0.0, "accuracy": 0.0, "parse_rate": 1.0, "eval_hash": "abc",
                          "harness_version": "grader math-v0", "metrics": ""} for b in ("gsm8k", "math500")])
    with pytest.raises(RegradeError, match=r"\['math500'\] are in the records but not in the item log"):
        regrade_output(recs, rp, SUITE)
    r = regrade_output(recs[recs["benchmark"] == "gsm8k"], rp, SUITE)
    assert r.health["gsm8k"].task == "windtunnel_gsm8k"


def test_cli_regrade_refuses_the_options_it_would_ignore(tmp_path: Path) -> None:
    for extra in (["--benchmark", "gsm8k"], ["--limit", "3"]):
        r = runner.invoke(app, ["eval", "--regrade", "--out", str(tmp_path / "r.parquet"), *extra])
        assert r.exit_code == 2 and f"{extra[0]}: not with --regrade" in r.stderr, r.stderr
    assert list(tmp_path.iterdir()) == []


def test_records_get_the_new_figures_grader_label_and_a_new_hash_only_when_a_version_changed() -> None:
    rows = [_row("gsm8k", "gsm8k-0", "\\boxed{8}", "8", 0.0)]
    _, health, changes = regrade_rows(rows, SUITE, processes=0)
    recs = pd.DataFrame([{"benchmark": "gsm8k", "n_correct": 0.0, "accuracy": 0.0, "parse_rate": 1.0,
                          "harness_version": "lm-eval 0.4; windtunnel-eval 1; backend hf; grader math-v0; "
                                             "max_gen_toks 32", "eval_hash": "abc", "metrics": ""}])
    out = regrade_records(recs, health, changes)
    assert out["accuracy"].tolist() == [100.0] and out["n_correct"].tolist() == [1.0]
    assert f"grader {grader_version('math')}; max_gen_toks 32" in out["harness_version"].iloc[0]
    assert out["eval_hash"].iloc[0] == regraded_hash("abc", {"gsm8k": grader_version("math")}) != "abc"
    same = [dict(r, grader_version=grader_version("math")) for r in rows]
    _, h2, c2 = regrade_rows(same, SUITE, processes=0)
    assert regrade_records(recs, h2, c2)["eval_hash"].iloc[0] == "abc"  # no version changed: the hash stays
    assert recs["accuracy"].tolist() == [0.0]  # input untouched


def test_cli_regrade_refuses_bad_arguments(tmp_path: Path) -> None:
    r = runner.invoke(app, ["eval", "--regrade"])
    assert r.exit_code == 2 and "--regrade needs --out RECORDS" in r.stderr
    r = runner.invoke(app, ["eval", str(tmp_path), "--regrade", "--out", str(tmp_path / "r.csv")])
    assert r.exit_code == 2 and "takes no CHECKPOINT" in r.stderr
    r = runner.invoke(app, ["eval", "--regrade", "--out", str(tmp_path / "r.csv")])
    assert r.exit_code == 2 and "records not found" in r.stderr
    r = runner.invoke(app, ["eval"])
    assert r.exit_code == 2 and "missing CHECKPOINT" in r.stderr
    assert list(tmp_path.iterdir()) == []


def _generations(cache: Path) -> list[tuple]:
    with sqlite3.connect(cache / "generations.sqlite") as c:
        return sorted(c.execute("SELECT key, response FROM generations").fetchall())


@pytest.mark.slow
def test_regrade_through_the_cli_changes_grades_only(random_model, tmp_path: Path, run_meta) -> None:
    """Cost: ~20 CPU-s (a 4-item gsm8k evaluation of the random tiny model at 8 tokens, a regrade, a cached
    re-evaluation). Proves: a regrade re-scores the stored generations (scores rewound to an "older grader" that
    credited everything come back to the real ones), writes the current grader version, adds no generation to the
    cache, and equals a fresh evaluation from the cache."""
    from analysis.records import write_records
    from evaluation.evaluator import evaluate_checkpoint

    out, cache = tmp_path / "records.parquet", tmp_path / "cache"
    relaxed = GateOverrides(min_parse_rate=0.0, max_truncation_rate=1.0)  # a random model parses nothing
    kw = dict(suite=SUITE, data_dir=FIXTURE_DIR, run_meta=run_meta, benchmarks=["gsm8k"], max_gen_toks=8,
              cache_dir=cache, gates=relaxed, progress=False)
    ev = evaluate_checkpoint(random_model, out=out, **kw)
    fresh = ev.records
    write_records(fresh, out)  # as the evaluate stage does
    before = _generations(cache)
    assert len(before) == 4 and ev.n_generated == 4
    # rewind: an older grader that credited every response
    log = tmp_path / "records.items.jsonl.gz"
    rows = [json.loads(x) for x in gzip.open(log, "rt")]
    with gzip.open(log, "wt") as f:
        for row in rows:
            f.write(json.dumps({**row, "score": 1.0, "grader_version": "math-v0"}) + "\n")
    write_records(fresh.assign(accuracy=100.0, n_correct=4.0, harness_version=fresh["harness_version"].str.replace(
        grader_version("math"), "math-v0")), out)

    r = runner.invoke(app, ["eval", "--regrade", "--out", str(out)])
    assert r.exit_code == 0, r.output + r.stderr
    assert "0 new generations: 4 stored responses re-scored" in r.output
    assert f"math-v0 -> {grader_version('math')}" in r.output and "-100.0" in r.output
    assert _generations(cache) == before  # the cache is untouched: same keys, same responses
    regraded = pd.read_parquet(out)
    assert regraded["accuracy"].tolist() == fresh["accuracy"].tolist()
    assert grader_version("math") in regraded["harness_version"].iloc[0]
    assert {json.loads(x)["grader_version"] for x in gzip.open(log, "rt")} == {grader_version("math")}
    # a fresh evaluation from the same cache regenerates nothing and scores what the regrade wrote
    again = evaluate_checkpoint(random_model, out=tmp_path / "again", **kw)
    assert again.n_generated == 0
    assert again.records["accuracy"].tolist() == regraded["accuracy"].tolist()
