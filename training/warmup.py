"""The tiny base model: build a random tiny Qwen2, then a short supervised warm-up on the answer format.

Why: RL from a random initialisation earns no reward at all, so the CPU recipe starts from a model
that already answers in the graders' format (and is right only part of the time: the warm-up labels
carry deliberate noise, leaving headroom for GRPO to show learning). The result is saved HF-style and
cached by the content hash of everything that determines it, so all runs of a campaign share it.
"""

from __future__ import annotations

import fcntl
import json
import os
import random
import shutil
import time
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pandas as pd
import torch

from training import synthetic
from training.tiny_model import build_tiny_model
from wtcommon.hashing import digest

if TYPE_CHECKING:
    from training.config import ModelConfig, RecipeConfig

WARMUP_VERSION = 2  # bump when the warm-up procedure changes (invalidates caches)


def default_cache_root() -> Path:
    return Path(os.environ.get("WINDTUNNEL_CACHE", Path.home() / ".cache" / "windtunnel"))


def content_hash(obj: Any) -> str:
    """16 hex digits of `obj` (the warm-up and pre-pass cache keys)."""
    return digest(obj, spaced=True)


class _Lock:
    """Exclusive file lock so concurrent runs build a shared cache entry once."""

    def __init__(self, path: Path):
        path.parent.mkdir(parents=True, exist_ok=True)
        self.fh = open(path, "w")

    def __enter__(self):
        fcntl.flock(self.fh, fcntl.LOCK_EX)
        return self

    def __exit__(self, *exc):
        fcntl.flock(self.fh, fcntl.LOCK_UN)
        self.fh.close()


def synthetic_corpus(data_cfg: dict, cache_root: Path | None = None) -> dict[str, Path]:
    """Train/test Parquet of the recipe's synthetic corpus, generated once per content hash."""
    cache_root = Path(cache_root or default_cache_root())
    key = content_hash({"data": data_cfg, "v": WARMUP_VERSION})
    d = cache_root / "data" / key
    paths = {"train": d / "train.parquet", "test": d / "test.parquet"}
    with _Lock(cache_root / "locks" / f"data-{key}.lock"):
        if not all(p.exists() for p in paths.values()):
            synthetic.write_corpus(
                d,
                seed=int(data_cfg.get("seed", 42)),
                train_per_domain=int(data_cfg.get("train_per_domain", 2000)),
                test_per_domain=int(data_cfg.get("test_per_domain", 32)),
                domains=tuple(data_cfg.get("domains", synthetic.DOMAINS)),
                levels=dict(data_cfg.get("levels", {})),
                heldout=str(data_cfg.get("heldout", "disjoint")),
            )
    return paths


def _noisy_response(rng: random.Random, domain: str, prompt: str, response: str, gold: str) -> str:
    """A wrong answer in the right format (used for the warm-up's label noise)."""
    if domain == "math":
        wrong = str(int(gold) + rng.choice([-3, -2, -1, 1, 2, 3]))
        return f"\\boxed{{{wrong}}}"
    if domain == "logic":
        import re

        pairs = re.findall(r"(\w+) is a (knight|knave)", gold)
        flip = rng.randrange(len(pairs))
        parts = [f"{n} is a {('knave' if r == 'knight' else 'knight') if i == flip else r}"
                 for i, (n, r) in enumerate(pairs)]
        return f"{parts[0]}, and {parts[1]}."
    letters = [c for c in synthetic.LETTERS if c != gold]
    return f"Answer: {rng.choice(letters)}"


def _sft_examples(train_path: Path, noise: float, seed: int) -> list[tuple[list[dict], str]]:
    df = pd.read_parquet(train_path)
    rng = random.Random(seed)
    out = []
    for row in df.itertuples(index=False):
        gold = row.reward_model["ground_truth"]
        good = {"math": f"\\boxed{{{gold}}}", "logic": gold, "science": f"Answer: {gold}"}[row.domain]
        resp = _noisy_response(rng, row.domain, row.prompt[0]["content"], good, gold) if rng.random() < noise else good
        out.append((list(row.prompt), resp))
    return out


def supervised_warmup(model_dir: Path, examples: list[tuple[list[dict], str]], cfg: dict) -> None:
    """Teacher-forced cross-entropy on response tokens only; seeded, about a minute on one idle core."""
    prev = (torch.get_num_threads(), torch.are_deterministic_algorithms_enabled())
    torch.set_num_threads(1)  # one thread, deterministic kernels: the same bits on every machine
    torch.use_deterministic_algorithms(True)
    try:
        _sft(model_dir, examples, cfg)
    finally:
        torch.set_num_threads(prev[0])
        torch.use_deterministic_algorithms(prev[1])


