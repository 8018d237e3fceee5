"""A corpus of malformed inputs — campaign specs, overrides, YAML files, policy YAMLs, records files and CLI
options — each of which must be refused with exit 2, a message naming the file or option, no traceback,
and nothing written (the work directory and any --out path stay absent).

`test_the_corpus_holds_at_least_260_inputs` counts the inputs the tests below run (one per list entry; the
generated hypothesis cases are not counted), so the size stated in the issue notes is the size tested.

The commands run in-process through Typer's CliRunner (the same code path as the console script, minus the
process start), so the whole corpus takes seconds.
"""

from __future__ import annotations

import re

from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from cli import app
from tests.released import RELEASED

REPO = Path(__file__).resolve().parents[2]
DEMO = str(REPO / "campaigns" / "demo.yaml")
runner = CliRunner()


def _refused(args: list[str], *, nothing_at: list[Path] = (), names: str | None = None) -> str:
    """Exit 2, an error line, no traceback, nothing written at `nothing_at`; `names`: text the message must hold
    (the file or option at fault)."""
    res = runner.invoke(app, args)
    text = res.output
    assert res.exit_code == 2, f"{args}: exit {res.exit_code}\n{text[-2000:]}\n{res.exception!r}"
    assert "Traceback" not in text and "error" in text.lower(), text[-2000:]
    for p in nothing_at:
        assert not Path(p).exists(), f"{args} wrote {p}"
    if names is not None:
        # Click's error box wraps a long path across its lines ("…/a_f │\n│ ile.txt"): read it joined as well
        joined = re.sub(r" *│ *\n *│ *", "", text)
        assert names in text or names in joined, f"{args}: the message does not name {names!r}:\n{text[-1000:]}"
    return text


# --- 1. overrides of a valid campaign (plan and submit: nothing written) ----------------------------

BAD_OVERRIDES = [
    "seeds=[-1]", "seeds=[2147483648000]", "seeds=[true]", "seeds=[1.5]", "seeds=[x]", "seeds=[1,1]", "seeds=[]",
    "seeds=7", "seeds={}", "steps=0", "steps=-5", "steps=x", "steps=1.5", "save_freq=0", "save_freq=-1",
    "name=../../escape", "name=a/b", "name=''", "name=.hidden", "suite=no_such_suite", "suite=../db12",
    "backend=gpu", "backend=1", "models=[]", "models=[no_such_model]", "models=[tiny_qwen2,tiny_qwen2]",
    "models=[../model/tiny_qwen2]", "policies=[]", "policies=[no_such_policy]", "policies=[baseline,baseline]",
    "policies=[../policy/gfpo]", "policies=[baseline,gfpo/../gfpo]", "recipe=no_such_recipe",
    "recipe=../recipe/cpu_tiny",
    "recipe=''", "compute.cpus_per_run=0", "compute.cpus_per_run=-1", "compute.cpus_per_run=1000",
    "compute.nodes=0", "compute.gpus_per_node=-1", "compute.hours_per_run=0", "compute.gpus_per_run=-2",
    "+compute.colour=red", "retries.max_attempts=0", "retries.backoff_s=-1", "+evaluation.limit=-5",
    "+evaluation.limit=0", "+evaluation.limit=x", "evaluation.max_gen_toks=0", "evaluation.backend=tpu",
    "evaluation.fixture_items=0", "+evaluation.gates.min_parse_rate=2", "+evaluation.gates.bogus=1",
    "+evaluation.colour=red", "+evaluation.all_checkpoints=maybe", "data.corpus=imagenet", "+data.colour=1",
    "baselines.select=no_such_policy_xyz", "+baselines.sort=baseline", "+colour=red", "seed=[1,2]", "polices=[a]",
    "+sub_campaigns.x.groups=[]", "+seed_design={}",
    # issue 25: steps a whole number in [1, 100000]; retries.backoff_max_s >= backoff_s, both finite
    "steps=1e9", "steps=1000000000000000000000000000000", "steps=100001", "steps=300.0", "steps=true",
    "save_freq=1e9", "save_freq=1000000000000000000000000000000", "retries.backoff_max_s=0.5",
    "retries.backoff_s=6", "retries.backoff_s=inf", "retries.backoff_max_s=nan", "retries.backoff_max_s=inf",
    # every numeric spec field: finite, integers not coerced from floats, stated caps (orchestrator/engine/spec.py)
    "compute.hours_per_run=inf", "compute.hours_per_run=1e6", "+compute.eval_gpu_hours_per_checkpoint=inf",
    "compute.nodes=1e9", "compute.cpus_per_run=1.0", "data.seed=-1", "data.seed=4294967296",
    "retries.max_attempts=1e9", "retries.max_attempts=1000",
    # issue 59: the vLLM evaluator's options typed, with ranges
    "+evaluation.vllm.tensor_parallel_size=0", "+evaluation.vllm.gpu_memory_utilization=true",
    "+evaluation.vllm.gpu_memory_utilization=1.5",
]


@pytest.mark.parametrize("override", BAD_OVERRIDES)
def test_bad_override_is_refused_by_plan(override, tmp_path):
    _refused(["plan", DEMO, override], nothing_at=[tmp_path / "w"], names="demo.yaml")


@pytest.mark.parametrize("override", BAD_OVERRIDES[::4])
def test_bad_override_is_refused_by_submit_and_writes_nothing(override, tmp_path):
    wd = tmp_path / "w"
    _refused(["submit", DEMO, override, "--workdir", str(wd)], nothing_at=[wd])


# --- 2. malformed campaign files ------------------------------------------------------------------------

BAD_FILES = {
    "empty": "", "list": "- a\n- b\n", "scalar": "just text\n", "syntax": "name: [unclosed\n",
    "tabs": "name:\tdemo\n\tseeds: [1]\n", "dup_key_types": "name: demo\nseeds: 'one'\n",
    "no_models": "name: x\npolicies: [baseline]\nrecipe: cpu_tiny\n",
    "no_policies": "name: x\nmodels: [tiny_qwen2]\nrecipe: cpu_tiny\n",
    "no_recipe": "name: x\nmodels: [tiny_qwen2]\npolicies: [baseline]\nbackend: local\n",
    "unknown_key": "name: x\nmodels: [tiny_qwen2]\npolicies: [baseline]\nrecipe: cpu_tiny\nmodles: [a]\n",
    "bad_group": "name: x\nsub_campaigns: {a: {groups: [{campaign: main}]}}\n",
    "bad_group_label": "name: x\nrecipe: cpu_tiny\nsub_campaigns: {a: {groups: [{campaign: ../x, models: [tiny_qwen2], "
                       "policies: [baseline]}]}}\n",
    "expected_mismatch": "name: x\nmodels: [tiny_qwen2]\npolicies: [baseline]\nrecipe: cpu_tiny\nexpected_runs: "
                         "99\nbackend: local\n",
    "binary": "\x00\x01\x02name: x\n",
    "seeds_design_bad": "name: x\nmodels: [tiny_qwen2]\npolicies: [baseline]\nrecipe: cpu_tiny\nseeds: {design: "
                        "magic}\n",
    # issue 25
    "steps_1e9": "name: x\nmodels: [tiny_qwen2]\npolicies: [baseline]\nrecipe: cpu_tiny\nsteps: 1.0e+9\n",
    "steps_10_pow_30": "name: x\nmodels: [tiny_qwen2]\npolicies: [baseline]\nrecipe: cpu_tiny\n"
                       "steps: 1000000000000000000000000000000\n",
    "steps_text": "name: x\nmodels: [tiny_qwen2]\npolicies: [baseline]\nrecipe: cpu_tiny\nsteps: '300'\n",
    "steps_1e9_bare": "name: x\nmodels: [tiny_qwen2]\npolicies: [baseline]\nrecipe: cpu_tiny\nsteps: 1e9\n",
    "steps_pow_expr": "name: x\nmodels: [tiny_qwen2]\npolicies: [baseline]\nrecipe: cpu_tiny\nsteps: 10**30\n",
    "backoff_order": "name: x\nmodels: [tiny_qwen2]\npolicies: [baseline]\nrecipe: cpu_tiny\n"
                     "retries: {backoff_s: 60, backoff_max_s: 5}\n",
    "group_steps": "name: x\nrecipe: cpu_tiny\nsub_campaigns: {a: {groups: [{campaign: main, models: [tiny_qwen2], "
                   "policies: [baseline], steps: 1.0e+12}]}}\n",
    # issue 34: a rollout-token budget is a whole number in [1, 1e15], the only key of its block
    **{f"budget_{k}": f"name: x\nmodels: [tiny_qwen2]\npolicies: [baseline]\nrecipe: cpu_tiny\nbackend: local\n"
                      f"budget: {v}\n"
       for k, v in {"zero": "{rollout_tokens: 0}", "negative": "{rollout_tokens: -5}", "float": "{rollout_tokens: 1.5}",
                    "text": "{rollout_tokens: many}", "huge": "{rollout_tokens: 1.0e+30}", "empty": "{}",
                    "scalar": "1000", "unknown_key": "{rollout_tokens: 10, steps: 3}"}.items()},
    # issue 51: the memorization probe's protocol
    **{f"memorization_{k}": f"name: x\nmodels: [tiny_qwen2]\npolicies: [baseline]\nrecipe: cpu_tiny\nbackend: local\n"
                            f"evaluation: {{memorization: {v}}}\n"
       for k, v in {"protocol": "{protocol: rouge}", "string": "paper", "extra_key": "{protocol: paper, prefix: 0.5}",
                    "number": "1"}.items()},
}


