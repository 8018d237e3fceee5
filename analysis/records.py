"""Records I/O: long Parquet/CSV and the wide released CSV, validated cell by cell (analysis.record_checks).

Every problem is collected (file, row, column, fix) before anything is raised, so a user fixes a
file in one pass. Missing scores stay NaN; 0.0 is a score. A CSV row with too few fields (a
truncated file) is an error, never silently NaN-filled.
"""

from __future__ import annotations

import csv
from pathlib import Path

import numpy as np
import pandas as pd

from analysis.record_checks import (
    blank_cells,
    check_budget_cells,
    check_budget_consistency,
    check_duplicates,
    check_int,
    check_mechanism,
    check_one_run_per_cell,
    check_score,
    check_text,
    derive_mechanism,
    number_cells,
    row_numbers,
)
from analysis.record_meta import (  # noqa: F401  (re-exported: the records' public API)
    BASELINES_KEY,
    RUNS_EXPECTED_KEY,
    RUNS_RECORDED_KEY,
    records_baselines,
    records_completeness,
)
from analysis.schema import (
    BASELINES_ATTR,
    BUDGET_COLUMNS,
    OPTIONAL_WRITE,
    RECORD_COLUMNS,
    REQUIRED_LONG,
    WIDE_ID_COLUMNS,
    WIDE_OPTIONAL,
    Problem,
    RecordsError,
)
from evaluation.suite import Suite, load_suite
from wtcommon.atomic import atomic_path


def _suite(suite: Suite | str | None) -> Suite:
    if suite is None:
        return load_suite("db12")
    return load_suite(suite) if isinstance(suite, str) else suite


# ----------------------------------------------------------------------------- raw reading

def _read_csv_raw(path: Path) -> tuple[pd.DataFrame | None, list[Problem]]:
    """Read every cell as text, checking each line has exactly as many fields as the header."""
    f = str(path)
    try:
        with open(path, newline="", encoding="utf-8") as fh:
            rows = list(csv.reader(fh))
    except UnicodeDecodeError as e:
        return None, [Problem(f, None, None, f"not UTF-8 text ({e}); save the file as UTF-8 CSV")]
    except csv.Error as e:
        return None, [Problem(f, None, None, f"not valid CSV: {e}")]
    if not rows or not any(cell.strip() for cell in rows[0]):
        return None, [Problem(f, None, None, "file is empty; expected a header line and one row per record")]
    header = [h.strip() for h in rows[0]]
    problems: list[Problem] = []
    dup = sorted({h for h in header if header.count(h) > 1})
    for h in dup:
        problems.append(Problem(f, None, h, "column appears more than once in the header; keep one"))
    data: list[list[str]] = []
    for i, row in enumerate(rows[1:], start=1):
        if not row:  # a blank line
            continue
        if len(row) != len(header):
            problems.append(Problem(
                f, i, header[min(len(row), len(header)) - 1] if len(row) < len(header) else None,
                f"has {len(row)} fields but the header has {len(header)} "
                f"({'file truncated or a field missing' if len(row) < len(header) else 'extra field(s)'}); "
                "fix or remove this line"))
            continue
        data.append(row)
    if problems:
        return None, problems
    if not data:
        return None, [Problem(f, None, None, "has a header but no data rows")]
    return pd.DataFrame(data, columns=header, dtype=object), []


def _read_raw(path: Path) -> pd.DataFrame:
    f = str(path)
    if not path.is_file():
        raise RecordsError([Problem(f, None, None, "file not found")])
    ext = path.suffix.lower()
    if ext == ".csv":
        raw, problems = _read_csv_raw(path)
        if problems:
            raise RecordsError(problems)
        return raw
    if ext in (".parquet", ".pq"):
        try:
            raw = pd.read_parquet(path)
        except Exception as e:  # pyarrow raises several types for a damaged file
            raise RecordsError([Problem(f, None, None,
                                        f"not a readable Parquet file ({type(e).__name__}: {e})")]) from e
        if raw.empty:
            raise RecordsError([Problem(f, None, None, "contains no records")])
        return raw.reset_index(drop=True)
    raise RecordsError([Problem(f, None, None, f"unsupported extension {ext!r}; use .csv or .parquet")])


def recover_n_correct(accuracy: np.ndarray, n_items: np.ndarray) -> np.ndarray:
    """Correct-item counts behind percentages, or NaN when not uniquely recoverable.

    accuracy, n_items: (k,). A value is recoverable when it equals 100*k/n exactly, or when it is
    within a 1-decimal rounding (0.05) of exactly one such k (100/n > 0.1, i.e. n < 1000).
    """
    acc = np.asarray(accuracy, dtype=float)
    n = np.asarray(n_items, dtype=float)
    k = np.round(acc * n / 100.0)
    err = np.abs(100.0 * k / n - acc)
    ok = (err <= 1e-6) | ((100.0 / n > 0.1) & (err <= 0.05 + 1e-9))
    return np.where(ok & ~np.isnan(acc), k, np.nan)


