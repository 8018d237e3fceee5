"""Per-step cost of every policy configuration against the memory-bandwidth floor.

Batch: 512 prompts x 5 rollouts x 8,192 response tokens (B, L) = (2560, 8192), float32 (84 MB per tensor).
Floor: one read + one write of a (B, L) float32 tensor (`torch.mul(x, 1.0, out=y)`), measured in the same
run. Each policy declares how many such passes it needs (`DataPolicy.passes`); ratio = time / (floor x
passes). Target: every configuration within 2x. Runs on CPU with 2 threads, and on CUDA when present.

    .venv/bin/python benchmarks/policy_hot_path.py [--prompts 512 --rollouts 5 --tokens 8192 --reps 3]
"""

from __future__ import annotations

import argparse
import glob
import os
import statistics
import sys
import time
from pathlib import Path

# Large tensors on transparent huge pages (PyTorch's CPU allocator knob; read at allocation time): without
# it every fresh 84 MB tensor pays ~20k page faults, which costs more than the pass itself.
os.environ.setdefault("THP_MEM_ALLOC_ENABLE", "1")

import torch
from rich.console import Console
from rich.table import Table

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from policies import StepBatch, load_policy  # noqa: E402

DOMAINS = ["math", "logic", "science"]


def make_tensors(prompts: int, n: int, L: int, device: str, seed: int = 0) -> dict[str, torch.Tensor]:
    gen = torch.Generator().manual_seed(seed)
    b = prompts * n
    lengths = torch.randint(L // 8, L + 1, (b,), generator=gen)
    rewards = (torch.rand(b, generator=gen) < 0.5).float()
    group = torch.arange(b) // n
    g = rewards.reshape(prompts, n)
    adv_seq = ((g - g.mean(1, keepdim=True)) / (g.std(1, keepdim=True) + 1e-6)).reshape(-1)
    mask = (torch.arange(L)[None] < lengths[:, None]).float()
    out = {
        "advantages": adv_seq[:, None] * mask,
        "response_mask": mask,
        "old_log_probs": -torch.rand(b, L, generator=gen) * 2 * mask,
        "rewards": rewards,
        "group": group,
        "domain": group % 3,
    }
    return {k: v.to(device) for k, v in out.items()}


def sync(device: str) -> None:
    if device == "cuda":
        torch.cuda.synchronize()


def timed(fn, reps: int, device: str) -> float:
    """Minimum wall time over `reps` runs after one warm-up (least disturbed by other processes)."""
    fn()
    sync(device)
    times = []
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        sync(device)
        times.append(time.perf_counter() - t0)
    return min(times)


def run(device: str, args: argparse.Namespace) -> list[tuple[str, float]]:
    t = make_tensors(args.prompts, args.rollouts, args.tokens, device)
    x, y = t["advantages"], torch.empty_like(t["advantages"])

    def floor_now() -> float:
        return timed(lambda: torch.mul(x, 1.0, out=y), max(args.reps, 5), device)

    floors = [floor_now()]
    table = Table(title=f"policy hot path on {device} (B={x.shape[0]}, L={x.shape[1]}, "
                        f"threads={torch.get_num_threads()}); "
                        f"floor = one read + one write of (B, L) float32")
    for c in ("configuration", "mechanism", "ms / step (best)", "passes", "floor x passes (ms)", "ratio"):
        table.add_column(c, justify="right" if c not in ("configuration", "mechanism") else "left")
    rows = []
    for path in sorted(glob.glob(str(REPO / "campaigns/policy/*.yaml"))):
        pol = load_policy(path, seed=0, domains=DOMAINS, rollout_n=args.rollouts)

        def step(pol=pol) -> None:
            batch = StepBatch(**t)  # fresh batch: no cached signals carried across repetitions
            pol.apply(batch, step=1)
            if pol.mechanism == "mix":
                pol.observe(batch, step=1)

        step()  # warm-up
        pairs = []
        for _ in range(args.reps):  # floor and policy interleaved, equally often: both see the same machine load
            sync(device)
            t0 = time.perf_counter()
            torch.mul(x, 1.0, out=y)
            sync(device)
            t1 = time.perf_counter()
            step()
            sync(device)
            pairs.append((time.perf_counter() - t1, t1 - t0))
        floors.extend(f for _, f in pairs)
        sec, f = min(p for p, _ in pairs), min(f for _, f in pairs)
        ratio = sec / (f * pol.passes)
        rows.append((pol, sec, f, ratio))
    floor = statistics.median(floors)
    table.title += f"; floor per pass {min(floors) * 1e3:.1f} ms best, {floor * 1e3:.1f} ms median"
    ratios = []
    for pol, sec, fl, ratio in rows:
        ratios.append((pol.name, ratio))
        table.add_row(pol.name, pol.mechanism, f"{sec * 1e3:.1f}", f"{pol.passes:g}", f"{fl * pol.passes * 1e3:.1f}",
                      f"{ratio:.2f}")
    Console(width=140).print(table)
    worst = max(ratios, key=lambda r: r[1])
    within = sum(r <= 2.0 for _, r in ratios)
    print(f"{device}: floor {floor * 1e3:.1f} ms per pass; {within}/{len(ratios)} configurations within 2x of floor x "
          f"passes; worst {worst[0]} at {worst[1]:.2f}x")
    return ratios


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--prompts", type=int, default=512)
    ap.add_argument("--rollouts", type=int, default=5)
    ap.add_argument("--tokens", type=int, default=8192)
    ap.add_argument("--reps", type=int, default=7)
    ap.add_argument("--threads", type=int, default=2)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    run("cpu", args)
    if torch.cuda.is_available():
        run("cuda", args)


if __name__ == "__main__":
    main()
