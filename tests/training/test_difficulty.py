"""The difficulty pre-pass (training/difficulty.py, `campaign data difficulty`): computed once per model + pool +
decoding, a rerun is a cache hit that generates nothing, the loader's error names the command that fixes it,
bad input exits 2 with nothing written, and hardest_k fed these pass rates keeps the hardest prompts.

Cost: each test's cache is a temp folder whose `base_models/` and `data/` link to the user cache (the tiny base
model is built once, by conftest's `tiny_base`), so only the pre-pass itself runs: 24 prompts x K=2 on the tiny
model, a few CPU-seconds, once per module."""

from __future__ import annotations

import json
import shlex
from pathlib import Path

import numpy as np
import pytest
import typer
from typer.testing import CliRunner

from cli import difficulty_commands
from policies.curricula.registry import build_curriculum
from training import difficulty as dy

LIMIT, K = 24, 2


@pytest.fixture(scope="module")
def app() -> typer.Typer:
    a = typer.Typer()
    difficulty_commands.register(a)
    return a


@pytest.fixture(scope="module")
def cache(tmp_path_factory, cache_dir) -> Path:
    """A fresh difficulty cache that shares the user cache's base model and corpus (content-keyed, read-only)."""
    from training.config import load_model_config, load_recipe
    from training.warmup import base_model, synthetic_corpus

    base_model(load_model_config("tiny_qwen2"), load_recipe("cpu_tiny"), cache_dir)
    synthetic_corpus(dict(load_recipe("cpu_tiny")["data"]), cache_dir)
    root = tmp_path_factory.mktemp("wtcache")
    for sub in ("base_models", "data"):
        (root / sub).symlink_to(Path(cache_dir) / sub, target_is_directory=True)
    return root


@pytest.fixture(scope="module")
def computed(app, cache) -> dict:
    """The one pre-pass of this module, run the way the loader's error says: its printed command."""
    spec = dy.spec_for("tiny_qwen2", "cpu_tiny", samples=K, limit=LIMIT)
    with pytest.raises(dy.DifficultyMissing) as missing:
        dy.pass_rates_for(spec, cache)
    argv = shlex.split(str(missing.value).rpartition("compute it with: ")[2])
    assert argv[:3] == ["campaign", "data", "difficulty"]
    first = CliRunner().invoke(app, argv[1:] + ["--cache-dir", str(cache)])
    return {"spec": spec, "error": missing.value, "first": first}


def test_the_loader_error_names_the_command_and_exits_2(computed) -> None:
    err, spec = computed["error"], computed["spec"]
    assert err.exit_code == 2
    assert ("campaign data difficulty --model tiny_qwen2 --recipe cpu_tiny -k 2 --temperature 1.0 --top-p 1.0 "
            "--top-k 0 --max-new-tokens 20 --seed 0 --limit 24") in str(err)
    assert spec.command() in str(err)


def test_the_command_writes_the_cache_and_a_rerun_generates_nothing(app, cache, computed) -> None:
    first = computed["first"]
    assert first.exit_code == 0, first.output
    assert first.output.startswith("computed: ")
    assert f"pool: {LIMIT} prompts, K={K}" in first.output
    npz, side = dy.entry_paths(dy.cache_key(computed["spec"], cache), cache)
    assert npz.is_file() and side.is_file()
    stamps = (npz.stat().st_mtime_ns, side.stat().st_mtime_ns)
    again = CliRunner().invoke(app, ["data", "difficulty", "--model", "tiny_qwen2", "-k", str(K), "--limit", str(LIMIT),
                                     "--cache-dir", str(cache), "--json"])
    assert again.exit_code == 0, again.output
    shown = json.loads(again.output)
    assert shown["cached"] is True and shown["pool_size"] == LIMIT
    assert sum(h["prompts"] for h in shown["histogram"]) == LIMIT
    assert [h["pass_rate"] for h in shown["histogram"]] == [0.0, 0.5, 1.0]
    assert (npz.stat().st_mtime_ns, side.stat().st_mtime_ns) == stamps  # nothing rewritten
    res = dy.run_prepass(computed["spec"], cache)
    assert res.cached


