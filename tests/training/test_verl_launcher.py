"""verl launcher: argv construction (seed knobs, reward keys, no shell strings) accepted by verl's own Hydra config."""

from __future__ import annotations

import dataclasses
import os
import signal
from pathlib import Path

import pytest
import yaml

from training.backend import TrainingError, TrainRequest
from training.registry import get_backend
from training.local import load_model_config, load_recipe
from training.verl_launcher import build_command, cancel, hydra_value
from training.verl_merge import main as merge_main
from training.verl_merge import merge_command, parse_pairs

REPO = Path(__file__).resolve().parents[2]
SEED_KNOBS = [
    "data.seed",
    "actor_rollout_ref.rollout.seed",
    "actor_rollout_ref.actor.data_loader_seed",
    "actor_rollout_ref.actor.fsdp_config.seed",
    "actor_rollout_ref.ref.fsdp_config.seed",
]


def _req(tmp_path: Path, policy: str = "topk", recipe: str = "grpo_7b", model: str = "qwen25_7b_instruct",
         seed: int = 5):
    train = tmp_path / "train.parquet"
    train.write_bytes(b"")  # the launcher only passes the path on
    return TrainRequest(
        run_id=f"demo/{model}/{policy}/s{seed}", run_key="abc123", seed=seed, out_dir=tmp_path / "run",
        policy=yaml.safe_load((REPO / "campaigns/policy" / f"{policy}.yaml").read_text()),
        recipe=load_recipe(recipe), model_path="Qwen/Qwen2.5-7B-Instruct", train_files=[str(train)],
        total_steps=300,
        model=load_model_config(model), mlflow_uri="sqlite:////tmp/x.db", mlflow_run_id="r1",
    )


def _as_dict(argv: list[str]) -> dict[str, str]:
    return dict(a.lstrip("+").split("=", 1) for a in argv[3:])


def test_argv_is_a_list_of_plain_tokens(tmp_path):
    argv, env = build_command(_req(tmp_path))
    assert argv[1:3] == ["-m", "verl.trainer.main_ppo"]
    assert all(isinstance(a, str) and " " not in a and "=" in a for a in argv[3:])
    assert env["VERL_USE_EXTERNAL_MODULES"] == "policies.verl.plugin"
    assert env["MLFLOW_TRACKING_URI"] == "sqlite:////tmp/x.db" and env["MLFLOW_RUN_ID"] == "r1"


def test_a_relative_reward_audit_dir_is_the_runs_own(tmp_path):
    """One recipe `env:` audits every run of a campaign apart: a relative dir lands in the run's train dir, an
    absolute one is kept as written."""
    import dataclasses

    from policies.verl.reward_audit import AUDIT_ENV

    req = _req(tmp_path)
    for value, want in (("reward_calls", str((tmp_path / "run" / "reward_calls").resolve())),
                        ("/abs/calls", "/abs/calls")):
        recipe = {**req.recipe.raw, "env": {**req.recipe.env, AUDIT_ENV: value}}
        assert build_command(dataclasses.replace(req, recipe=recipe))[1][AUDIT_ENV] == want
    assert AUDIT_ENV not in build_command(req)[1]  # off unless the recipe asks


@pytest.mark.parametrize("seed", [1, 2, 17])
def test_every_seed_knob_follows_the_run_seed(tmp_path, seed):
    d = _as_dict(build_command(_req(tmp_path, seed=seed))[0])
    assert {k: d[k] for k in SEED_KNOBS} == dict.fromkeys(SEED_KNOBS, str(seed))


def test_both_reward_key_sets_point_at_the_one_grader(tmp_path):
    d = _as_dict(build_command(_req(tmp_path))[0])
    for prefix in ("custom_reward_function", "reward.custom_reward_function"):
        assert d[f"{prefix}.path"] == "pkg://evaluation.reward"
        assert d[f"{prefix}.name"] == "compute_score"
    import evaluation.reward as r

    assert callable(getattr(r, d["custom_reward_function.name"]))


