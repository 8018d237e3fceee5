"""The difficulty pre-pass: the base model's pass rate on each prompt of a training pool, cached.

Why: `hardest_k` (policies/curricula/hardest_k.py, arXiv 2508.14094) keeps the prompts the base model fails
most, so it needs every prompt's pass rate before training starts. Computing it costs K rollouts per prompt,
so it is done once per (model, pool, decoding) and shared by every campaign: the cache key is the model's
identity (the tiny base model's content key, or the sha256 of an HF directory's weights), the pool's content
hash (the bytes of its Parquet files, and the row limit) and the decoding (K, temperature, top_p, top_k,
max_new_tokens, seed, and the fixed prompts-per-generate chunk, which decides the sampling draws).

The rollouts are the local trainer's (`training.rollout.generate`: chat template, left padding, K rows per
prompt) in chunks of prompts, and each is scored by the evaluation graders (`evaluation.reward.compute_score`,
what training and verl call); a success is the grader's `acc` (correctness, what a curriculum reads, not the
shaped score), so pass rate = successes / K.

An entry is `difficulty/<key>.npz` (pass_rates, successes, prompt_ids; loaded with allow_pickle=False) and
`difficulty/<key>.json` (what it was computed from), each written atomically, the JSON last: an entry counts
only when both are there.
"""

from __future__ import annotations

import json
import shlex
import zipfile
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from training import warmup
from training.config import ModelConfig, RecipeConfig, load_model_config, load_recipe
from training.errors import TrainingError
from wtcommon.atomic import atomic_path, atomic_write_json
from wtcommon.errors import UserError
from wtcommon.hashing import sha256_file

DIFFICULTY_VERSION = 1  # bump when the pre-pass procedure changes (invalidates the cache)
CHUNK_PROMPTS = 32  # prompts per generate call: part of the key (the sampling draws depend on it)
_COLUMNS = ("data_source", "prompt", "reward_model", "domain")


class DifficultyMissing(UserError):
    """No cached pre-pass for this model, pool and decoding; the message names the command that computes it."""


@dataclass(frozen=True)
class Decoding:
    """How the K samples per prompt are drawn (temperature 0: greedy, every sample the same)."""

    samples: int
    temperature: float
    top_p: float
    top_k: int
    max_new_tokens: int
    seed: int

    def problems(self) -> list[str]:
        """Each bad value, named by the command's option."""
        out = []
        if self.samples < 1:
            out.append(f"-k/--samples: got {self.samples}; must be >= 1")
        if not self.temperature >= 0:
            out.append(f"--temperature: got {self.temperature}; must be >= 0 (0 = greedy)")
        if not 0 < self.top_p <= 1:
            out.append(f"--top-p: got {self.top_p}; must be in (0, 1]")
        if self.top_k < 0:
            out.append(f"--top-k: got {self.top_k}; must be >= 0 (0 = off)")
        if self.max_new_tokens < 1:
            out.append(f"--max-new-tokens: got {self.max_new_tokens}; must be >= 1")
        if not 0 <= self.seed < 2**32:
            out.append(f"--seed: got {self.seed}; seeds are integers >= 0 and < 2**32")
        return out


@dataclass(frozen=True)
class PrepassSpec:
    """One pre-pass, fully resolved: which model, which pool, which decoding."""

    model: str  # as given (a model config name, `builtin:<name>`, or an HF directory)
    recipe: str  # the recipe's name or path (for the command line)
    train_files: tuple[str, ...]  # empty: the recipe's synthetic corpus
    decoding: Decoding
    limit: int | None
    model_cfg: ModelConfig | None  # None: an HF directory
    recipe_cfg: RecipeConfig

    def command(self) -> str:
        """The exact `campaign data difficulty` command that computes this pre-pass."""
        d = self.decoding
        argv = ["campaign", "data", "difficulty", "--model", self.model, "--recipe", self.recipe]
        for f in self.train_files:
            argv += ["--train-file", f]
        argv += ["-k", str(d.samples), "--temperature", repr(d.temperature), "--top-p", repr(d.top_p), "--top-k",
                 str(d.top_k), "--max-new-tokens", str(d.max_new_tokens), "--seed", str(d.seed)]
        if self.limit is not None:
            argv += ["--limit", str(self.limit)]
        return shlex.join(argv)


