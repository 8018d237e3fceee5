"""Content hash of a checkpoint directory: the generation cache key, so a changed file regenerates."""

from __future__ import annotations

import hashlib
from pathlib import Path

from wtcommon.errors import UserError


class CheckpointNotFound(UserError, FileNotFoundError):
    """The checkpoint path given holds no model (still a FileNotFoundError for callers that catch that)."""

# files that change what the model generates; optimizer states and logs do not
_RELEVANT = (".safetensors", ".bin", ".json", ".jinja", ".model", ".txt", ".tiktoken", ".py")


def checkpoint_hash(path: Path | str) -> str:
    """sha256 over (relative path, content) of the model/tokenizer files, in sorted order."""
    root = Path(path)
    if not root.exists():
        raise CheckpointNotFound(f"{root}: checkpoint not found")
    files = [root] if root.is_file() else sorted(p for p in root.rglob("*") if p.is_file() and p.suffix in _RELEVANT)
    if not files:
        raise CheckpointNotFound(f"{root}: no model files (*.safetensors, config.json, tokenizer files) found")
    h = hashlib.sha256()
    for f in files:
        h.update(str(f.relative_to(root) if root.is_dir() else f.name).encode() + b"\0")
        with open(f, "rb") as fh:
            for chunk in iter(lambda: fh.read(1 << 22), b""):
                h.update(chunk)
        h.update(b"\0")
    return h.hexdigest()
