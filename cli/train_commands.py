"""`campaign train` (one run, local or verl backend) and `campaign data synthetic`."""

from __future__ import annotations

import json
from pathlib import Path

import typer

from cli.console import err
from cli.groups import command, subgroup
from cli.options import OutDirOpt
from cli.writable import out_dir_callback, refuse_replacing
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


# the most each count asks for (a bound stated in --help, so a typo cannot start hours of generation)
MAX_PER_DOMAIN, MAX_TEST_PER_DOMAIN, MAX_EVAL_ITEMS = 1_000_000, 100_000, 100_000
SYNTHETIC_OUTPUTS = ("train.parquet", "test.parquet", "eval")


def synthetic_cmd(
    out_dir: OutDirOpt[Path],
    seed: int = typer.Option(42, "--seed", min=0, help="generator seed"),
    per_domain: int = typer.Option(2000, "--per-domain", help=f"training prompts per domain (1 to {MAX_PER_DOMAIN:,})"),
    test_per_domain: int = typer.Option(32, "--test-per-domain",
                                        help=f"held-out prompts per domain (1 to {MAX_TEST_PER_DOMAIN:,})"),
    eval_items: int = typer.Option(16, "--eval-items", help=f"items per benchmark fixture (1 to {MAX_EVAL_ITEMS:,})"),
    suite: str = typer.Option("db12", "--suite", help="suite whose benchmarks get fixtures"),
    heldout: str = typer.Option("iid", "--heldout", help="iid: held-out prompts drawn like training ones (as the "
                                "cpu_tiny recipe); disjoint: never trained on (needs enough distinct prompts)"),
    force: bool = typer.Option(False, "--force", help="replace train.parquet, test.parquet and eval/ already in --out"),
) -> None:
    """Write into --out FOLDER the synthetic corpus (train/test.parquet) and eval fixtures (eval/<benchmark>.parquet
    plus the manifest.json that declares them fixtures, so `campaign submit --data-dir FOLDER/eval` accepts them).

    Every option is checked before anything is written; the files are built beside --out and moved in at the end,
    so a failure leaves --out as it was; what is already there is replaced only with --force."""
    from evaluation.suite import SuiteError, load_suite

    for name, val, most in (("--per-domain", per_domain, MAX_PER_DOMAIN),
                            ("--test-per-domain", test_per_domain, MAX_TEST_PER_DOMAIN),
                            ("--eval-items", eval_items, MAX_EVAL_ITEMS)):
        if not 1 <= val <= most:
            raise UserError(f"{name}: got {val}; must be between 1 and {most:,}")
    if heldout not in ("iid", "disjoint"):
        raise UserError(f"--heldout: got {heldout!r}; choose iid or disjoint")
    try:
        load_suite(suite)
    except (SuiteError, ValueError, KeyError, FileNotFoundError) as e:
        raise UserError(f"--suite {suite}: {e}") from e
    refuse_replacing("--out", out_dir, [out_dir / n for n in SYNTHETIC_OUTPUTS], force)
    paths, n_fixtures = _write_synthetic(out_dir, seed=seed, per_domain=per_domain, test_per_domain=test_per_domain,
                                         eval_items=eval_items, suite=suite, heldout=heldout)
    typer.echo(f"train: {paths['train']}\ntest: {paths['test']}\neval fixtures: {out_dir / 'eval'} "
               f"({n_fixtures} benchmarks, manifest.json)")


def _write_synthetic(out_dir: Path, *, seed: int, per_domain: int, test_per_domain: int, eval_items: int,
                     suite: str, heldout: str) -> tuple[dict[str, Path], int]:
    """Build the corpus and fixtures in a hidden folder beside `out_dir`, then move each into `out_dir`."""
    import shutil
    import tempfile

    from evaluation.benchmark_data import write_manifest
    from training import synthetic

    out_dir.parent.mkdir(parents=True, exist_ok=True)
    stage = Path(tempfile.mkdtemp(prefix=f".{out_dir.name}.", dir=out_dir.parent))
    try:
        synthetic.write_corpus(stage, seed=seed, train_per_domain=per_domain, test_per_domain=test_per_domain,
                               heldout=heldout)
        fixtures = synthetic.write_eval_fixtures(stage / "eval", seed=seed, n_items=eval_items, suite=suite)
        write_manifest(stage / "eval", sorted(fixtures), kind="fixture")
        out_dir.mkdir(exist_ok=True)
        for name in SYNTHETIC_OUTPUTS:
            if (out_dir / name).is_dir():
                shutil.rmtree(out_dir / name)
            (stage / name).replace(out_dir / name)
    except (ValueError, KeyError, FileNotFoundError) as e:
        raise UserError(f"synthetic data: {e}") from e
    finally:
        shutil.rmtree(stage, ignore_errors=True)
    return {"train": out_dir / "train.parquet", "test": out_dir / "test.parquet"}, len(fixtures)


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
