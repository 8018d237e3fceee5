"""evaluate_checkpoint end to end through lm-eval's HF backend on tiny local models."""

from __future__ import annotations

import gzip
import json
import math
import shutil
from pathlib import Path

import pandas as pd
import pytest

from analysis.schema import RECORD_COLUMNS
from evaluation.benchmark_data import FIXTURE_DIR, write_benchmark, write_manifest
from evaluation.gates import GateOverrides
from evaluation.evaluator import EvaluationError, evaluate_checkpoint
from evaluation.suite import load_suite
from tests.components import started



def _fixture_sizes() -> dict[str, int]:
    return {p.stem: len(pd.read_parquet(p)) for p in FIXTURE_DIR.glob("*.parquet")}


@pytest.mark.slow
def test_random_model_fails_gates_then_relaxed_run_scores_all_twelve_from_cache(random_model, tmp_path, small_suite,
                                                                                run_meta):
    suite = small_suite(12)
    out = tmp_path / "records.parquet"
    with pytest.raises(EvaluationError) as exc:
        evaluate_checkpoint(random_model, suite=suite, data_dir=FIXTURE_DIR, run_meta=run_meta, out=out,
                            cache_dir=tmp_path / "cache", progress=False)
    msg = str(exc.value)
    # every benchmark is named with its parse-rate number; no Records are written for a failed gate
    for bid in suite.benchmark_ids:
        assert f"{bid}: parse rate 0.000 below the gate 0.5" in msg
    assert not out.exists()
    items = [json.loads(x) for x in gzip.open(tmp_path / "records.items.jsonl.gz", "rt")]
    sizes = _fixture_sizes()
    assert len(items) == sum(sizes.values())
    assert {"prompt", "response", "parsed", "score", "finish_reason", "response_tokens",
            "prompt_tokens"} <= set(items[0])
    assert all(it["response_tokens"] <= 12 for it in items)

    # the same evaluation with relaxed gates regenerates nothing (cache keyed by checkpoint hash)
    # gates as overrides of the suite's (a campaign's `gates:`), `out` as a directory (orchestrator stage layout)
    ev = evaluate_checkpoint(random_model, suite=suite, data_dir=FIXTURE_DIR, run_meta=run_meta,
                             out=tmp_path / "step_0", cache_dir=tmp_path / "cache",
                             gates=GateOverrides(min_parse_rate=0.0, max_truncation_rate=1.0), progress=False)
    out = tmp_path / "step_0" / "records.parquet"
    assert (tmp_path / "step_0" / "records.items.jsonl.gz").is_file()
    assert ev.n_generated == 0 and ev.n_cached == sum(sizes.values())
    assert [h.benchmark for h in ev.health] == suite.benchmark_ids and all(not h.failures for h in ev.health)
    rec = ev.records
    assert list(rec.columns) == list(RECORD_COLUMNS)
    assert list(rec["benchmark"]) == suite.benchmark_ids
    assert rec["n_items"].tolist() == [sizes[b] for b in suite.benchmark_ids]
    # a real zero, not a missing value: accuracy 0.0 with the parse rate recorded next to it
    assert (rec["accuracy"] == 0.0).all() and (rec["parse_rate"] == 0.0).all()
    assert rec["truncation_rate"].notna().all()
    # evaluation returns results; the caller (the evaluate stage) writes them where `records_path` says
    assert ev.records_path == out and not out.exists()
    from analysis.records import write_records

    write_records(rec, ev.records_path)
    back = pd.read_parquet(out)
    assert len(back) == 12 and back["run_id"].eq("run-1").all() and back["domain"].tolist() == [
        suite.benchmark(b).domain for b in suite.benchmark_ids]


@pytest.mark.slow
@pytest.mark.component("lm-eval")
def test_overfit_model_scores_100_and_a_wrong_gold_scores_0(boxed_model, tmp_path, small_suite, run_meta):
    suite = small_suite(32)
    rec = evaluate_checkpoint(boxed_model, suite=suite, data_dir=FIXTURE_DIR, run_meta=run_meta,
                              benchmarks=["gsm8k"], progress=False).records
    row = rec.iloc[0]
    n = _fixture_sizes()["gsm8k"]
    assert (row["accuracy"], row["n_correct"], row["parse_rate"], row["truncation_rate"]) == (100.0, n, 1.0, 0.0)
    started("lm-eval", f"gsm8k {n} of {n} through the harness on a locally built model")

    # same prompts, golds shifted by one: the same generations must now score 0 while still parsing
    df = pd.read_parquet(FIXTURE_DIR / "gsm8k.parquet")
    df["answer"] = [str(int(a) + 1) for a in df["answer"]]
    data = tmp_path / "data"
    write_benchmark(df, data, "gsm8k", "math")
    write_manifest(data, ["gsm8k"], kind="fixture")
    rec2 = evaluate_checkpoint(boxed_model, suite=suite, data_dir=data, run_meta=run_meta,
                               benchmarks=["gsm8k"], progress=False).records
    assert rec2.iloc[0]["accuracy"] == 0.0 and rec2.iloc[0]["parse_rate"] == 1.0


