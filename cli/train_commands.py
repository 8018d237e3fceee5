"""`campaign train` (one run, local or verl backend) and `campaign data synthetic`."""

from __future__ import annotations

import json
from pathlib import Path

import typer

from cli.console import err
from cli.groups import command, subgroup
from cli.options import OutDirOpt
from cli.writable import out_dir_callback
from wtcommon.errors import UserError


def train(
    out_dir: OutDirOpt[Path],
    policy: Path = typer.Option(..., "--policy", help="policy YAML, e.g. campaigns/policy/topk.yaml"),
    seed: int = typer.Option(..., "--seed", help="run seed: data order, sampling and policy randomness"),
    backend: str = typer.Option("local", "--backend", help="local (CPU, tiny models) or verl (GPU)"),
    recipe: str = typer.Option("cpu_tiny", "--recipe", help="campaigns/recipe/<name>.yaml or a path"),
    steps: int | None = typer.Option(None, "--steps", help="override the recipe's total steps"),
    save_freq: int | None = typer.Option(None, "--save-freq", help="override the checkpoint interval"),
    model: str | None = typer.Option(None, "--model", help="campaigns/model/<name>.yaml (default: the recipe's)"),
    train_file: list[str] | None = typer.Option(None, "--train-file",
                                                help="Parquet in the study schema (repeatable)"),
    mlflow_uri: str | None = typer.Option(None, "--mlflow-uri", help="default sqlite:///<out>/mlflow.db"),
    no_mlflow: bool = typer.Option(False, "--no-mlflow", help="write only metrics.jsonl"),
    cache_dir: Path | None = typer.Option(None, "--cache-dir", callback=out_dir_callback,
                                          help="base-model/data cache (default ~/.cache/windtunnel)"),
) -> None:
    """Train one policy at one seed and print the checkpoints and compute.

    --out FOLDER is the run directory: checkpoints/, metrics.jsonl, result.json."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    from training.backend import TrainingError
    from orchestrator.single_run import train_request
    from orchestrator.tracking import default_uri
    from training.registry import get_backend

    from orchestrator.engine.ranges import check_seed, check_steps

    if backend not in ("local", "verl"):
        raise UserError(f"--backend: got {backend!r}; choose local or verl")
    for problem in (check_seed("--seed", seed), check_steps("--steps", steps),
                    check_steps("--save-freq", save_freq)):
        if problem:
            raise UserError(problem)
    try:
        uri = None if no_mlflow else (mlflow_uri or default_uri(out_dir))
        req = train_request(backend=backend, policy=policy, seed=seed, out_dir=out_dir, recipe=recipe,
                            steps=steps, save_freq=save_freq, model=model, mlflow_uri=uri, cache_dir=cache_dir,
                            train_files=train_file)
        if backend == "local":
            from training.local import run_training

            with Progress(TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(),
                          TextColumn("{task.fields[info]}"), TimeElapsedColumn(), console=err) as bar:
                task = bar.add_task(f"train {req.run_id}", total=req.total_steps or None, info="")

                def progress(step: int, total: int, row: dict) -> None:
                    bar.update(task, completed=step, total=total,
                               info=f"reward {row.get('reward/mean', float('nan')):.3f}")

                sink = None
                if uri:
                    from orchestrator.tracking import MlflowTrainingSink

                    sink = MlflowTrainingSink(uri)
                result = run_training(req, progress=progress, sink=sink)
        else:
            result = get_backend(backend).train(req)
    except TrainingError as e:  # this command's settings did not train: exit 2, as it always said
        raise UserError(str(e)) from e
    out_dir.mkdir(parents=True, exist_ok=True)
    for c in result.checkpoints:
        typer.echo(f"checkpoint step {c.step}: {c.path}")
    typer.echo(f"metrics: {result.metrics_path}")
    _policy_line(Path(result.metrics_path))
    typer.echo("compute: " + json.dumps({k: round(v, 2) if isinstance(v, float) else v
                                         for k, v in result.compute.items()}))


def synthetic_cmd(
    out_dir: OutDirOpt[Path],
    seed: int = typer.Option(42, "--seed", help="generator seed"),
    per_domain: int = typer.Option(2000, "--per-domain", help="training prompts per domain"),
    test_per_domain: int = typer.Option(32, "--test-per-domain", help="held-out prompts per domain"),
    eval_items: int = typer.Option(16, "--eval-items", help="items per benchmark fixture"),
    suite: str = typer.Option("db12", "--suite", help="suite whose benchmarks get fixtures"),
    heldout: str = typer.Option("iid", "--heldout", help="iid: held-out prompts drawn like training ones (as the "
                                "cpu_tiny recipe); disjoint: never trained on (needs enough distinct prompts)"),
) -> None:
    """Write into --out FOLDER the synthetic corpus (train/test.parquet) and eval fixtures (eval/<benchmark>.parquet
    plus the manifest.json that declares them fixtures, so `campaign submit --data-dir FOLDER/eval` accepts them)."""
    from evaluation.benchmark_data import write_manifest
    from training import synthetic

    for name, val in (("--per-domain", per_domain), ("--test-per-domain", test_per_domain),
                      ("--eval-items", eval_items)):
        if val < 1:
            raise UserError(f"{name}: got {val}; must be >= 1")
    if heldout not in ("iid", "disjoint"):
        raise UserError(f"--heldout: got {heldout!r}; choose iid or disjoint")
    try:
        paths = synthetic.write_corpus(out_dir, seed=seed, train_per_domain=per_domain,
                                       test_per_domain=test_per_domain, heldout=heldout)
        fixtures = synthetic.write_eval_fixtures(out_dir / "eval", seed=seed, n_items=eval_items, suite=suite)
        write_manifest(out_dir / "eval", sorted(fixtures), kind="fixture")
    except (ValueError, KeyError, FileNotFoundError) as e:
        raise UserError(f"synthetic data: {e}") from e
    typer.echo(f"train: {paths['train']}\ntest: {paths['test']}\neval fixtures: {out_dir / 'eval'} "
               f"({len(fixtures)} benchmarks, manifest.json)")


def register(app: typer.Typer) -> None:
    """Attach this area's commands to the main app."""
    command(app, "train", train)
    data_app = subgroup(app, "data", "Build training corpora and evaluation data.")
    command(data_app, "synthetic", synthetic_cmd)


def _policy_line(metrics_path: Path) -> None:
    """One line with the policy's own metrics, mean over the steps (`kept_frac`, `weight_std`, a mixer's
    realised proportions): what a smoke test is run to see, without opening metrics.jsonl."""
    from wtcommon.metrics import policy_metric_means

    means, steps = policy_metric_means(metrics_path)
    if means:
        typer.echo(f"policy (mean over {steps} steps): " + ", ".join(f"{k} {v:.3g}" for k, v in means.items()))
