"""The evaluator's vLLM backend, run for real on vLLM's CPU build, against the HF backend (issue 48).

One tiny model with a head size vLLM's CPU attention supports (32), overfit to answer the gsm8k fixture items in
the boxed format, is evaluated by both backends on the fixture suite `db12_sampled` at 32 generated tokens:
- greedy benchmarks, float32: every item's response, extracted answer, score, finish reason and token counts
  equal, item by item, and so every benchmark's score (a response that stopped at EOS is counted without it by
  both backends);
- aime24 is avg@4 at temperature 0.8: the sampled path (k samples of an item in one vLLM request) runs and
  records 4 outcomes per item, with pass@k >= avg@k;
- one engine serves the whole checkpoint (greedy and sampled benchmarks alike).
Cost: one HF evaluation (~15 s) and one vLLM engine start plus generation (~40-60 s on 2 cores)."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pandas as pd
import pytest
import yaml

from evaluation.backends.vllm import VLLMOptions
from evaluation.benchmark_data import FIXTURE_DIR
from evaluation.evaluator import evaluate_checkpoint
from evaluation.gates import GateOverrides
from evaluation.run_meta import RunMeta
from evaluation.suite import SUITE_DIR, parse_suite
from tests.components import started

pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]

H32 = {"hidden_size": 64, "num_attention_heads": 2, "num_key_value_heads": 1}  # = campaigns/model/tiny_qwen2_h32
COMPARED = ["response", "parsed", "score", "status", "finish_reason", "response_tokens", "prompt_tokens"]


@pytest.fixture(scope="module")
def model(tmp_path_factory) -> Path:
    from training.calibration_models import boxed_answer_pairs, overfit_tiny_model

    df = pd.read_parquet(FIXTURE_DIR / "gsm8k.parquet")
    return overfit_tiny_model(tmp_path_factory.mktemp("h32") / "model", boxed_answer_pairs(df.prompt, df.answer),
                              steps=300, lr=6e-3, architecture=H32)


def _evaluate(model: Path, out: Path, backend: str) -> tuple[pd.DataFrame, list[dict]]:
    raw = yaml.safe_load((SUITE_DIR / "db12_sampled.yaml").read_text())
    for d in raw["generation"]:
        raw["generation"][d]["max_gen_toks"] = 32
    meta = RunMeta(run_id="r", run_key="k", campaign="c", model="tiny_qwen2_h32", policy="baseline",
                   mechanism="none", seed=1, step=0, regime="", config_hash="x")
    ev = evaluate_checkpoint(model, suite=parse_suite(raw, "db12-sampled-32"), data_dir=FIXTURE_DIR, run_meta=meta,
                             out=out, backend=backend, progress=False,
                             gates=GateOverrides(min_parse_rate=0.0, max_truncation_rate=1.0),
                             vllm_options=VLLMOptions(dtype="float32", enforce_eager=True, seed=0))
    items = [json.loads(line) for line in gzip.open(out / "records.items.jsonl.gz", "rt")]
    return ev.records, items


@pytest.mark.component("vllm-evaluator")
def test_vllm_equals_hf_item_by_item_and_samples_with_one_engine(model, tmp_path, monkeypatch):
    from vllm.entrypoints.llm import LLM  # the class `vllm.LLM` lazily names, which lm-eval constructs

    engines = []
    real_init = LLM.__init__

    def counting_init(self, *a, **kw):
        engines.append(kw.get("model"))
        real_init(self, *a, **kw)

    monkeypatch.setattr(LLM, "__init__", counting_init)
    hf_rec, hf_items = _evaluate(model, tmp_path / "hf", "hf")
    vl_rec, vl_items = _evaluate(model, tmp_path / "vllm", "vllm")
    assert len(engines) == 1, "one vLLM engine serves every benchmark of a checkpoint"

    greedy = {(r["benchmark"], r["item_id"]): r for r in hf_items if "samples" not in r}
    compared = 0
    for r in vl_items:
        if "samples" in r:
            continue
        h = greedy[(r["benchmark"], r["item_id"])]
        assert {k: r[k] for k in COMPARED} == {k: h[k] for k in COMPARED}, (r["benchmark"], r["item_id"])
        compared += 1
    assert compared == len(greedy) >= 30  # every greedy item of the fixture suite (35: 11 benchmarks)
    # the model answers gsm8k: some responses stop at EOS (counted without it) and score
    gsm = [r for r in vl_items if r["benchmark"] == "gsm8k"]
    assert any(r["finish_reason"] == "stop" for r in gsm) and sum(r["score"] for r in gsm) > 0
    assert hf_rec.set_index("benchmark")["accuracy"].drop("aime24").equals(
        vl_rec.set_index("benchmark")["accuracy"].drop("aime24"))

    aime = [r for r in vl_items if r["benchmark"] == "aime24"]
    assert aime and all(len(r["samples"]) == 4 for r in aime)
    row = vl_rec.set_index("benchmark").loc["aime24"]
    assert row["metric"] == "aime24@avg4"
    started("vllm-evaluator", f"{compared} greedy items equal to HF's, one engine")
