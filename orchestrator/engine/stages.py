"""Stage entrypoints run inside Ray Jobs: train (+ merge) and evaluate (+ record), idempotent.

    python -m orchestrator.engine.stages train    --run-spec <workdir>/runs/<key>/run_spec.json --workdir <workdir>
    python -m orchestrator.engine.stages evaluate --run-spec ... --workdir ...

Each stage writes its outputs under `<workdir>/runs/<campaign>/<run_key>/`, then a `<stage>_done.json`
manifest last (atomic), listing the files and their sha256. The orchestrator marks the ledger
state only after `verify_<stage>` re-checks that manifest against the files (rule 4), and a stage
whose manifest verifies is skipped on rerun. Jobs never write MLflow (SQLite allows one writer):
they leave JSONL/Parquet the orchestrator ingests.

One execution at a time per run dir: `main` holds an exclusive lock on `<run dir>/.stage.lock`
(flock, released by the kernel when the process dies) for the whole stage, so a second execution of the
same attempt exits 1 with `windtunnel-stage-error: busy` instead of writing the same files.

Fencing (a stage process on a lost node): the scheduler passes each attempt's submission id (`--attempt`,
ending in `-a<N>`). An attempt writes its id to `<run dir>/.<stage>.fence` when it starts; a NEWER attempt
that finds the lock held by an older one does not wait for it (its node may be dead while the process runs on,
re-parented to init): it takes the fence and runs. Every `<stage>_done.json` carries its attempt, and is
written only by the attempt that holds the fence, so a late finish of the fenced process never overwrites the
retry's manifest (it exits 1 with `windtunnel-stage-error: fenced`).

Exit codes: 0 done, 2 deterministic configuration error (not retried), 1 anything else.
"""

from __future__ import annotations

import argparse
import fcntl
import json
import os
import re
import socket
import sys
import time
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any
from collections.abc import Iterator

import orchestrator
from orchestrator.engine.grid import RunSpec
from orchestrator.engine.paths import inside, run_dir  # noqa: F401 - inside: this module's API too
from training.errors import StageConfigError, StageHealthGateError
from training.backend import Checkpoint, EvalRequest, TrainingConfigError
from wtcommon.atomic import atomic_write_json, atomic_write_text, json_file_text
from wtcommon.hashing import sha256_file
from wtcommon.errors import RunFailed
from orchestrator.engine import start_latency

if TYPE_CHECKING:
    from evaluation.run_meta import RunMeta

EXIT_CONFIG = 2
EXIT_HEALTH_GATE = 3


class StageBusy(RunFailed):
    """Another process is executing a stage in this run dir right now."""


class StageFenced(RunFailed):
    """A newer attempt of this stage took the run dir over: this (older) one must not write its manifest."""


LOCK_NAME = ".stage.lock"


def attempt_number(attempt: str) -> int:
    """N of a submission id ending in `-a<N>`; 0 for none (a stage run by hand)."""
    m = re.search(r"-a(\d+)$", attempt or "")
    return int(m.group(1)) if m else 0


def _fence(rd: Path, stage: str) -> Path:
    return rd / f".{stage}.fence"


def fence_holder(rd: Path, stage: str) -> str:
    try:
        return _fence(rd, stage).read_text().strip()
    except OSError:
        return ""


def check_fence(rd: Path, stage: str, attempt: str) -> None:
    """StageFenced when a newer attempt than `attempt` holds the stage's fence."""
    holder = fence_holder(rd, stage)
    if attempt and holder and holder != attempt and attempt_number(holder) > attempt_number(attempt):
        raise StageFenced(f"run dir {rd}: attempt {holder} took over {stage} from {attempt} (its node was lost "
                          "or it was retried); this attempt's late outputs are not written")


