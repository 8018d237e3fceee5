"""The shipped validation suite `synth_dev` and the paired intermediate value that drives pruning."""

from __future__ import annotations

import math
from pathlib import Path

import pandas as pd
import pytest

from evaluation.benchmark_data import read_benchmark, read_manifest, verify_checksum
from evaluation.fixtures.make_fixtures import fixture_frames
from evaluation.graders import grade
from evaluation.suite import load_suite
from orchestrator.engine.spec import load_campaign
from training import synth_dev as build
from training import synthetic
from tuning.intermediate import paired_intermediate
from tuning.request import TuneError, TuneRequest
from tuning.validation import _check_validation, shipped_data_dir

REPO = Path(__file__).resolve().parents[2]
DEV = REPO / "evaluation" / "fixtures" / "synth_dev"


# ---------------------------------------------------------------- paired intermediate value


def test_paired_intermediate_is_the_mean_over_seeds_of_trial_minus_reference_per_step():
    trial = pd.DataFrame({"seed": [1, 1, 1, 2, 2, 2], "step": [2, 4, 6, 2, 4, 6],
                          "V": [10.0, 20.0, 30.0, 14.0, 18.0, math.nan]})
    ref = pd.DataFrame({"seed": [1, 1, 1, 2, 2, 2], "step": [2, 4, 6, 2, 4, 6],
                        "V": [11.0, 15.0, 25.0, 10.0, 20.0, 22.0]})
    got = paired_intermediate(trial, ref, "V", [1, 2])
    # step 2: ((10-11) + (14-10)) / 2 = 1.5; step 4: ((20-15) + (18-20)) / 2 = 1.5; step 6: seed 2 is NaN -> absent
    assert got == {2: pytest.approx(1.5), 4: pytest.approx(1.5)}
    # one seed ahead of the other: a step is reported only once every seed has it
    ahead = trial[(trial.seed == 1) | (trial.step == 2)]
    assert paired_intermediate(ahead, ref, "V", [1, 2]) == {2: pytest.approx(1.5)}
    # a seed the reference lacks: nothing is comparable
    assert paired_intermediate(trial, ref[ref.seed == 1], "V", [1, 2]) == {}
    # a single seed: the plain difference; steps only the reference has are ignored
    assert paired_intermediate(trial[trial.seed == 1], ref, "V", [1]) == {2: -1.0, 4: 5.0, 6: 5.0}
    assert paired_intermediate(trial.iloc[:0], ref, "V", [1]) == {}


def test_paired_intermediate_uses_the_last_row_of_a_repeated_step():
    trial = pd.DataFrame({"seed": [1, 1], "step": [2, 2], "V": [0.0, 7.0]})
    ref = pd.DataFrame({"seed": [1], "step": [2], "V": [3.0]})
    assert paired_intermediate(trial, ref, "V", [1]) == {2: 4.0}


# ---------------------------------------------------------------- the shipped validation suite


def test_synth_dev_is_declared_like_db12_and_its_data_ships_and_verifies():
    suite = load_suite("synth_dev")
    assert suite.domains == ("math", "logic", "science")
    assert set(suite.benchmark_ids).isdisjoint(load_suite("db12").benchmark_ids)
    assert suite.aggregate_names[0] == "DEV-3"
    assert shipped_data_dir("synth_dev") == DEV and shipped_data_dir("db12_nothing_shipped") is None
    man = read_manifest(DEV)
    assert man["kind"] == "fixture" and set(man["benchmarks"]) == set(suite.benchmark_ids)
    for b in suite.benchmarks:
        df = read_benchmark(DEV, b.id, b.grader)
        verify_checksum(DEV, b.id, man)
        assert len(df) == b.n_items and df["prompt"].is_unique
        # every gold answer is right by the suite's own grader on the generator's reference response
        for prompt, ans in zip(df["prompt"], df["answer"], strict=True):
            resp = {"math": f"\\boxed{{{ans}}}", "logic": ans, "science": f"Answer: {ans}"}[b.domain]
            assert grade(b.grader, resp, ans, n_options=4 if b.domain == "science" else None).score == 1.0, prompt


def test_synth_dev_data_is_what_the_builder_writes():
    built = build.build_frames()
    for bid, df in built.items():
        shipped = pd.read_parquet(DEV / f"{bid}.parquet")
        pd.testing.assert_frame_equal(shipped.reset_index(drop=True), df.reset_index(drop=True), check_dtype=False)