@pytest.mark.parametrize("case", sorted(BAD_FILES))
def test_malformed_campaign_file_is_refused(case, tmp_path):
    f = tmp_path / "campaigns" / f"{case}.yaml"
    f.parent.mkdir()
    (tmp_path / "campaigns" / "policy").mkdir()
    f.write_text(BAD_FILES[case])
    text = _refused(["plan", str(f)])
    assert f"{case}.yaml" in text


def test_missing_campaign_file_is_refused(tmp_path):
    _refused(["plan", str(tmp_path / "nope.yaml")])
    _refused(["submit", str(tmp_path / "nope.yaml"), "--workdir", str(tmp_path / "w")], nothing_at=[tmp_path / "w"])


# --- 3. malformed policy YAMLs --------------------------------------------------------------------------

GOOD_SELECT = {"name": "p", "mechanism": "select", "scorer": {"name": "advantage_magnitude"},
               "actuator": {"name": "topk_fraction", "params": {"fraction": 0.5}}}
BAD_POLICIES = [
    {**GOOD_SELECT, "mechanism": "magic"}, {**GOOD_SELECT, "colour": 1}, {**GOOD_SELECT, "scorer": {"name": "nope"}},
    {**GOOD_SELECT, "actuator": {"name": "nope"}},
    {**GOOD_SELECT, "actuator": {"name": "topk_fraction", "params": {"fraction": 7}}},
    {**GOOD_SELECT, "actuator": {"name": "topk_fraction", "params": {"fraction": -0.1}}},
    {**GOOD_SELECT, "actuator": {"name": "topk_fraction", "params": {"fraction": "half"}}},
    {**GOOD_SELECT, "actuator": {"name": "topk_fraction", "params": {"fraction": 0.5, "bogus": 1}}},
    {**GOOD_SELECT, "actuator": {"name": "topk_fraction", "params": {"fraction": 0.5, "scope": "galaxy"}}},
    {**GOOD_SELECT, "plugins": ["no_such_module_abc"]}, {**GOOD_SELECT, "plugins": 7}, {**GOOD_SELECT, "plugins": [""]},
    {**GOOD_SELECT, "warmup_step": -1}, {**GOOD_SELECT, "warmup_step": "x"}, {**GOOD_SELECT, "warmup_step": True},
    {**GOOD_SELECT, "loss_norm": "some"}, {**GOOD_SELECT, "recompute_advantages": "yes"},
    {**GOOD_SELECT, "control": {"name": "nope"}}, {**GOOD_SELECT, "control": 3},
    {**GOOD_SELECT, "search_space": {"actuator.fraction": {"low": 2, "high": 1}}},
    {**GOOD_SELECT, "search_space": {"actuator.nope": {"low": 0, "high": 1}}},
    {"name": "p", "mechanism": "select", "actuator": {"name": "topk_fraction"}},
    {"name": "p", "mechanism": "select", "scorer": {"name": "advantage_magnitude"}},
    {"name": "p", "mechanism": "mix", "actuator": {"name": "static"}},
    {"name": "p", "mechanism": "mix", "actuator": {"name": "static"}, "domains": ["math", "math"]},
    {"name": "p", "mechanism": "mix", "domains": ["a", "b", "c"],
     "actuator": {"name": "reward_gap", "params": {"floor": 0.5}}},
    {"name": "p", "mechanism": "mix", "domains": ["a", "b"], "scorer": {"name": "advantage_magnitude"},
     "actuator": {"name": "static"}},
    {"name": "p", "mechanism": "reweight", "scorer": {"name": "advantage_magnitude"},
     "actuator": {"name": "topk_fraction"}},
    {"name": "p", "mechanism": "none", "scorer": {"name": "advantage_magnitude"}},
    {"name": "p", "mechanism": "select", "scorer": "advantage_magnitude", "actuator": {"name": "topk_fraction"}},
    {"mechanism": None}, [1, 2, 3], "just a string",
    # issue 25: a policy's name is text
    {**GOOD_SELECT, "name": [1, 2]}, {**GOOD_SELECT, "name": 7}, {**GOOD_SELECT, "name": {"a": 1}},
    {**GOOD_SELECT, "name": True}, {**GOOD_SELECT, "name": 1.5},
    # issue 34: curricula at the integration level (the rules' own parameters are tested with the rules)
    {"name": "p", "mechanism": "curriculum"},
    {"name": "p", "mechanism": "curriculum", "curriculum": {"name": "no_such_rule"}},
    {"name": "p", "mechanism": "curriculum", "curriculum": "greso"},
    {"name": "p", "mechanism": "curriculum", "curriculum": {"name": "uniform", "params": {"bogus": 1}}},
    {"name": "p", "mechanism": "curriculum", "curriculum": {"name": "uniform"},
     "scorer": {"name": "advantage_magnitude"}},
    {"name": "p", "mechanism": "none", "curriculum": {"name": "uniform"}},
    {"name": "p", "mechanism": "mix", "domains": ["a", "b"], "actuator": {"name": "static"},
     "curriculum": {"name": "hardest_k"}},
]


@pytest.mark.parametrize("i", range(len(BAD_POLICIES)))
def test_malformed_policy_is_refused(i, tmp_path):
    f = tmp_path / "policy" / f"bad{i}.yaml"
    f.parent.mkdir()
    f.write_text(yaml.safe_dump(BAD_POLICIES[i]))
    text = _refused(["policies", "validate", str(f), "--rollout-n", "8"])
    assert f"bad{i}.yaml" in text


@pytest.mark.parametrize("text", ["{unclosed", "", "\t- x", "a: b: c"])
def test_unparseable_policy_yaml_is_refused(text, tmp_path):
    f = tmp_path / "policy" / "broken.yaml"
    f.parent.mkdir()
    f.write_text(text)
    assert "broken.yaml" in _refused(["policies", "validate", str(f)])


# --- 4. malformed records -------------------------------------------------------------------------------