# ---- fast failures: all raised before any model is loaded -------------------------------------------------


@pytest.fixture
def fake_ckpt(tmp_path) -> Path:
    p = tmp_path / "ckpt"
    p.mkdir()
    (p / "config.json").write_text("{}")
    return p


def test_unknown_task_is_an_error(fake_ckpt, run_meta):
    with pytest.raises(EvaluationError, match=r"unknown benchmark/task \['mmlu_history'\]"):
        evaluate_checkpoint(fake_ckpt, data_dir=FIXTURE_DIR, run_meta=run_meta, benchmarks=["mmlu_history"])


def test_missing_dataset_file_names_it(fake_ckpt, run_meta, tmp_path):
    data = tmp_path / "data"
    shutil.copytree(FIXTURE_DIR, data)
    (data / "kk_hard.parquet").unlink()
    with pytest.raises(EvaluationError,
                       match=r"kk_hard\.parquet: benchmark file not found; run `campaign data benchmarks"):
        evaluate_checkpoint(fake_ckpt, data_dir=data, run_meta=run_meta)


def test_changed_file_fails_its_checksum(fake_ckpt, run_meta, tmp_path):
    data = tmp_path / "data"
    shutil.copytree(FIXTURE_DIR, data)
    df = pd.read_parquet(data / "gpqa_diamond.parquet")
    df.loc[0, "answer"] = "D" if df.loc[0, "answer"] != "D" else "A"
    df.to_parquet(data / "gpqa_diamond.parquet", index=False)
    with pytest.raises(EvaluationError, match=r"gpqa_diamond.*does not match the manifest"):
        evaluate_checkpoint(fake_ckpt, data_dir=data, run_meta=run_meta)


def test_unscorable_gold_letter_is_rejected(fake_ckpt, run_meta, tmp_path):
    df = pd.read_parquet(FIXTURE_DIR / "gpqa_diamond.parquet")
    df.loc[1, "answer"] = "?"
    data = tmp_path / "data"
    data.mkdir()
    df.to_parquet(data / "gpqa_diamond.parquet", index=False)
    with pytest.raises(EvaluationError, match=r"row 1 column 'answer' = '\?' is not a letter within 4 options"):
        evaluate_checkpoint(fake_ckpt, data_dir=data, run_meta=run_meta, benchmarks=["gpqa_diamond"])


def test_real_data_dir_must_hold_the_suite_item_count(fake_ckpt, run_meta, tmp_path):
    data = tmp_path / "data"
    data.mkdir()
    shutil.copy(FIXTURE_DIR / "aime24.parquet", data / "aime24.parquet")
    write_manifest(data, ["aime24"], kind="benchmarks")
    n = len(pd.read_parquet(data / "aime24.parquet"))
    with pytest.raises(EvaluationError, match=rf"aime24: .* has {n} items, the suite expects 30"):
        evaluate_checkpoint(fake_ckpt, data_dir=data, run_meta=run_meta, benchmarks=["aime24"])


def test_small_data_without_manifest_says_how_to_mark_it(fake_ckpt, tmp_path, run_meta):
    data = tmp_path / "data"
    data.mkdir()
    shutil.copy(FIXTURE_DIR / "gsm8k.parquet", data / "gsm8k.parquet")
    with pytest.raises(EvaluationError, match=r"the suite expects 1319; no manifest.json .* kind='fixture'"):
        evaluate_checkpoint(fake_ckpt, data_dir=data, run_meta=run_meta, benchmarks=["gsm8k"])


def test_unknown_gate_key_is_rejected():
    with pytest.raises(ValueError, match=r"gates: unknown key\(s\) \['min_parse'\]"):
        GateOverrides.from_mapping({"min_parse": 0.1})
    with pytest.raises(ValueError, match=r"gates.require_item_count: got 1; true or false"):
        GateOverrides.from_mapping({"require_item_count": 1})
    g = GateOverrides.from_mapping({"min_parse_rate": 0.3}).apply(load_suite("db12").gates)
    assert (g.min_parse_rate, g.max_truncation_rate, g.require_item_count) == (0.3, 0.2, True)


