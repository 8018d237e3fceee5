"""`campaign data difficulty`: the base model's pass rate per training prompt (the pre-pass `hardest_k` reads),
computed once per model + pool + decoding into the user cache (training/difficulty.py)."""

from __future__ import annotations

import json
from pathlib import Path

import typer

from cli.groups import command, subgroup
from cli.options import JsonOpt
from cli.writable import out_dir_callback


def difficulty_cmd(
    model: str | None = typer.Option(None, "--model", help="campaigns/model/<name>.yaml (e.g. tiny_qwen2) or an "
                                     "HF model directory (default: the recipe's model)"),
    recipe: str = typer.Option("cpu_tiny", "--recipe", help="campaigns/recipe/<name>.yaml or a path: the pool "
                               "(its synthetic corpus) and the rollout defaults"),
    train_file: list[str] | None = typer.Option(None, "--train-file", help="Parquet in the verl schema instead of "
                                                "the recipe's corpus (repeatable; rows in the order given)"),
    samples: int | None = typer.Option(None, "-k", "--samples", help="samples per prompt (default: rollout.n)"),
    temperature: float | None = typer.Option(None, "--temperature", help="default: rollout.temperature; 0 = greedy"),
    top_p: float | None = typer.Option(None, "--top-p", help="default: rollout.top_p"),
    top_k: int | None = typer.Option(None, "--top-k", help="default: rollout.top_k (0 = off)"),
    max_new_tokens: int | None = typer.Option(None, "--max-new-tokens", help="default: rollout.max_new_tokens"),
    seed: int = typer.Option(0, "--seed", help="sampling seed"),
    limit: int | None = typer.Option(None, "--limit", metavar="N", help="only the first N prompts (smoke use)"),
    cache_dir: Path | None = typer.Option(None, "--cache-dir", callback=out_dir_callback,
                                          help="default $WINDTUNNEL_CACHE or "
                                          "~/.cache/windtunnel"),
    as_json: JsonOpt = False,
) -> None:
    """Roll out K samples per training prompt with the model, grade them as training does, and cache each
    prompt's pass rate (successes / K); a rerun with the same settings prints `cached` and generates nothing."""
    from cli.writable import check_writable
    from training.difficulty import histogram, run_prepass, spec_for
    from training.warmup import default_cache_root

    check_writable(Path(cache_dir or default_cache_root()),  # before a model is loaded: exit 2, nothing written
                   "--cache-dir" if cache_dir else "the cache ($WINDTUNNEL_CACHE or ~/.cache/windtunnel)")
    spec = spec_for(model, recipe, train_files=train_file or (), samples=samples, temperature=temperature,
                    max_new_tokens=max_new_tokens, top_p=top_p, top_k=top_k, seed=seed, limit=limit)  # UserError: 2
    res = run_prepass(spec, cache_dir)
    hist = histogram(res)
    if as_json:
        typer.echo(json.dumps({"path": str(res.path), "cached": res.cached, "pool_size": len(res.pass_rates),
                               "mean_pass_rate": res.meta["mean_pass_rate"], "decoding": res.meta["decoding"],
                               "histogram": [{"pass_rate": r, "prompts": c} for r, c in hist]}, indent=1))
        return
    d = spec.decoding
    typer.echo(f"{'cached' if res.cached else 'computed'}: {res.path}")
    typer.echo(f"pool: {len(res.pass_rates)} prompts, K={d.samples}, temperature {d.temperature:g}, top_p "
               f"{d.top_p:g}, max_new_tokens {d.max_new_tokens}, seed {d.seed}; mean pass rate "
               f"{res.meta['mean_pass_rate']:.3f}")
    width, most = 40, max((c for _, c in hist), default=0) or 1
    for rate, count in hist:
        typer.echo(f"  pass rate {rate:4.2f}  {count:7d}  {'#' * round(width * count / most)}")


def register(app: typer.Typer) -> None:
    """Attach `campaign data difficulty` to the shared `data` group."""
    group = subgroup(app, "data", "Build training corpora and evaluation data.")
    command(group, "difficulty", difficulty_cmd)