@dataclass(frozen=True)
class Difficulty:
    """A pre-pass result: pass rates aligned to the pool's row order (prompt_ids are those rows)."""

    path: Path
    pass_rates: np.ndarray  # (N,) float64 = successes / K
    successes: np.ndarray  # (N,) int64
    prompt_ids: np.ndarray  # (N,) int64 row positions in the pool
    meta: dict[str, Any]
    cached: bool  # True: read from the cache, nothing generated


def spec_for(model: str | None = None, recipe: str | Path | RecipeConfig | Mapping[str, Any] = "cpu_tiny", *,
             train_files: Sequence[str | Path] = (), samples: int | None = None, temperature: float | None = None,
             max_new_tokens: int | None = None, top_p: float | None = None, top_k: int | None = None,
             seed: int = 0, limit: int | None = None,
             model_cfg: ModelConfig | Mapping[str, Any] | None = None) -> PrepassSpec:
    """The pre-pass for these settings, defaults from the recipe (its model, its `rollout:` section); every bad
    value raises UserError (exit 2) naming the option. `recipe` may be a name/path or an already-loaded recipe
    (a trainer passes its own), `model` a config name, `builtin:<name>` or an HF directory; `model_cfg`, when
    given, is that model's config (a trainer's `TrainRequest.model`) instead of `campaigns/model/<name>.yaml`."""
    if isinstance(recipe, (str, Path)):
        try:
            recipe_cfg = RecipeConfig.of(load_recipe(recipe))
        except (TrainingError, ValueError) as exc:
            raise UserError(f"--recipe: {exc}; give a name in campaigns/recipe/ or a recipe file") from None
        recipe_label = str(recipe)
    else:
        recipe_cfg = RecipeConfig.of(recipe)
        recipe_label = recipe_cfg.label
    if model is not None and not model.strip():  # given but empty: not the recipe's model in disguise
        raise UserError("--model '': empty; give a model config name (e.g. tiny_qwen2) or an HF model directory, "
                        "or leave the option out for the recipe's model")
    model = model or recipe_cfg.model
    if not model:
        raise UserError(f"--model: recipe {recipe_label!r} names no model; give --model NAME or an HF directory")
    if _is_hf_dir(model):
        from wtcommon.model_dir import model_dir_problem

        if (problem := model_dir_problem(Path(model), "--model")) is not None:
            raise UserError(problem)
        model_cfg = None
    elif model_cfg is not None:
        model_cfg = ModelConfig.of(model_cfg, model)
    else:
        model_cfg = _model_config(model)
    roll = recipe_cfg.rollout
    dec = Decoding(samples=roll.n if samples is None else int(samples),
                   temperature=roll.temperature if temperature is None else float(temperature),
                   top_p=float(roll.top_p if top_p is None else top_p),
                   top_k=int(roll.top_k if top_k is None else top_k),
                   max_new_tokens=roll.max_new_tokens if max_new_tokens is None else int(max_new_tokens),
                   seed=int(seed))
    problems = dec.problems() + ([f"--limit: got {limit}; must be >= 1"] if limit is not None and limit < 1 else [])
    if problems:
        raise UserError("; ".join(problems))
    files = tuple(str(f) for f in train_files)
    for f in files:
        if not Path(f).is_file():
            raise UserError(f"--train-file: {f}: not found; give a Parquet file in the verl schema {list(_COLUMNS)}")
    return PrepassSpec(model=model, recipe=recipe_label, train_files=files, decoding=dec, limit=limit,
                       model_cfg=model_cfg, recipe_cfg=recipe_cfg)


def _is_hf_dir(model: str) -> bool:
    return (Path(model) / "config.json").is_file()