def _records_variants(tmp_path: Path) -> dict[str, Path]:
    df = pd.read_csv(RELEASED)
    out: dict[str, Path] = {}

    def put(name: str, frame: pd.DataFrame | None = None, text: str | None = None) -> None:
        p = tmp_path / f"{name}.csv"
        if text is not None:
            p.write_text(text)
        else:
            frame.to_csv(p, index=False)
        out[name] = p

    put("empty", text="")
    put("header_only", text=",".join(df.columns) + "\n")
    put("truncated", text=RELEASED.read_text()[:700])
    put("wrong_header", df.rename(columns={"math500": "math_500"}))
    put("missing_column", df.drop(columns=["seed"]))
    put("text_score", df.assign(math500=df["math500"].astype(object).where(df.index != 3, "high")))
    put("score_above_100", df.assign(gsm8k=df["gsm8k"].where(df.index != 5, 250.0)))
    put("negative_score", df.assign(gsm8k=df["gsm8k"].where(df.index != 5, -3.0)))
    put("duplicate_rows", pd.concat([df, df.iloc[[0]]]))
    put("text_seed", df.assign(seed=df["seed"].astype(object).where(df.index != 2, "one")))
    put("fractional_seed", df.assign(seed=df["seed"].astype(float).where(df.index != 2, 1.5)))
    put("negative_steps", df.assign(steps=df["steps"].where(df.index != 2, -300)))
    put("binary", text="\x00\x01\x02\x03")
    put("blank_seed", df.assign(seed=df["seed"].astype(object).where(df.index != 4, "")))
    put("blank_model", df.assign(model=df["model"].where(df.index != 4, "")))
    assert list(out) == RECORD_VARIANTS
    return out


RECORD_VARIANTS = ["empty", "header_only", "truncated", "wrong_header", "missing_column", "text_score",
                   "score_above_100", "negative_score", "duplicate_rows", "text_seed", "fractional_seed",
                   "negative_steps", "binary", "blank_seed", "blank_model"]


def test_malformed_records_are_refused_by_every_analysis_command(tmp_path):
    variants = _records_variants(tmp_path)
    for name, path in variants.items():
        for cmd in (["compare", str(path)], ["tables", str(path), "--table", "main_7b"]):
            text = _refused(cmd)
            assert f"{name}.csv" in text, (name, cmd, text[-500:])


def test_missing_records_file_is_refused(tmp_path):
    for cmd in ("compare", "tables", "sensitivity"):
        _refused([cmd, str(tmp_path / "none.csv")])


# --- 5. CLI options -----------------------------------------------------------------------------------


def _cli_cases(tmp_path: Path, tree: Path) -> list[tuple[list[str], str]]:
    """(argv, what the message must name) of every malformed CLI option."""
    wd = tmp_path / "w"
    noop = str(tree / "small.yaml")  # passes preflight (no evaluation data needed): the option itself is refused
    rel = str(RELEASED)
    out = str(tmp_path / "out.md")
    cases = [
        (["plan", DEMO, "--gpus", "0"], "--gpus"), (["plan", DEMO, "--format", "yaml"], "--format"),
        (["plan", DEMO, "--data-dir", str(tmp_path / "x")], str(tmp_path / "x")),
        (["submit", noop, "--workdir", str(wd), "--max-parallel", "0"], "--max-parallel"),
        (["submit", noop, "--workdir", str(wd), "--ledger-url", "mongodb://x/y"], "mongodb://x/y"),
        (["submit", noop, "--workdir", str(wd), "--ledger-url", f"sqlite:///{tmp_path}/no/such/dir/ledger.db"],
         "no/such/dir"),
        (["submit", DEMO, "--workdir", str(wd), "--data-dir", str(tmp_path / "no_data")], "no_data"),
        (["compare", rel, "--resamples", str(10**12)], "--resamples"),
        (["tables", rel, "--out", str(tmp_path / "a_file.txt")], "a_file.txt"),
        (["report", rel, "--out", str(tmp_path)], "--out"),
        (["report", rel, "--out", rel], "--out"),
        (["status", "--workdir", str(wd)], "--workdir"), (["resume", "demo", "--workdir", str(wd)], "'demo'"),
        (["logs", "demo", "x", "--workdir", str(wd)], "'demo'"),
        (["cancel", "demo", "--workdir", str(wd)], "'demo'"), (["retry", "demo", "--workdir", str(wd)], "'demo'"),
        (["watch", "demo", "--workdir", str(wd)], "'demo'"),
        (["status", "demo", "--workdir", str(wd)], "'demo'"),
        (["resume", DEMO, "--workdir", str(wd)], "'demo'"), (["cancel", DEMO, "--workdir", str(wd)], "'demo'"),
        (["compare", rel, "--resamples", "5"], "--resamples"),
        (["compare", rel, "--aggregate", "DB-99"], "--aggregate"),
        (["tables", rel, "--table", "no_such_table"], "--table"), (["tables", rel, "--format", "docx"], "--format"),
        (["policies", "validate", str(REPO / "campaigns" / "policy" / "gfpo.yaml"), "--rollout-n", "0"], "--rollout-n"),
        (["policies", "show", "no_such_policy"], "no_such_policy"),
        (["policies", "validate", str(tmp_path / "no_such_policy.yaml")], "no_such_policy.yaml"),
        (["data", "synthetic", "--out", str(tmp_path / "d"), "--test-per-domain", "0"], "--test-per-domain"),
        (["data", "synthetic", "--out", str(tmp_path / "d"), "--heldout", "sometimes"], "--heldout"),
        # issue 59: bounded counts, the suite checked before anything is written
        (["data", "synthetic", "--out", str(tmp_path / "d"), "--per-domain", "100000000000"], "--per-domain"),
        (["data", "synthetic", "--out", str(tmp_path / "d"), "--eval-items", "1000001"], "--eval-items"),
        (["data", "synthetic", "--out", str(tmp_path / "d"), "--suite", "nosuch"], "nosuch"),
        (["data", "synthetic", "--out", str(tmp_path / "d"), "--seed", "-1"], "--seed"),
        (["audit", "graders", "--n", "100000000000000000000000"], "--n"),
        # checked before the hub is contacted (it retried for 24 s before naming the value)
        (["data", "train", "--out", str(tmp_path / "d"), "--per-domain", "-1"], "--per-domain"),
        (["data", "train", "--out", str(tmp_path / "d"), "--test-per-domain", "0"], "--test-per-domain"),
        (["data", "train", "--out", str(tmp_path / "d"), "--seed", "-1"], "--seed"),
        *[(["compare", rel, "--at", "tokens-to-target", "--target", t], "--target") for t in ("101", "0", "-5", "nan")],
        (["calibrate", str(tmp_path / "ckpt"), "--n", "100001"], "--n"),
        # issue 59, a walk of hostile values through the newest commands: a name no filesystem takes (was an
        # OSError traceback, exit 1), a --workdir the graders audit ignored, a campaign name outside the work dir
        (["compare", rel, "--out", str(tmp_path / ("x" * 300))], "longer than"),
        (["audit", "memorization", "--model", "m" * 300, "--out", str(tmp_path / "d")], "longer than"),
        (["audit", "graders", "--n", "1", "--workdir", str(wd)], "--workdir"),
        (["audit", "graders", "--n", "1", "--campaign", "../../x", "--workdir", str(wd)], "--campaign"),
        (["data", "difficulty", "--model", "", "--cache-dir", str(tmp_path / "d")], "--model"),
        (["export-tasks", str(tmp_path / "t"), "--data-dir", str(tmp_path / "none")], str(tmp_path / "none")),
    ]
    # issue 25: every numeric option of the analysis commands and `plan` has a stated range
    # (orchestrator/engine/ranges.py)
    for cmd in (["compare", rel], ["verdicts", rel], ["tables", rel], ["report", rel, "--out", out]):
        for v in ("inf", "-inf", "nan", "0", "-1", "1e309"):
            cases.append(([*cmd, "--margin", v], "--margin"))
    for v in ("inf", "nan", "0", "-1", "-inf"):
        cases.append((["compare", rel, "--effect", v], "--effect"))
    for v in ("nan", "0", "1", "1.5", "-0.1", "inf"):
        cases.append((["verdicts", rel, "--alpha", v], "--alpha"))
    for v in ("-1", str(2**32)):
        cases.append((["compare", rel, "--seed", v], "--seed"))
    for opt in ("--sd", "--margin"):
        for v in ("nan", "inf", "0", "-2"):
            cases.append((["plan", DEMO, opt, v], opt))
    gfpo = str(REPO / "campaigns" / "policy" / "gfpo.yaml")
    train = ["train", "--policy", gfpo, "--out", str(tmp_path / "d")]
    cases += [
        ([*train, "--seed", "-1"], "--seed"), ([*train, "--seed", str(2**32)], "--seed"),
        ([*train, "--seed", "1", "--steps", "0"], "--steps"),
        ([*train, "--seed", "1", "--steps", "1000000"], "--steps"),
        ([*train, "--seed", "1", "--save-freq", "0"], "--save-freq"),
        (["eval", str(tmp_path / "ckpt"), "--seed", "-1"], "--seed"),
        (["eval", str(tmp_path / "ckpt"), "--step", "-3"], "--step"),
        (["eval", str(tmp_path / "ckpt"), "--max-gen-toks", "0"], "--max-gen-toks"),
        (["eval", str(tmp_path / "ckpt"), "--out", str(tmp_path / "no" / "ev.txt")], "ev.txt"),
        (["tune", DEMO, "--workdir", str(wd), "--trials", "0"], "--trials"),
        (["tune", DEMO, "--workdir", str(wd), "--sampler-seed", "-1"], "--sampler-seed"),
        (["tune", DEMO, "--workdir", str(wd), "--max-parallel", "0"], "--max-parallel"),
        (["tune", DEMO, "--workdir", str(wd), "--ray-address", "not a url"], "--ray-address"),
        (["tune", DEMO, "--workdir", str(wd), "--seeds", "1,x"], "--seeds"),
        (["seeds-look", "demo", "--look", "0", "--workdir", str(wd), "--records", rel, "--margin", "nan"], "--margin"),
        (["seeds-look", "demo", "--look", "0", "--workdir", str(wd), "--records", rel, "--futility-cp", "2"],
         "--futility-cp"),
        (["looks", "demo", "--workdir", str(wd)], "'demo'"),
    ]
    return cases


