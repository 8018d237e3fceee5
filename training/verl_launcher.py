"""The verl backend: build the `verl.trainer.main_ppo` argv from recipe + model + policy + seed, run it, merge.

Why: the published study set only `data.seed` and left every other seed knob at its default, wrote
checkpoints to relative directories and silently resumed into stale ones (STUDY.md §2.2, §7). Here
every knob of VERL.md §4 is set from the run seed, both reward key sets point at the one grader
(`evaluation.reward.compute_score`), the checkpoint directory is absolute and per run, and the
command is an argv list (never a shell string) run in its own process group so a cancel kills
exactly this run's processes.
"""

from __future__ import annotations

import json
import math
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any
from collections.abc import Sequence

import yaml

from training import launches
from training.backend import (Checkpoint, TrainingBackend, TrainingConfigError, TrainingError,
                              TrainRequest, TrainResult)
from training.registry import register_backend
from training.verl_merge import merge_command
from training.rollout_guard import RolloutStallError, shm_segments, stall_message, sweep_shm
from training.verl_runtime import (LOOPBACK_ENV, PRIVATE_NODE_CPUS, private_runtime_env, private_temp_dir,
                                    runtime_overrides)
from policies.verl.launcher import IPC_DIR_ENV
from policies.verl.reward_audit import AUDIT_ENV
from wtcommon import rollout_watch
from wtcommon.atomic import atomic_write_text
from wtcommon.metrics import read_metrics_jsonl
from wtcommon.polling import wait_until

REWARD_PATH = "pkg://evaluation.reward"
REWARD_NAME = "compute_score"
PLUGIN_MODULE = "policies.verl.plugin"


def hydra_value(v: Any) -> str:
    """A Python value as a Hydra override value (lists as [a,b], booleans lower case, None as null)."""
    if isinstance(v, bool):
        return "true" if v else "false"
    if v is None:
        return "null"
    if isinstance(v, (list, tuple)):
        return "[" + ",".join(hydra_value(x) for x in v) + "]"
    if isinstance(v, float):
        return repr(v)
    s = str(v)
    if any(c in s for c in " ,=[]{}'\"()\\"):
        raise TrainingError(f"override value {s!r} contains characters a Hydra override cannot carry; rename or move "
                            "it")
    return s


def seed_overrides(seed: int) -> dict[str, Any]:
    """Every seed knob of VERL.md §4, all driven by the run seed (matched seeds = identical knobs)."""
    return {
        "data.seed": seed,
        "actor_rollout_ref.rollout.seed": seed,
        "actor_rollout_ref.actor.data_loader_seed": seed,
        "actor_rollout_ref.actor.fsdp_config.seed": seed,
        "actor_rollout_ref.ref.fsdp_config.seed": seed,
    }


def reward_overrides() -> dict[str, str]:
    """Both key sets: verl reads `reward.custom_reward_function`, older paths `custom_reward_function`."""
    return {
        "custom_reward_function.path": REWARD_PATH,
        "custom_reward_function.name": REWARD_NAME,
        "reward.custom_reward_function.path": REWARD_PATH,
        "reward.custom_reward_function.name": REWARD_NAME,
    }


def policy_overrides(policy_path: Path, seed: int, domains: Sequence[str] | None) -> tuple[list[str], dict[str, str]]:
    """Plugin activation from the policies helper (`policies.verl.launcher`), with a documented fallback."""
    try:
        from policies.verl.launcher import launcher_env, launcher_overrides
    except ImportError:
        return ["trainer.v1.trainer_mode=windtunnel_sync", f"+windtunnel.policy={policy_path}"], {
            "VERL_USE_EXTERNAL_MODULES": PLUGIN_MODULE
        }
    return list(launcher_overrides(policy_path, seed=seed, domains=domains)), dict(launcher_env())


def run_dirs(out_dir: Path) -> dict[str, Path]:
    out = Path(out_dir).resolve()
    return {
        "out": out,
        "verl": out / "verl_checkpoints",  # FSDP shards (trainer.default_local_dir)
        "hf": out / "checkpoints",  # merged HF checkpoints, global_step_<N>/
        "metrics": out / "metrics.jsonl",  # verl's file logger
        "log": out / "train.log",
        "pid": out / "train.pid",
        "launch": out / "launch.json",
        "policy": out / "policy.yaml",
    }