def test_run_dir_is_absolute_and_epochs_never_cut_the_run(tmp_path):
    d = _as_dict(build_command(_req(tmp_path))[0])
    assert Path(d["trainer.default_local_dir"]).is_absolute()
    assert d["trainer.default_local_dir"].startswith(str((tmp_path / "run").resolve()))
    assert d["trainer.resume_mode"] == "auto"
    assert d["trainer.logger"] == "[console,mlflow,file]"
    assert int(d["trainer.total_epochs"]) >= int(d["trainer.total_training_steps"]) == 300
    assert d["trainer.n_gpus_per_node"] == "8" and d["trainer.nnodes"] == "1"
    assert (tmp_path / "run" / "policy.yaml").exists()


def test_recipe_keys_pass_through(tmp_path):
    rec = load_recipe("grpo_05b")
    d = _as_dict(build_command(_req(tmp_path, recipe="grpo_05b", model="qwen25_05b_instruct"))[0])
    for k, v in rec["overrides"].items():
        if k.lstrip("+") in ("trainer.total_epochs",):
            continue
        assert d[k.lstrip("+")] == hydra_value(v), k
    assert "actor_rollout_ref.model.enable_gradient_checkpointing" not in d  # 0.5B main runs do not set it


def test_plugin_activation_from_the_policies_package(tmp_path):
    d = _as_dict(build_command(_req(tmp_path, policy="reward_gap", recipe="grpo_mix"))[0])
    assert d["trainer.v1.trainer_mode"] == "windtunnel_sync"
    assert d["windtunnel.policy"] == str((tmp_path / "run" / "policy.yaml").resolve())


@pytest.mark.parametrize("policy,recipe", [("topk", "grpo_7b"), ("reward_gap", "grpo_mix"), ("baseline", "grpo_05b")])
def test_verl_hydra_config_accepts_the_overrides(tmp_path, policy, recipe):
    """Compose verl's own ppo_trainer config with the generated overrides (up to the GPU boundary)."""
    import verl
    from hydra import compose, initialize_config_dir

    argv, _ = build_command(_req(tmp_path, policy=policy, recipe=recipe, seed=9))
    with initialize_config_dir(config_dir=os.path.join(verl.__path__[0], "trainer/config"), version_base=None):
        cfg = compose("ppo_trainer", overrides=argv[3:])
    assert cfg.data.seed == 9 and cfg.actor_rollout_ref.rollout.seed == 9
    assert cfg.actor_rollout_ref.actor.fsdp_config.seed == 9 and cfg.actor_rollout_ref.ref.fsdp_config.seed == 9
    assert cfg.actor_rollout_ref.actor.data_loader_seed == 9
    assert cfg.reward.custom_reward_function.path == "pkg://evaluation.reward"
    assert cfg.custom_reward_function.name == "compute_score"
    assert cfg.trainer.total_training_steps == 300 and cfg.actor_rollout_ref.rollout.n == 5
    assert cfg.trainer.v1.trainer_mode == "windtunnel_sync"


def test_bad_inputs_fail_loudly(tmp_path):
    req = _req(tmp_path)
    req.train_files = []
    with pytest.raises(TrainingError, match="train_files"):
        build_command(req)
    with pytest.raises(TrainingError, match="Hydra"):
        hydra_value("a b")
    with pytest.raises(TrainingError, match="unknown training backend"):
        get_backend("slurm")


def test_every_checkpoint_of_a_run_is_merged_by_one_process(tmp_path, capsys):
    """One merge process for all of a run's checkpoints (verl's CLI takes one per process, and its imports cost
    more than merging a small model); the pairs arrive in order, and a malformed argv is refused before any
    import. The merge itself (verl's FSDPModelMerger) runs in tests/verl/test_verl_campaign.py."""
    pairs = [(tmp_path / "global_step_1" / "actor", tmp_path / "hf1"), (tmp_path / "global_step_2" / "actor",
                                                                          tmp_path / "hf2")]
    cmd = merge_command(pairs)
    assert cmd[1:3] == ["-m", "training.verl_merge"] and cmd.count("-m") == 1
    assert parse_pairs(cmd[3:]) == pairs
    with pytest.raises(ValueError, match="no checkpoint"):
        merge_command([])
    for bad in ([], [str(tmp_path / "actor")]):
        assert merge_main(bad) == 2
        assert "ACTOR_DIR TARGET_DIR pairs" in capsys.readouterr().err
    assert not (tmp_path / "hf1").exists()


