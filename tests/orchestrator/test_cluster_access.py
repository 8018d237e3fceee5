"""Access to a cluster: a wrong token is an authentication error with the fix (exit 2), never "unreachable";
the work directory's databases and the local head's temp dir are private to the user."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from cli import app

CAMPAIGN = str(Path(sys.executable).with_name("campaign"))


def test_submit_writes_a_private_ledger(tree, tmp_path):
    wd = tmp_path / "w"
    r = CliRunner().invoke(app, ["submit", str(tree / "small.yaml"), "--workdir", str(wd), "--no-wait"])
    assert r.exit_code == 0, r.output
    assert stat.S_IMODE((wd / "ledger.db").stat().st_mode) == 0o600


@pytest.mark.slow
def test_a_wrong_token_is_an_authentication_error_with_the_fix(tree, tmp_path, head):
    address, _token = head
    bad = tmp_path / "bad_token"
    bad.write_text("0" * 64)
    os.chmod(bad, 0o600)
    env = {**os.environ, "RAY_AUTH_TOKEN_PATH": str(bad)}
    p = subprocess.run([CAMPAIGN, "submit", str(tree / "small.yaml"), "--workdir", str(tmp_path / "w"),
                        "--ray-address", address], capture_output=True, text=True, env=env, timeout=300)
    assert p.returncode == 2, (p.returncode, p.stderr[-2000:])
    assert "refused authentication" in p.stderr and "RAY_AUTH_TOKEN_PATH" in p.stderr
    assert "unreachable" not in p.stderr.split("Ray said:")[0]