def build_command(req: TrainRequest, *, python: str | None = None, write_policy: bool = True,
                  private_address: str | None = None, ray_temp_dir: Path | None = None
                  ) -> tuple[list[str], dict[str, str]]:
    """(argv, extra env) for one run. The policy is written to `<out>/policy.yaml` (the resolved config).
    `private_address`: the GCS of the run's multi-node private runtime (training.reservation);
    `ray_temp_dir`: the one-node private runtime's temp dir (`private_temp_dir`, one per launch)."""
    recipe = req.recipe
    if recipe.overrides is None:
        raise TrainingError(f"recipe {recipe.label!r}: overrides: missing; a verl recipe lists its Hydra "
                            "keys there")
    if not req.train_files:
        raise TrainingError("train_files: empty; the verl backend needs Parquet files in the study schema (campaign "
                            "data train)")
    dirs = run_dirs(req.out_dir)
    model = req.model
    ov: dict[str, Any] = dict(recipe.overrides)
    ov.update({
        "data.train_files": [str(Path(f).resolve()) for f in req.train_files],
        "data.val_files": [str(Path(f).resolve()) for f in (req.val_files or req.train_files)],
        "actor_rollout_ref.model.path": req.model_path,
    })
    ov.update(seed_overrides(req.seed))
    ov.update(reward_overrides())
    total = int(req.total_steps or ov.get("trainer.total_training_steps") or 0)
    if total < 1:
        raise TrainingConfigError("total_steps: must be >= 1 (request or recipe trainer.total_training_steps)")
    ov.update({
        "trainer.total_training_steps": total,
        # the loop stops at whichever limit comes first: never let epochs cut a run short
        "trainer.total_epochs": max(int(ov.get("trainer.total_epochs") or 1), total),
        "trainer.save_freq": int(req.save_freq or ov.get("trainer.save_freq") or total),
        "trainer.default_local_dir": str(dirs["verl"]),
        "trainer.resume_mode": req.resume_mode,
        # MLflow only with an explicit store: without one verl falls back to one SQLite file in the temp dir
        # that every concurrent run would write (stage jobs never write MLflow; the orchestrator ingests)
        "trainer.logger": ["console", "mlflow", "file"] if req.mlflow_uri else ["console", "file"],
        "trainer.project_name": str(req.experiment or recipe.project_name or "windtunnel"),
        "trainer.experiment_name": req.run_id.replace("/", "__"),
    })
    if model is not None and model.gpus_per_node:
        ov["trainer.n_gpus_per_node"] = model.gpus_per_node
    if model is not None and "nnodes" in model.raw:  # only a model that declares its nodes sets verl's count
        ov["trainer.nnodes"] = model.nnodes
    ov = runtime_overrides(ov, private_address, ray_temp_dir=ray_temp_dir,
                           run_gpus=(model.gpus_per_node or 0) if model is not None else 0)
    if write_policy:
        dirs["out"].mkdir(parents=True, exist_ok=True)
        dirs["policy"].write_text(yaml.safe_dump(req.policy, sort_keys=False))
    domains = list(req.policy.get("domains") or req.domains or [])  # passed: the plugin need not re-read the file
    pol_args, pol_env = policy_overrides(dirs["policy"], req.seed, domains)
    argv = [python or sys.executable, "-m", "verl.trainer.main_ppo"]
    argv += [f"{k}={hydra_value(v)}" for k, v in ov.items()]
    argv += pol_args
    env = {str(k): str(v) for k, v in recipe.env.items()}
    env.update(pol_env)
    if env.get(AUDIT_ENV) and not Path(env[AUDIT_ENV]).is_absolute():
        # a relative reward-audit dir is the run's own (`<out>/<dir>`): one recipe audits every run of a
        # campaign separately
        env[AUDIT_ENV] = str(dirs["out"].resolve() / env[AUDIT_ENV])
    env["VERL_FILE_LOGGER_PATH"] = str(dirs["metrics"])
    if private_address is None:
        env.update(LOOPBACK_ENV)
    if req.mlflow_uri:
        env["MLFLOW_TRACKING_URI"] = req.mlflow_uri
    if req.mlflow_run_id:
        env["MLFLOW_RUN_ID"] = req.mlflow_run_id
    return argv, env


