"""A small campaign on the demo's recipe, evaluated on fixture data of a chosen suite and submitted through the
CLI to the suite's shared head: what the end-to-end analysis campaign tests share."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import yaml

REPO = Path(__file__).resolve().parents[2]
CAMPAIGN = str(Path(sys.executable).with_name("campaign"))


def fixture_campaign(tmp_path: Path, name: str, suite: str, *, n_items: int = 8,
                     evaluation: dict[str, Any] | None = None) -> tuple[Path, Path]:
    """(work dir, campaign file): campaigns/demo.yaml as baseline and gfpo x 2 seeds, 4 steps, on `suite`'s
    fixtures of `n_items` items per benchmark (written with their manifest), `evaluation` added to its block."""
    from evaluation.benchmark_data import write_manifest
    from training.synthetic import write_eval_fixtures

    wd = tmp_path / "wd"
    paths = write_eval_fixtures(wd / "data" / "eval", seed=42, n_items=n_items, suite=suite)
    write_manifest(wd / "data" / "eval", sorted(paths), kind="fixture")
    spec = yaml.safe_load((REPO / "campaigns" / "demo.yaml").read_text())
    spec.update(name=name, suite=suite, policies=["baseline", "gfpo"], seeds=[1, 2], steps=4, save_freq=4)
    spec["evaluation"] = {**spec["evaluation"], "fixture_items": n_items, **(evaluation or {})}
    camp = tmp_path / f"{name}.yaml"
    camp.write_text(yaml.safe_dump(spec, sort_keys=False))
    return wd, camp


def submit(camp: Path, wd: Path, head: tuple[str, Path]) -> subprocess.CompletedProcess:
    """`campaign submit CAMP --ray-address <head> --workdir WD --max-parallel 2`, with the head's token."""
    addr, tok = head
    env = {**os.environ, "RAY_AUTH_TOKEN_PATH": str(tok), "RAY_AUTH_MODE": "token"}
    return subprocess.run([CAMPAIGN, "submit", str(camp), "--ray-address", addr, "--workdir", str(wd),
                           "--max-parallel", "2"], env=env, capture_output=True, text=True, timeout=1500)