def test_cancel_kills_only_the_recorded_process_group(tmp_path):
    import subprocess
    import sys

    from training.verl_launcher import run_dirs

    dirs = run_dirs(tmp_path)
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"], start_new_session=True)
    dirs["pid"].write_text(str(proc.pid))
    assert cancel(tmp_path)
    assert proc.wait(timeout=10) != 0
    assert not cancel(tmp_path / "nowhere")


# a verl launch in miniature: the leader starts a worker that moves to a process group of its own (as Ray's
# workers do) and then publishes its pid (argv[1], written whole by a rename); once it is published the leader
# sleeps argv[2] seconds and exits
_WORKER = "import os, sys, time; os.setpgid(0, 0); open(sys.argv[1] + '.tmp', 'w').write(str(os.getpid())); " \
          "os.replace(sys.argv[1] + '.tmp', sys.argv[1]); time.sleep(120)"
_LAUNCH = f"""
import os, subprocess, sys, time
subprocess.Popen([sys.executable, "-c", {_WORKER!r}, sys.argv[1]])
deadline = time.time() + 60
while not os.path.exists(sys.argv[1]) and time.time() < deadline:
    time.sleep(0.02)
time.sleep(float(sys.argv[2]))
"""


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def _wait_gone(pid: int, timeout: float = 10.0) -> bool:
    from wtcommon.polling import wait_until

    return wait_until(lambda: not _alive(pid), timeout, interval_s=0.05)


def test_cancel_kills_the_whole_launch_including_workers_in_their_own_process_group(tmp_path):
    """A SIGKILL of the leader's group alone left verl's Ray workers (own groups, same session) running."""
    import subprocess
    import sys

    from training.verl_launcher import _proc_start, run_dirs
    from wtcommon.polling import wait_until

    dirs, worker_pid = run_dirs(tmp_path), tmp_path / "worker.pid"
    leader = subprocess.Popen([sys.executable, "-c", _LAUNCH, str(worker_pid), "120"], start_new_session=True)
    dirs["pid"].write_text(f"{leader.pid} {_proc_start(leader.pid)}")
    assert wait_until(worker_pid.exists, 60, interval_s=0.05)
    worker = int(worker_pid.read_text())
    assert os.getpgid(worker) != leader.pid  # the worker really left the leader's group
    assert cancel(tmp_path, signal.SIGKILL)
    assert leader.wait(timeout=10) == -signal.SIGKILL
    assert _wait_gone(worker), "the worker in its own process group survived the cancel"


def test_a_launch_that_exits_leaves_no_worker_behind(tmp_path):
    """The launcher sweeps the launch's session once its leader exits (a crashed verl leaves Ray workers)."""
    import sys

    from training.verl_launcher import _run

    worker_pid = tmp_path / "worker.pid"
    rc = _run([sys.executable, "-c", _LAUNCH, str(worker_pid), "0"], {}, tmp_path / "train.log")
    assert rc == 0
    assert _wait_gone(int(worker_pid.read_text())), "a worker of the finished launch is still running"


