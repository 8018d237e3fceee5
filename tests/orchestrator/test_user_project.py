"""The README's worked example, verbatim, from a project directory outside the repo.

The policy class, its YAML and the campaign YAML are read from the README's code blocks and written to a
temporary directory; the README's commands run as a user would type them (installed console script). The
campaign goes to a Ray head started elsewhere (the session's shared head, `--ray-address`), whose jobs can
import the plugin only through the `runtime_env` py_modules the orchestrator ships.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

REPO = Path(__file__).resolve().parents[2]
CAMPAIGN = str(Path(sys.executable).with_name("campaign"))


def readme_example() -> tuple[dict[str, str], list[str]]:
    """Files (path -> text) and command lines of the README's worked example."""
    text = (REPO / "README.md").read_text()
    section = text[text.index("### Add a new data policy"):text.index("### Smoke-test a policy")]
    files: dict[str, str] = {}
    commands: list[str] = []
    for lang, body in re.findall(r"```(\w*)\n(.*?)```", section, flags=re.S):
        first = body.splitlines()[0]
        if lang in ("python", "yaml") and first.startswith("# "):
            files[first[2:].strip()] = body
        elif lang == "bash":
            commands = [ln.split("  #")[0].strip() for ln in body.splitlines() if ln.strip()]
    return files, commands


def test_readme_example_is_complete():
    files, commands = readme_example()
    assert set(files) == {"my_policies.py", "policy/brevity.yaml", "my_campaign.yaml"}
    assert commands[0] == "cd my_project" and any(c.startswith("campaign submit") for c in commands)


@pytest.mark.slow
def test_readme_worked_example_runs_verbatim_outside_the_repo(tmp_path, head):
    address, token = head
    files, commands = readme_example()
    proj = tmp_path / "my_project"
    for rel, body in files.items():
        (proj / rel).parent.mkdir(parents=True, exist_ok=True)
        (proj / rel).write_text(body)
    env = {**os.environ, "RAY_AUTH_TOKEN_PATH": str(token)}
    env.pop("PYTHONPATH", None)
    outputs = []
    for line in commands[1:]:  # commands[0] is `cd my_project`: we run in proj
        argv = shlex.split(line)
        assert argv[0] == "campaign"
        argv[0] = CAMPAIGN
        if argv[1] == "submit":
            argv += ["--ray-address", address]  # a head started elsewhere, as a user's own cluster
        p = subprocess.run(argv, cwd=proj, env=env, capture_output=True, text=True, timeout=1500)
        assert p.returncode == 0, f"{line}\n{p.stdout[-3000:]}\n{p.stderr[-3000:]}"
        outputs.append(p.stdout)
    recs = pd.read_parquet(proj / "work" / "results" / "brevity_vs_baseline" / "records.parquet")
    assert sorted(recs["run_id"].unique()) == [f"brevity_vs_baseline/tiny_qwen2/{p}/s{s}"
                                               for p in ("baseline", "brevity") for s in (1, 2)]
    assert "brevity" in outputs[-1] and "baseline" in outputs[-1]  # the paired comparison was printed
    submitted = outputs[[c.startswith("campaign submit") for c in commands[1:]].index(True)]
    shown = submitted.split("records: ")[-1].split()[0]  # issue 58: submit ends with the records and what next
    assert (proj / shown).resolve() == (proj / "work/results/brevity_vs_baseline/records.parquet").resolve(), shown
    assert "next: campaign compare" in submitted, submitted[-2000:]
    # the job imported the researcher's class: brevity kept 40% of each group's rollouts at every step
    metrics = list((proj / "work" / "runs" / "brevity_vs_baseline").glob("*/train/metrics.jsonl"))
    kept = [json.loads(ln).get("policy/kept_frac") for m in metrics for ln in m.read_text().splitlines() if ln.strip()]
    kept = [k for k in kept if k is not None]
    assert kept and any(abs(k - 0.4) < 0.13 for k in kept)
    # the address is remembered: a later command needs no --ray-address and starts no local head
    p = subprocess.run([CAMPAIGN, "status", "brevity_vs_baseline", "--workdir", "work"], cwd=proj, env=env,
                       capture_output=True, text=True, timeout=120)
    assert p.returncode == 0 and not (proj / "work" / "ray_head.json").exists()
    assert json.loads((proj / "work" / "cluster.json").read_text())["address"] == address