def test_bad_cli_options_are_refused(tmp_path, tree):
    (tmp_path / "a_file.txt").write_text("keep me")
    for args, names in _cli_cases(tmp_path, tree):
        _refused(args, names=names,
                 nothing_at=[tmp_path / "w", tmp_path / "d", tmp_path / "t", tmp_path / "no", tmp_path / "out.md"])
    assert (tmp_path / "a_file.txt").read_text() == "keep me"


def test_json_output_never_holds_nan_or_infinity(tmp_path):
    """`--json` is parsed by strict JSON readers: a missing number is null (README "JSON output")."""
    import json

    for args in (["compare", str(RELEASED), "--json", "--resamples", "200"],
                 ["verdicts", str(RELEASED), "--json", "--resamples", "200"]):
        res = runner.invoke(app, args)
        assert res.exit_code == 0, res.output[-500:]
        text = res.stdout
        bare: list[str] = []
        json.loads(text, parse_constant=bare.append)  # called for NaN, Infinity, -Infinity only
        assert bare == [] and "NaN" not in text and "Infinity" not in text, (args, bare)


# --- 7. issue 25: --ray-address, the suite under the noop backend ---------------------------------------

BAD_RAY_ADDRESSES = ["not a url", "", "ray://127.0.0.1:10001", "http://127.0.0.1:99999", "127.0.0.1:abc",
                     "http://u:p@127.0.0.1:8265", "ftp://127.0.0.1:8265", "http://127.0.0.1:8265/jobs", "http://",
                     "127.0.0.1:0", "-host:8265", "http://a b:8265"]


@pytest.mark.parametrize("address", BAD_RAY_ADDRESSES)
def test_malformed_ray_address_is_refused_before_anything_is_written(address, tmp_path, tree):
    """Was exit 3 ("unreachable") after writing ledger.db with 8 runs and cluster.json."""
    wd = tmp_path / "w"
    _refused(["submit", str(tree / "small.yaml"), "--workdir", str(wd), "--ray-address", address, "--no-wait"],
             nothing_at=[wd], names="--ray-address")


def test_malformed_ray_address_is_refused_by_commands_on_a_submitted_campaign(tmp_path):
    from orchestrator.campaign import open_session
    from orchestrator.cluster.ray_address import RayAddressError

    with pytest.raises(RayAddressError, match="--ray-address"):
        open_session(tmp_path / "w", ray_address="not a url", remember=True)
    assert not (tmp_path / "w").exists()


NOOP_SUITES = ["nosuch", "../db12", "db12/../../x"]


@pytest.mark.parametrize("suite", NOOP_SUITES)
def test_unknown_suite_is_refused_under_the_noop_backend(suite, tmp_path, tree):
    """The noop evaluate stage loads the suite too: preflight checks it for every backend."""
    spec = yaml.safe_load((tree / "small.yaml").read_text())
    f = tree / "small_bad_suite.yaml"
    f.write_text(yaml.safe_dump({**spec, "suite": suite}))
    wd = tmp_path / "w"
    _refused(["plan", str(f)], names="small_bad_suite.yaml")
    _refused(["submit", str(f), "--workdir", str(wd), "--no-wait"], nothing_at=[wd], names="small_bad_suite.yaml")


# --- 6. generated: any garbage as a seed list or a campaign name -------------------------------------------

GARBAGE = st.one_of(st.integers(max_value=-1), st.integers(min_value=2**32, max_value=2**80), st.booleans(),
                    st.floats(allow_nan=True).filter(lambda x: not float(x).is_integer() if x == x else True),
                    st.text(alphabet="abc!@#", min_size=1, max_size=4))


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(bad=GARBAGE)
def test_generated_bad_seed_is_refused(bad):
    from orchestrator.engine.spec_fields import check_seeds

    with pytest.raises(ValueError):
        check_seeds([1, bad])


@settings(max_examples=40, deadline=None)
@given(name=st.text(min_size=0, max_size=12).filter(
    lambda s: not (s and s[0].isalnum() and s.isascii() and all(c.isalnum() or c in "_.+-" for c in s)
                   and ".." not in s)))
def test_generated_unsafe_name_is_refused(name):
    from orchestrator.engine.spec_fields import check_name

    with pytest.raises(ValueError):
        check_name(name, "campaign name")


def test_malformed_long_records_are_refused(tmp_path):
    """Long records (what a work dir collects): two generations of one cell, impossible counts, a bool score."""
    from analysis.records import read_records

    long = read_records(RELEASED, suite="db12")
    long.to_csv(tmp_path / "ok.csv", index=False)
    read_records(tmp_path / "ok.csv", suite="db12")  # the base file is valid
    first = long["run_id"] == long["run_id"].iloc[0]
    row5 = long.index == 5
    seed_f = long["seed"].astype(float)
    variants = {
        "two_generations.csv": pd.concat([long, long[first].assign(run_key="new-generation-key")]),
        "zero_items.csv": long.assign(n_items=long["n_items"].where(~first, 0)),
        "more_correct_than_items.csv": long.assign(n_correct=long["n_correct"].where(~first, 10**6)),
        "bool_accuracy.parquet": long[first].assign(accuracy=True),  # a whole bool column (pyarrow keeps it bool)
        # issue 25: a missing seed (or other cell key) in any format is refused with file, row and column
        "nan_seed.parquet": long.assign(seed=seed_f.where(~row5, float("nan"))),
        "inf_seed.parquet": long.assign(seed=seed_f.where(~row5, float("inf"))),
        "nan_step.parquet": long.assign(step=long["step"].astype(float).where(~row5, float("nan"))),
        "none_campaign.parquet": long.assign(campaign=long["campaign"].where(~row5, None)),
        "none_policy.parquet": long.assign(policy=long["policy"].where(~row5, None)),
        "blank_seed.csv": long.assign(seed=long["seed"].astype(object).where(~row5, "")),
    }
    assert list(variants) == LONG_VARIANTS
    for name, frame in variants.items():
        path = tmp_path / name
        frame.to_parquet(path) if path.suffix == ".parquet" else frame.to_csv(path, index=False)
        text = _refused(["compare", str(path)])
        assert name in text, (name, text[-400:])
        if name.startswith(("nan_", "inf_", "none_", "blank_")):
            column = name.split("_")[1].split(".")[0]
            assert "row 6" in text and f"column '{column}'" in text, (name, text[-400:])


LONG_VARIANTS = ["two_generations.csv", "zero_items.csv", "more_correct_than_items.csv", "bool_accuracy.parquet",
                 "nan_seed.parquet", "inf_seed.parquet", "nan_step.parquet", "none_campaign.parquet",
                 "none_policy.parquet", "blank_seed.csv"]