def test_a_launch_left_running_by_a_killed_stage_job_is_stopped_before_the_retry(tmp_path):
    """An OOM-killed stage job leaves its verl process (own session) training; the retry must stop it
    before launching, and must not signal a process that merely reuses the recorded pid."""
    import subprocess
    import sys

    from training.verl_launcher import _next_launch_file, _proc_start, run_dirs, stop_orphan

    dirs = run_dirs(tmp_path)
    dirs["pid"].parent.mkdir(parents=True, exist_ok=True)
    orphan = subprocess.Popen([sys.executable, "-c", "import signal, time; signal.signal(signal.SIGTERM, "
                               "signal.SIG_IGN); print('ready', flush=True); time.sleep(60)"],
                              start_new_session=True, stdout=subprocess.PIPE, text=True)  # ignores SIGTERM
    assert orphan.stdout is not None and orphan.stdout.readline().strip() == "ready"
    other = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"], start_new_session=True)
    try:
        dirs["pid"].write_text(f"{other.pid} 1")  # the recorded launch is gone and its pid reused
        assert not stop_orphan(tmp_path) and not cancel(tmp_path) and other.poll() is None
        dirs["pid"].write_text(f"{orphan.pid} {_proc_start(orphan.pid)}")
        assert stop_orphan(tmp_path, grace_s=0.5)  # SIGTERM ignored: SIGKILL after the grace period
        assert orphan.wait(timeout=10) == -9
        assert not stop_orphan(tmp_path)  # nothing left to stop
    finally:
        for p in (orphan, other):
            p.kill()
            p.wait()
    folder = tmp_path / "verl_metrics"
    folder.mkdir()
    (folder / "launch_001.jsonl").write_text("")  # a gap: the count (1) names an existing file
    assert [_next_launch_file(folder).name for _ in range(2)] == ["launch_002.jsonl", "launch_003.jsonl"]


# ---- cluster-safe launching (issue 11, Build 3) ---------------------------------------------------

def test_verl_starts_a_private_runtime_never_the_jobs_cluster(tmp_path):
    """verl's `ray.init(**ray_kwargs.ray_init)` must not attach to the cluster the Ray Job runs on (Ray refuses
    num_cpus/num_gpus there): address=local, and the env given to verl drops the job's RAY_ADDRESS."""
    from training.verl_runtime import CLUSTER_ENV_VARS, private_runtime_env

    d = _as_dict(build_command(_req(tmp_path, recipe="grpo_05b", model="qwen25_05b_instruct"))[0])
    assert d["ray_kwargs.ray_init.address"] == "local"
    assert d["ray_kwargs.ray_init.num_cpus"] == "64" and d["ray_kwargs.ray_init.include_dashboard"] == "false"
    job_env = {"RAY_ADDRESS": "10.0.0.1:6379", "RAY_JOB_CONFIG_JSON_ENV_VAR": "{}", "PATH": "/bin",
               "CUDA_VISIBLE_DEVICES": "2,3"}
    env = private_runtime_env(job_env, {"VERL_USE_EXTERNAL_MODULES": "policies.verl.plugin"})
    assert not set(CLUSTER_ENV_VARS) & set(env)
    assert env["CUDA_VISIBLE_DEVICES"] == "2,3"  # the job's reserved GPUs are what the private runtime sees
    assert env["PATH"] == "/bin" and env["VERL_USE_EXTERNAL_MODULES"] == "policies.verl.plugin"
    assert job_env["RAY_ADDRESS"] == "10.0.0.1:6379"  # input untouched


def test_a_multi_node_run_is_refused_with_the_reason(tmp_path):
    req = _req(tmp_path, recipe="grpo_05b", model="qwen25_05b_instruct")
    req = dataclasses.replace(req, model={**(req.model.raw if req.model else {}), "nnodes": 2})
    with pytest.raises(TrainingError, match="nnodes: 2"):
        build_command(req)


