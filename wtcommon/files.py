"""The one YAML-mapping loader (fingerprints are in wtcommon/hashing.py).

Why one home: the same "safe_load, must be a mapping" code was written in several modules with slightly
different messages; each caller keeps its own typed error.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any


def load_yaml_mapping(path: str | Path, *, what: str = "YAML file",
                      error: type[Exception] = ValueError) -> dict[str, Any]:
    """`yaml.safe_load` of a file that must hold a mapping. Every problem (missing file, invalid YAML,
    another top-level type) raises `error` (the caller's typed error) with a message naming the file.
    yaml is imported here, not with the module: a stage process hashes files but reads no YAML."""
    import yaml

    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise error(f"{p}: {what} not found") from None
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise error(f"{p}: not valid YAML for a {what} ({exc})") from None
    if not isinstance(data, dict):
        raise error(f"{p}: a {what} must be a mapping at the top level, got {type(data).__name__}")
    return data
