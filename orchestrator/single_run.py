"""One training run outside a campaign (`campaign train`): the recipe, model and policy files resolved into the
`TrainRequest` a backend takes, checked before anything is written (errors name the file and field)."""

from __future__ import annotations

from pathlib import Path

from training.backend import TrainRequest


def train_request(
    *, backend: str, policy: Path, seed: int, out_dir: Path, recipe: str, steps: int | None,
    save_freq: int | None, model: str | None, mlflow_uri: str | None, cache_dir: Path | None,
    train_files: list[str] | None = None,
) -> TrainRequest:
    """Resolve recipe, model and policy files into a `TrainRequest`; its run key hashes what decides training
    (policy, seed, recipe, model, train files), as a campaign run's does."""

    from training.backend import TrainingError
    from training.config import ModelConfig, RecipeConfig, load_model_config, load_recipe
    from training.warmup import content_hash

    from policies import load_policy

    from orchestrator.engine.plugins import add_project_path, project_root_of_policy

    # Strict validation (file, YAML, fields) before anything is written; the run gets the resolved config.
    add_project_path(project_root_of_policy(policy))  # the policy's plugin modules live in its project directory
    pol = dict(load_policy(policy, seed=seed).config)
    rec = RecipeConfig.of(load_recipe(recipe), f"recipe {recipe}")
    if (rec.backend or backend) != backend:
        raise TrainingError(f"recipe {recipe!r} is for backend {rec.backend!r}, not {backend!r}; pick another "
                            "--recipe")
    model_name = model or rec.model
    if not model_name:
        raise TrainingError(f"recipe {recipe!r}: model: missing; pass --model campaigns/model/<name>.yaml or a name")
    mcfg = ModelConfig.of(load_model_config(model_name), f"model {model_name}")
    if mcfg.path is None:
        raise TrainingError(f"model {model_name!r}: path: missing (an HF id/directory or builtin:<name>)")
    run_key = content_hash({"policy": pol, "seed": seed, "recipe": rec.raw, "model": mcfg.raw,
                            "train_files": train_files or []})
    return TrainRequest(
        run_id=f"{pol['name']}_s{seed}", run_key=run_key, policy=pol, seed=seed, out_dir=out_dir, recipe=rec,
        model_path=mcfg.path, train_files=list(train_files or []), total_steps=int(steps or 0),
        save_freq=int(save_freq or 0), model=mcfg, mlflow_uri=mlflow_uri or None,
        cache_dir=str(cache_dir) if cache_dir else None,
    )