def test_the_one_node_runtime_keeps_its_files_ports_and_memory_to_itself(tmp_path):
    """Issue 24, Build 6: the private runtime's temp dir is the launch's own (never /tmp/ray), Ray's socket paths
    fit in 107 bytes, it listens on loopback only, and its object store is sized to the run, not 30% of the node."""
    from training.verl_runtime import (LOOPBACK_ENV, OBJECT_STORE_BYTES_PER_GPU, OBJECT_STORE_MIN_BYTES,
                                       RAY_SESSION_SUFFIX, RAY_SOCKET_MAX, private_temp_dir, runtime_overrides)

    short = tmp_path / "r"
    short.mkdir()
    deep = tmp_path / ("d" * 80) / "runs" / "campaign" / "0123456789abcdef" / "train"
    deep.mkdir(parents=True)
    if len(str(short)) <= RAY_SOCKET_MAX - RAY_SESSION_SUFFIX - len("/ray-XXXXXXXX"):
        inside = private_temp_dir(short)
        assert inside.parent == short.resolve() and inside.name.startswith("ray-")
    made = [private_temp_dir(deep), private_temp_dir(deep)]  # one per launch
    outside = made[0]
    try:
        assert outside.name.startswith("wt-rt-") and not outside.is_relative_to(deep) and made[1] != outside
        assert len(str(outside)) + RAY_SESSION_SUFFIX <= RAY_SOCKET_MAX
    finally:
        for d in made:
            d.rmdir()
    req = _req(tmp_path, recipe="grpo_05b", model="qwen25_05b_instruct")
    argv, env = build_command(req, ray_temp_dir=outside)
    d = _as_dict(argv)
    assert d["ray_kwargs.ray_init._temp_dir"] == str(outside)
    gpus = req.model.gpus_per_node if req.model else 0
    assert gpus >= 1 and d["ray_kwargs.ray_init.object_store_memory"] == str(OBJECT_STORE_BYTES_PER_GPU * gpus)
    assert env.items() >= LOOPBACK_ENV.items()
    cpu = runtime_overrides({"trainer.nnodes": 1}, run_gpus=0)
    assert cpu["+ray_kwargs.ray_init.object_store_memory"] == OBJECT_STORE_MIN_BYTES
    own = runtime_overrides({"trainer.nnodes": 1, "+ray_kwargs.ray_init.object_store_memory": 10**9}, run_gpus=8)
    assert own["+ray_kwargs.ray_init.object_store_memory"] == 10**9  # the recipe's own size wins
    two = runtime_overrides({"trainer.nnodes": 2}, "10.0.0.1:6379", ray_temp_dir=outside, run_gpus=8)
    assert not [k for k in two if "_temp_dir" in k or "object_store" in k]  # the multi-node runtime is not ours here


def test_cpu_recipe_composes_in_verls_config_with_the_hf_rollout(tmp_path):
    import verl
    from hydra import compose, initialize_config_dir

    req = _req(tmp_path, policy="gfpo", recipe="verl_cpu_tiny", model="tiny_qwen2", seed=3)
    argv, env = build_command(req, ray_temp_dir=tmp_path / "ray-x")
    assert env["WINDTUNNEL_VERL_CPU"] == "1" and env["VERL_PLATFORM"] == "windtunnel_cpu"
    with initialize_config_dir(config_dir=os.path.join(verl.__path__[0], "trainer/config"), version_base=None):
        cfg = compose("ppo_trainer", overrides=argv[3:])
    assert cfg.actor_rollout_ref.rollout.name == "hf"
    assert cfg.ray_kwargs.ray_init.num_gpus == 1 and cfg.ray_kwargs.ray_init.address == "local"
    assert cfg.ray_kwargs.ray_init._temp_dir == str(tmp_path / "ray-x")
    assert cfg.ray_kwargs.ray_init.object_store_memory == 512 * 1024**2  # a CPU run's share
    assert cfg.transfer_queue.backend.SimpleStorage.num_data_storage_units == 1
    assert cfg.actor_rollout_ref.model.override_config.attn_implementation == "sdpa"
    assert cfg.actor_rollout_ref.model.use_remove_padding is False
    assert cfg.trainer.save_freq == 1 and cfg.trainer.total_training_steps == 300


