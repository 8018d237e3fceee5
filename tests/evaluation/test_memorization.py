"""`campaign audit memorization` on real models built here: a tiny Qwen2 trained (plain next-token loss, seconds of
CPU) on the math fixture problems and their answers recalls them from their first 60% and recalls none of the
logic and science problems it never saw; a random model recalls nothing; a rerun reads the cache and loads no
model; and every bad input exits 2 naming the option or file, writing nothing."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest
import yaml

from evaluation.benchmark_data import FIXTURE_DIR
from evaluation.memorization_scores import problem_text
from evaluation.prompts import MATH_INSTRUCTION

MATH = ["math500", "aime24", "olympiadbench", "minerva_math", "gsm8k"]
OTHER = ["kk_hard", "bbh_logical_deduction", "bbh_tracking", "zebra_logic_mc", "gpqa_diamond", "mmlu_pro_chemistry",
         "mmlu_pro_physics"]


def _fixture_items(ids: list[str]) -> list[tuple[str, str]]:
    out = []
    for bid in ids:
        df = pd.read_parquet(FIXTURE_DIR / f"{bid}.parquet")
        out += [(problem_text(p), str(a)) for p, a in zip(df.prompt, df.answer, strict=True)]
    return out


def _memorizing_model(folder: Path, steps: int = 300) -> Path:
    """A tiny model whose tokenizer covers every fixture problem, trained only on the math ones (problem, then
    `The answer is <gold>.`, then EOS): it holds the math benchmarks and not the others."""
    from training.calibration_models import memorize_texts

    seen = [f"{p} The answer is {a}." for p, a in _fixture_items(MATH)]
    return memorize_texts(folder, seen, extra_corpus=[p for p, _ in _fixture_items(OTHER)], steps=steps, lr=5e-3,
                          seed=0)


@pytest.fixture(scope="module")
def memorizing_model(tmp_path_factory) -> Path:
    return _memorizing_model(tmp_path_factory.mktemp("memorizer"))


def _probe(campaign_cli, model: Path, out: Path, cache: Path, *extra: str):
    return campaign_cli(["audit", "memorization", "--model", str(model), "--data-dir", str(FIXTURE_DIR),
                         "--out", str(out), "--cache-dir", str(cache), *extra])


def _rates(out: Path) -> dict[str, dict]:
    body = json.loads((out / "memorization.json").read_text())
    return {b["benchmark"]: b for b in body["benchmarks"]}


@pytest.mark.slow
def test_a_model_trained_on_the_math_items_recalls_them_and_not_the_others(memorizing_model, tmp_path, campaign_cli):
    r = _probe(campaign_cli, memorizing_model, tmp_path / "out", tmp_path / "cache")
    assert r.returncode == 0, r.stderr
    rates = _rates(tmp_path / "out")
    n_math = sum(rates[b]["n_probed"] for b in MATH)
    recalled = sum(rates[b]["near"] for b in MATH)
    exact = sum(rates[b]["exact"] for b in MATH)
    answered = sum(rates[b]["answer"] for b in MATH)
    assert n_math == 17 and recalled >= 15 and exact >= 14 and answered >= 14, rates
    assert all(rates[b]["near"] == 0 and rates[b]["exact"] == 0 and rates[b]["answer"] == 0 for b in OTHER), rates
    assert all(rates[b]["mean_rouge_l"] < 0.5 for b in OTHER)
    # the interval is stated and exact: 0 of 3 items is 0 to 0.708 (Clopper-Pearson), not a point at 0
    other = rates["gpqa_diamond"]
    assert other["near_rate"] == 0.0 and other["near_ci_low"] == 0.0 and abs(other["near_ci_high"] - 0.7076) < 1e-3
    gsm = rates["gsm8k"]
    assert gsm["most_recalled"][0]["rouge_l"] == 1.0 and len(gsm["most_recalled"]) == gsm["n_probed"] == 4
    body = json.loads((tmp_path / "out" / "memorization.json").read_text())
    assert body["meta"]["prefix"] == 0.6 and "tokenizer" in body["meta"]["prefix_unit"]
    assert "Clopper-Pearson" in body["definitions"]["interval"]
    items = pd.read_csv(tmp_path / "out" / "memorization_items.csv")
    assert len(items) == 38 and set(items.benchmark) == set(MATH + OTHER)
    per_bench = pd.read_csv(tmp_path / "out" / "memorization.csv")
    assert list(per_bench.benchmark) == MATH + OTHER
    assert "Clopper-Pearson exact 95%" in r.stdout and "gsm8k" in r.stdout


@pytest.mark.slow
def test_a_rerun_reads_the_cache_without_loading_the_model_and_a_new_prefix_does_not(memorizing_model, tmp_path,
                                                                                   campaign_cli, monkeypatch):
    from evaluation import memorization

    first = _probe(campaign_cli, memorizing_model, tmp_path / "a", tmp_path / "cache", "--benchmark", "gsm8k")
    assert first.returncode == 0, first.stderr

    def no_model(*a, **k):
        raise AssertionError("the model was loaded on a cached rerun")

    monkeypatch.setattr(memorization, "_load_lm", no_model)
    again = _probe(campaign_cli, memorizing_model, tmp_path / "b", tmp_path / "cache", "--benchmark", "gsm8k",
                   "--near", "0.5")  # the threshold is the summary's: the same cache entry
    assert again.returncode == 0, again.stderr
    assert "cached" in again.stdout and "generated" in first.stdout
    assert (pd.read_csv(tmp_path / "a" / "memorization_items.csv")
            .equals(pd.read_csv(tmp_path / "b" / "memorization_items.csv")))
    other_prefix = _probe(campaign_cli, memorizing_model, tmp_path / "c", tmp_path / "cache", "--benchmark", "gsm8k",
                          "--prefix", "0.3")
    assert other_prefix.returncode == 1 and "the model was loaded" in other_prefix.stderr


@pytest.mark.slow
def test_the_paper_protocol_on_the_memorizing_model_writes_what_a_third_party_can_rescore(memorizing_model,
                                                                                        tmp_path, campaign_cli):
    """--protocol paper on gsm8k (4 items x 4 ratios, 48 new tokens each): the memorised items are exact at 80% and
    answered at every ratio; the items file holds the problem, prefix, target, completion and clipped prediction,
    and re-scoring it with rouge_score gives the stored ROUGE-L. Cost: ~10 s on 2 cores (with the model fixture)."""
    from rouge_score import rouge_scorer

    r = _probe(campaign_cli, memorizing_model, tmp_path / "out", tmp_path / "cache", "--protocol", "paper",
               "--benchmark", "gsm8k", "--max-new-tokens", "48")
    assert r.returncode == 0, r.stderr
    assert "paper protocol" in r.stdout and "EM" in r.stdout
    body = json.loads((tmp_path / "out" / "memorization.json").read_text())
    assert body["meta"]["protocol"] == "paper" and body["meta"]["ratios"] == [0.8, 0.6, 0.4, 1.0]
    by_ratio = {b["ratio"]: b for b in body["benchmarks"]}
    assert by_ratio[0.8]["exact"] >= 3 and by_ratio[1.0]["exact"] is None and by_ratio[1.0]["answer"] >= 3, by_ratio
    items = pd.read_csv(tmp_path / "out" / "memorization_items.csv", keep_default_na=False)
    assert len(items) == 16
    scorer = rouge_scorer.RougeScorer(["rougeL"], use_stemmer=True)
    for row in items[items.ratio < 1].itertuples():
        assert row.problem.startswith(row.prefix) and row.problem[len(row.prefix):].strip() == row.target
        assert row.prediction == " ".join(row.completion.split()[:len(row.target.split())])
        assert abs(scorer.score(row.target, row.prediction)["rougeL"].fmeasure - float(row.rouge_l)) < 1e-9
    # a corrupt cache entry is probed again (from the generation store) and rewritten, with a warning
    entry = next((tmp_path / "cache" / "memorization").glob("*.json"))
    entry.write_text('{"meta": {"half')
    again = _probe(campaign_cli, memorizing_model, tmp_path / "out2", tmp_path / "cache", "--protocol", "paper",
                   "--benchmark", "gsm8k", "--max-new-tokens", "48")
    assert again.returncode == 0 and "generated" in again.stdout, again.stderr
    assert "not a readable memorization cache entry" in again.stderr and json.loads(entry.read_text())["rows"]


def test_a_random_model_recalls_nothing_on_the_demos_fixture_items(random_model, tmp_path, campaign_cli):
    """The data the demo evaluates on (training/synthetic.py's fixture items, instructions inline)."""
    from training.synthetic import write_eval_fixtures

    write_eval_fixtures(tmp_path / "eval", n_items=3)
    r = campaign_cli(["audit", "memorization", "--model", str(random_model), "--data-dir", str(tmp_path / "eval"),
                      "--out", str(tmp_path / "out"), "--cache-dir", str(tmp_path / "cache")])
    assert r.returncode == 0, r.stderr
    rates = _rates(tmp_path / "out")
    assert len(rates) == 12 and all(b["near"] == 0 and b["exact"] == 0 for b in rates.values())
    assert sum(b["n_probed"] for b in rates.values()) == 36


# -- bad input: exit 2, the option or file named with its fix, nothing written -----------------------------------


def _nothing_written(tmp_path: Path) -> None:
    assert not (tmp_path / "out").exists() and not (tmp_path / "cache").exists()


@pytest.mark.parametrize("prefix", ["0", "1", "1.5", "-0.2"])
def test_a_prefix_outside_0_1_exits_2_naming_the_option(prefix, random_model, tmp_path, campaign_cli):
    r = _probe(campaign_cli, random_model, tmp_path / "out", tmp_path / "cache", "--prefix", prefix)
    assert r.returncode == 2 and "--prefix" in r.stderr and "strictly between 0 and 1" in r.stderr, r.stderr
    assert "Traceback" not in r.stderr
    _nothing_written(tmp_path)


def test_a_model_path_that_does_not_exist_exits_2_naming_it(tmp_path, campaign_cli):
    r = _probe(campaign_cli, tmp_path / "no-such-model", tmp_path / "out", tmp_path / "cache")
    assert r.returncode == 2 and "--model" in r.stderr and "no-such-model" in r.stderr, r.stderr
    assert "huggingface-cli download" in r.stderr
    _nothing_written(tmp_path)


def _one_benchmark_suite(tmp_path: Path) -> Path:
    raw = {"name": "one", "version": "1", "domains": ["math"], "benchmarks": [
        {"id": "bare", "domain": "math", "n_items": 2, "grader": "math"}],
        "aggregates": [{"name": "All", "kind": "mean", "benchmarks": "all"}]}
    path = tmp_path / "one.yaml"
    path.write_text(yaml.safe_dump(raw))
    return path


def test_a_suite_without_problem_text_exits_2_naming_the_file(random_model, tmp_path, campaign_cli):
    data = tmp_path / "data"
    data.mkdir()
    pd.DataFrame({"item_id": ["b-0", "b-1"], "prompt": [MATH_INSTRUCTION, f"\n\n{MATH_INSTRUCTION}"],
                  "answer": ["1", "2"], "n_options": [0, 0]}).to_parquet(data / "bare.parquet")
    before = sorted(p.name for p in data.iterdir())
    r = campaign_cli(["audit", "memorization", "--model", str(random_model), "--suite", str(_one_benchmark_suite(
        tmp_path)), "--data-dir", str(data), "--out", str(tmp_path / "out"), "--cache-dir", str(tmp_path / "cache")])
    assert r.returncode == 2, r.stderr
    assert "bare.parquet" in r.stderr and "no problem text" in r.stderr and "campaign data benchmarks" in r.stderr
    _nothing_written(tmp_path)
    assert sorted(p.name for p in data.iterdir()) == before


def test_a_data_file_without_a_prompt_column_exits_2_naming_it(random_model, tmp_path, campaign_cli):
    data = tmp_path / "data"
    data.mkdir()
    pd.DataFrame({"item_id": ["b-0"], "answer": ["1"], "n_options": [0]}).to_parquet(data / "bare.parquet")
    r = campaign_cli(["audit", "memorization", "--model", str(random_model), "--suite", str(_one_benchmark_suite(
        tmp_path)), "--data-dir", str(data), "--out", str(tmp_path / "out"), "--cache-dir", str(tmp_path / "cache")])
    assert r.returncode == 2 and "bare.parquet" in r.stderr and "prompt" in r.stderr, r.stderr
    _nothing_written(tmp_path)


def test_a_missing_data_dir_or_unknown_suite_exits_2(random_model, tmp_path, campaign_cli):
    r = campaign_cli(["audit", "memorization", "--model", str(random_model), "--data-dir", str(tmp_path / "nope"),
                      "--out", str(tmp_path / "out"), "--cache-dir", str(tmp_path / "cache")])
    assert r.returncode == 2 and "--data-dir" in r.stderr and "campaign data benchmarks" in r.stderr, r.stderr
    r = _probe(campaign_cli, random_model, tmp_path / "out", tmp_path / "cache", "--suite", "no_such_suite")
    assert r.returncode == 2 and "no_such_suite" in r.stderr, r.stderr
    _nothing_written(tmp_path)
