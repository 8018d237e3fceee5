"""Benchmark data on disk: one Parquet per benchmark plus a checksummed manifest.

`<data_dir>/<benchmark_id>.parquet` with columns `item_id:str, prompt:str (the user message),
answer:str (gold), n_options:int (0 if not multiple choice)`; `<data_dir>/manifest.json` records
each file's sha256 and row count, and `kind` ("benchmarks" from the hub, or "fixture" for the
small test suite shipped in the repo) so the item-count gate knows what to expect.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pandas as pd

from evaluation.graders.multiple_choice import normalise_gold
from wtcommon.atomic import atomic_path, atomic_write_text
from wtcommon.hashing import sha256_file
from wtcommon.errors import UserError

COLUMNS: dict[str, str] = {"item_id": "str", "prompt": "str", "answer": "str", "n_options": "int"}
MANIFEST = "manifest.json"
FIXTURE_DIR = Path(__file__).resolve().parent / "fixtures" / "db12"


class BenchmarkDataError(UserError):
    """A benchmark file is missing or malformed; the message names file, row/column and the fix."""


def validate_items(df: pd.DataFrame, where: str, grader: str | None = None) -> pd.DataFrame:
    """Check the benchmark-data columns and (for multiple choice) that every gold is a valid letter."""
    missing = [c for c in COLUMNS if c not in df.columns]
    if missing:
        raise BenchmarkDataError(f"{where}: missing column(s) {missing}; expected {list(COLUMNS)}")
    if len(df) == 0:
        raise BenchmarkDataError(f"{where}: no rows; rebuild it with `campaign data benchmarks`")
    for col in ("item_id", "prompt", "answer"):
        bad = df.index[df[col].isna() | (df[col].astype(str).str.strip() == "")].tolist()
        if bad:
            raise BenchmarkDataError(f"{where}: row {bad[0]} column {col!r} is empty ({len(bad)} such rows)")
    dup = df.index[df["item_id"].astype(str).duplicated()].tolist()
    if dup:
        raise BenchmarkDataError(f"{where}: row {dup[0]} column 'item_id' duplicates {df['item_id'].iloc[dup[0]]!r}")
    n_opt = pd.to_numeric(df["n_options"], errors="coerce")
    bad = df.index[n_opt.isna() | (n_opt < 0)].tolist()
    if bad:
        raise BenchmarkDataError(f"{where}: row {bad[0]} column 'n_options' must be an integer >= 0")
    out = pd.DataFrame({
        "item_id": df["item_id"].astype(str),
        "prompt": df["prompt"].astype(str),
        "answer": df["answer"].astype(str),
        "n_options": n_opt.astype("int64"),
    })
    if grader == "multiple_choice":
        for i, (ans, n) in enumerate(zip(out["answer"], out["n_options"], strict=True)):
            if n < 2 or normalise_gold(ans, int(n)) is None:
                raise BenchmarkDataError(
                    f"{where}: row {i} column 'answer' = {ans!r} is not a letter within {int(n)} options "
                    "(STUDY.md §5.3: unscorable golds are rejected at build time)")
    return out


def read_benchmark(data_dir: Path, benchmark_id: str, grader: str | None = None) -> pd.DataFrame:
    path = Path(data_dir) / f"{benchmark_id}.parquet"
    if not path.is_file():
        raise BenchmarkDataError(
            f"{path}: benchmark file not found; run `campaign data benchmarks --out {data_dir}` "
            f"or pass --data-dir {FIXTURE_DIR} for the fixture suite")
    try:
        df = pd.read_parquet(path)
    except Exception as e:
        raise BenchmarkDataError(f"{path}: not a readable Parquet file ({e})") from e
    return validate_items(df, str(path), grader)


def write_benchmark(df: pd.DataFrame, data_dir: Path, benchmark_id: str, grader: str | None = None) -> Path:
    path = Path(data_dir) / f"{benchmark_id}.parquet"
    clean = validate_items(df.reset_index(drop=True), f"{benchmark_id} (being written)", grader)
    with atomic_path(path) as tmp:
        clean.to_parquet(tmp, index=False)
    return path


def write_manifest(data_dir: Path, benchmark_ids: list[str], *, kind: str,
                   sources: dict[str, Any] | None = None) -> Path:
    """Checksums and row counts of the written files (what `verify_manifest` re-checks)."""
    data_dir = Path(data_dir)
    entries = {}
    for bid in benchmark_ids:
        p = data_dir / f"{bid}.parquet"
        entries[bid] = {"file": p.name, "sha256": sha256_file(p),
                        "n_items": int(len(pd.read_parquet(p, columns=["item_id"]))),
                        **({"source": sources[bid]} if sources and bid in sources else {})}
    body = {"kind": kind, "benchmarks": entries}
    path = data_dir / MANIFEST
    atomic_write_text(path, json.dumps(body, indent=2, sort_keys=True) + "\n")
    return path


def read_manifest(data_dir: Path) -> dict[str, Any] | None:
    p = Path(data_dir) / MANIFEST
    if not p.is_file():
        return None
    try:
        return json.loads(p.read_text())
    except json.JSONDecodeError as e:
        raise BenchmarkDataError(f"{p}: not valid JSON ({e}); rebuild with `campaign data benchmarks`") from e


def verify_checksum(data_dir: Path, benchmark_id: str, manifest: dict[str, Any] | None) -> str:
    """sha256 of the file, checked against the manifest when one exists (pinned data, STUDY.md §5.3)."""
    p = Path(data_dir) / f"{benchmark_id}.parquet"
    digest = sha256_file(p)
    if manifest is not None:
        entry = manifest.get("benchmarks", {}).get(benchmark_id)
        if entry is None:
            raise BenchmarkDataError(f"{Path(data_dir) / MANIFEST}: no entry for benchmark {benchmark_id!r}")
        if entry.get("sha256") != digest:
            raise BenchmarkDataError(
                f"{p}: sha256 {digest[:12]}… does not match the manifest ({str(entry.get('sha256'))[:12]}…); "
                "the file changed after it was built: rebuild it")
    return digest