def test_run_meta_must_name_the_run(run_meta):
    from evaluation.run_meta import RunMeta, RunMetaError

    fields = run_meta.columns()
    with pytest.raises(RunMetaError, match=r"missing \['seed', 'step'\], unknown \['sede'\]"):
        RunMeta.from_mapping({k: v for k, v in fields.items() if k not in ("seed", "step")} | {"sede": 1})
    meta = RunMeta.from_mapping({k: v for k, v in fields.items() if k != "run_key"})
    assert meta.run_key == meta.run_id == "run-1"  # outside a campaign the run is named by its id
    assert list(meta.columns())[:2] == ["run_key", "run_id"] and meta.columns()["eval_hash"] == ""


def test_suite_gates_come_from_the_suite_file():
    g = load_suite("db12").gates
    assert (g.min_parse_rate, g.max_truncation_rate, g.require_item_count) == (0.5, 0.2, True)
    assert not math.isnan(g.min_parse_rate)


def _sampled_suite(seed: int):
    """db12 (generation 32 tokens) with gsm8k and aime24 decoded by sampling: 4 samples at temperature 0.8."""
    import yaml

    from evaluation.suite import SUITE_DIR, parse_suite

    raw = yaml.safe_load((SUITE_DIR / "db12.yaml").read_text())
    for d in raw["generation"]:
        raw["generation"][d]["max_gen_toks"] = 32
    for b in raw["benchmarks"]:
        if b["id"] in ("gsm8k", "aime24"):
            b.update(samples=4, temperature=0.8, seed=seed)
    return parse_suite(raw, f"db12-sampled-{seed}")


@pytest.mark.slow
def test_sampled_decoding_logs_k_outcomes_and_records_avg_pass_maj(boxed_model, random_model, tmp_path, run_meta):
    """~60 CPU s: 2 fixture benchmarks x 4 samples, five evaluations. Proves the item log holds 4 outcomes per
    item, the records carry avg@4, pass@1..4 (the closed form on the logged outcomes) and maj@4, the same seed
    gives the same samples (no cache) and another seed other samples."""
    from math import comb

    relaxed = GateOverrides(min_parse_rate=0.0, max_truncation_rate=1.0)
    bench = ["gsm8k", "aime24"]

    def run(seed: int, out: Path, model: Path = boxed_model) -> tuple[pd.DataFrame, list[dict]]:
        rec = evaluate_checkpoint(model, suite=_sampled_suite(seed), data_dir=FIXTURE_DIR, run_meta=run_meta,
                                  out=out, benchmarks=bench, gates=relaxed, progress=False).records
        return rec, [json.loads(x) for x in gzip.open(out.with_name("records.items.jsonl.gz"), "rt")]

    rec, items = run(7, tmp_path / "a" / "records.parquet")
    sizes = _fixture_sizes()
    assert len(items) == sizes["gsm8k"] + sizes["aime24"]
    assert all(it["n_samples"] == 4 and len(it["samples"]) == 4 for it in items)
    assert {"score", "status", "parsed", "finish_reason", "response_tokens", "response"} <= set(items[0]["samples"][0])
    assert list(rec["metric"]) == ["gsm8k@avg4", "aime24@avg4"]
    for _, row in rec.iterrows():
        bid = row["benchmark"]
        m = json.loads(row["metrics"])
        assert set(m) == {f"{bid}@avg4", f"{bid}@maj4", *(f"{bid}@pass{j}" for j in range(1, 5))}
        its = [it for it in items if it["benchmark"] == bid]
        cs = [sum(s["score"] >= 0.5 for s in it["samples"]) for it in its]
        for j in range(1, 5):
            closed = 100 * sum(1 - comb(4 - c, j) / comb(4, j) for c in cs) / len(cs)
            assert m[f"{bid}@pass{j}"] == pytest.approx(closed, abs=1e-9)
        avg = 100 * sum(s["score"] for it in its for s in it["samples"]) / (4 * len(its))
        assert row["accuracy"] == pytest.approx(avg) == pytest.approx(m[f"{bid}@avg4"])
    # the overfit model, sampled at 0.8, answers gsm8k mostly right but not always the same way
    g = json.loads(rec.set_index("benchmark").loc["gsm8k", "metrics"])
    assert g["gsm8k@pass4"] >= g["gsm8k@avg4"] > 0

    # the same seed, a fresh evaluation (no cache): the same samples; the untrained model's samples of an item
    # differ from each other, and another seed draws others
    def texts(its: list[dict]) -> list[list[str]]:
        return [[s["response"] for s in it["samples"]] for it in its]

    _, again = run(7, tmp_path / "b" / "records.parquet")
    assert texts(again) == texts(items)
    _, r7 = run(7, tmp_path / "c" / "records.parquet", random_model)
    _, r7b = run(7, tmp_path / "d" / "records.parquet", random_model)
    _, r8 = run(8, tmp_path / "e" / "records.parquet", random_model)
    assert texts(r7) == texts(r7b)
    assert all(len(set(t)) > 1 for t in texts(r7))
    assert texts(r8) != texts(r7)