# ----------------------------------------------------------------------------- wide / long parsing

def is_wide(columns: pd.Index | list[str]) -> bool:
    cols = set(columns)
    return "benchmark" not in cols and {"run_id", "method"} <= cols


def _from_wide(raw: pd.DataFrame, f: str, suite: Suite) -> pd.DataFrame:
    problems: list[Problem] = []
    cols = list(raw.columns)
    required = [c for c in WIDE_ID_COLUMNS if c != "regime"]
    for c in required:
        if c not in cols:
            problems.append(Problem(f, None, c, f"required column is missing; the wide header starts "
                                                f"{', '.join(WIDE_ID_COLUMNS)}"))
    bench = suite.benchmark_ids
    for b in bench:
        if b not in cols:
            problems.append(Problem(f, None, b, f"missing column for benchmark {b!r} of suite {suite.name!r}; "
                                                "add it (blank cells mean a missing score)"))
    known = set(WIDE_ID_COLUMNS) | set(WIDE_OPTIONAL) | set(bench)
    for c in cols:
        if c not in known:
            problems.append(Problem(f, None, c, f"unknown column: not an id column and not a benchmark of suite "
                                                f"{suite.name!r} ({', '.join(bench)})"))
    present = [c for c in required if c in cols]
    for c in ("run_id", "campaign", "model", "method"):
        if c in present:
            check_text(raw, c, f, problems)
    seed = check_int(raw, "seed", f, problems) if "seed" in cols else None
    steps = check_int(raw, "steps", f, problems) if "steps" in cols else None
    scores = {b: check_score(raw, b, f, problems) for b in bench if b in cols}
    if "mechanism" in cols:
        check_mechanism(raw, f, problems)
    if "run_id" in cols and "steps" in cols:
        check_duplicates(raw[["run_id", "steps"]].astype(str), f, "run_id", problems)
    if problems:
        raise RecordsError(problems)
    assert seed is not None and steps is not None  # required columns: a missing one is a problem raised above

    n_runs, n_b = len(raw), len(bench)
    text = lambda c, default="": (raw[c].astype(str).str.strip() if c in cols  # noqa: E731
                                  else pd.Series([default] * n_runs)).to_numpy(dtype=object)
    run_id = text("run_id")
    policy = text("method")
    mech = (raw["mechanism"].astype(str).str.strip().to_numpy(dtype=object) if "mechanism" in cols
            else derive_mechanism(pd.Series(policy)))
    regime = np.where(blank_cells(raw["regime"]), "", text("regime")) if "regime" in cols else text("regime")
    run_key = np.where(blank_cells(raw["run_key"]), run_id, text("run_key")) if "run_key" in cols else run_id
    acc = np.column_stack([scores[b] for b in bench]).reshape(-1)  # run-major
    n_items = np.tile(np.array([suite.item_counts()[b] for b in bench]), n_runs)
    rep = lambda a: np.repeat(np.asarray(a, dtype=object), n_b)  # noqa: E731
    out = pd.DataFrame({
        "run_key": rep(run_key), "run_id": rep(run_id), "campaign": rep(text("campaign")),
        "model": rep(text("model")), "policy": rep(policy), "mechanism": rep(mech),
        "seed": np.repeat(seed.astype(np.int64), n_b), "step": np.repeat(steps.astype(np.int64), n_b),
        "regime": rep(regime), "benchmark": np.tile(np.array(bench, dtype=object), n_runs),
        "domain": np.tile(np.array([suite.domain_of()[b] for b in bench], dtype=object), n_runs),
        "n_items": n_items.astype(np.int64), "n_correct": recover_n_correct(acc, n_items),
        "accuracy": acc, "parse_rate": np.nan, "truncation_rate": np.nan,
        "suite_version": rep(text("suite_version")), "harness_version": rep(text("harness_version")),
        "config_hash": rep(text("config_hash")), "eval_hash": rep(text("eval_hash")), "metric": "",
        "metrics": "",
    })
    return _typed(out)