# --- 7b. curricula and budgets that only the campaign's backend, recipe and data can refuse (issue 34) ----------


def _curriculum_campaign(tmp_path: Path, case: str) -> Path:
    """A campaign tree in tmp_path: the shipped policies, and a recipe of its own where the case needs one."""
    root = tmp_path / "campaigns"
    (root / "recipe").mkdir(parents=True)
    (root / "policy").mkdir()
    recipe = yaml.safe_load((REPO / "campaigns" / "recipe" / "cpu_tiny.yaml").read_text())
    recipe["name"] = "small_pool"
    recipe["data"]["train_per_domain"] = 3  # 9 prompts, 3 a domain, for a batch of 12
    (root / "recipe" / "small_pool.yaml").write_text(yaml.safe_dump(recipe))
    if case == "mixer_domain_pool":
        recipe["data"]["train_per_domain"] = 5
        recipe["actor"]["prompts_per_step"] = 6  # 15 prompts in all (enough), 5 a domain (not)
        (root / "recipe" / "small_pool.yaml").write_text(yaml.safe_dump(recipe))
        (root / "policy" / "static_greso.yaml").write_text(yaml.safe_dump(
            {"name": "static_greso", "mechanism": "mix", "actuator": {"name": "static"}, "curriculum":
             {"name": "greso"}}))
    body = {
        "pool_smaller_than_batch": ("local", "small_pool", "[baseline, greso]", ""),
        "mixer_domain_pool": ("local", "small_pool", "[static_greso]", "baselines: {mix: static_greso}\n"),
        "missing_prepass": ("local", "cpu_tiny", "[baseline, hardest_k]", ""),
        "prepass_on_verl": ("verl", "verl_cpu_tiny", "[baseline, hardest_k]", ""),
        "budget_on_verl": ("verl", "verl_cpu_tiny", "[baseline]", "budget: {rollout_tokens: 1000}\n"),
    }[case]
    f = root / f"{case}.yaml"
    f.write_text(f"name: x\nmodels: [tiny_qwen2]\npolicies: {body[2]}\nrecipe: {body[1]}\nbackend: {body[0]}\n"
                 f"data: {{corpus: synthetic}}\n{body[3]}")
    return f


CURRICULUM_CASES = {  # case -> the file and key the message must name
    "pool_smaller_than_batch": "small_pool.yaml: key 'actor.prompts_per_step'",
    "mixer_domain_pool": "small_pool.yaml: key 'actor.prompts_per_step'",
    "missing_prepass": "hardest_k.yaml: key 'curriculum.name'",
    "prepass_on_verl": "hardest_k.yaml: key 'curriculum.name'",
    "budget_on_verl": "budget_on_verl.yaml: key 'budget.rollout_tokens'",
}


@pytest.mark.parametrize("case", sorted(CURRICULUM_CASES))
def test_a_curriculum_or_budget_the_campaign_cannot_run_is_refused(case, tmp_path, monkeypatch):
    monkeypatch.setenv("WINDTUNNEL_CACHE", str(tmp_path / "cache"))  # no pre-pass cached, whatever the user's holds
    f = _curriculum_campaign(tmp_path, case)
    _refused(["plan", str(f)], names=CURRICULUM_CASES[case])
    wd = tmp_path / "w"
    _refused(["submit", str(f), "--workdir", str(wd)], nothing_at=[wd], names=CURRICULUM_CASES[case])


# --- 7c. issue 51: outputs checked before the work, corrupt inputs and caches, messages a user can act on -------
#
# Each case runs against a work dir (tmp_path) whose whole tree (every path and every file's bytes) is listed
# before and after: an exit 2 leaves it byte-identical (no lock, no cache entry, no half-written --out).


def _tree(root: Path) -> dict[str, bytes | None]:
    """Every path under `root` with its bytes (None for a folder)."""
    return {str(p.relative_to(root)): (None if p.is_dir() else p.read_bytes()) for p in sorted(root.rglob("*"))}


def _refused_untouched(args: list[str], root: Path, names: str | list[str]) -> str:
    import re

    before = _tree(root)
    text = _refused(args)
    squeezed = re.sub(r"[\s│╭╮╰╯─]+", "", text)  # Typer's error box wraps long paths anywhere
    for n in [names] if isinstance(names, str) else names:
        assert re.sub(r"\s+", "", n) in squeezed, f"{args}: the message does not name {n!r}:\n{text[-1500:]}"
    after = _tree(root)
    assert after == before, f"{args} changed the work dir: {sorted(set(after) ^ set(before))}"
    return text


def _fake_model(root: Path) -> Path:
    """An HF-looking directory (config.json, a weights file): enough for the probe's checks, never loaded here
    because every case below is refused before the model is."""
    import torch
    from safetensors.torch import save_file

    m = root / "model"
    m.mkdir(parents=True)
    (m / "config.json").write_text("{}")
    save_file({"w": torch.zeros(1)}, str(m / "model.safetensors"))  # a readable header (wtcommon/model_dir.py)
    (m / "tokenizer_config.json").write_text("{}")
    return m


def _memorization_cases(root: Path) -> list[tuple[list[str], str | list[str]]]:
    (root / "a_file.txt").write_text("keep me")
    model = _fake_model(root)
    (root / "bad_cache" / "memorization").mkdir(parents=True)
    (root / "bad_cache" / "memorization" / "generations.sqlite").write_bytes(b"not sqlite " * 100)
    fixtures = str(REPO / "evaluation" / "fixtures" / "db12")
    used = root / "used"
    used.mkdir()
    (used / "memorization.json").write_text("{}")
    base = ["audit", "memorization", "--model", str(model), "--data-dir", fixtures]
    cache = ["--cache-dir", str(root / "cache")]
    return [
        ([*base, "--out", str(root / "a_file.txt" / "sub"), *cache], ["a_file.txt", "is a file"]),  # under a file
        ([*base, "--out", "/proc/windtunnel-probe", *cache], ["/proc", "does not accept new files"]),
        ([*base, "--out", str(root / "a_file.txt"), *cache], ["a_file.txt", "takes a folder"]),  # onto a file
        ([*base, "--out", str(root / "out"), "--cache-dir", str(root / "a_file.txt")], ["--cache-dir", "a_file.txt"]),
        ([*base, "--out", str(root / "out"), *cache, "--protocol", "bogus"], "--protocol"),
        ([*base, "--out", str(root / "out"), *cache, "--prefix", "0.4", "--prefix", "0.6"], "--prefix"),
        ([*base, "--out", str(root / "out"), *cache, "--protocol", "paper", "--prefix", "1.5"], "--prefix"),
        ([*base, "--out", str(root / "out"), *cache, "--protocol", "paper", "--max-new-tokens", "0"],
         "--max-new-tokens"),
        ([*base, "--out", str(root / "out"), "--cache-dir", str(root / "bad_cache"), "--benchmark", "gsm8k"],
         ["generations.sqlite", "not a readable SQLite database", "delete it"]),
        # issue 59: a folder holding an earlier probe's files is replaced only with --force
        ([*base, "--out", str(used), *cache], ["memorization.json", "--force"]),
    ]


def test_memorization_outputs_are_checked_before_the_model_is_loaded(tmp_path):
    """Was a NotADirectoryError / FileNotFoundError / FileExistsError traceback after the whole generation, with
    the cache already written."""
    for args, names in _memorization_cases(tmp_path):
        _refused_untouched(args, tmp_path, names)
    assert (tmp_path / "a_file.txt").read_text() == "keep me"


def _verl_pool(path: Path, rows: int = 3, reward_model: object = None) -> Path:
    pd.DataFrame({"data_source": ["synthetic_math"] * rows,
                  "prompt": [[{"role": "user", "content": f"What is {i} + 1?"}] for i in range(rows)],
                  "reward_model": [reward_model or {"ground_truth": str(i + 1), "style": "rule"}
                                   for i in range(rows)],
                  "domain": ["math"] * rows}).to_parquet(path)
    return path


