"""A non-editable install works: the wheel carries the code, the shipped config tree (`campaigns`) and the
evaluation fixtures, and `campaign plan` on the shipped demo campaign runs from another directory with
nothing from the checkout on the path.

The wheel is built with pip and unpacked into a temporary directory that is put first on `PYTHONPATH` of the
project's interpreter (its dependencies are already installed there); the test asserts the code really
came from the wheel, not from the checkout.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.slow
def test_wheel_carries_the_config_tree_and_plans_the_demo_from_elsewhere(tmp_path):
    wheels = tmp_path / "wheels"
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", str(REPO), "-w", str(wheels)],
                   check=True, capture_output=True, timeout=600)
    (whl,) = wheels.glob("windtunnel-*.whl")
    names = zipfile.ZipFile(whl).namelist()
    for must in ("campaigns/__init__.py", "campaigns/demo.yaml", "campaigns/paper/campaign.yaml",
                 "campaigns/policy/gfpo.yaml", "campaigns/suite/db12.yaml", "campaigns/recipe/cpu_tiny.yaml",
                 "evaluation/fixtures/db12/math500.parquet", "evaluation/fixtures/synth_dev/manifest.json"):
        assert must in names, must
    site = tmp_path / "site"
    zipfile.ZipFile(whl).extractall(site)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    code = ("import sys, orchestrator, campaigns; print(orchestrator.__file__); print(campaigns.config_root()); "
            "sys.argv = ['campaign', 'plan', 'demo', '--format', 'json']; "
            "from cli import main; main()")
    env = {**os.environ, "PYTHONPATH": str(site)}
    p = subprocess.run([sys.executable, "-c", code], cwd=elsewhere, env=env, capture_output=True, text=True,
                       timeout=300)
    assert p.returncode == 0, p.stderr[-2000:]
    first, second, rest = p.stdout.split("\n", 2)
    assert first.startswith(str(site)) and second.startswith(str(site))  # code and config tree from the wheel
    assert json.loads(rest)["total_runs"] == 8
