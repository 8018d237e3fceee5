"""A local Ray head for the verl end-to-end tests (127.0.0.1, token auth), like tests/orchestrator's
`head` fixture, which pytest does not share across test directories."""

from __future__ import annotations

import tempfile
from pathlib import Path

import pytest


@pytest.fixture(scope="session")
def verl_head():
    from orchestrator.executor.local_head import ensure_head, stop_head, token_file

    wd = Path(tempfile.mkdtemp(prefix="wtvh", dir="/tmp"))
    addr = ensure_head(wd, num_cpus=4)
    yield addr, token_file(wd)
    stop_head(wd)