def _difficulty_cases(root: Path) -> list[tuple[list[str], str | list[str]]]:
    from training.difficulty import cache_key, entry_paths, spec_for

    cache = root / "cache"
    good = _verl_pool(root / "pool.parquet")
    (root / "corrupt.parquet").write_text("not a parquet file\n" * 20)
    bad_rm = _verl_pool(root / "no_ground_truth.parquet", reward_model={"style": "rule"})
    empty = _verl_pool(root / "empty.parquet", rows=0)
    plain = root / "plain_prompt.parquet"  # issue 59: a plain-string prompt and an empty one were tracebacks
    pd.read_parquet(good).assign(prompt=["What is 1 + 1?"] * 3).to_parquet(plain)
    no_msgs = root / "no_messages.parquet"
    pd.read_parquet(good).assign(prompt=[[]] * 3).to_parquet(no_msgs)
    spec = spec_for("tiny_qwen2", "cpu_tiny", train_files=[good])
    npz, side = entry_paths(cache_key(spec, cache), cache)
    npz.parent.mkdir(parents=True)
    npz.write_bytes(b"PK\x03\x04 truncated zip")
    side.write_text("{}")
    (root / "a_file.txt").write_text("keep me")
    base = ["data", "difficulty", "--model", "tiny_qwen2", "--recipe", "cpu_tiny"]
    return [
        ([*base, "--train-file", str(root / "corrupt.parquet"), "--cache-dir", str(cache)],
         ["corrupt.parquet", "not a readable Parquet file"]),
        ([*base, "--train-file", str(bad_rm), "--cache-dir", str(cache)], ["no_ground_truth.parquet", "ground_truth"]),
        ([*base, "--train-file", str(good), "--cache-dir", str(cache)], [npz.name, "delete it", side.name]),
        ([*base, "--train-file", str(good), "--cache-dir", str(root / "a_file.txt")], ["--cache-dir", "a_file.txt"]),
        ([*base, "--train-file", str(good), "--cache-dir", str(cache), "--samples", "0"], "--samples"),
        ([*base, "--train-file", str(good), "--cache-dir", str(cache), "--limit", "0"], "--limit"),
        ([*base, "--train-file", str(root / "missing.parquet"), "--cache-dir", str(cache)], "missing.parquet"),
        ([*base, "--train-file", str(empty), "--cache-dir", str(cache)], ["empty.parquet", "no rows"]),
        ([*base, "--train-file", str(plain), "--cache-dir", str(cache)], ["plain_prompt.parquet", "'prompt'"]),
        ([*base, "--train-file", str(no_msgs), "--cache-dir", str(cache)], ["no_messages.parquet", "'prompt'"]),
        ([*base, "--train-file", str(good), "--cache-dir", str(cache), "--seed", "-1"], "--seed"),
    ]


def test_data_difficulty_refuses_a_corrupt_training_file_or_cache_entry_and_leaves_no_lock(tmp_path):
    """Was a 63-line pyarrow traceback and a lock file left behind; a corrupt cached pass-rate file was a
    BadZipFile traceback with no hint to delete it."""
    for args, names in _difficulty_cases(tmp_path):
        _refused_untouched(args, tmp_path, names)
    assert not (tmp_path / "cache" / "locks").exists()


def _graders_cases(root: Path) -> list[tuple[list[str], str | list[str]]]:
    log = root / "w" / "runs" / "c" / "run1" / "eval" / "step_8.items.jsonl.gz"
    log.parent.mkdir(parents=True)
    log.write_bytes(b"")
    (root / "a_file.txt").write_text("keep me")
    base = ["audit", "graders", "--family", "math", "--n", "1", "--workdir", str(root / "w")]
    return [
        ([*base, "--campaign", "c"], [log.name, "empty file, 0 bytes"]),
        ([*base, "--campaign", "c", "--out", str(root / "a_file.txt" / "d.jsonl")], ["--out", "a_file.txt"]),
        ([*base, "--campaign", "c", "--out", str(root / "w")], ["--out", "is a folder"]),
        ([*base, "--family", "nope"], "--family"),
        (["audit", "graders", "--n", "0"], "--n"),
        ([*base, "--benchmark", "math500"], "--benchmark"),
        ([*base, "--campaign", "c", "--out", str(root / "a_file.txt")], ["a_file.txt", "--force"]),  # issue 59
    ]


def test_audit_graders_refuses_an_empty_item_log(tmp_path):
    """Was exit 0 with the empty log silently counted."""
    for args, names in _graders_cases(tmp_path):
        _refused_untouched(args, tmp_path, names)


def _workdir_cases(root: Path, tree: Path) -> list[tuple[list[str], str | list[str]]]:
    (root / "a_file.txt").write_text("keep me")
    small = str(tree / "small.yaml")
    f = str(root / "a_file.txt")
    gfpo = str(REPO / "campaigns" / "policy" / "gfpo.yaml")
    return [
        (["submit", small, "--workdir", f"{f}/w", "--no-wait"], ["--workdir", "a_file.txt", "is a file"]),
        (["submit", small, "--workdir", f, "--no-wait"], ["--workdir", "a_file.txt", "takes a folder"]),
        (["submit", small, "--workdir", "/proc/windtunnel-w", "--no-wait"], ["--workdir", "/proc"]),
        (["demo", "--workdir", f], ["--workdir", "a_file.txt"]),
        (["train", "--policy", gfpo, "--out", str(root / "d"), "--seed", "1", "--cache-dir", f], "--cache-dir"),
        (["train", "--policy", gfpo, "--out", f, "--seed", "1"], ["--out", "takes a folder"]),
        (["eval", str(root / "ckpt"), "--cache-dir", f], "--cache-dir"),
        (["export-tasks", f], "a_file.txt"),
        (["data", "synthetic", "--out", f"{f}/d"], ["--out", "is a file"]),
    ]


def test_work_dirs_caches_and_out_folders_are_checked_before_anything_runs(tmp_path, tree):
    """Was a NotADirectoryError / FileExistsError traceback from the ledger opener or the demo."""
    before_tree = _tree(tree)
    for args, names in _workdir_cases(tmp_path, tree):
        _refused_untouched(args, tmp_path, names)
    assert _tree(tree) == before_tree


PLUGIN_CASES = {  # module source -> what the message must say
    "raise RuntimeError('boom in my scorer')\n": ["RuntimeError: boom in my scorer", "its code failed",
                                                  "fix the module's code"],
    "x = 1 / 0\n": ["ZeroDivisionError", "its code failed", "raising_plugin.py:1"],
    "import no_such_dependency_xyz\n": ["ModuleNotFoundError", "install 'no_such_dependency_xyz'"],
    "def broken(:\n": ["SyntaxError", "its code failed"],
}


@pytest.mark.parametrize("source", sorted(PLUGIN_CASES))
def test_a_plugin_whose_code_raises_on_import_names_the_exception_not_the_path(source, tmp_path, monkeypatch):
    import sys

    (tmp_path / "plug").mkdir()
    (tmp_path / "plug" / "raising_plugin.py").write_text(source)
    monkeypatch.syspath_prepend(str(tmp_path / "plug"))
    monkeypatch.delitem(sys.modules, "raising_plugin", raising=False)
    f = tmp_path / "policy" / "p.yaml"
    f.parent.mkdir()
    f.write_text(yaml.safe_dump({**GOOD_SELECT, "plugins": ["raising_plugin"]}))
    text = _refused_untouched(["policies", "validate", str(f)], tmp_path, ["p.yaml", *PLUGIN_CASES[source]])
    assert "PYTHONPATH" not in text


SCHEMA_SHAPES = {  # a block given as the wrong type -> the example the message must show
    "budget: 3000": "e.g. `budget: {rollout_tokens: 1000000}`", "budget: [1, 2]": "e.g. `budget: {rollout_tokens:",
    "compute: 4": "e.g. `compute: {gpus_per_run: 1", "retries: 3": "e.g. `retries: {max_attempts: 3",
    "data: synthetic": "e.g. `data: {corpus: synthetic}`", "baselines: baseline": "e.g. `baselines: {select:",
    "sub_campaigns: {a: 3}": "expected a mapping (keys: description",
}


