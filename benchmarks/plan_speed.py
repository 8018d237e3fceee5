"""Plan + ledger speed: compose/validate/expand and upsert into a fresh SQLite ledger, for the
591-run paper program and a 10,000-run grid (10 models × 25 policies × 40 seeds, synthetic
campaign tree in a temp dir); then a re-submission of the same grid (all unchanged).
Prints a table and the ratio to the 10 s target."""

from __future__ import annotations

import shutil
import sys
import tempfile
import time
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from orchestrator.engine.ledger import open_ledger  # noqa: E402
from orchestrator.session import plan  # noqa: E402

TARGET_S = 10.0


def _big_tree(root: Path) -> Path:
    shutil.copytree(REPO / "campaigns" / "policy", root / "policy")
    shutil.copytree(REPO / "campaigns" / "recipe", root / "recipe")
    (root / "model").mkdir()
    models = [f"m{i}" for i in range(10)]
    for m in models:
        (root / "model" / f"{m}.yaml").write_text(yaml.safe_dump({"name": m, "path": f"hf/{m}"}))
    policies = sorted(p.stem for p in (root / "policy").glob("*.yaml"))[:25]
    spec = {"name": "big", "models": models, "policies": policies, "seeds": list(range(1, 41)), "recipe": "grpo_7b",
            "expected_runs": 10 * len(policies) * 40}
    (root / "big.yaml").write_text(yaml.safe_dump(spec))
    return root / "big.yaml"


def measure(target: Path, td: Path) -> tuple[int, float, float, float]:
    t0 = time.perf_counter()
    spec, runs = plan(target)
    t1 = time.perf_counter()
    led = open_ledger(td / f"wd-{spec.name}")
    rows = [r.ledger_row() for r in runs]
    led.upsert_campaign(spec.name, spec.model_dump_json(), rows)
    t2 = time.perf_counter()
    diff = led.upsert_campaign(spec.name, spec.model_dump_json(), rows)
    t3 = time.perf_counter()
    assert len(diff.unchanged) == len(runs)
    led.close()
    return len(runs), t1 - t0, t2 - t1, t3 - t2


def main() -> None:
    with tempfile.TemporaryDirectory() as tds:
        td = Path(tds)
        big = _big_tree(td / "campaigns")
        res = [("paper", *measure(REPO / "campaigns" / "paper", td)), ("grid", *measure(big, td))]
    print(f"{'campaign':<10}{'runs':>8}{'plan s':>9}{'upsert s':>10}{'resubmit s':>12}{'total s':>9}{'vs 10 s':>9}")
    for name, n, p, u, r in res:
        tot = p + u
        print(f"{name:<10}{n:>8}{p:>9.2f}{u:>10.2f}{r:>12.2f}{tot:>9.2f}{tot / TARGET_S:>9.3f}")


if __name__ == "__main__":
    main()
