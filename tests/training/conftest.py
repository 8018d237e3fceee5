"""Shared fixtures: the recipe and the warmed-up tiny base model (content-addressed cache, built once)."""

from __future__ import annotations

import copy
from pathlib import Path

import pytest
import yaml

from training.backend import TrainRequest
from training.local import load_model_config, load_recipe
from training.warmup import base_model, default_cache_root

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="session")
def cache_dir() -> Path:
    """The user cache (WINDTUNNEL_CACHE or ~/.cache/windtunnel): entries are keyed by content hash,
    so sharing it across test sessions is safe and saves the one-off warm-up."""
    return default_cache_root()


@pytest.fixture(scope="session")
def tiny_base(cache_dir) -> Path:
    return base_model(load_model_config("tiny_qwen2"), load_recipe("cpu_tiny"), cache_dir)


@pytest.fixture
def make_request(tiny_base, cache_dir, tmp_path):
    def make(policy: str = "baseline", seed: int = 1, steps: int = 3, out: Path | None = None, **recipe_updates):
        recipe = copy.deepcopy(load_recipe("cpu_tiny"))
        for dotted, value in recipe_updates.items():
            section, key = dotted.split("__")
            recipe[section][key] = value
        pol = yaml.safe_load((REPO / "campaigns/policy" / f"{policy}.yaml").read_text())
        return TrainRequest(
            run_id=f"{policy}_s{seed}", run_key=f"{policy}-{seed}", policy=pol, seed=seed,
            out_dir=out or tmp_path / f"{policy}_s{seed}", recipe=recipe, model_path="builtin:tiny_qwen2",
            total_steps=steps, cache_dir=str(cache_dir),
        )

    return make
