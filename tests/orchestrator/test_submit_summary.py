"""`submit` and `submit --dry-run` say what changed (issue 27): the same human summary naming each changed run's
fields old → new, and `--json` with the count keys `--dry-run` printed before."""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from cli import app
from orchestrator.submit_summary import CATEGORIES, field_changes, summarise

REPO = Path(__file__).resolve().parents[2]


def test_field_changes_name_each_changed_field_with_old_and_new() -> None:
    old = {"run_key": "a", "seed": 1, "policy_cfg": {"params": {"fraction": 0.5, "k": 3}}, "steps": 8}
    new = {"run_key": "b", "seed": 1, "policy_cfg": {"params": {"fraction": 0.3, "k": 3}}, "steps": 8, "x": 1}
    assert field_changes(old, new) == [("policy_cfg.params.fraction", 0.5, 0.3), ("x", None, 1)]


def test_summary_lines_and_json_keep_the_count_keys() -> None:
    cur = [("c/m/topk/s1", "k1", {"policy_cfg": {"fraction": 0.5}}), ("c/m/topk/s2", "k2", {}),
           ("c/m/old/s1", "k9", {})]
    runs = [("c/m/topk/s1", "k1b", {"policy_cfg": {"fraction": 0.3}}), ("c/m/topk/s2", "k2", {}),
            ("c/m/topk/s3", "k3", {})]
    s = summarise("c", cur, runs)
    assert s.counts() == {"new": 1, "changed": 1, "unchanged": 1, "reevaluate": 0, "removed": 1}
    lines = s.lines(dry_run=True)
    assert lines[0] == ("c: 1 new, 1 changed (the old run is superseded), 1 unchanged, 1 no longer in the spec "
                        "(dry run: nothing written)")
    assert "  changed c/m/topk/s1: policy_cfg.fraction 0.5 → 0.3" in lines
    js = s.as_json()
    assert {k for k, _ in CATEGORIES} <= js.keys() and js["changes"]["c/m/topk/s1"][0]["old"] == 0.5


def test_dry_run_and_submit_print_the_same_summary(tmp_path: Path) -> None:
    """The demo campaign registered without driving (--no-wait), then resubmitted with other steps: --dry-run and
    submit name the changed fields the same way, and --json carries them with the count keys."""
    wd = tmp_path / "wd"
    r = CliRunner()
    data = r.invoke(app, ["data", "synthetic", "--out", str(wd / "data"), "--per-domain", "10", "--test-per-domain",
                          "4", "--eval-items", "4"])
    assert data.exit_code == 0, data.output
    demo = str(REPO / "campaigns" / "demo.yaml")
    base = ["submit", demo, "policies=[baseline,gfpo]", "seeds=[1]", "--workdir", str(wd)]
    first = r.invoke(app, [*base, "steps=4", "save_freq=4", "--no-wait"])
    assert first.exit_code == 0, first.output
    assert "demo: 2 new" in first.stdout
    dry = r.invoke(app, [*base, "steps=6", "save_freq=6", "--dry-run"])
    assert dry.exit_code == 0, dry.output
    assert "demo: 0 new, 2 changed (the old run is superseded)" in dry.stdout and "steps 4 → 6" in dry.stdout
    assert "save_freq 4 → 6" in dry.stdout
    js = json.loads(r.invoke(app, [*base, "steps=6", "save_freq=6", "--dry-run", "--json"]).stdout)
    assert js["changed"] == 2 and js["new"] == 0 and js["unchanged"] == 0 and js["dry_run"] is True
    assert {"field": "steps", "old": 4, "new": 6} in next(iter(js["changes"].values()))
    real = r.invoke(app, [*base, "steps=6", "save_freq=6", "--no-wait"])
    assert real.exit_code == 0, real.output
    strip = lambda t: [ln.replace(" (dry run: nothing written)", "") for ln in t.splitlines()]  # noqa: E731
    assert strip(real.stdout) == strip(dry.stdout)
    again = r.invoke(app, [*base, "steps=6", "save_freq=6", "--dry-run"])
    assert "demo: 0 new, 2 unchanged" in again.stdout