def _model_config(model: str) -> ModelConfig:
    name = model.split(":", 1)[1] if model.startswith("builtin:") else model
    try:
        cfg = ModelConfig.of(load_model_config(name), name)
    except (TrainingError, ValueError) as exc:
        raise UserError(f"--model: {exc}; give a name in campaigns/model/ or an HF model directory") from None
    path = cfg.path or f"builtin:{name}"
    if not path.startswith("builtin:") and not _is_hf_dir(path):
        raise UserError(f"--model: {name}'s path {path!r} is not a local HF directory (no config.json); download "
                        "the model and pass its directory as --model")
    return cfg


def _model_identity(spec: PrepassSpec) -> tuple[str, str | None]:
    """(identity, HF directory or None when the builtin base model is not built yet)."""
    cfg = spec.model_cfg
    path = spec.model if cfg is None else (cfg.path or "builtin:")
    if path.startswith("builtin:"):
        assert cfg is not None
        return f"base-{warmup.base_model_key(cfg, spec.recipe_cfg)}", None
    return f"weights-{_weights_hash(Path(path))}", path


def _weights_hash(d: Path) -> str:
    """The weights' sha256 (a checkpoint's own record in completed.json when it has one, else the files')."""
    done = d / "completed.json"
    if done.is_file():
        recorded = json.loads(done.read_text()).get("sha256")
        if isinstance(recorded, dict) and recorded:
            return warmup.content_hash(recorded)
    files = sorted([*d.glob("*.safetensors"), *d.glob("*.bin")])
    if not files:
        raise UserError(f"--model: {d}: no *.safetensors or *.bin weights; give a complete HF model directory")
    return warmup.content_hash({f.name: sha256_file(f) for f in files})


def _pool_files(spec: PrepassSpec, cache_root: Path) -> list[str]:
    if spec.train_files:
        return list(spec.train_files)
    return [str(warmup.synthetic_corpus(dict(spec.recipe_cfg.data or {}), cache_root)["train"])]


def cache_key(spec: PrepassSpec, cache_root: Path | None = None) -> str:
    """The entry's content key: model identity + pool content + decoding (nothing is generated)."""
    root = Path(cache_root or warmup.default_cache_root())
    identity, _ = _model_identity(spec)
    pool = [sha256_file(f) for f in _pool_files(spec, root)]
    return warmup.content_hash({"model": identity, "pool": pool, "limit": spec.limit,
                                "decoding": asdict(spec.decoding), "chunk": CHUNK_PROMPTS, "v": DIFFICULTY_VERSION})


def entry_paths(key: str, cache_root: Path | None = None) -> tuple[Path, Path]:
    d = Path(cache_root or warmup.default_cache_root()) / "difficulty"
    return d / f"{key}.npz", d / f"{key}.json"


def _read_entry(key: str, cache_root: Path) -> Difficulty | None:
    npz, side = entry_paths(key, cache_root)
    if not (npz.is_file() and side.is_file()):
        return None
    try:
        meta = json.loads(side.read_text())
        with np.load(npz, allow_pickle=False) as z:
            return Difficulty(npz, z["pass_rates"], z["successes"], z["prompt_ids"], meta, cached=True)
    except (OSError, ValueError, KeyError, EOFError, zipfile.BadZipFile) as e:
        raise UserError(f"{npz}: corrupt difficulty cache entry ({type(e).__name__}: {e}); delete it and its sidecar "
                        f"{side}, then rerun `campaign data difficulty` to rebuild it") from None


def pass_rates_for(spec: PrepassSpec, cache_root: Path | None = None) -> np.ndarray:
    """The cached pass rates (float64, the pool's row order) of `spec`; DifficultyMissing (exit 2) naming the
    `campaign data difficulty` command to run when the pre-pass was not computed."""
    root = Path(cache_root or warmup.default_cache_root())
    hit = _read_entry(cache_key(spec, root), root)
    if hit is None:
        raise DifficultyMissing(f"difficulty pre-pass: none cached for model {spec.model!r}, recipe {spec.recipe!r} "
                                f"and this decoding (hardest_k needs it); compute it with: {spec.command()}")
    return hit.pass_rates


