"""Wall time per training step: verl 0.9.1 on CPU (`verl_cpu_tiny`: main_ppo + windtunnel_sync + hf rollout)
next to the local backend (`cpu_tiny`, training/local.py) on the same tiny Qwen2, the same
synthetic corpus and the same batch shape (prompts x rollouts, response budget).

verl's per-step time is its own `timing_s/step` metric; the local backend's is `time/step_s`. Step 1 of
verl includes its first weight sync and lazy initialisation, so the table shows steps 2.. separately. The
start-up (Ray runtime, workers, rollout server) and the checkpoint merge are reported as fixed costs.

    .venv/bin/python benchmarks/verl_step.py [--steps 3 --policy baseline --seed 1]
"""

from __future__ import annotations

import argparse
import copy
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

import yaml
from rich.console import Console
from rich.table import Table

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from training.backend import TrainRequest  # noqa: E402
from training.local import LocalBackend, load_model_config, load_recipe  # noqa: E402
from training.verl_launcher import VerlBackend  # noqa: E402


def _rows(path: Path, key: str) -> list[float]:
    out = []
    for line in path.read_text().splitlines():
        obj = json.loads(line)
        data = obj.get("data", obj)
        if key in data:
            out.append(float(data[key]))
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=3)
    ap.add_argument("--policy", default="baseline")
    ap.add_argument("--seed", type=int, default=1)
    a = ap.parse_args()
    policy = yaml.safe_load((REPO / "campaigns/policy" / f"{a.policy}.yaml").read_text())
    model = load_model_config("tiny_qwen2")
    vrec = load_recipe("verl_cpu_tiny")
    ov = vrec["overrides"]
    lrec = copy.deepcopy(load_recipe("cpu_tiny"))  # same data/warm-up -> the same base model and corpus
    lrec["rollout"].update(n=int(ov["actor_rollout_ref.rollout.n"]), max_new_tokens=int(ov["data.max_response_length"]))
    lrec["actor"]["prompts_per_step"] = int(ov["data.train_batch_size"])
    lrec["trainer"].update(val_before_train=False, eval_freq=a.steps)
    out = Path(tempfile.mkdtemp(prefix="verl_step_"))
    res = {}
    for name, backend, recipe in (("local", LocalBackend(), lrec), ("verl", VerlBackend(), vrec)):
        req = TrainRequest(run_id=f"bench/{name}", run_key=name, policy=policy, seed=a.seed, out_dir=out / name,
                           recipe=recipe, model_path="builtin:tiny_qwen2", total_steps=a.steps, save_freq=a.steps,
                           model=model, mlflow_uri=f"sqlite:///{out / name}.db")
        t0 = time.time()
        result = backend.train(req)
        total = time.time() - t0
        steps = _rows(result.metrics_path, "timing_s/step" if name == "verl" else "time/step_s")
        res[name] = {"total": total, "steps": steps}
    table = Table(title=f"wall time per training step ({ov['data.train_batch_size']} prompts x "
                        f"{ov['actor_rollout_ref.rollout.n']} rollouts, <= {ov['data.max_response_length']} tokens)")
    for col in ("backend", "step 1 (s)", "steps 2.. mean (s)", "run total incl. start-up + merge (s)"):
        table.add_column(col)
    for name, r in res.items():
        later = r["steps"][1:]
        table.add_row(name, f"{r['steps'][0]:.2f}" if r["steps"] else "n/a",
                      f"{statistics.mean(later):.2f}" if later else "n/a", f"{r['total']:.1f}")
    Console(width=140).print(table)
    lv, vv = res["local"]["steps"][1:], res["verl"]["steps"][1:]
    if lv and vv:
        print(f"ratio verl/local per step (steps 2..): {statistics.mean(vv) / statistics.mean(lv):.1f}x; "
              f"per run: {res['verl']['total'] / res['local']['total']:.1f}x")


if __name__ == "__main__":
    main()
