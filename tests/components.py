"""The real components the suite proves, and the record of which test started each (issue 56).

A test that starts a component (or a fixture, for the tests that request it) calls `started(name, evidence)` once the
component has answered; tests declare what they start with `@pytest.mark.component(name)` (the shared fixtures
declare it for the tests that request them: `FIXTURE_COMPONENTS`). At the session's end the controller prints every
component with the test that started it and fails the session when a test that declares one passed without it
being recorded (a real part replaced by a stand-in, or a skip that stopped being one)."""

from __future__ import annotations

import json
import os
from pathlib import Path

# name -> what it is; every name is declared by some test (tests/test_code_rules.py checks it)
COMPONENTS: dict[str, str] = {
    "ray-head": "a local Ray head (`ray start --head`, token auth) that campaigns are submitted to",
    "ray-cluster": "a multi-node Ray cluster (three `ray start` nodes, own ports and temp dirs, logical GPUs)",
    "verl-hf": "verl's own trainer (main_ppo + windtunnel_sync) with the plugin's hf rollout",
    "verl-vllm": "verl's own trainer with verl's vLLM rollout server (vLLM's CPU build)",
    "vllm-evaluator": "the evaluator's vLLM backend (lm-eval's vLLM model, vLLM's CPU build)",
    "lm-eval": "the lm-eval harness evaluating a locally built model",
    "slurm": "Slurm daemons (munged, slurmctld, a slurmd per node) and sbatch",
    "postgresql": "a PostgreSQL server (initdb + pg_ctl) holding the ledger",
    "mlflow": "an MLflow tracking store (SQLite) written and read back",
    "chromium": "headless Chromium rendering the HTML report",
    "pdflatex": "pdflatex compiling the LaTeX tables",
}
# the components only the vLLM environment (`make test-vllm`) can start
VLLM_ONLY = frozenset({"verl-vllm", "vllm-evaluator"})
# session fixtures that start a component: a test requesting one declares it
FIXTURE_COMPONENTS = {"head": "ray-head", "ray_cluster3": "ray-cluster", "pg_server": "postgresql"}
SHARED_ENV = "WT_SUITE_SHARED"  # the session's shared folder (tests/conftest.py sets it for every worker)
RECORD = "components.jsonl"


def started(name: str, evidence: str) -> None:
    """Record that `name` answered in the current test (its node id from pytest), with what showed it."""
    if name not in COMPONENTS:
        raise KeyError(f"unknown component {name!r}; declare it in tests/components.py COMPONENTS")
    root = os.environ.get(SHARED_ENV)
    if not root:
        return
    test = os.environ.get("PYTEST_CURRENT_TEST", "?").rsplit(" (", 1)[0]
    line = json.dumps({"component": name, "test": test, "evidence": evidence[:200]}) + "\n"
    with open(Path(root) / RECORD, "a") as fh:  # one small O_APPEND write: whole lines from any worker
        fh.write(line)


def recorded(root: Path) -> dict[str, list[dict]]:
    """component -> its records (first first)."""
    out: dict[str, list[dict]] = {}
    path = root / RECORD
    if path.exists():
        for raw in path.read_text().splitlines():
            rec = json.loads(raw)
            out.setdefault(rec["component"], []).append(rec)
    return out


def missing(declared: dict[str, set[str]], records: dict[str, list[dict]]) -> dict[str, set[str]]:
    """Components declared by tests that passed but never recorded: {component: those tests}."""
    return {c: tests for c, tests in declared.items() if tests and c not in records}