def test_pass_rates_are_successes_over_k_in_pool_order(cache, computed) -> None:
    res = dy.run_prepass(computed["spec"], cache)
    assert res.pass_rates.dtype == np.float64 and res.pass_rates.shape == (LIMIT,)
    assert np.array_equal(res.prompt_ids, np.arange(LIMIT))
    assert res.successes.min() >= 0 and res.successes.max() <= K
    assert np.array_equal(res.pass_rates, res.successes / K)
    assert ((res.pass_rates >= 0) & (res.pass_rates <= 1)).all()
    assert np.array_equal(dy.pass_rates_for(computed["spec"], cache), res.pass_rates)
    assert res.meta["pool_size"] == LIMIT and res.meta["decoding"]["samples"] == K


def test_hardest_k_on_these_pass_rates_keeps_the_hardest_fraction(cache, computed) -> None:
    rates = dy.pass_rates_for(computed["spec"], cache)
    cur = build_curriculum("hardest_k", {"fraction": 0.5}, LIMIT, 4, 3, pass_rates=rates)
    keep = cur.keep
    assert int(keep.sum()) == LIMIT // 2
    assert rates[keep].max() <= rates[~keep].min()  # nothing easier kept than something left out
    proposed = np.concatenate([cur.propose(step) for step in range(1, 4)])
    assert keep[proposed].all()


def test_the_trainers_call_finds_the_commands_entry(cache, computed) -> None:
    """What a trainer holds (`builtin:` model path, its typed recipe and model config, the corpus file as its
    train file) resolves to the entry the plain command wrote."""
    from training.config import ModelConfig, RecipeConfig, load_model_config, load_recipe
    from training.warmup import synthetic_corpus

    recipe = RecipeConfig.of(load_recipe("cpu_tiny"))
    corpus = synthetic_corpus(dict(recipe.data or {}), cache)["train"]
    spec = dy.spec_for("builtin:tiny_qwen2", recipe, train_files=[corpus], samples=K, limit=LIMIT,
                       model_cfg=ModelConfig.of(load_model_config("tiny_qwen2")))
    assert np.array_equal(dy.pass_rates_for(spec, cache), dy.pass_rates_for(computed["spec"], cache))


def test_the_key_moves_with_model_pool_and_decoding(cache, tmp_path) -> None:
    base = dy.spec_for("tiny_qwen2", "cpu_tiny", samples=K, limit=LIMIT)
    key = dy.cache_key(base, cache)
    assert dy.cache_key(dy.spec_for("tiny_qwen2", "cpu_tiny", samples=K, limit=LIMIT), cache) == key
    others = [dy.spec_for("tiny_qwen2", "cpu_tiny", samples=K + 1, limit=LIMIT),
              dy.spec_for("tiny_qwen2", "cpu_tiny", samples=K, limit=LIMIT, seed=1),
              dy.spec_for("tiny_qwen2", "cpu_tiny", samples=K, limit=LIMIT, temperature=0.5),
              dy.spec_for("tiny_qwen2", "cpu_tiny", samples=K, limit=LIMIT, max_new_tokens=8),
              dy.spec_for("tiny_qwen2", "cpu_tiny", samples=K, limit=LIMIT, top_p=0.9),
              dy.spec_for("tiny_qwen2", "cpu_tiny", samples=K, limit=LIMIT + 1)]
    assert len({key, *(dy.cache_key(s, cache) for s in others)}) == 1 + len(others)
    import torch
    from safetensors.torch import save_file

    hf = tmp_path / "ckpt"
    hf.mkdir()
    (hf / "config.json").write_text("{}")
    (hf / "tokenizer_config.json").write_text("{}")
    save_file({"w": torch.zeros(1)}, str(hf / "model.safetensors"))  # readable weights (wtcommon/model_dir.py)
    k1 = dy.cache_key(dy.spec_for(str(hf), "cpu_tiny", samples=K, limit=LIMIT), cache)
    save_file({"w": torch.ones(1)}, str(hf / "model.safetensors"))
    k2 = dy.cache_key(dy.spec_for(str(hf), "cpu_tiny", samples=K, limit=LIMIT), cache)
    assert len({key, k1, k2}) == 3


