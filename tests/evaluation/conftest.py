"""Shared fixtures: tiny models built locally (no download) and a small-generation copy of db12."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest
import yaml

from evaluation.benchmark_data import FIXTURE_DIR
from evaluation.run_meta import RunMeta
from evaluation.suite import SUITE_DIR, Suite, parse_suite


def _small_suite(max_gen_toks: int) -> Suite:
    """db12 with short generation limits: the tiny model's context is 8,192 tokens."""
    raw = yaml.safe_load((SUITE_DIR / "db12.yaml").read_text())
    for d in raw["generation"]:
        raw["generation"][d]["max_gen_toks"] = max_gen_toks
    return parse_suite(raw, f"db12-small-{max_gen_toks}")


@pytest.fixture(scope="session")
def random_model(shared_artifact) -> Path:
    from training.tiny_model import build_tiny_model

    return shared_artifact("random_model", build_tiny_model)


@pytest.fixture(scope="session")
def boxed_model(shared_artifact) -> Path:
    """Overfit for seconds to answer the gsm8k fixture items with `The answer is \\boxed{gold}.` (300 steps: at 100
    this machine's CPU numerics left two of the four items answered `48`, failing both tests that use it)."""
    from training.calibration_models import boxed_answer_pairs, overfit_tiny_model

    df = pd.read_parquet(FIXTURE_DIR / "gsm8k.parquet")
    return shared_artifact("boxed_model", lambda folder: overfit_tiny_model(
        folder, boxed_answer_pairs(df.prompt, df.answer), steps=300, lr=6e-3))


@pytest.fixture
def small_suite():
    return _small_suite


RUN_META = {"run_id": "run-1", "run_key": "c/tiny/baseline/s1", "campaign": "c", "model": "tiny",
            "policy": "baseline", "mechanism": "none", "seed": 1, "step": 0, "regime": "", "config_hash": "abc"}


@pytest.fixture
def run_meta() -> RunMeta:
    return RunMeta(**RUN_META)
