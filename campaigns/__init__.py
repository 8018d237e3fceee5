"""Windtunnel's shipped config tree: models, recipes, policies, suites, the demo and the paper campaigns.

Installed as package data, so a non-editable install finds it too; `config_root()` is the one way the code
locates it (a user's own campaign directory is found from its own path and falls back to this tree).
"""

from __future__ import annotations

from pathlib import Path


def config_root() -> Path:
    """The directory holding `model/ recipe/ policy/ suite/ paper/` and `demo.yaml`."""
    return Path(__file__).resolve().parent
