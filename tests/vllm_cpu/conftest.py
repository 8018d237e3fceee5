"""The vLLM tests run in the second environment (`make venv-vllm`: vLLM's CPU build, `make test-vllm`); in the main
venv, which never holds vLLM, they are skipped with that reason."""

from __future__ import annotations

import importlib.util

import pytest


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if importlib.util.find_spec("vllm") is not None:
        return
    skip = pytest.mark.skip(reason="vLLM is not installed here: these run in .venv-vllm (`make test-vllm`)")
    for item in items:
        if "tests/vllm_cpu/" in str(item.fspath):
            item.add_marker(skip)