def _from_long(raw: pd.DataFrame, f: str, suite: Suite) -> pd.DataFrame:
    problems: list[Problem] = []
    cols = list(raw.columns)
    for c in REQUIRED_LONG:
        if c not in cols:
            problems.append(Problem(f, None, c, "required column is missing (long records need "
                                                f"{', '.join(REQUIRED_LONG)})"))
    for c in cols:
        if c not in RECORD_COLUMNS and c not in BUDGET_COLUMNS:
            problems.append(Problem(f, None, c, f"unknown column; Record columns are {_KNOWN}"))
    for c in ("run_id", "campaign", "model", "policy", "benchmark"):
        if c in cols:
            check_text(raw, c, f, problems)
    ints = {c: check_int(raw, c, f, problems) for c in ("seed", "step", "n_items") if c in cols}
    floats = _budget_cells(raw, f, problems)
    if "accuracy" in cols:
        floats["accuracy"] = check_score(raw, "accuracy", f, problems)
    for c in ("parse_rate", "truncation_rate"):
        if c in cols:
            floats[c] = check_score(raw, c, f, problems, hi=1.0)
    if "n_correct" in cols:
        vals, bad = number_cells(raw["n_correct"])
        for r in row_numbers(bad | (vals < 0)):
            problems.append(Problem(f, r, "n_correct", f"{raw['n_correct'].iloc[r - 1]!r} is not a count >= 0"))
        floats["n_correct"] = vals
    if "benchmark" in cols:
        bench = raw["benchmark"].astype(str).str.strip()
        unknown = ~bench.isin(suite.benchmark_ids).to_numpy() & ~blank_cells(raw["benchmark"])
        for r in row_numbers(unknown):
            problems.append(Problem(f, r, "benchmark", f"{bench.iloc[r - 1]!r} is not a benchmark of suite "
                                                       f"{suite.name!r} ({', '.join(suite.benchmark_ids)})"))
        if "domain" in cols:
            expect = bench.map(suite.domain_of())
            wrong = (~unknown & (raw["domain"].astype(str).str.strip() != expect)).to_numpy()
            for r in row_numbers(wrong):
                problems.append(Problem(f, r, "domain", f"{raw['domain'].iloc[r - 1]!r} but suite {suite.name!r} "
                                                        f"puts {bench.iloc[r - 1]!r} in {expect.iloc[r - 1]!r}"))
    if "mechanism" in cols:
        check_mechanism(raw, f, problems)
    key_col = "run_key" if "run_key" in cols else "run_id"
    if {key_col, "step", "benchmark"} <= set(cols):
        check_duplicates(raw[[key_col, "step", "benchmark"]].astype(str).apply(lambda s: s.str.strip()),
                          f, "benchmark", problems)
    if "n_items" in ints:
        for r in row_numbers(~np.isnan(ints["n_items"]) & (ints["n_items"] <= 0)):
            problems.append(Problem(f, r, "n_items", f"{raw['n_items'].iloc[r - 1]!r} is not a positive item count"))
        if "n_correct" in floats:
            over = np.nan_to_num(floats["n_correct"]) > np.nan_to_num(ints["n_items"], nan=np.inf)
            for r in row_numbers(over):
                problems.append(Problem(f, r, "n_correct", f"{raw['n_correct'].iloc[r - 1]!r} exceeds n_items "
                                                           f"{raw['n_items'].iloc[r - 1]!r}"))
    if "accuracy" in cols and (raw["accuracy"].dtype == bool or raw["accuracy"].map(type).eq(bool).any()):
        for r in row_numbers(raw["accuracy"].map(lambda v: isinstance(v, (bool, np.bool_))).to_numpy()):
            problems.append(Problem(f, r, "accuracy", f"{raw['accuracy'].iloc[r - 1]!r} is a boolean; write the "
                                                      "accuracy in points (0-100)"))
    check_one_run_per_cell(raw, cols, key_col, f, problems)
    check_budget_consistency(raw, floats, ints, key_col, f, problems)
    if problems:
        raise RecordsError(problems)

    n = len(raw)
    text = lambda c: raw[c].astype(str).str.strip().to_numpy(dtype=object)  # noqa: E731
    out = pd.DataFrame({c: (text(c) if c in cols else np.full(n, "", dtype=object))
                        for c, t in RECORD_COLUMNS.items() if t == "str"})
    for c in ("regime", "suite_version", "harness_version", "config_hash", "eval_hash", "run_key", "metric",
              "metrics"):
        if c in cols:
            out[c] = np.where(blank_cells(raw[c]), "", out[c])
    out["run_key"] = np.where(out["run_key"] == "", out["run_id"], out["run_key"])
    if "mechanism" not in cols:
        out["mechanism"] = derive_mechanism(out["policy"])
    out["domain"] = out["benchmark"].map(suite.domain_of())
    out["seed"] = ints["seed"].astype(np.int64)
    out["step"] = ints["step"].astype(np.int64)
    counts = out["benchmark"].map(suite.item_counts()).to_numpy(dtype=np.int64)
    out["n_items"] = ints["n_items"].astype(np.int64) if "n_items" in ints else counts
    for c in ("n_correct", "accuracy", "parse_rate", "truncation_rate"):
        out[c] = floats.get(c, np.full(n, np.nan))
    return _typed(out[list(RECORD_COLUMNS)].assign(**{c: floats[c] for c in BUDGET_COLUMNS if c in cols}))


