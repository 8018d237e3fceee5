"""Recipes and model configs by name (`campaigns/recipe/<name>.yaml`, `campaigns/model/<name>.yaml`) or path."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from campaigns import config_root
from training.backend import TrainingError
from wtcommon.files import load_yaml_mapping


def load_recipe(name_or_path: str | Path) -> dict[str, Any]:
    """A recipe by name (`campaigns/recipe/<name>.yaml`) or by path."""
    p = Path(name_or_path)
    if not p.suffix:
        p = config_root() / "recipe" / f"{name_or_path}.yaml"
    return load_yaml_mapping(p, what="recipe file", error=TrainingError)


def load_model_config(name_or_path: str | Path) -> dict[str, Any]:
    """A model config by name (`campaigns/model/<name>.yaml`) or by path."""
    p = Path(name_or_path)
    if not p.suffix:
        p = config_root() / "model" / f"{name_or_path}.yaml"
    return load_yaml_mapping(p, what="model config file", error=TrainingError)
