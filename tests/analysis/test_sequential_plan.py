"""What a campaign can decide under sequential seeds (analysis/sequential/plan.py) and `campaign plan --power`."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from analysis.sequential.plan import Comparisons, campaign_cost, recommend

REPO = Path(__file__).resolve().parents[2]
SMALL = Comparisons(cell=np.repeat(np.arange(2), 3), sd=np.full(6, 1.5), gh_policy=np.full(6, 2.0),
                    gh_ref=np.full(6, 5.0), planned_seeds=np.full(6, 3))


def test_cost_counts_each_reference_at_its_cells_longest_comparison():
    seeds = np.array([[3, 6, 9, 3, 3, 3]])
    runs, gpu = campaign_cost(SMALL, seeds)
    assert runs[0] == 27 + 9 + 3 and gpu[0] == 27 * 2.0 + (9 + 3) * 5.0


def test_recommends_the_first_design_reaching_the_target_and_checks_the_budget():
    """The recommended design reaches the power target and every smaller maximum tried does not; a budget below
    its expected GPU-hours is reported out of reach with the most powerful design that fits."""
    doc = recommend(SMALL, power=0.8, effect=3.0, n_sims=150, search=(6, 9, 12, 15))
    h = doc["recommended"]
    assert doc["reachable"] and h["power"] >= 0.8 and all(t["power"] < 0.8 for t in doc["tried"][:-1])
    assert h["gpu_h"] <= h["gpu_h_p95"] and 0 < h["decided"] <= 1 and doc["within_budget"]
    tight = recommend(SMALL, power=0.8, effect=3.0, n_sims=150, search=(6, 9, 12, 15), budget=h["gpu_h"] - 1)
    assert not tight["within_budget"]
    b = tight["best_in_budget"]
    assert b is None or (b["gpu_h"] < h["gpu_h"] and b["power"] < 0.8)
    far = recommend(SMALL, power=0.8, effect=0.3, n_sims=100, search=(6, 9))
    assert not far["reachable"] and far["recommended"] is None and not far["within_budget"]


def test_campaign_plan_power_recommends_a_design_and_rejects_half_a_target():
    from typer.testing import CliRunner

    from cli import app

    demo = str(REPO / "campaigns" / "demo.yaml")
    res = CliRunner().invoke(app, ["plan", demo, "--sd", "1.5", "--power", "0.8", "--effect", "3", "--sims", "100",
                                   "--json"])
    assert res.exit_code == 0, res.output
    sp = json.loads(res.stdout)["sequential_plan"]
    assert sp["recommended"]["power"] >= 0.8 and sp["familywise"] == "holm" and sp["family_size"] >= 1
    text = CliRunner().invoke(app, ["plan", demo, "--sd", "1.5", "--power", "0.8", "--effect", "3", "--sims", "100"])
    assert text.exit_code == 0 and "recommended: seeds: {design: sequential" in text.output
    for bad in (["--sd", "1.5", "--power", "0.8"], ["--power", "0.8", "--effect", "2"],
                ["--sd", "1.5", "--power", "1.5", "--effect", "2"], ["--sd", "1.5", "--gpu-hours", "10"]):
        r = CliRunner().invoke(app, ["plan", demo, *bad])
        assert r.exit_code == 2, (bad, r.output)