_KNOWN = f"{', '.join(RECORD_COLUMNS)} (and, for runs trained to a budget, {', '.join(BUDGET_COLUMNS)})"


def _budget_cells(raw: pd.DataFrame, f: str, problems: list[Problem]) -> dict[str, np.ndarray]:
    """The budget columns a file has (a budgeted run's), each a token count >= 0 or blank (NaN: none)."""
    return {c: check_budget_cells(raw, c, f, problems) for c in BUDGET_COLUMNS if c in raw.columns}


def _typed(df: pd.DataFrame) -> pd.DataFrame:
    """Cast to the schema's dtypes, in canonical column order; the budget columns follow when `df` has them."""
    out = pd.DataFrame(index=df.index)
    for c, t in (RECORD_COLUMNS | {c: t for c, t in BUDGET_COLUMNS.items() if c in df.columns}).items():
        if t == "str":
            out[c] = df[c].astype(str)
        elif t == "int":
            out[c] = df[c].astype(np.int64)
        else:
            out[c] = df[c].astype(np.float64)
    return out.reset_index(drop=True)


# ----------------------------------------------------------------------------- public API

def read_records(path: str | Path, suite: Suite | str | None = None) -> pd.DataFrame:
    """Read long (Parquet/CSV) or wide released-format records; validate; return long Records.

    Raises RecordsError listing every problem (file, 1-based data row, column, fix).
    """
    p = Path(path)
    s = _suite(suite)
    raw = _read_raw(p)
    raw.columns = [str(c).strip() for c in raw.columns]
    out = _from_wide(raw, str(p), s) if is_wide(raw.columns) else _from_long(raw, str(p), s)
    baselines = records_baselines(p)
    if baselines:
        out.attrs[BASELINES_ATTR] = baselines
    return out


def normalise_records(df: pd.DataFrame, suite: Suite | str | None = None) -> pd.DataFrame:
    """Validate an in-memory long DataFrame exactly as a file would be (source named '<dataframe>')."""
    return _from_long(df.reset_index(drop=True).astype(object), "<dataframe>", _suite(suite))


def write_records(df: pd.DataFrame, path: str | Path) -> Path:
    """Write long Records atomically; format by extension (.parquet or .csv). Missing stays NaN/blank.

    Refuses (RecordsError, nothing written) duplicate run_key x step x benchmark rows and
    accuracies outside [0, 100]; full suite validation happens when the file is read.
    """
    p = Path(path)
    missing = [c for c in RECORD_COLUMNS if c not in df.columns and c not in OPTIONAL_WRITE]
    if missing:
        raise RecordsError([Problem("<dataframe>", None, c, "Record column missing; build records with "
                                                            "analysis.records.normalise_records") for c in missing])
    out = _typed(df.assign(**{c: "" for c in OPTIONAL_WRITE if c not in df.columns}))
    problems: list[Problem] = []
    check_duplicates(out[["run_key", "step", "benchmark"]], "<dataframe>", "benchmark", problems)
    acc = out["accuracy"].to_numpy()
    for r in row_numbers(~np.isnan(acc) & ((acc < 0) | (acc > 100))):
        problems.append(Problem("<dataframe>", r, "accuracy", f"{acc[r - 1]!r} is outside [0, 100]"))
    if problems:
        raise RecordsError(problems)
    ext = p.suffix.lower()
    if ext not in (".parquet", ".pq", ".csv"):
        raise RecordsError([Problem(str(p), None, None, f"unsupported extension {ext!r}; use .csv or .parquet")])
    with atomic_path(p) as tmp:
        if ext == ".csv":
            out.to_csv(tmp, index=False)
        else:
            out.to_parquet(tmp, index=False)
    return p


def to_wide(df: pd.DataFrame, suite: Suite | str | None = None) -> pd.DataFrame:
    """One row per run x step, one column per benchmark, in the released CSV's column order."""
    s = _suite(suite)
    ids = ["run_key", "run_id", "campaign", "model", "policy", "seed", "step", "regime"]
    wide = df.set_index(ids + ["benchmark"])["accuracy"].unstack("benchmark")
    wide = wide.reindex(columns=s.benchmark_ids).reset_index()
    wide = wide.rename(columns={"policy": "method", "step": "steps"})
    extra = ["run_key"] if (wide["run_key"] != wide["run_id"]).any() else []
    wide = wide[list(WIDE_ID_COLUMNS) + s.benchmark_ids + extra]
    wide.columns.name = None
    return wide


def write_wide(df: pd.DataFrame, path: str | Path, suite: Suite | str | None = None) -> Path:
    """Atomic wide CSV export matching `released_runs_171.csv` (blank cell = missing score)."""
    p = Path(path)
    with atomic_path(p) as tmp:
        to_wide(df, suite).to_csv(tmp, index=False)
    return p