@contextmanager
def stage_lock(rd: Path, stage: str, attempt: str = "") -> Iterator[None]:
    """Hold `<rd>/.stage.lock` exclusively (non-blocking) for one stage execution; StageBusy if held, unless
    the holder is an older attempt of the same stage: then take its fence and run without the lock."""
    rd.mkdir(parents=True, exist_ok=True)
    f = open(rd / LOCK_NAME, "a+")
    try:
        try:
            fcntl.flock(f.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            f.seek(0)
            holder = f.read().strip() or "unknown process"
            parts = holder.split()
            old = parts[-1] if len(parts) > 1 and parts[-2] == "attempt" else ""
            if not (attempt and old and parts[0] == stage and attempt_number(old) < attempt_number(attempt)):
                raise StageBusy(f"run dir {rd}: another stage execution holds {LOCK_NAME} ({holder}); "
                                f"not running {stage} twice in one run dir") from None
            check_fence(rd, stage, attempt)
            atomic_write_text(_fence(rd, stage), attempt)
            print(f"windtunnel: fenced {old} (still holding {LOCK_NAME}: {holder}); {attempt} runs {stage}",
                  file=sys.stderr, flush=True)
            yield
            return
        if attempt:
            check_fence(rd, stage, attempt)
            atomic_write_text(_fence(rd, stage), attempt)
        f.seek(0)
        f.truncate()
        f.write(f"{stage} {socket.gethostname()}:{os.getpid()} since {time.time():.0f}"
                + (f" attempt {attempt}" if attempt else "") + "\n")
        f.flush()
        yield
    finally:
        f.close()


CANCELLED = ".cancelled_attempts"


def cancel_attempt(rd: Path, attempt: str) -> None:
    """Add `attempt` to the run dir's cancel list (read by `main` before it does anything)."""
    rd.mkdir(parents=True, exist_ok=True)
    with open(rd / CANCELLED, "a") as f:
        f.write(attempt + "\n")


def cancelled(rd: Path, attempt: str) -> bool:
    try:
        return bool(attempt) and attempt in (rd / CANCELLED).read_text().split()
    except OSError:
        return False


def write_manifest(rd: Path, stage: str, attempt: str, manifest: dict[str, Any]) -> None:
    """`<rd>/<stage>_done.json`, carrying its attempt, unless a newer attempt holds the fence (StageFenced)."""
    check_fence(rd, stage, attempt)
    atomic_write_json(rd / f"{stage if stage == 'train' else 'eval'}_done.json",
                      {**manifest, **({"attempt": attempt} if attempt else {})}, indent=2)


def write_run_spec(spec: RunSpec, workdir: Path) -> Path:
    path = run_dir(workdir, spec) / "run_spec.json"
    text = json_file_text(spec.to_dict(), 2)
    if not path.exists() or path.read_text() != text:
        atomic_write_text(path, text)
    return path


def _resolve(p: str | None, workdir: Path) -> Path | None:
    if not p:
        return None
    path = Path(str(p).replace("${workdir}", str(workdir)))
    return path if path.is_absolute() else Path(workdir) / path


# ---- train + merge ---------------------------------------------------------------------------

def _weights(ckpt: Path) -> list[Path]:
    return sorted(ckpt.glob("*.safetensors")) or sorted(ckpt.glob("pytorch_model*.bin"))


def merge(ckpts: list[Path]) -> list[Path]:
    """An HF directory for each checkpoint: itself when it already is one, else verl's FSDP merger's output,
    every checkpoint that needs it merged in one process (`training.verl_merge`)."""
    out: list[Path] = []
    pending: list[tuple[Path, Path]] = []
    for ckpt in ckpts:
        if (ckpt / "config.json").exists() and _weights(ckpt):
            out.append(ckpt)
            continue
        actor = ckpt / "actor" if (ckpt / "actor").is_dir() else ckpt
        target = actor / "huggingface"
        out.append(target)
        if not ((target / "config.json").exists() and _weights(target)):
            pending.append((actor, target))
    if pending:
        import subprocess

        from training.verl_merge import merge_command

        proc = subprocess.run(merge_command(pending), capture_output=True, text=True)
        failed = [str(a) for a, t in pending if not _weights(t)]
        if proc.returncode != 0 or failed:
            raise RunFailed(f"merge of {', '.join(failed) or 'the checkpoints'} failed (rc={proc.returncode}): "
                            f"{proc.stderr[-800:]}")
    return out


def _train_files(spec: RunSpec, workdir: Path) -> list[str]:
    if spec.data.get("corpus") == "synthetic":
        return []  # the local backend generates the recipe's synthetic corpus (content in run_key via recipe)
    from training.corpus import corpus_dir

    root = _resolve(spec.data.get("root"), workdir) or Path(workdir) / "data"
    train = corpus_dir(root, spec.data["corpus"], spec.regime) / "train.parquet"
    if not train.exists():
        raise StageConfigError(f"{train}: corpus not built; run `campaign data train --out {root}` first")
    return [str(train)]


def stage_train(spec: RunSpec, workdir: Path, attempt: str = "") -> dict[str, Any]:
    rd = run_dir(workdir, spec)
    done = verify_train(spec, workdir)
    if done is not None:
        return done
    out = rd / "train"
    t0 = time.time()
    from training.backend import TrainRequest
    from training.registry import get_backend

    try:
        backend = get_backend(spec.backend)
        req = TrainRequest(
            run_id=spec.run_id, run_key=spec.run_key, policy=dict(spec.policy.cfg), seed=spec.seed, out_dir=out,
            recipe=spec.recipe_cfg, model_path=spec.model_cfg.path or f"builtin:{spec.model}",
            train_files=_train_files(spec, workdir) if backend.needs_train_files else [], total_steps=spec.steps,
            save_freq=spec.save_freq, model=spec.model_cfg, rollout_token_budget=spec.rollout_token_budget,
            # base models and synthetic corpora are content-addressed: share them across work
            # directories (WINDTUNNEL_CACHE, else the training backend's ~/.cache/windtunnel)
            cache_dir=os.environ.get("WINDTUNNEL_CACHE") or None,
        )
        result = backend.train(req).to_json()
    except TrainingConfigError as exc:  # deterministic: no retry
        raise StageConfigError(str(exc)) from None
    listed = sorted(result["checkpoints"], key=lambda c: c["step"])
    ckpts = [{"step": int(c["step"]), "path": str(hf), "weights_sha256": {p.name: sha256_file(p) for p in _weights(hf)}}
             for c, hf in zip(listed, merge([Path(c["path"]) for c in listed]), strict=True)]
    if not ckpts:
        raise RunFailed(f"training of {spec.run_id} produced no checkpoint")
    compute = {"wall_s": round(time.time() - t0, 3), "gpu_s": 0.0, "rollout_tokens": 0, "update_tokens": 0,
               **{k: v for k, v in result.get("compute", {}).items()}}
    manifest = {"run_key": spec.run_key, "checkpoints": ckpts, "metrics_path": result["metrics_path"],
                "compute": compute}
    if (out / "placement.json").exists():  # a multi-node run: the shared cluster's nodes it held
        manifest["placement"] = json.loads((out / "placement.json").read_text())
    write_manifest(rd, "train", attempt, manifest)
    return manifest


def verify_train(spec: RunSpec, workdir: Path) -> dict[str, Any] | None:
    """The train manifest when every listed checkpoint's weights still match their sha256."""
    path = run_dir(workdir, spec) / "train_done.json"
    if not path.exists():
        return None
    try:
        m = json.loads(path.read_text())
        if m.get("run_key") != spec.run_key or not m["checkpoints"]:
            return None
        for c in m["checkpoints"]:
            d = Path(c["path"])
            if not (d / "config.json").exists():
                return None
            for name, digest in c["weights_sha256"].items():
                if not (d / name).exists() or sha256_file(d / name) != digest:
                    return None
        if not Path(m["metrics_path"]).exists():
            return None
        return m
    except (ValueError, KeyError, TypeError):
        return None


# ---- evaluate + record -----------------------------------------------------------------------

def run_meta(spec: RunSpec, step: int) -> RunMeta:
    """The labels of the run's records at one step (`eval_hash` is added by `eval_request`)."""
    from evaluation.run_meta import RunMeta

    return RunMeta(run_key=spec.run_key, run_id=spec.run_id, campaign=spec.group, model=spec.model,
                   policy=spec.policy.name, mechanism=spec.policy.mechanism, seed=spec.seed, step=step,
                   regime=spec.regime, config_hash=spec.config_hash)


def eval_data_dir(spec: RunSpec, workdir: Path) -> Path:
    """The suite's data of the run: its `evaluation.data_dir` (relative to the work directory), else
    `<workdir>/data/eval`."""
    return _resolve(spec.evaluation.data_dir, workdir) or Path(workdir) / "data" / "eval"


def eval_request(spec: RunSpec, workdir: Path, checkpoint: Checkpoint) -> EvalRequest:
    """What the run's training backend needs to evaluate one of its checkpoints."""
    from evaluation.settings import evaluation_hash

    opts, rd = spec.evaluation, run_dir(workdir, spec)
    data_dir = eval_data_dir(spec, workdir)
    return EvalRequest(
        checkpoint=checkpoint, suite=spec.suite,
        run_meta=run_meta(spec, checkpoint.step).with_eval_hash(evaluation_hash(spec.eval_key, data_dir)),
        recipe_name=spec.recipe_name, recipe=spec.recipe_cfg, options=opts, data_dir=data_dir,
        cache_dir=Path(workdir) / "cache" / "eval", out_dir=rd / "eval" / f"step_{checkpoint.step}", run_dir=rd,
    )


def stage_evaluate(spec: RunSpec, workdir: Path, attempt: str = "") -> dict[str, Any]:
    import pandas as pd

    from analysis.records import read_records, write_records

    rd = run_dir(workdir, spec)
    done = verify_evaluate(spec, workdir)
    if done is not None:
        return done
    trained = verify_train(spec, workdir)
    if trained is None:
        raise StageConfigError(f"run {spec.run_id}: no verified training output; train it first")
    ckpts = trained["checkpoints"] if spec.evaluation.all_checkpoints else trained["checkpoints"][-1:]
    from training.registry import get_backend

    try:
        backend = get_backend(spec.backend)
    except TrainingConfigError as exc:  # deterministic: no retry
        raise StageConfigError(str(exc)) from None
    t0 = time.time()
    reqs = [eval_request(spec, workdir, Checkpoint(int(c["step"]), Path(c["path"]))) for c in ckpts]
    # every row says which evaluation settings and data produced it, whatever the backend wrote
    frames = [backend.evaluate(req).assign(eval_hash=req.run_meta.eval_hash) for req in reqs]
    records = rd / "records.parquet"
    write_records(with_budget_columns(pd.concat(frames, ignore_index=True), spec, trained), records)
    n = len(read_records(records, suite=spec.suite))  # re-read through the validating reader
    manifest = {"run_key": spec.run_key, "records": str(records), "rows": n, "sha256": sha256_file(records),
                "eval_wall_s": round(time.time() - t0, 3), "steps": [c["step"] for c in ckpts],
                "eval_key": spec.eval_key, "eval_hash": reqs[0].run_meta.eval_hash}
    write_manifest(rd, "evaluate", attempt, manifest)
    return manifest


def with_budget_columns(frame: Any, spec: RunSpec, trained: dict[str, Any]) -> Any:
    """A budgeted run's records carry its budget and the rollout tokens generated by each checkpoint (the
    training log's `tokens/rollout_cum` at that step; NaN where the log has none: missing, never zero), so an
    analysis of the records alone pairs runs at the budget. An equal-step run's records are returned unchanged."""
    if spec.rollout_token_budget is None:
        return frame
    from wtcommon.metrics import read_metrics_jsonl

    rows = read_metrics_jsonl(trained["metrics_path"], torn_tail="skip")[0]
    cum = {int(r["step"]): float(r["tokens/rollout_cum"]) for r in rows  # a resumed run's repeat: the last wins
           if "tokens/rollout_cum" in r and "step" in r}
    return frame.assign(rollout_token_budget=float(spec.rollout_token_budget),
                        rollout_tokens=frame["step"].map(lambda st: cum.get(int(st), float("nan"))).astype(float))


def evaluated_key(spec: RunSpec, workdir: Path) -> str | None:
    """The evaluation key the run's records were scored with (its eval_done.json), or None when there are none;
    "" for records written before evaluation generations (their settings are unknown)."""
    path = run_dir(workdir, spec) / "eval_done.json"
    try:
        return str(json.loads(path.read_text()).get("eval_key", "")) if path.exists() else None
    except ValueError:
        return None


def verify_evaluate(spec: RunSpec, workdir: Path) -> dict[str, Any] | None:
    """The evaluate manifest when its records still match their sha256 and were scored with the run's current
    evaluation settings (a changed gate or generation limit re-evaluates; the checkpoints stay)."""
    path = run_dir(workdir, spec) / "eval_done.json"
    if not path.exists():
        return None
    try:
        m = json.loads(path.read_text())
        rec = Path(m["records"])
        if m.get("run_key") != spec.run_key or not rec.exists() or sha256_file(rec) != m["sha256"] or m["rows"] <= 0:
            return None
        if m.get("eval_key") != spec.eval_key:
            return None
        return m
    except (ValueError, KeyError, TypeError):
        return None


STAGES = {"train": (stage_train, verify_train), "evaluate": (stage_evaluate, verify_evaluate)}


def load_run_spec(arg: str) -> RunSpec:
    """`--run-spec` is a path to the run's JSON or the JSON itself."""
    text = arg if arg.lstrip().startswith("{") else Path(arg).read_text()
    return RunSpec.from_json(text)


def main(argv: list[str] | None = None) -> int:
    imported = time.time()  # this module's imports are done (orchestrator.engine.start_latency)
    ap = argparse.ArgumentParser(prog="python -m orchestrator.engine.stages", description=__doc__.splitlines()[0])
    ap.add_argument("stage", choices=sorted(STAGES))
    ap.add_argument("--run-spec", required=True)
    ap.add_argument("--workdir", required=True)
    ap.add_argument("--attempt", default="", help="this attempt's submission id (fencing; see the module doc)")
    a = ap.parse_args(argv)
    workdir = Path(a.workdir).resolve()
    try:
        spec = load_run_spec(a.run_spec)
        if cancelled(run_dir(workdir, spec), a.attempt):  # cancelled while Ray still held the job PENDING
            print(f"windtunnel-stage-error: cancelled: attempt {a.attempt} was cancelled before it started",
                  file=sys.stderr, flush=True)
            return 1
        with stage_lock(run_dir(workdir, spec), a.stage, a.attempt):
            from wtcommon.phase import PHASE_ENV, PHASE_FILE, set_phase

            os.environ[PHASE_ENV] = str(run_dir(workdir, spec) / PHASE_FILE)  # `campaign status` reads it
            set_phase({"train": "training: starting", "evaluate": "evaluating: loading the checkpoint"}.get(
                a.stage, a.stage))
            start_latency.record(run_dir(workdir, spec), a.stage, a.attempt,
                                 {"main": orchestrator.STARTED_AT, "imported": imported, "begin": time.time()})
            out = STAGES[a.stage][0](spec, workdir, a.attempt)
    except StageConfigError as exc:
        print(f"windtunnel-stage-error: config: {exc}", file=sys.stderr, flush=True)
        return EXIT_CONFIG
    except StageHealthGateError as exc:
        print(f"windtunnel-stage-error: health_gate: {exc}", file=sys.stderr, flush=True)
        return EXIT_HEALTH_GATE
    except StageBusy as exc:
        print(f"windtunnel-stage-error: busy: {exc}", file=sys.stderr, flush=True)
        return 1
    except StageFenced as exc:
        print(f"windtunnel-stage-error: fenced: {exc}", file=sys.stderr, flush=True)
        return 1
    except Exception as exc:
        import traceback  # only a failing stage prints one: not a cost of every stage's start

        traceback.print_exc()
        print(f"windtunnel-stage-error: {type(exc).__name__}: {exc}", file=sys.stderr, flush=True)
        return 1
    print(json.dumps({"stage": a.stage, "ok": True, **{k: v for k, v in out.items() if k != "checkpoints"}},
                     default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
