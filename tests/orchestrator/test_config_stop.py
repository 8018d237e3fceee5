"""A deterministic configuration error stops its configuration: the other seeds of the same configuration
are failed without being submitted (no Ray job, no attempt), other configurations go on."""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from orchestrator.engine.scheduler.retries import config_identity

CAMPAIGN = str(Path(sys.executable).with_name("campaign"))


def test_config_identity_ignores_only_the_seed():
    a = {"run_key": "k1", "run_id": "c/m/p/s1", "seed": 1, "policy": "p", "recipe_cfg": {"lr": 1}}
    assert config_identity(a) == config_identity({**a, "seed": 2, "run_key": "k2", "run_id": "c/m/p/s2"})
    assert config_identity(a) != config_identity({**a, "recipe_cfg": {"lr": 2}})


@pytest.mark.slow
def test_a_configuration_error_is_not_repeated_for_every_seed(tree: Path, tmp_path: Path, head) -> None:
    addr, tok = head
    (tree / "recipe" / "noop_config.yaml").write_text(yaml.safe_dump({"name": "noop_config", "fail": "config"}))
    spec = yaml.safe_load((tree / "small.yaml").read_text())
    spec.update(name="cfgstop", recipe="noop_config", policies=["baseline", "gfpo"], seeds=[1, 2, 3])
    camp = tree / "cfgstop.yaml"
    camp.write_text(yaml.safe_dump(spec))
    wd = tmp_path / "wd"
    env = {**os.environ, "RAY_AUTH_TOKEN_PATH": str(tok), "RAY_AUTH_MODE": "token"}
    p = subprocess.run([CAMPAIGN, "submit", str(camp), "--ray-address", addr, "--workdir", str(wd), "--max-parallel",
                        "1"],
                       env=env, capture_output=True, text=True, timeout=300)
    assert p.returncode == 1, p.stderr[-2000:]
    with sqlite3.connect(wd / "ledger.db") as c:
        runs = c.execute("select run_id, state, failure_class, reason from runs").fetchall()
        attempts = c.execute("select count(*) from attempts").fetchone()[0]
    assert {(s, k) for _, s, k, _ in runs} == {("failed", "config")} and len(runs) == 6
    assert attempts == 2  # one job per configuration (baseline, gfpo), not one per seed
    skipped = [r for r in runs if r[3].startswith("not started")]
    assert len(skipped) == 4 and all("same configuration" in r[3] for r in skipped)
