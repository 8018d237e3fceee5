"""multidomain_3 builder on local fixture rows; regime transforms; content hash into run_key."""

from __future__ import annotations

import random

import pytest

from training.corpus import (CorpusError, apply_regime, build_multidomain, content_hash, corpus_identity,
                               parse_regime, science_row)
from orchestrator.engine.spec import DataSpec


def _sources(n: int = 40) -> dict[str, list[dict]]:
    sci = [{"question": f"Q{i}?", "correct_answer": f"right{i}", "distractor1": f"w{i}a", "distractor2": f"w{i}b",
            "distractor3": f"w{i}c", "support": "s" * 900} for i in range(n)]
    kk = [{"quiz": f"A says B is a knave ({i}).", "solution_text": "A is a knight, and B is a knave", "n_people": 2}
          for i in range(n)]
    return {
        "gsm8k": [{"question": f"What is {i}+1? Let's think step by step", "answer": str(i + 1)} for i in range(n)],
        "deepscaler": [{"question": f"Solve x={i}", "answer": str(i)} for i in range(n)],
        "kk_train": kk, "kk_test": kk[: n // 2], "sciq_train": sci, "sciq_val": sci[: n // 2],
    }


def test_schema_counts_and_determinism() -> None:
    train, test = build_multidomain(_sources(), per_domain=20, test_per_domain=8, seed=42)
    assert len(train) == 60 and len(test) == 24
    assert {d: sum(r["domain"] == d for r in train) for d in ("math", "logic", "science")} == dict.fromkeys(
        ("math", "logic", "science"), 20)
    assert sum(r["extra_info"].get("orig_source") == "gsm8k" for r in train) == 10
    r = next(r for r in train if r["domain"] == "math")
    assert set(r) == {"data_source", "prompt", "ability", "reward_model", "extra_info", "domain"}
    assert "Let's think step by step" not in r["prompt"][0]["content"] and "\\boxed{}" in r["prompt"][0]["content"]
    assert r["data_source"] == "HuggingFaceH4/MATH-500" and r["prompt"][0]["role"] == "user"
    again, _ = build_multidomain(_sources(), per_domain=20, test_per_domain=8, seed=42)
    other, _ = build_multidomain(_sources(), per_domain=20, test_per_domain=8, seed=43)
    assert content_hash(train) == content_hash(again) != content_hash(other)


def test_science_gold_letter_points_at_correct_option() -> None:
    for seed in range(20):
        row = science_row("Q?", "RIGHT", ["a", "b", "c"], "", random.Random(seed))
        letter = row["reward_model"]["ground_truth"]
        assert f"{letter}. RIGHT" in row["prompt"][0]["content"]


def test_regimes_subset_and_label_noise() -> None:
    train, _ = build_multidomain(_sources(), per_domain=20, test_per_domain=8, seed=42)
    sub = apply_regime(train, "sub25_25pct_data_subset", seed=42)
    assert len(sub) == 15 and all(sum(r["domain"] == d for r in sub) == 5 for d in ("math", "logic", "science"))
    assert sub == apply_regime(train, "sub25_25pct_data_subset", seed=42)
    noisy = apply_regime(train, "noise20_20pct_label_noise", seed=42)
    changed = [(a, b) for a, b in zip(train, noisy, strict=True) if a["reward_model"] != b["reward_model"]]
    assert len(changed) == 12  # 20 % of 20 per domain × 3
    assert all(b["extra_info"].get("noisy_label") for _, b in changed)
    assert all(a["reward_model"]["ground_truth"] != b["reward_model"]["ground_truth"] for a, b in changed)


def test_unknown_regime_and_short_source_are_errors() -> None:
    with pytest.raises(CorpusError, match="regime 'half'"):
        parse_regime("half")
    with pytest.raises(CorpusError, match="source gsm8k: has 5 rows"):
        build_multidomain(_sources(5), per_domain=20, test_per_domain=2)


def test_identity_uses_built_manifest_hash(tmp_path) -> None:
    from training.corpus import build_variants

    spec = DataSpec(corpus="multidomain_3", seed=42)
    unbuilt = corpus_identity(spec, "", tmp_path)
    assert unbuilt["hash"].startswith("spec:")
    train, test = build_multidomain(_sources(), per_domain=20, test_per_domain=8, seed=42)
    mans = build_variants(train, test, tmp_path, "multidomain_3", ["noise20_20pct_label_noise"], 42)
    assert corpus_identity(spec, "", tmp_path)["hash"] == content_hash(train) == mans["standard"]["train_sha256"]
    assert corpus_identity(spec, "noise20_20pct_label_noise", tmp_path)["hash"] != content_hash(train)