@pytest.mark.parametrize("line", sorted(SCHEMA_SHAPES))
def test_a_block_of_the_wrong_type_shows_the_expected_shape_not_a_class_name(line, tmp_path):
    f = tmp_path / "campaigns" / "shape.yaml"
    f.parent.mkdir()
    f.write_text(f"name: x\nmodels: [tiny_qwen2]\npolicies: [baseline]\nrecipe: cpu_tiny\nbackend: local\n{line}\n")
    text = _refused_untouched(["plan", str(f)], tmp_path, ["shape.yaml", SCHEMA_SHAPES[line]])
    assert "instance of" not in text and "Spec" not in text, text


# --- 7d. issue 59: every class of bad input on the newest commands, each with the work dir unchanged ---------
#
# The classes the issue names; each case is exit 2, no traceback, the message naming the value, file or option,
# and every path and byte under tmp_path as it was (`_refused_untouched`). Other modules test the same checks at
# the function level (tests/analysis/test_tokens_to_target.py, tests/evaluation/test_regrade.py,
# tests/orchestrator/test_slurm_script.py, tests/policies/test_curriculum_guide.py); here they go through the CLI.


def _tokens_to_target_cases(root: Path) -> list[tuple[list[str], str | list[str]]]:
    """--at tokens-to-target: options it would have ignored, an unknown reference, nothing that pairs."""
    from analysis.records import write_records
    from tests.analysis.budget_records import budget_records

    recs = budget_records()
    path = str(write_records(recs, root / "records.parquet"))
    alone = str(write_records(recs[recs["policy"] != "baseline"], root / "alone.parquet"))
    base = ["compare", path, "--at", "tokens-to-target"]
    return [([*base, "--format", "latex"], "--format latex"), ([*base, "--items", str(root)], "--items"),
            ([*base, "--runs-dir", str(root)], "--runs-dir"), ([*base, "--margin", "1"], "--margin"),
            ([*base, "--reference-map", "mopps=nosuch"], "nosuch"),
            (["compare", alone, "--at", "tokens-to-target"], "no policy could be paired")]


def _regrade_cases(root: Path) -> list[tuple[list[str], str | list[str]]]:
    """eval --regrade: an item log covering 1 of the records' 12 benchmarks, a corrupt gzip, ignored options."""
    import gzip
    import json

    from analysis.records import write_records
    from evaluation import item_log
    from evaluation.regrade import regrade_rows
    from tests.analysis.budget_records import SUITE, budget_records

    recs = budget_records(budget=None)
    one = recs[recs["run_key"] == recs["run_key"].iloc[0]]
    (root / "partial").mkdir()
    (root / "torn").mkdir()
    partial = write_records(one, root / "partial" / "records.parquet")
    rows = [{"benchmark": "gsm8k", "item_id": "gsm8k-0", "prompt": "p", "response": "\\boxed{8}", "gold": "8",
             "parsed": None, "score": 0.0, "status": "ok", "finish_reason": "stop", "response_tokens": 5,
             "prompt_tokens": 3, "max_gen_toks": 32, "grader_version": "math-v0"}]
    _, health, _ = regrade_rows(rows, SUITE, processes=0)
    item_log.write_item_log(item_log.items_path_of(partial), rows, health.values())
    torn = write_records(one, root / "torn" / "records.parquet")
    good = gzip.compress(json.dumps(rows[0]).encode() * 50)
    item_log.items_path_of(torn).write_bytes(good[:10] + b"\xff" * 40 + good[50:])  # an invalid deflate block
    return [(["eval", "--regrade", "--out", str(partial)], ["math500", "not in the item log"]),
            (["eval", "--regrade", "--out", str(torn)], "not a readable gzip"),
            (["eval", "--regrade", "--out", str(partial), "--benchmark", "gsm8k"], "--benchmark"),
            (["eval", "--regrade", "--out", str(partial), "--limit", "3"], "--limit")]


def _slurm_cases(root: Path) -> list[tuple[list[str], str | list[str]]]:
    """campaign slurm: every value bound for the batch script checked before a script or work dir exists."""
    camp = root / "c.yaml"
    camp.write_text("name: c\nbackend: noop\n")
    (root / "afile").write_text("x")
    base = ["slurm", str(camp), "--workdir", str(root / "w")]
    return [([*base, "--partition", "gpu\ntouch /tmp/pwned"], "--partition"),
            ([*base, "--time", "1:00:00\nrm -rf ~"], "--time"), ([*base, "--time", "soon"], "--time"),
            ([*base, "--time", "0:05:00", "--signal", "600"], "--signal"),
            ([*base, "--sbatch-arg", "--account=x\necho hi"], "--sbatch-arg"),
            (["slurm", DEMO, "--workdir", str(root / "w"), "--ledger-url", "mongodb://x/y"], "mongodb://x/y"),
            (base, ["c.yaml", "'models'/'policies'"]),  # the campaign checked before a script is written
            (["slurm", str(camp), "--workdir", str(root / "afile")], "not a folder"),
            (["slurm", DEMO, "--workdir", "/sys/windtunnel-w"], "/sys")]


BAD_RULES = '''"""A user's curriculum module, each rule broken one way (issue 59: found only at training time)."""
import numpy as np
from policies import Curriculum, register_curriculum


class _Half(Curriculum):
    signal = "none"

    def _propose(self, step, mask, n):
        return np.flatnonzero(mask)[:n]

    def update(self, step, prompt_ids, correct):
        self.check_update(prompt_ids, correct)


@register_curriculum("corpus_lost_state")
class LostState(_Half):
    STATE = ("counts",)


@register_curriculum("corpus_raising_check")
class RaisingCheck(_Half):
    @classmethod
    def check_params(cls, params):
        raise ValueError("low above high")
'''
BAD_SIGNATURE = '''from policies import Curriculum, register_curriculum


@register_curriculum("corpus_bad_propose")
class BadPropose(Curriculum):
    signal = "none"

    def _propose(self, step):
        return None

    def update(self, step, prompt_ids, correct):
        pass
'''


def _plugin_cases(root: Path) -> list[tuple[list[str], str | list[str]]]:
    """A registered curriculum whose signature, STATE or check_params is wrong: refused by validate, show, plan
    and submit --dry-run (the module lives outside the repository, as a user's does)."""
    camp = root / "proj"
    (camp / "policy").mkdir(parents=True)
    (root / "plug").mkdir()
    (root / "plug" / "corpus_rules.py").write_text(BAD_RULES)
    (root / "plug" / "corpus_bad_sig.py").write_text(BAD_SIGNATURE)
    cases: list[tuple[list[str], str | list[str]]] = []
    for rule, module, names in (("corpus_lost_state", "corpus_rules", "STATE names ['counts']"),
                                ("corpus_raising_check", "corpus_rules", "check_params raised ValueError"),
                                ("corpus_bad_propose", "corpus_bad_sig", "_propose(self, step) cannot take")):
        pol = camp / "policy" / f"{rule}.yaml"
        pol.write_text(yaml.safe_dump({"name": rule, "mechanism": "curriculum", "curriculum": {"name": rule},
                                       "plugins": [module]}))
        spec = camp / f"c_{rule}.yaml"
        spec.write_text(f"name: c\nmodels: [tiny_qwen2]\npolicies: [baseline, {rule}]\nrecipe: cpu_tiny\n"
                        "backend: local\ndata: {corpus: synthetic}\n")
        cases += [(["policies", "validate", str(pol)], names), (["policies", "show", str(pol)], names),
                  (["plan", str(spec)], names),
                  (["submit", str(spec), "--dry-run", "--workdir", str(root / "w")], names)]
    return cases