# Ray gives a starting node a fixed 30 s to register its raylet (`ray/_private/node.py`, no setting), and a
# loaded 2-core machine running two verl runs missed it: such a launch never started training, so it is
# launched again (a new metrics file), at most this many times.
STARTUP_RETRIES = 2
STARTUP_TIMEOUT = "The current node timed out during startup"


def _startup_timed_out(log: Path, launch_file: Path) -> bool:
    """Whether the launch that logged to `launch_file` (still empty: no step ran) died of Ray's start-up wait."""
    try:
        ran = launch_file.stat().st_size > 0
        tail = log.read_bytes()[-20000:].decode(errors="replace")
    except OSError:
        return False
    return not ran and STARTUP_TIMEOUT in tail


def _proc_start(pid: int) -> str | None:
    """The start time of process `pid` (clock ticks since boot, /proc/<pid>/stat field 22), or None when
    it is gone: with the pid it names one process, so a reused pid is never mistaken for our launch."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return stat.rsplit(")", 1)[1].split()[19]


def _recorded_group(out_dir: Path) -> int | None:
    """The process group (= session: `start_new_session`) of the run's recorded verl launch while its leader is
    still that process."""
    pid_file = run_dirs(out_dir)["pid"]
    try:
        parts = pid_file.read_text().split()
        pgid = int(parts[0])
    except (OSError, ValueError, IndexError):
        return None
    start = _proc_start(pgid)
    if start is None or (len(parts) > 1 and parts[1] != start):
        return None  # gone, or the pid now belongs to another process
    return pgid


def _session(sid: int) -> list[int]:
    """Every live process of session `sid` (/proc/<pid>/stat field 6), the leader last."""
    pids = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[3]) == sid and fields[0] != "Z":  # a zombie is dead already (its parent reaps it)
            pids.append(int(stat.parent.name))
    return sorted(pids, key=lambda pid: pid == sid)


def _signal_launch(sid: int, sig: int) -> bool:
    """Signal every process of a launch's session; True if any was there.

    Why the session and not the process group: verl's private Ray runtime puts each worker (the reward loop,
    the rollout server, the actor workers) in a process group of its own, inside the launch's session. A
    SIGKILL to the leader's group alone left those workers running, re-parented to init, holding their memory
    (seen: a `ray::RewardLoopWorker` of 630 MB alive 40 minutes after its run was killed)."""
    found = False
    for pid in _session(sid):
        try:
            os.kill(pid, sig)
            found = True
        except ProcessLookupError:
            pass
    return found


def cancel(out_dir: Path, sig: int = signal.SIGTERM) -> bool:
    """Signal the recorded verl launch of a run, all of it (its session; never by name); True if signalled."""
    sid = _recorded_group(out_dir)
    if sid is None:
        return False
    return _signal_launch(sid, sig)


def stop_orphan(out_dir: Path, grace_s: float = 10.0) -> bool:
    """Stop a verl launch left running by a dead stage job; True if there was one.

    verl runs in its own session (so `cancel` kills exactly it), which also means it outlives a stage job
    killed by SIGKILL or the OOM killer. The stage lock lets one stage job at a time into a run dir, so a
    live recorded launch at the start of a new one is such an orphan: left alone it would train on into
    the same checkpoint and metrics files as the retry."""
    pgid = _recorded_group(out_dir)
    if pgid is None:
        return False
    for sig, wait in ((signal.SIGTERM, grace_s), (signal.SIGKILL, 5.0)):
        if not _signal_launch(pgid, sig) or wait_until(lambda: not _session(pgid), wait):
            return True
    return True


def _next_launch_file(folder: Path) -> Path:
    """A new `launch_NNN.jsonl`, reserved with O_EXCL: two launches never share (and truncate) one file."""
    n = len(list(folder.glob("launch_*.jsonl")))
    while True:
        path = folder / f"launch_{n:03d}.jsonl"
        try:
            os.close(os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644))
            return path
        except FileExistsError:
            n += 1


def _run(argv: list[str], env: dict[str, str], log: Path, pid_file: Path | None = None,
         watch_dir: Path | None = None) -> int:
    """Run one process in a session of its own, logging to `log`; the exit code. With `watch_dir`, a rollout wait
    recorded there past its bound ends the launch (`RolloutStallError`, training/rollout_guard.py)."""
    shm_before = shm_segments()
    stalled: dict | None = None
    # cwd = the run directory: Hydra writes its `outputs/<date>/<time>/` there, not into the caller's cwd
    with open(log, "ab") as fh:
        # own session (start_new_session): cancel kills exactly this launch, Ray workers included
        proc = subprocess.Popen(argv, env=private_runtime_env(dict(os.environ), env), stdout=fh,
                                stderr=subprocess.STDOUT, start_new_session=True, cwd=log.parent)
        if pid_file is not None:  # the pid and its start time: `cancel` never signals a reused pid
            pid_file.write_text(f"{proc.pid} {_proc_start(proc.pid) or ''}".strip())
        try:
            while (rc := _wait(proc, 1.0)) is None:
                if watch_dir is not None and (stalled := rollout_watch.overdue(watch_dir)) is not None:
                    fh.write(f"\nwindtunnel: {stall_message(stalled)}\n".encode())
                    fh.flush()
                    _signal_launch(proc.pid, signal.SIGTERM)
                    rc = _wait(proc, 10.0)
                    break
        except BaseException:
            _signal_launch(proc.pid, signal.SIGTERM)
            raise
        finally:
            # whatever of the launch outlived its leader (a crashed or killed verl leaves its Ray workers) goes now
            _signal_launch(proc.pid, signal.SIGKILL)
            proc.wait()
            wait_until(lambda: not _session(proc.pid), 10.0)
            sweep_shm(shm_before)
            if watch_dir is not None:
                rollout_watch.end(watch_dir)
    if stalled is not None:
        raise RolloutStallError(f"{stall_message(stalled)}; see {log}")
    return int(rc) if rc is not None else -int(signal.SIGKILL)


def _wait(proc: subprocess.Popen, timeout: float) -> int | None:
    try:
        return proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        return None


def merge_metric_files(files: Sequence[Path], out: Path) -> None:
    """One line per step from verl's per-launch JSONL files; a later launch's line for a step wins (a
    resumed run re-logs only the steps after its checkpoint). Written atomically."""
    by_step: dict[int, dict[str, Any]] = {}
    for f in files:  # a killed launch's torn last line is left out; lines are copied as verl wrote them
        for row in read_metrics_jsonl(f, torn_tail="skip", raw=True)[0]:
            if isinstance(row.get("step"), int):
                by_step[row["step"]] = row
    atomic_write_text(out, "".join(json.dumps(by_step[k]) + "\n" for k in sorted(by_step)))


def resolve_inputs(req: TrainRequest) -> TrainRequest:
    """A `builtin:<model>` becomes the warmed-up local base model and an empty `train_files` the recipe's
    synthetic corpus (train + held-out val), exactly as the local backend resolves them (shared cache)."""
    import dataclasses

    from training import warmup
    from training.config import ModelConfig, load_model_config

    cache_root = Path(req.cache_dir or warmup.default_cache_root())
    model_path, train, val = req.model_path, list(req.train_files), list(req.val_files)
    if model_path.startswith("builtin:"):
        cfg = req.model or ModelConfig.of(load_model_config(model_path.split(":", 1)[1]), model_path)
        model_path = str(warmup.base_model(cfg, req.recipe, cache_root))
    if not train:
        if req.recipe.data is None:
            raise TrainingError(f"recipe {req.recipe.label!r}: no train_files and no data: section for a "
                                "synthetic corpus")
        corpus = warmup.synthetic_corpus(dict(req.recipe.data), cache_root)
        train = [str(corpus["train"])]
        val = val or [str(corpus["test"])]
    return dataclasses.replace(req, model_path=model_path, train_files=train, val_files=val)


def _clear_earlier_attempts(req: TrainRequest, dirs: dict[str, Path], attempts: Path) -> None:
    """Stop a launch a killed earlier attempt left running (its compute ends now, not at its last metrics line)
    and remove the Ray temp dirs of launches killed with their launcher."""
    if stop_orphan(req.out_dir):
        with open(dirs["log"], "a") as fh:
            fh.write("windtunnel: stopped the verl launch a killed earlier attempt left running\n")
        sweep_shm(set())  # its launcher died with it: the segments nobody maps any more go now
        for name in launches.unfinished(dirs["out"]):  # its compute ends now, not at its last metrics line
            launches.record_end(dirs["out"], attempts / name, None, how="stopped")
    for leftover in launches.ray_temp_dirs(dirs["out"]):  # of launches killed with their launcher
        shutil.rmtree(leftover, ignore_errors=True)


def _merge_checkpoints(req: TrainRequest, dirs: dict[str, Path]) -> list[Checkpoint]:
    """verl's FSDP checkpoints as verifiable HF checkpoints: every one not merged yet (a rerun after a crash merges
    only those) in one merge process, each renamed into place once its `completed.json` is written."""
    from training.checkpoints import save_checkpoint_meta

    steps = sorted(dirs["verl"].glob("global_step_*"), key=lambda p: int(p.name.rsplit("_", 1)[1]))
    pending = [(d, dirs["hf"] / f".{d.name}.tmp") for d in steps
               if not (dirs["hf"] / d.name / "completed.json").exists()]
    if pending:
        for _, tmp in pending:  # a merge killed half way left its tmp dir: start it clean
            shutil.rmtree(tmp, ignore_errors=True)
        with launches.timed(dirs["out"], "merge"):  # merge_s / merge_cpu_s of the compute account
            mrc = _run(merge_command([(d / "actor", tmp) for d, tmp in pending]), {}, dirs["log"])
        if mrc != 0:
            raise TrainingError(f"model merge of {', '.join(d.name for d, _ in pending)} exited with {mrc}; "
                                f"see {dirs['log']}")
        for d, tmp in pending:
            step = int(d.name.rsplit("_", 1)[1])
            save_checkpoint_meta(tmp, step, {"run_id": req.run_id, "run_key": req.run_key, "seed": req.seed})
            os.replace(tmp, dirs["hf"] / d.name)
    return [Checkpoint(int(d.name.rsplit("_", 1)[1]), dirs["hf"] / d.name) for d in steps]


@register_backend("verl")
class VerlBackend(TrainingBackend):
    """GPU training through verl 0.9.1 with the Windtunnel policy plugin."""

    multi_node = True  # nnodes > 1: a placement group across nodes and a private runtime on them (reservation)
    runs_curricula = True  # the windtunnel_sync trainer rolls out a curriculum's prompts (policies/verl/trainer.py)
    runs_dynamic_sampling = True  # its replay buffer runs the rounds (policies/verl/dynamic_sampling.py)

    def train(self, req: TrainRequest) -> TrainResult:
        self._refuse_unsupported(req)
        dirs = run_dirs(req.out_dir)
        with launches.timed(dirs["out"], "build"):  # the base model's build, once its cache is cold (launches.py)
            req = resolve_inputs(req)
        # verl's file logger truncates its file on open (`verl/utils/tracking.py:541`): each launch (a resume
        # after a kill is a new launch) logs to its own file, merged into metrics.jsonl when the run is done
        attempts = dirs["out"] / "verl_metrics"
        attempts.mkdir(parents=True, exist_ok=True)
        _clear_earlier_attempts(req, dirs, attempts)
        rc = self._launch_run(req, dirs, attempts)
        if rc != 0:
            raise TrainingError(f"verl exited with {rc}; see {dirs['log']}")
        merge_metric_files(sorted(attempts.glob("launch_*.jsonl")), dirs["metrics"])
        checkpoints = _merge_checkpoints(req, dirs)
        model = req.model
        per_node = model.gpus_per_node if model is not None and model.gpus_per_node is not None else 8
        n_gpus = per_node * (model.nnodes if model is not None else 1)
        ov = req.recipe.overrides or {}
        seqs = float(ov.get("data.train_batch_size", math.nan)) * float(ov.get("actor_rollout_ref.rollout.n", math.nan))
        # every launch of the run, killed ones included (their part also as lost_*): training/launches.py
        compute = launches.compute_account(dirs["out"], n_gpus, seqs)
        return TrainResult(checkpoints, dirs["metrics"], compute)

    def _refuse_unsupported(self, req: TrainRequest) -> None:
        """Refuse, before any launch, what this backend cannot train yet (a rollout-token budget, a curriculum
        that reads the difficulty pre-pass) rather than train it as if it were not asked."""
        if not self.runs_rollout_budget and req.rollout_token_budget is not None:
            # preflight refuses this for a campaign; a direct request (campaign train) is refused here, before
            # any launch, rather than trained for its steps as if it had no budget
            raise TrainingConfigError(f"run {req.run_id}: the verl backend does not stop at a rollout-token "
                                      "budget yet; remove the budget or use the local backend")
        from policies.curricula.registry import needs_pass_rates

        block = (req.policy or {}).get("curriculum") or {}
        if needs_pass_rates(block):  # refused before the launch, not at its first fetch
            raise TrainingConfigError(f"run {req.run_id}: curriculum {block['name']!r} needs the difficulty "
                                      "pre-pass, which the verl backend does not read yet; use the local backend")

    def _launch_run(self, req: TrainRequest, dirs: dict[str, Path], attempts: Path) -> int:
        """Launch verl on the run's nodes: one node in a private runtime of its own (launched again when Ray's
        start-up wait was missed), several in the private runtime started on its reserved nodes; the exit code."""
        from training.reservation import private_runtime, reserved_nodes

        def note(line: str) -> None:
            with open(dirs["log"], "a") as fh:
                fh.write(line + "\n")

        launch_file = _next_launch_file(attempts)
        with reserved_nodes(req.model, dirs["out"], req.run_key, log=note) as res:
            if res is None:
                rc, _ = self._launch(req, dirs, launch_file, None)
                for _ in range(STARTUP_RETRIES):  # Ray's fixed 30 s raylet wait, missed on a loaded node
                    if rc == 0 or not _startup_timed_out(dirs["log"], launch_file):
                        break
                    note("windtunnel: the private Ray runtime missed Ray's 30 s start-up wait; launching again")
                    launch_file = _next_launch_file(attempts)
                    rc, _ = self._launch(req, dirs, launch_file, None)
            else:
                # verl's workers live on the private nodes and see those nodes' environment, not the driver's:
                # every node gets the run's variables, this launch's metrics file included
                _, env = build_command(req, private_address="reserved:0")
                env["VERL_FILE_LOGGER_PATH"] = str(launch_file)
                with private_runtime(res, cpus_per_node=PRIVATE_NODE_CPUS, log_dir=dirs["out"], env=env,
                                     log=note) as gcs:
                    rc, _ = self._launch(req, dirs, launch_file, gcs)
        return rc

    @staticmethod
    def _launch(req: TrainRequest, dirs: dict[str, Path], launch_file: Path, private_address: str | None
                ) -> tuple[int, float]:
        """One verl launch (in its own session, its own metrics file): (exit code, wall seconds). Its start and
        end go to `launches.jsonl` as they happen (training/launches.py)."""
        ray_tmp = None if private_address else private_temp_dir(dirs["out"])
        argv, env = build_command(req, private_address=private_address, ray_temp_dir=ray_tmp)
        env["VERL_FILE_LOGGER_PATH"] = str(launch_file)
        if ray_tmp is not None:  # the weight-transfer socket of verl's vLLM rollout, per launch (vllm_cpu.py)
            env[IPC_DIR_ENV] = str(ray_tmp)
        dirs["launch"].write_text(json.dumps({"argv": argv, "env": env}, indent=1))
        t0, c0 = time.time(), launches.cpu_seconds()  # CPU: this process and the children it reaps
        launches.record_start(dirs["out"], launch_file, t0, ray_temp_dir=ray_tmp)
        try:
            rc = _run(argv, env, dirs["log"], dirs["pid"], watch_dir=dirs["out"])
        except BaseException:
            launches.record_end(dirs["out"], launch_file, None, how="interrupted")
            raise
        finally:  # every process of the launch is gone (`_run` kills its session): its Ray files go too
            if ray_tmp is not None:
                shutil.rmtree(ray_tmp, ignore_errors=True)
        t1 = time.time()
        launches.record_end(dirs["out"], launch_file, rc, t=t1, cpu_s=launches.cpu_seconds() - c0)
        return rc, t1 - t0