def _is_chat(prompt: Any) -> bool:
    """A verl prompt: a non-empty sequence (Parquet gives an array) of messages with a role and a content."""
    if isinstance(prompt, str | bytes) or not hasattr(prompt, "__len__") or len(prompt) == 0:
        return False
    return all(isinstance(m, dict) and "role" in m and "content" in m for m in prompt)


def _load_pool(files: list[str], domains: list[str], limit: int | None) -> pd.DataFrame:
    frames = []
    for f in files:
        try:
            df = pd.read_parquet(f)
        except Exception as e:  # pyarrow's errors (ArrowInvalid, ArrowIOError, ...) share no base we can name
            raise UserError(f"--train-file: {f}: not a readable Parquet file ({type(e).__name__}: "
                            f"{str(e).splitlines()[0] if str(e) else ''}); give a Parquet file in the verl schema "
                            f"{list(_COLUMNS)}") from None
        missing = [c for c in _COLUMNS if c not in df.columns]
        if missing:
            raise UserError(f"--train-file: {f}: missing column(s) {missing}; expected the verl schema "
                            f"{list(_COLUMNS)}")
        unknown = sorted(set(df["domain"]) - set(domains))
        if unknown:
            raise UserError(f"--train-file: {f}: domain value(s) {unknown} not in the recipe's data.domains {domains}")
        if not len(df):
            raise UserError(f"--train-file: {f}: no rows; give a pool of at least one prompt")
        chat = [i for i, p in enumerate(df["prompt"]) if not _is_chat(p)]
        if chat:
            raise UserError(f"--train-file: {f}: row {chat[0]}: column 'prompt' must be a non-empty list of chat "
                            f"messages ({{'role': ..., 'content': ...}}, the verl schema); got "
                            f"{repr(df['prompt'].iloc[chat[0]])[:80]}")
        bad = [i for i, rm in enumerate(df["reward_model"]) if not (isinstance(rm, dict) and "ground_truth" in rm)]
        if bad:
            raise UserError(f"--train-file: {f}: row {bad[0]}: column 'reward_model' must be a mapping with "
                            "'ground_truth' (the verl schema)")
        frames.append(df)
    pool = pd.concat(frames, ignore_index=True)
    return pool.iloc[:limit] if limit is not None else pool


def _graded(pool: pd.DataFrame) -> tuple[list[str], list[str], list[dict]]:
    """(data_source, ground truth, extra_info) per row, extracted once (the grader reads them per response)."""
    extra = pool["extra_info"] if "extra_info" in pool.columns else [None] * len(pool)
    return (pool["data_source"].astype(str).tolist(), [str(rm["ground_truth"]) for rm in pool["reward_model"]],
            [dict(e) if isinstance(e, dict) else {} for e in extra])


def _score(graded: tuple[list[str], list[str], list[dict]], texts: list[str], rows: np.ndarray, k: int) -> np.ndarray:
    """(len(rows),) successes: the graders' `acc` summed over each prompt's K samples."""
    from evaluation.reward import compute_score

    src, gold, extra = graded
    acc = np.fromiter((bool(compute_score(src[i], t, gold[i], extra[i])["acc"])  # one grader call per response
                       for i, t in zip(np.repeat(rows, k), texts, strict=True)), dtype=np.int64, count=len(texts))
    return acc.reshape(len(rows), k).sum(axis=1)


