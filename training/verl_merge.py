"""verl FSDP checkpoints to Hugging Face directories, every checkpoint of a run in ONE process.

    python -m training.verl_merge ACTOR_DIR TARGET_DIR [ACTOR_DIR TARGET_DIR ...]

Why not `python -m verl.model_merger merge` per checkpoint: it merges one checkpoint per process, and the
process's imports (torch, transformers, verl: about 7 s of CPU) cost more than merging a small model, so a
run with N checkpoints paid them N times. This runs verl's own merger (`FSDPModelMerger`, configured as its
CLI configures it for `merge --backend fsdp`) once per pair after importing once.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from pathlib import Path


def merge_command(pairs: Sequence[tuple[Path, Path]], python: str | None = None) -> list[str]:
    """argv merging each `(actor_dir, target_dir)` pair, in order, in one process."""
    if not pairs:
        raise ValueError("merge_command: no checkpoint to merge")
    return [python or sys.executable, "-m", "training.verl_merge",
            *[str(p) for pair in pairs for p in pair]]


def parse_pairs(argv: Sequence[str]) -> list[tuple[Path, Path]]:
    """`[actor, target, actor, target, ...]` -> pairs; ValueError naming the fix for an odd or empty list."""
    if not argv or len(argv) % 2:
        raise ValueError(f"expected ACTOR_DIR TARGET_DIR pairs, got {len(argv)} argument(s): {list(argv)}")
    return [(Path(argv[i]), Path(argv[i + 1])) for i in range(0, len(argv), 2)]


def merge_fsdp(actor_dir: Path, target_dir: Path) -> None:
    """verl's `merge --backend fsdp --local_dir ACTOR_DIR --target_dir TARGET_DIR`, in this process."""
    from verl.model_merger.base_model_merger import ModelMergerConfig
    from verl.model_merger.fsdp_model_merger import FSDPModelMerger

    target_dir.mkdir(parents=True, exist_ok=True)
    # the fields verl's CLI sets for this command (`generate_config_from_args`), defaults for the rest
    config = ModelMergerConfig(operation="merge", backend="fsdp", local_dir=str(actor_dir),
                               target_dir=str(target_dir), hf_model_config_path=str(actor_dir / "huggingface"))
    merger = FSDPModelMerger(config)
    merger.merge_and_save()
    merger.cleanup()


def main(argv: Sequence[str] | None = None) -> int:
    try:
        pairs = parse_pairs(sys.argv[1:] if argv is None else argv)
    except ValueError as exc:
        print(f"verl_merge: {exc}", file=sys.stderr)
        return 2
    for actor, target in pairs:
        print(f"verl_merge: {actor} -> {target}", flush=True)
        merge_fsdp(actor, target)
    return 0


if __name__ == "__main__":
    sys.exit(main())