def test_synth_dev_items_are_held_out_from_training_and_the_test_fixtures(tmp_path):
    dev = {bid: pd.read_parquet(DEV / f"{bid}.parquet") for bid in build.BENCHMARKS}
    ids = set().union(*(set(df["item_id"]) for df in dev.values()))
    # item ids: never a db12 fixture's (hand-written or the synthetic ones `campaign demo` writes)
    db12_ids = {i for df in fixture_frames().values() for i in df["item_id"]}
    synth_ids = set()
    for path in synthetic.write_eval_fixtures(tmp_path, n_items=16).values():
        synth_ids |= set(pd.read_parquet(path)["item_id"])
    assert ids.isdisjoint(db12_ids) and ids.isdisjoint(synth_ids)
    # prompts: logic and science items occur neither in the cpu_tiny training corpus nor in any db12 fixture
    train = build.training_prompts("cpu_tiny")
    fixtures = build.fixture_prompts()
    for bid in ("dev_logic", "dev_science"):
        prompts = set(dev[bid]["prompt"])
        assert prompts.isdisjoint(train), bid
        assert prompts.isdisjoint(fixtures), bid
    # math: level-0 addition has 25 prompts and training holds all of them; dev_math is exactly that space
    space = {f"What is {a} + {b}? {synthetic.MATH_INSTRUCTION}" for a in range(5) for b in range(5)}
    assert set(dev["dev_math"]["prompt"]) == space and space <= train


# ---------------------------------------------------------------- the tuner accepts it, refuses the test suite


def test_tune_demo_validates_on_synth_dev_with_the_shipped_data_and_refuses_db12(tmp_path):
    spec = load_campaign(REPO / "campaigns" / "tune_demo.yaml")
    req = TuneRequest(campaign=REPO / "campaigns" / "tune_demo.yaml", policies=["gfpo"], trials=1, workdir=tmp_path)
    vs, evaluation, agg = _check_validation(spec, req)
    assert (vs, agg) == ("synth_dev", "DEV-3") and evaluation == {"data_dir": str(DEV)}
    req.validation_suite = "db12"
    with pytest.raises(TuneError, match="is the final test suite"):
        _check_validation(spec, req)
    leaky = tmp_path / "leaky.yaml"
    leaky.write_text((REPO / "campaigns" / "suite" / "synth_dev.yaml").read_text().replace("name: synth_dev",
                                                                                           "name: leaky")
                     .replace("- {id: dev_math,", "- {id: gsm8k,"))
    req.validation_suite = str(leaky)
    with pytest.raises(TuneError, match=r"shares benchmark\(s\) \['gsm8k'\]"):
        _check_validation(spec, req)


# ---------------------------------------------------------------- the held-out signal, read while a run trains


def test_heldout_intermediate_values_come_from_the_metrics_rows_written_so_far(tmp_path):
    import json

    from orchestrator.engine.grid import expand
    from orchestrator.engine.stages import run_dir
    from tuning.intermediate import _Intermediate
    from tuning.runner import _Runner
    from tuning.validation import HELDOUT, HELDOUT_AGG, validation_run

    spec = load_campaign(REPO / "campaigns" / "tune_demo.yaml")
    req = TuneRequest(campaign=REPO / "campaigns" / "tune_demo.yaml", policies=["gfpo"], trials=1, workdir=tmp_path)
    runner = _Runner(req, spec, "c")  # nothing connects until a run is submitted
    runs = [validation_run(r, "c", HELDOUT, {}) for r in expand(spec, data_root=tmp_path) if r.policy.name == "gfpo"]
    rows = {1: [{"step": 0, "val/reward_mean": 0.25, "val/sampled_reward_mean": 0.5}, {"step": 1, "reward/mean": 0.1},
                {"step": 2, "val/reward_mean": 0.125}],
            2: [{"step": 0, "val/sampled_reward_mean": 0.75}]}
    for r in runs:
        path = run_dir(runner.session.workdir, r) / "train" / "metrics.jsonl"
        path.parent.mkdir(parents=True)
        # a torn last line (the job is mid-write) is skipped, not an error
        path.write_text("".join(json.dumps(x) + "\n" for x in rows[r.seed]) + '{"step": 4, "val/rew')
    got = _Intermediate(runner, runs, HELDOUT, HELDOUT_AGG, lambda _m: None).poll()
    got = {(int(a), int(b)): v for a, b, v in got[["seed", "step", HELDOUT_AGG]].itertuples(index=False)}
    # points (x100); the sampled reward when logged (GRPO's objective, less noisy), else the greedy one
    assert got == {(1, 0): 50.0, (1, 2): 12.5, (2, 0): 75.0}


def test_cli_refuses_a_negative_prune_warmup(tmp_path, campaign_cli):
    p = campaign_cli(["tune", str(REPO / "campaigns" / "tune_demo.yaml"), "--policy", "gfpo", "--trials", "1",
                      "--workdir", str(tmp_path), "--prune-warmup-steps", "-1"])
    assert p.returncode == 2 and "--prune-warmup-steps" in p.stderr and "Traceback" not in p.stderr
