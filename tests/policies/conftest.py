"""Make the shared batch builders (`policy_batches.py`) importable under pytest's importlib mode."""

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))


@pytest.fixture
def policy_dir() -> Path:
    return Path(__file__).resolve().parents[2] / "campaigns" / "policy"
