"""Helpers every Windtunnel package may import (atomic writes, file hashes, YAML mappings, metrics JSONL).

Why a package of its own: `orchestrator → evaluation → policies` and `orchestrator → analysis` is the one
direction imports go (tests/test_code_rules.py), and these helpers are needed on every layer. This package
imports nothing of Windtunnel, so any layer may import it without an arrow running back up.
"""
