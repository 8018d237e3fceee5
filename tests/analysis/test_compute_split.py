"""Compute that means what it says (issue 50, Build 6): the base model's build, paid by whichever run found the
cache cold, is counted once for the campaign and left out of each run's training wall, so a policy is not made to
look cheaper than the reference whose seed-1 run built the model."""

from __future__ import annotations

import math

from analysis.intervention import build_note_html, compare_to_reference, run_summary


def _run(policy: str, mechanism: str, seed: int, wall: float, build: float) -> dict:
    return {"run_key": f"k{policy}{seed}", "run_id": f"c/m/{policy}/s{seed}", "campaign": "c", "model": "m",
            "regime": "", "policy": policy, "mechanism": mechanism, "seed": seed, "metrics_path": None,
            "compute": {"wall_s": wall, "gpu_s": 0.0, "rollout_tokens": 100, "update_tokens": 100.0,
                        "build_s": build, "build_cpu_s": build / 2, "train_wall_s": wall - build,
                        "cpu_s": wall, "train_cpu_s": wall - build / 2}}


def test_the_build_is_left_out_of_the_runs_training_wall_and_named_once() -> None:
    summary = run_summary([_run("baseline", "none", 1, 100.0, 80.0), _run("baseline", "none", 2, 20.0, 0.0),
                           _run("mopps", "curriculum", 1, 22.0, 0.0), _run("mopps", "curriculum", 2, 22.0, 0.0)])
    comp = compare_to_reference(summary).set_index("policy")
    assert math.isclose(comp.loc["mopps", "compute_wall_s_ratio"], 22.0 / 60.0)  # the whole wall: 2.7x "cheaper"
    assert math.isclose(comp.loc["mopps", "compute_train_wall_s_ratio"], 22.0 / 20.0)  # training alone
    note = build_note_html(summary)
    assert "80.0 s wall" in note and "c/m/baseline/s1" in note and "counted once" in note


def test_runs_without_the_split_compare_on_their_whole_wall() -> None:
    runs = [_run("baseline", "none", 1, 30.0, 0.0), _run("mopps", "curriculum", 1, 15.0, 0.0)]
    for r in runs:
        for k in ("build_s", "build_cpu_s", "train_wall_s", "cpu_s", "train_cpu_s"):
            r["compute"].pop(k)
    summary = run_summary(runs)
    comp = compare_to_reference(summary).set_index("policy")
    assert math.isclose(comp.loc["mopps", "compute_train_wall_s_ratio"], 0.5) and build_note_html(summary) == ""
    cached = run_summary([_run("baseline", "none", 1, 30.0, 0.004), _run("mopps", "curriculum", 1, 15.0, 0.003)])
    assert "taken from the cache" in build_note_html(cached) and "paid by" not in build_note_html(cached)