def test_stage_jobs_reserve_the_runs_gpus_in_rays_accounting(tmp_path):
    from orchestrator.engine.executor.ray_jobs import stage_gpus
    from orchestrator.engine.grid import PolicyRef, RunSpec

    def run_spec(gpus: int, model_cfg: dict) -> str:
        return RunSpec(run_key="k", run_id="c/m/p/s1", campaign="c", sub_campaign="c", group="c", model="m",
                       policy=PolicyRef("p", "none"), reference="p", seed=1, steps=1, save_freq=1, regime="",
                       recipe_name="r", backend="verl", suite="db12", gpus=gpus, est_hours=1.0,
                       model_cfg=model_cfg).to_json()

    spec = tmp_path / "run_spec.json"
    spec.write_text(run_spec(8, {"nnodes": 1}))
    argv = ["python", "-m", "orchestrator.engine.stages", "train", "--run-spec", str(spec), "--workdir", "/w"]
    assert stage_gpus(argv) == 8
    assert stage_gpus([*argv[:3], "evaluate", *argv[4:]]) == 1
    spec.write_text(run_spec(16, {"nnodes": 2}))
    assert stage_gpus(argv) == 0  # a two-node run reserves its nodes in a placement group, not the entrypoint
    spec.write_text(run_spec(0, {}))
    assert stage_gpus(argv) == 0 and stage_gpus([*argv[:3], "evaluate", *argv[4:]]) == 0
    assert stage_gpus(["python", "-c", "pass"]) == 0
    assert stage_gpus([*argv[:5], str(tmp_path / "missing.json")]) == 0


def test_metrics_of_a_resumed_run_keep_every_step(tmp_path):
    """verl truncates its metrics file at each launch; the per-launch files merge, later launch wins."""
    import json

    from training.verl_launcher import merge_metric_files

    a, b = tmp_path / "launch_000.jsonl", tmp_path / "launch_001.jsonl"
    a.write_text("".join(json.dumps({"step": s, "data": {"x": s, "launch": 0}}) + "\n" for s in (1, 2)) + "{broken\n")
    b.write_text(json.dumps({"step": 2, "data": {"x": 2, "launch": 1}}) + "\n"
                 + json.dumps({"step": 3, "data": {"x": 3, "launch": 1}}) + "\n")
    out = tmp_path / "metrics.jsonl"
    merge_metric_files([a, b], out)
    rows = [json.loads(x) for x in out.read_text().splitlines()]
    assert [(r["step"], r["data"]["launch"]) for r in rows] == [(1, 0), (2, 1), (3, 1)]


def test_no_mlflow_logger_without_a_store(tmp_path):
    req = _req(tmp_path)
    req.mlflow_uri = None
    argv, env = build_command(req)
    assert _as_dict(argv)["trainer.logger"] == "[console,file]" and "MLFLOW_TRACKING_URI" not in env


def test_only_a_launch_that_never_stepped_and_missed_rays_start_up_wait_is_launched_again(tmp_path):
    """Ray waits a fixed 30 s for a new node's raylet; a launch that died of that did no work and is relaunched."""
    from training.verl_launcher import STARTUP_TIMEOUT, _startup_timed_out

    log, launch = tmp_path / "train.log", tmp_path / "launch_000.jsonl"
    launch.write_text("")
    log.write_text(f"Traceback ...\nException: {STARTUP_TIMEOUT}. This could happen because ...\n")
    assert _startup_timed_out(log, launch)
    launch.write_text('{"step": 1, "data": {}}\n')  # it trained a step: never relaunched behind the user's back
    assert not _startup_timed_out(log, launch)
    launch.write_text("")
    log.write_text("RuntimeError: CUDA out of memory\n")  # any other failure is the scheduler's to classify
    assert not _startup_timed_out(log, launch)


def test_a_private_nodes_ports_are_distinct_and_its_workers_clear_of_rays_default_range():
    """Each private node's `ray start` names every port, all different (Ray refuses a port used twice), and its
    worker block lies outside Ray's default 10002-19999 that one-node runtimes use."""
    from training.reservation import WORKER_PORTS, node_argv

    for head in (None, "127.0.0.1:6379"):
        argv = node_argv(head_address=head, ip="127.0.0.1", gpus=1, cpus=4, temp_dir="/tmp/x")
        ports = {a.split("=")[0]: int(a.split("=")[1]) for a in argv if a.startswith("--") and a.endswith(
            tuple("0123456789")) and "port" in a.split("=")[0]}
        lo, hi = ports.pop("--min-worker-port"), ports.pop("--max-worker-port")
        assert hi - lo + 1 == WORKER_PORTS and lo >= 20000
        assert len(set(ports.values())) == len(ports) and not any(lo <= p <= hi for p in ports.values())
        assert ("--head" in argv) == (head is None)