def _options_cases(root: Path) -> list[tuple[list[str], str | list[str]]]:
    """Options blocks typed with ranges: a suite's options.think_tags (a suite file is handed to `eval --suite`),
    dynamic sampling's min_round."""
    camp = root / "opts"
    (camp / "suite").mkdir(parents=True)
    (camp / "policy").mkdir()
    suite = yaml.safe_load((REPO / "campaigns" / "suite" / "db12.yaml").read_text())
    cases: list[tuple[list[str], str | list[str]]] = []
    model = _fake_model(root)
    for i, tags in enumerate((5, True, ["<think>", "</think>"], "<t>,<t>", "</think>,<think>")):
        bad = dict(suite, name=f"tags{i}")
        bad["benchmarks"] = [dict(b, options={**(b.get("options") or {}), "think_tags": tags}) if j == 0 else b
                             for j, b in enumerate(suite["benchmarks"])]
        (camp / "suite" / f"tags{i}.yaml").write_text(yaml.safe_dump(bad))
        cases.append((["eval", str(model), "--suite", str(camp / "suite" / f"tags{i}.yaml"), "--out",
                       str(root / "ev" / "r.parquet")], [f"tags{i}.yaml", "think_tags"]))
    (camp / "policy" / "ds_bad.yaml").write_text(yaml.safe_dump(
        {"name": "ds_bad", "mechanism": "curriculum", "curriculum": {"name": "uniform"},
         "dynamic_sampling": {"oversample": 1.5, "min_round": 2.0}}))
    cases.append((["policies", "validate", str(camp / "policy" / "ds_bad.yaml")], ["ds_bad.yaml", "min_round"]))
    return cases


NEWEST = {"tokens_to_target": _tokens_to_target_cases, "regrade": _regrade_cases, "slurm": _slurm_cases,
          "plugins": _plugin_cases, "options": _options_cases}


@pytest.mark.parametrize("group", sorted(NEWEST))
def test_bad_input_on_the_newest_commands_is_refused_and_changes_nothing(group, tmp_path, monkeypatch):
    import sys

    monkeypatch.syspath_prepend(str(tmp_path / "plug"))
    for mod in ("corpus_rules", "corpus_bad_sig"):
        monkeypatch.delitem(sys.modules, mod, raising=False)
    for args, names in NEWEST[group](tmp_path):
        _refused_untouched(args, tmp_path, names)


# --- 8. the corpus size ----------------------------------------------------------------------------------


def _fresh(root: Path, name: str) -> Path:
    (root / name).mkdir()
    return root / name


def test_the_corpus_holds_at_least_260_inputs(tmp_path):
    """Issue 25: >= 260 malformed inputs, each run by a test above (exit 2, no traceback, nothing written, the
    message naming the file or option). Counted from the same lists the tests iterate."""
    counts = {
        "overrides (plan)": len(BAD_OVERRIDES), "overrides (submit)": len(BAD_OVERRIDES[::4]),
        "campaign files": len(BAD_FILES), "missing campaign file": 2, "policy files": len(BAD_POLICIES),
        "unparseable policy YAML": 4, "records (compare, tables)": 2 * len(RECORD_VARIANTS),
        "missing records": 3, "cli options": len(_cli_cases(tmp_path, tmp_path)), "long records": len(LONG_VARIANTS),
        "--ray-address": len(BAD_RAY_ADDRESSES) + 1, "suite under noop (plan, submit)": 2 * len(NOOP_SUITES),
        "curricula and budgets (plan, submit)": 2 * len(CURRICULUM_CASES),
        "issue 51: memorization outputs": len(_memorization_cases(_fresh(tmp_path, "m"))),
        "issue 51: difficulty inputs and cache": len(_difficulty_cases(_fresh(tmp_path, "d"))),
        "issue 51: graders item logs": len(_graders_cases(_fresh(tmp_path, "g"))),
        "issue 51: work dirs, caches, --out": len(_workdir_cases(_fresh(tmp_path, "w"), tmp_path)),
        "issue 51: plugins raising on import": len(PLUGIN_CASES), "issue 51: block shapes": len(SCHEMA_SHAPES),
        **{f"issue 59: {g}": len(f(_fresh(tmp_path, f"n_{g}"))) for g, f in NEWEST.items()},
        "issue 59: budget columns": len(_budget_cases(_fresh(tmp_path, "b"))), "issue 59: model folders": 6,
        "issue 59: data synthetic without --force": 1,
    }
    print(f"bad-input corpus: {sum(counts.values())} inputs", counts)
    assert sum(counts.values()) >= 260, counts


def test_data_synthetic_replaces_a_folders_files_only_with_force(tmp_path):
    """`data synthetic` into a folder that already holds its files exits 2 and changes no byte; with --force it
    replaces them; no staging folder is left beside --out either way (issue 59: it overwrote them silently)."""
    small = ["--per-domain", "20", "--test-per-domain", "4", "--eval-items", "2"]
    out = tmp_path / "d"
    assert runner.invoke(app, ["data", "synthetic", "--out", str(out), *small]).exit_code == 0
    before = {p: p.read_bytes() for p in out.rglob("*") if p.is_file()}
    assert out / "eval" / "manifest.json" in before
    _refused(["data", "synthetic", "--out", str(out), "--seed", "7", *small], names="--force")
    assert {p: p.read_bytes() for p in out.rglob("*") if p.is_file()} == before
    res = runner.invoke(app, ["data", "synthetic", "--out", str(out), "--seed", "7", "--force", *small])
    assert res.exit_code == 0, res.output
    assert (out / "train.parquet").read_bytes() != before[out / "train.parquet"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["d"]


def test_a_model_folder_is_checked_before_any_command_loads_it(tmp_path):
    """issue 59: random bytes in model.safetensors were a SafetensorError traceback in eval, memorization and
    difficulty; a folder without tokenizer files probed nothing and exited 0. Each is exit 2 naming the file."""
    import os

    garbage = _fake_model(tmp_path / "g")
    (garbage / "model.safetensors").write_bytes(os.urandom(4096))
    no_tok = _fake_model(tmp_path / "t")
    (no_tok / "tokenizer_config.json").unlink()
    fixtures = str(REPO / "evaluation" / "fixtures" / "db12")
    pool = _verl_pool(tmp_path / "pool.parquet")
    for model, names in ((garbage, ["model.safetensors", "not a readable safetensors file"]),
                         (no_tok, ["no tokenizer"])):
        for args in (["eval", str(model), "--data-dir", fixtures, "--out", str(tmp_path / "ev" / "r.parquet")],
                     ["audit", "memorization", "--model", str(model), "--data-dir", fixtures, "--out",
                      str(tmp_path / "mem"), "--cache-dir", str(tmp_path / "cache")],
                     ["data", "difficulty", "--model", str(model), "--recipe", "cpu_tiny", "--train-file", str(pool),
                      "--cache-dir", str(tmp_path / "cache")]):
            _refused_untouched(args, tmp_path, names)


def _budget_cases(root: Path) -> list[tuple[list[str], str | list[str]]]:
    """Budgeted records broken one way each (issue 59: only negative values were refused)."""
    from analysis.records import write_records
    from tests.analysis.budget_records import budget_records

    good = budget_records()
    first = good.index[good["run_id"] == good["run_id"].iloc[0]]
    late = first[good.loc[first, "step"] == good.loc[first, "step"].max()]
    broken = {
        "zero_budget": good.assign(rollout_token_budget=0.0),
        "inf_budget": good.assign(rollout_token_budget=np.inf),
        "huge_budget": good.assign(rollout_token_budget=1e300),
        "huge_tokens": good.assign(rollout_tokens=good["rollout_tokens"] * 1e300),
        "tokens_go_down": good.assign(rollout_tokens=good["rollout_tokens"].where(~good.index.isin(late), 1.0)),
        "budgets_differ": good.assign(rollout_token_budget=good["rollout_token_budget"].where(
            good["policy"] != "mopps", good["rollout_token_budget"] * 1.5)),
    }
    cases = []
    for name, df in broken.items():
        path = root / f"{name}.csv"
        df.to_csv(path, index=False)  # CSV: what a user hands in; every cell read and checked
        col = "rollout_tokens" if "tokens" in name else "rollout_token_budget"
        cases.append((["compare", str(path), "--at", "budget"], [f"{name}.csv", col]))
    write_records(good, root / "fine.parquet")  # the unbroken records pass: the cases fail for their break
    return cases


def test_budget_columns_are_checked_on_read(tmp_path):
    for args, names in _budget_cases(tmp_path):
        _refused_untouched(args, tmp_path, names)
    res = runner.invoke(app, ["compare", str(tmp_path / "fine.parquet"), "--at", "budget", "--resamples", "200"])
    assert res.exit_code == 0, res.output