@pytest.mark.parametrize("args, named", [
    (["-k", "0"], "-k/--samples"),
    (["--temperature", "-0.5"], "--temperature"),
    (["--max-new-tokens", "0"], "--max-new-tokens"),
    (["--top-p", "0"], "--top-p"),
    (["--top-k", "-1"], "--top-k"),
    (["--limit", "0"], "--limit"),
    (["--model", "no_such_model"], "--model"),
    (["--recipe", "no_such_recipe"], "--recipe"),
    (["--train-file", "missing.parquet"], "--train-file"),
])
def test_bad_input_exits_2_naming_the_option_and_writes_nothing(app, tmp_path, args, named) -> None:
    res = CliRunner().invoke(app, ["data", "difficulty", *args, "--cache-dir", str(tmp_path)])
    assert res.exit_code == 2, res.output
    assert named in res.output
    assert list(tmp_path.iterdir()) == []


@pytest.mark.slow
def test_the_local_trainer_rolls_out_only_hardest_ks_prompts(app, cache, tmp_path) -> None:
    """hardest_k end to end in the local trainer (about 20 CPU-s: a pre-pass over 24 prompts at the recipe's K,
    one GRPO step): refused naming the command while no pre-pass is cached, then, after that very command, every
    prompt it rolls out is one of the hardest half by those rates (ties broken by the run's seed)."""
    import copy

    import pandas as pd
    import yaml

    from training.backend import TrainingError, TrainRequest
    from training.local import load_recipe, run_training
    from training.warmup import synthetic_corpus
    from wtcommon.prompt_ids import IDS_FILE, read_prompt_ids

    recipe = copy.deepcopy(load_recipe("cpu_tiny"))
    recipe["trainer"].update(val_before_train=False, eval_freq=100)
    pool = tmp_path / "pool.parquet"
    pd.read_parquet(synthetic_corpus(dict(recipe["data"]), cache)["train"]).iloc[:LIMIT].to_parquet(pool)
    policy = yaml.safe_load((Path(__file__).parents[2] / "campaigns" / "policy" / "hardest_k.yaml").read_text())
    policy["curriculum"]["params"] = {"fraction": 0.5}  # 12 of the 24 prompts: one batch

    def request(out: Path) -> TrainRequest:
        return TrainRequest(run_id="hk", run_key="hk", policy=policy, seed=3, out_dir=out, recipe=recipe,
                            model_path="builtin:tiny_qwen2", train_files=[str(pool)], total_steps=1, save_freq=1,
                            cache_dir=str(cache))

    with pytest.raises(TrainingError, match="campaign data difficulty") as missing:
        run_training(request(tmp_path / "refused"))
    argv = shlex.split(str(missing.value).rpartition("compute it with: ")[2])
    assert CliRunner().invoke(app, argv[1:] + ["--cache-dir", str(cache)]).exit_code == 0
    run_training(request(tmp_path / "run"))

    rates = dy.pass_rates_for(dy.spec_for("tiny_qwen2", "cpu_tiny", train_files=[pool]), cache)
    rolled = np.concatenate(list(read_prompt_ids(tmp_path / "run" / IDS_FILE).values()))
    assert rates.min() < rates.max()  # the pool has easier and harder prompts: the choice is not vacuous
    assert len(set(rolled.tolist())) == 12  # the kept half is one batch: the step rolls it out whole
    assert rates[rolled].max() <= np.delete(rates, rolled).min()  # none easier kept than one left out
