"""Fixtures: a campaigns tree in a temp dir (real policy YAMLs, small model/recipe files)."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]
CAMPAIGN = [str(Path(sys.executable).with_name("campaign"))]

PAPER_MODELS = ["qwen25_05b_instruct", "qwen25_15b_instruct", "qwen25_3b_instruct", "qwen25_7b_instruct",
                "qwen25_7b_base", "qwen25_14b_base", "llama31_8b_base"]


def write_yaml(path: Path, obj) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(obj, sort_keys=False))
    return path


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    """campaigns/ with the repo's policy YAMLs and paper campaign, stub model/recipe files."""
    root = tmp_path / "campaigns"
    shutil.copytree(REPO / "campaigns" / "policy", root / "policy")
    shutil.copytree(REPO / "campaigns" / "paper", root / "paper")
    for m in PAPER_MODELS + ["m0"]:
        # the 14B models span two 8-GPU nodes (compute.models.<14B>.gpus: 16 = gpus_per_node × nnodes)
        shape = {"gpus_per_node": 8, "nnodes": 2} if "14b" in m else {}
        write_yaml(root / "model" / f"{m}.yaml", {"name": m, "path": f"hf/{m}", **shape})
    for r in ("grpo_7b", "grpo_05b", "grpo_mix"):
        write_yaml(root / "recipe" / f"{r}.yaml", {"name": r, "lr": 1e-6})
    write_yaml(root / "recipe" / "noop.yaml", {"name": "noop", "sleep_s": 0.5})
    write_yaml(root / "recipe" / "noop_fail.yaml", {"name": "noop_fail", "fail": True})
    write_yaml(root / "small.yaml", {
        "name": "small", "backend": "noop", "models": ["m0"], "recipe": "noop", "steps": 2,
        "policies": ["baseline", "gfpo", "static", "reward_gap"], "seeds": [1, 2],
        "compute": {"nodes": 1, "gpus_per_node": 0, "gpus_per_run": 0, "hours_per_run": 0.01},
        "retries": {"max_attempts": 2, "backoff_s": 0.2, "backoff_max_s": 1},
    })
    return root


@pytest.fixture
def helpers():
    """Shared helpers (importlib mode forbids importing conftest from tests)."""
    class H:
        repo = REPO
        campaign = CAMPAIGN
        write_yaml = staticmethod(write_yaml)
    return H


@pytest.fixture
def small_campaign(tree: Path):
    """Writes `<tree>/<name>.yaml`: the tree's small campaign renamed, with `kw` replacing its top-level keys."""
    def make(name: str, **kw) -> Path:
        spec = yaml.safe_load((tree / "small.yaml").read_text())
        spec.update(name=name, **kw)
        return write_yaml(tree / f"{name}.yaml", spec)
    return make
