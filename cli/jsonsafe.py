"""JSON that every parser reads: NaN and ±Infinity become null.

Why: Python's `json.dumps` writes the bare tokens `NaN` and `Infinity`, which are not JSON (jq, JavaScript and
most JSON libraries reject the whole document). A missing or undefined number is `null` in every `--json`
output of the CLI (README "JSON output"); `dumps` fails loudly (ValueError) rather than emit one.
"""

from __future__ import annotations

import json
import math
from typing import Any


def json_safe(obj: Any) -> Any:
    """`obj` with every non-finite float (numpy scalars included) replaced by None, recursively."""
    if type(obj).__module__ == "numpy" and getattr(obj, "ndim", None) == 0:
        obj = obj.item()  # numpy scalar -> Python
    if isinstance(obj, float):
        return obj if math.isfinite(obj) else None
    if isinstance(obj, dict):
        return {k: json_safe(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [json_safe(v) for v in obj]
    return obj


def dumps(obj: Any, **kwargs: Any) -> str:
    """`json.dumps` of `json_safe(obj)` with `allow_nan=False` (a non-finite number left over is an error)."""
    return json.dumps(json_safe(obj), allow_nan=False, **kwargs)
