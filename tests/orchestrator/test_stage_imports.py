"""A noop stage process imports what it needs and no more, and records where its start went (issue 36).

Why: a stage's start-up is paid once per job; before this, the entrypoint's imports (pydantic via the campaign spec
models, never used by a stage that reads its RunSpec from JSON) were most of our part of it. Each stage runs as
`python -m orchestrator.engine.stages` does, in its own process (two subprocesses; the test file costs about 5 CPU-s
with pytest's start and the plan)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[2]
HEAVY = ("torch", "transformers", "verl", "vllm", "ray", "mlflow", "pydantic", "sqlalchemy")
NOT_IN = {"train": {*HEAVY, "yaml", "pandas"}, "evaluate": set(HEAVY)}  # evaluate reads its suite's YAML

# runs the entrypoint module as `-m` does, then reports which top-level packages the process imported
RUN = """import json, runpy, sys
sys.argv = ["orchestrator.engine.stages", *sys.argv[1:]]
try:
    runpy.run_module("orchestrator.engine.stages", run_name="__main__", alter_sys=True)
except SystemExit as exc:
    rc = exc.code
print(json.dumps({"rc": rc, "modules": sorted({m.split(".")[0] for m in sys.modules})}))
"""


def _stage(stage: str, spec: Path, wd: Path) -> dict:
    p = subprocess.run([sys.executable, "-c", RUN, stage, "--run-spec", str(spec), "--workdir", str(wd),
                        "--attempt", f"wt-x-{stage}-a1"], cwd=REPO, capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr[-2000:]
    return json.loads(p.stdout.strip().splitlines()[-1])


def test_noop_stages_import_no_ml_stack_and_record_their_start(tree: Path, tmp_path: Path, small_campaign) -> None:
    from orchestrator.engine.stages import write_run_spec
    from orchestrator.session import plan
    from orchestrator.engine.start_latency import read_log

    (tree / "recipe" / "noop_now.yaml").write_text(yaml.safe_dump({"name": "noop_now", "sleep_s": 0}))
    _, runs = plan(small_campaign("imp", policies=["baseline"], seeds=[1], recipe="noop_now"))
    wd = tmp_path / "wd"
    path = write_run_spec(runs[0], wd)
    for stage in ("train", "evaluate"):
        out = _stage(stage, path, wd)
        assert out["rc"] == 0
        assert not NOT_IN[stage] & set(out["modules"]), f"{stage} imported {NOT_IN[stage] & set(out['modules'])}"
    log = read_log(wd / "runs" / "imp" / runs[0].run_key)
    assert [(m["stage"], m["attempt"]) for m in log] == [("train", "wt-x-train-a1"), ("evaluate", "wt-x-evaluate-a1")]
    for m in log:  # the marks are one process's, in the order they happen (/proc: 10 ms ticks)
        assert m["supervisor"] <= m["process"] + 0.02 and m["process"] <= m["main"] + 0.02
        assert m["main"] <= m["imported"] <= m["begin"]