def _rollout_successes(model_dir: Path, pool: pd.DataFrame, dec: Decoding, num_threads: int) -> np.ndarray:
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from transformers.utils import logging as hf_logging

    from training import rollout as ro

    hf_logging.disable_progress_bar()
    prev = (torch.get_num_threads(), torch.are_deterministic_algorithms_enabled())
    torch.set_num_threads(num_threads)  # as the trainer: fixed threads, deterministic kernels
    torch.use_deterministic_algorithms(True)
    try:
        tok = AutoTokenizer.from_pretrained(model_dir)
        model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32, attn_implementation="eager").eval()
        messages = [list(p) for p in pool["prompt"]]
        graded = _graded(pool)
        out = np.zeros(len(pool), dtype=np.int64)
        for c, lo in enumerate(range(0, len(pool), CHUNK_PROMPTS)):  # batched: one generate per chunk of prompts
            rows = np.arange(lo, min(lo + CHUNK_PROMPTS, len(pool)))
            seed = int(np.random.SeedSequence([dec.seed, c]).generate_state(1, np.uint64)[0] >> np.uint64(1))
            roll = ro.generate(model, tok, [messages[i] for i in rows], n=dec.samples,
                               max_new_tokens=dec.max_new_tokens, do_sample=dec.temperature > 0,
                               temperature=dec.temperature or 1.0, top_p=dec.top_p, top_k=dec.top_k, seed=seed)
            out[rows] = _score(graded, roll.texts, rows, dec.samples)
        return out
    finally:
        torch.set_num_threads(prev[0])
        torch.use_deterministic_algorithms(prev[1])


def run_prepass(spec: PrepassSpec, cache_root: Path | None = None) -> Difficulty:
    """The pre-pass of `spec`: from the cache when there (`cached`, nothing generated), else K rollouts per prompt,
    scored, written atomically (npz, then the JSON sidecar) and returned."""
    root = Path(cache_root or warmup.default_cache_root())
    key = cache_key(spec, root)
    hit = _read_entry(key, root)  # a corrupt entry or pool is exit 2 before the lock file is made
    if hit is not None:
        return hit
    files = _pool_files(spec, root)
    domains = list((spec.recipe_cfg.data or {}).get("domains", ["math", "logic", "science"]))
    pool = _load_pool(files, domains, spec.limit)
    with warmup._Lock(root / "locks" / f"difficulty-{key}.lock"):
        hit = _read_entry(key, root)  # another process may have built it meanwhile
        if hit is not None:
            return hit
        identity, model_dir = _model_identity(spec)
        if model_dir is None:
            assert spec.model_cfg is not None
            model_dir = str(warmup.base_model(spec.model_cfg, spec.recipe_cfg, root))
        successes = _rollout_successes(Path(model_dir), pool, spec.decoding, spec.recipe_cfg.trainer.num_threads)
        rates = successes / float(spec.decoding.samples)
        ids = np.arange(len(pool), dtype=np.int64)
        npz, side = entry_paths(key, root)
        with atomic_path(npz) as tmp, open(tmp, "wb") as fh:
            np.savez(fh, pass_rates=rates, successes=successes, prompt_ids=ids)
        meta = {"key": key, "version": DIFFICULTY_VERSION, "model": spec.model, "model_identity": identity,
                "recipe": spec.recipe, "pool_files": files, "pool_sha256": [sha256_file(f) for f in files],
                "limit": spec.limit, "pool_size": int(len(pool)), "decoding": asdict(spec.decoding),
                "chunk_prompts": CHUNK_PROMPTS, "mean_pass_rate": float(rates.mean()) if len(rates) else None,
                "command": spec.command()}
        atomic_write_json(side, meta, indent=1)
        return Difficulty(npz, rates, successes, ids, meta, cached=False)


def histogram(d: Difficulty) -> list[tuple[float, int]]:
    """(pass rate, prompts) for each possible rate j/K (K <= 16), else ten equal bins by their left edge."""
    k = int(d.meta["decoding"]["samples"])
    if k <= 16:
        counts = np.bincount(d.successes, minlength=k + 1)
        return [(j / k, int(c)) for j, c in enumerate(counts)]
    counts, edges = np.histogram(d.pass_rates, bins=10, range=(0.0, 1.0))
    return [(float(e), int(c)) for e, c in zip(edges[:-1], counts, strict=True)]


__all__ = ["CHUNK_PROMPTS", "DIFFICULTY_VERSION", "Decoding", "Difficulty", "DifficultyMissing", "PrepassSpec",
           "cache_key", "entry_paths", "histogram", "pass_rates_for", "run_prepass", "spec_for"]
