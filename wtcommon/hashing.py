"""Content fingerprints: canonical JSON and the hashes built on it, in one place (issue 37).

Two serialisations are in use and both are kept byte for byte, because stored keys depend on them:
- canonical JSON (sorted keys, no spaces, `str` for what JSON cannot hold): run keys, config hashes, evaluation
  keys, corpus content hashes;
- spaced JSON (sorted keys, json's default ", " and ": "): keys first written before the canonical form was
  shared (a corpus recipe's `spec:` hash, warm-up and trained-weights caches, the generation cache, a regraded
  eval hash). Moving them to the canonical form would orphan every cache and checkpoint on disk, so a caller
  names the form its key was born with: `digest(obj, spaced=True)`.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any


def canonical_json(obj: Any, *, spaced: bool = False) -> str:
    """`obj` as sorted-key JSON: compact by default, with json's default separators when `spaced`."""
    if spaced:
        return json.dumps(obj, sort_keys=True, default=str)
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), default=str)


def text_hash(data: str | bytes, n: int = 16) -> str:
    """The first `n` hex digits of sha256(`data`) (64 = the whole digest)."""
    return hashlib.sha256(data.encode() if isinstance(data, str) else data).hexdigest()[:n]


def digest(obj: Any, n: int = 16, *, spaced: bool = False) -> str:
    """The first `n` hex digits of sha256 of `obj`'s JSON (`canonical_json`, in the form the key was born with)."""
    return text_hash(canonical_json(obj, spaced=spaced), n)


def rows_digest(rows: Iterable[Any]) -> str:
    """Full hex sha256 over records, one canonical-JSON line each: equal rows in equal order, equal digest."""
    h = hashlib.sha256()
    for r in rows:
        h.update(canonical_json(r).encode())
        h.update(b"\n")
    return h.hexdigest()


def sha256_file(path: str | Path) -> str:
    """Hex sha256 of a file's bytes (streamed)."""
    with open(path, "rb") as f:
        return hashlib.file_digest(f, "sha256").hexdigest()