def _sft(model_dir: Path, examples: list[tuple[list[dict], str]], cfg: dict) -> None:
    from transformers import AutoModelForCausalLM, AutoTokenizer

    seed = int(cfg.get("seed", 0))
    torch.manual_seed(seed)
    tok = AutoTokenizer.from_pretrained(model_dir)
    model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32)
    model.train()
    opt = torch.optim.AdamW(model.parameters(), lr=float(cfg.get("lr", 3e-3)), weight_decay=0.0)
    rng = random.Random(seed)
    bs, steps = int(cfg.get("batch_size", 32)), int(cfg.get("steps", 200))
    tokens: dict[int, tuple[list[int], list[int]]] = {}  # each example tokenized once: the same ids, drawn again

    def tokenized(i: int) -> tuple[list[int], list[int]]:
        if i not in tokens:
            messages, response = examples[i]
            prompt = tok.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
            tokens[i] = (tok(prompt, add_special_tokens=False)["input_ids"],
                         tok(response + "<|im_end|>", add_special_tokens=False)["input_ids"])
        return tokens[i]

    for _ in range(steps):
        batch = [tokenized(rng.randrange(len(examples))) for _ in range(bs)]
        p_ids, r_ids = [p for p, _ in batch], [r for _, r in batch]
        width = max(len(p) + len(r) for p, r in zip(p_ids, r_ids, strict=True))
        ids = torch.full((bs, width), tok.pad_token_id)
        labels = torch.full((bs, width), -100)
        attn = torch.zeros((bs, width), dtype=torch.long)
        for i, (p, r) in enumerate(zip(p_ids, r_ids, strict=True)):
            seq = p + r
            ids[i, : len(seq)] = torch.tensor(seq)
            labels[i, len(p) : len(seq)] = torch.tensor(r)
            attn[i, : len(seq)] = 1
        loss = model(input_ids=ids, attention_mask=attn, labels=labels).loss
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
    model.save_pretrained(model_dir)


def _identity(model_cfg: ModelConfig, recipe: RecipeConfig) -> tuple[dict, dict, dict, str]:
    """What determines the base model (data, warm-up and architecture configs) and its content hash."""
    # the warm-up always covers every synthetic domain, so recipes that train on a subset of domains
    # (e.g. math only) share one base model
    data_cfg = {**dict(recipe.data or {}), "domains": list(synthetic.DOMAINS)}
    warm_cfg = dict(recipe.warmup)
    arch = dict(model_cfg.architecture)
    return data_cfg, warm_cfg, arch, content_hash({"arch": arch, "data": data_cfg, "warmup": warm_cfg,
                                                   "v": WARMUP_VERSION})


def base_model_key(model_cfg: ModelConfig | Mapping[str, Any], recipe: RecipeConfig | Mapping[str, Any]) -> str:
    """The content key of the base model `base_model` builds for these configs, without building it (other
    caches keyed by the model, e.g. the difficulty pre-pass, name it by this key)."""
    from training.config import ModelConfig, RecipeConfig

    return _identity(ModelConfig.of(model_cfg), RecipeConfig.of(recipe))[3]


def base_model_dir(model_cfg: ModelConfig | Mapping[str, Any], recipe: RecipeConfig | Mapping[str, Any],
                   cache_root: Path | None = None) -> Path:
    """Where `base_model` keeps (or will keep) the base model of (model YAML, recipe); built or not."""
    return Path(cache_root or default_cache_root()) / "base_models" / base_model_key(model_cfg, recipe)


def base_model(model_cfg: ModelConfig | Mapping[str, Any], recipe: RecipeConfig | Mapping[str, Any],
               cache_root: Path | None = None) -> Path:
    """Path of the warmed-up tiny base model for (model YAML, recipe data + warmup), built once (a mapping
    given for either config is typed first)."""
    from training.config import ModelConfig, RecipeConfig

    model_cfg, recipe = ModelConfig.of(model_cfg), RecipeConfig.of(recipe)
    cache_root = Path(cache_root or default_cache_root())
    data_cfg, warm_cfg, arch, key = _identity(model_cfg, recipe)
    final = base_model_dir(model_cfg, recipe, cache_root)
    from wtcommon.phase import set_phase

    if not (final / "completed.json").exists():
        set_phase("waiting on the base model's lock (another run may be building it)")
    with _Lock(cache_root / "locks" / f"model-{key}.lock"):
        if (final / "completed.json").exists():
            set_phase("training: base model ready")
            return final
        set_phase("building the base model (once per model and recipe; later runs reuse it)")
        corpus = synthetic_corpus(data_cfg, cache_root)
        for stale in final.parent.glob(f".{key}.tmp*"):  # left by a killed build; we hold the lock
            shutil.rmtree(stale, ignore_errors=True)
        tmp = final.with_name(f".{key}.tmp{os.getpid()}")
        t0 = time.time()
        build_tiny_model(
            tmp,
            corpus=synthetic.tokenizer_corpus(int(data_cfg.get("seed", 42))),
            seed=int(warm_cfg.get("seed", 0)),
            **arch,
        )
        t1 = time.time()
        examples = _sft_examples(corpus["train"], float(warm_cfg.get("label_noise", 0.0)), int(warm_cfg.get("seed", 0)))
        if int(warm_cfg.get("steps", 0)) > 0:
            supervised_warmup(tmp, examples, warm_cfg)
        timings = {"build_s": round(t1 - t0, 2), "warmup_s": round(time.time() - t1, 2)}  # not part of the key
        (tmp / "completed.json").write_text(json.dumps({"key": key, "arch": arch, "warmup": warm_cfg,
                                                        "data": data_cfg, "timings": timings}))
        shutil.rmtree(final, ignore_errors=True)
        os.replace(tmp, final)
    set_phase("training: base model ready")
    return final


def build_timings(model_dir: Path) -> dict[str, float]:
    """How long the cached base model at `model_dir` took to build and warm up (`build_s`, `warmup_s`), as
    recorded when it was built; empty for one built before timings were recorded."""
    try:
        return dict(json.loads((Path(model_dir) / "completed.json").read_text()).get("timings", {}))
    except (OSError, ValueError):
        return {}
