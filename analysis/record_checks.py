"""Cell-by-cell checks of raw records, each appending a `Problem` (file, 1-based row, column, fix) to a
list instead of raising, so analysis.records reports every problem of a file in one pass; and the refusal of
records that mix evaluation settings or grader versions within one comparison group.
"""

from __future__ import annotations

import warnings

import numpy as np
import pandas as pd

from analysis.schema import GROUP_KEYS, MECHANISMS, Problem, RecordsError, study_mechanism


_MISSING_TOKENS = {"", "nan", "na", "none", "null"}


class UnknownPolicyWarning(UserWarning):
    """A policy outside the study's table got mechanism "unknown"."""


def blank_cells(s: pd.Series) -> np.ndarray:
    txt = s.astype(str).str.strip().str.lower()
    return (s.isna() | txt.isin(_MISSING_TOKENS)).to_numpy()


def number_cells(s: pd.Series) -> tuple[np.ndarray, np.ndarray]:
    """(values with NaN for blanks, mask of non-blank cells that are not numbers)."""
    blank = blank_cells(s)
    vals = pd.to_numeric(s.where(~blank).astype(object).map(lambda v: str(v).strip() if isinstance(v, str) else v),
                         errors="coerce").to_numpy(dtype=float)
    bad = ~blank & np.isnan(vals)
    return vals, bad


def row_numbers(mask: np.ndarray) -> list[int]:
    return (np.flatnonzero(mask) + 1).tolist()


def check_text(raw: pd.DataFrame, col: str, f: str, problems: list[Problem]) -> None:
    for r in row_numbers(blank_cells(raw[col])):
        problems.append(Problem(f, r, col, "is empty; every record needs a value here"))


INT_LIMITS = {"seed": 2**32, "step": 2**31, "steps": 2**31}  # seeds are uint32 (as in campaign specs)


def check_int(raw: pd.DataFrame, col: str, f: str, problems: list[Problem]) -> np.ndarray:
    vals, bad = number_cells(raw[col])
    blank = blank_cells(raw[col])
    nonint = ~bad & ~blank & (np.isinf(vals) | (np.nan_to_num(vals) != np.floor(np.nan_to_num(vals))))
    for r in row_numbers(blank):
        problems.append(Problem(f, r, col, "is empty; expected an integer"))
    for r in row_numbers(bad | nonint):
        problems.append(Problem(f, r, col, f"{raw[col].iloc[r - 1]!r} is not an integer"))
    hi = INT_LIMITS.get(col, 2**53)
    finite = np.nan_to_num(vals, nan=0.0, posinf=0.0, neginf=0.0)
    for r in row_numbers(~bad & ~blank & ~nonint & ((finite < 0) | (finite >= hi))):
        problems.append(Problem(f, r, col, f"{raw[col].iloc[r - 1]!r} is out of range; must be >= 0 and < {hi}"))
    return vals


def check_score(raw: pd.DataFrame, col: str, f: str, problems: list[Problem], hi: float = 100.0) -> np.ndarray:
    vals, bad = number_cells(raw[col])
    for r in row_numbers(bad):
        problems.append(Problem(f, r, col, f"{raw[col].iloc[r - 1]!r} is not a number; "
                                           "write a number, or leave the cell blank for a missing score"))
    out = ~np.isnan(vals) & ((vals < 0) | (vals > hi) | np.isinf(vals))
    for r in row_numbers(out):
        problems.append(Problem(f, r, col, f"{vals[r - 1]!r} is outside [0, {hi:g}]"))
    return vals


CELL = ("campaign", "model", "policy", "regime", "step", "seed", "benchmark")


def _is_missing(v: object) -> bool:
    """None, NaN or pandas NA (scalars only)."""
    try:
        return bool(pd.isna(v))
    except (TypeError, ValueError):  # a list or array cell: not missing
        return False


def check_one_run_per_cell(raw: pd.DataFrame, cols: set[str] | list[str], key_col: str, f: str,
                            problems: list[Problem]) -> None:
    """Two runs of one cell (same campaign/model/policy/regime/step/seed/benchmark, different run) would be paired
    arbitrarily: records of two generations of a changed spec, or a duplicated run. Refuse them, naming both."""
    cell = [c for c in CELL if c in cols]
    if key_col not in cols or not {"campaign", "model", "policy", "seed", "benchmark"} <= set(cell):
        return
    # a blank key cell (NaN seed in a Parquet file, "" in a CSV) is refused by the cell checks with its row and
    # column; here it is text like any other value, never a float that `'/'.join` cannot take
    keys = raw[cell + [key_col]].apply(lambda s: s.map(lambda v: "" if _is_missing(v) else str(v).strip()))
    first = keys.groupby(cell, sort=False)[key_col].transform("first")
    for r in row_numbers((keys[key_col] != first).to_numpy()):
        problems.append(Problem(f, r, key_col, f"{keys[key_col].iloc[r - 1]!r} is a second run of the cell "
                                              f"{'/'.join(keys[cell].iloc[r - 1])} (first: {first.iloc[r - 1]!r}): "
                                              "records of two generations or a duplicated run; keep one generation "
                                              "(a work dir's results/<campaign>/records.parquet holds only the current "
                                              "one)"))


def check_duplicates(keys: pd.DataFrame, f: str, col: str, problems: list[Problem]) -> None:
    dup = keys.duplicated(keep=False).to_numpy()
    if not dup.any():
        return
    first: dict[tuple, int] = {}
    for r, key in zip(row_numbers(dup), keys[dup].itertuples(index=False, name=None), strict=True):
        if key in first:
            problems.append(Problem(f, r, col, f"duplicate of row {first[key]} for "
                                               f"{dict(zip(keys.columns, key, strict=True))}; keep one"))
        else:
            first[key] = r


def derive_mechanism(policies: pd.Series) -> np.ndarray:
    mech = policies.map(study_mechanism).to_numpy(dtype=object)
    unknown = sorted(set(policies[mech == "unknown"]))
    if unknown:
        warnings.warn(f"policies {unknown} are not in the study's policy table; mechanism set to 'unknown' "
                      "(add a 'mechanism' column to set it)", UnknownPolicyWarning, stacklevel=3)
    return mech


def check_mechanism(raw: pd.DataFrame, f: str, problems: list[Problem]) -> None:
    bad = ~raw["mechanism"].astype(str).str.strip().isin(MECHANISMS).to_numpy()
    for r in row_numbers(bad):
        problems.append(Problem(f, r, "mechanism",
                                f"{raw['mechanism'].iloc[r - 1]!r} is not one of {list(MECHANISMS)}"))


def grader_labels(df: pd.DataFrame) -> pd.Series:
    """Each record's grader version as its `harness_version` names it (`grader math-v3`, evaluation/evaluator.py;
    a regrade rewrites it, evaluation/regrade.py); "unknown" where none is named (released files, older runs)."""
    if "harness_version" not in df.columns:
        return pd.Series("unknown", index=df.index)
    got = df["harness_version"].fillna("").astype(str).str.extract(r"grader (\S+?)(?:;|$)", expand=False)
    return got.fillna("unknown")


def check_one_grader(df: pd.DataFrame, source: str = "<records>") -> None:
    """Refuse (RecordsError naming the runs and versions) records of one comparison group (campaign, model,
    regime, step) in which one benchmark was scored under two grader versions: a paired difference would
    mix a grader change into the policy effect. Re-scoring the older runs (`campaign eval --regrade`) makes
    them one version; records naming no version are one "unknown" version."""
    if df.empty:
        return
    d = df.assign(_grader=grader_labels(df)).drop_duplicates(["run_key", "step", "benchmark"])
    problems: list[Problem] = []
    for key, g in d.groupby([*GROUP_KEYS, "benchmark"], sort=True):
        counts = g["_grader"].value_counts()
        if len(counts) < 2:
            continue
        ids = {v: sorted(g.loc[g["_grader"] == v, "run_id"].astype(str)) for v in counts.index}
        named = ", ".join(f"{v} ({n} run{'s' if n > 1 else ''}: {', '.join(ids[v][:3])}{', ...' if n > 3 else ''})"
                          for v, n in counts.items())
        where = "/".join(str(k) for k in key[:-1] if k != "")
        problems.append(Problem(source, None, "harness_version", f"{where}: {key[-1]} scored under {len(counts)} "
                                f"grader versions: {named}; re-score the older runs with `campaign eval --regrade "
                                "--out RECORDS` or pass --allow-mixed-graders to compare them anyway"))
    if problems:
        raise RecordsError(problems)


def check_one_evaluation(df: pd.DataFrame, source: str = "<records>", *, by_graders: bool = False) -> None:
    """Refuse (RecordsError naming both) records of one comparison group (campaign, model, regime, step) scored
    under different evaluation settings or data (`eval_hash`, evaluation/settings.py): a paired difference would
    mix an evaluation change into the policy effect. Records without a hash (released files, older runs) are one
    "unknown" generation; a group of only those passes. `by_graders` (mixed grader versions allowed): the grader
    versions change the hash, so the settings must agree only among runs scored by the same graders."""
    if "eval_hash" not in df.columns or df.empty:
        return
    keys = list(GROUP_KEYS)
    if by_graders:
        sig = df.assign(_g=grader_labels(df)).groupby(["run_key", "step"])["_g"].agg(lambda x: ",".join(sorted(set(x))))
        df = df.join(sig.rename("_graders"), on=["run_key", "step"])
        keys.append("_graders")
    runs = df.drop_duplicates(["run_key", "step"])
    problems: list[Problem] = []
    for key, g in runs.groupby(keys, sort=True):
        counts = g["eval_hash"].replace("", "unknown").value_counts()
        if len(counts) > 1:
            named = ", ".join(f"{h} ({n} run{'s' if n > 1 else ''}, e.g. "
                              f"{g.loc[g['eval_hash'].replace('', 'unknown') == h, 'run_id'].iloc[0]})"
                              for h, n in counts.items())
            where = "/".join(str(k) for k in key[:len(GROUP_KEYS)] if k != "")
            problems.append(Problem(source, None, "eval_hash", f"{where}: records "
                                    f"of {len(counts)} evaluation settings: {named}; re-evaluate the older runs "
                                    "(`campaign submit` re-evaluates runs whose evaluation settings changed) or pass "
                                    "--allow-mixed-evaluations to compare them anyway"))
    if problems:
        raise RecordsError(problems)


# the most rollout tokens a record may state: 10^15 is a thousand times a 7B model's whole study at 64 GPUs; a larger
# value is a unit slip or a typo (1e300), and an infinite one would pair every run "at the budget"
MAX_TOKENS = 1e15


def check_budget_cells(raw: pd.DataFrame, col: str, f: str, problems: list[Problem]) -> np.ndarray:
    """A budget column's cells: finite token counts, `rollout_token_budget` > 0 and `rollout_tokens` >= 0, at most
    MAX_TOKENS, or blank (NaN: no budget)."""
    vals, bad = number_cells(raw[col])
    low = vals <= 0 if col == "rollout_token_budget" else vals < 0
    off = bad | low | np.isinf(vals) | (vals > MAX_TOKENS)
    what = "> 0" if col == "rollout_token_budget" else ">= 0"
    for r in row_numbers(off):
        problems.append(Problem(f, r, col, f"{raw[col].iloc[r - 1]!r} is not a finite token count {what} and <= "
                                           f"{MAX_TOKENS:.0e} (blank: none)"))
    return vals


def check_budget_consistency(raw: pd.DataFrame, floats: dict[str, np.ndarray], ints: dict[str, np.ndarray],
                             key_col: str, f: str, problems: list[Problem]) -> None:
    """Across rows: a run's cumulative rollout tokens never decrease from one checkpoint to the next, and every
    run of one configuration (campaign, model, regime: all policies and seeds, so a policy and its reference) was
    trained to the same budget; otherwise "at the budget" would pair runs of different compute."""
    if key_col not in raw.columns or "step" not in ints:
        return
    runs = raw[key_col].astype(str).str.strip().to_numpy()
    if "rollout_tokens" in floats:
        d = pd.DataFrame({"run": runs, "step": ints["step"], "tok": floats["rollout_tokens"],
                          "row": np.arange(1, len(raw) + 1)}).dropna(subset=["tok", "step"])
        d = d.sort_values(["run", "step", "row"], kind="stable").drop_duplicates(["run", "step"])
        down = d.groupby("run", sort=False)["tok"].diff() < 0
        for row, run, step in d.loc[down, ["row", "run", "step"]].itertuples(index=False):
            problems.append(Problem(f, int(row), "rollout_tokens", f"run {run}: cumulative rollout tokens decrease at "
                                    f"step {int(step)}; they count every rollout since step 0 and never go down"))
    if "rollout_token_budget" in floats:
        cfg = [c for c in ("campaign", "model", "regime") if c in raw.columns]
        if not cfg:
            return
        d = raw[cfg].astype(str).apply(lambda s: s.str.strip()).assign(budget=floats["rollout_token_budget"],
                                                                       row=np.arange(1, len(raw) + 1))
        d = d.dropna(subset=["budget"])
        first = d.groupby(cfg, sort=False)["budget"].transform("first")
        for row, got, want in zip(d["row"], d["budget"], np.asarray(first), strict=True):
            if got != want:
                problems.append(Problem(f, int(row), "rollout_token_budget", f"{got:,.0f}, but {want:,.0f} for "
                                        "another run of the same campaign/model/regime: a policy and its reference "
                                        "are compared at one budget; re-run the odd one to the campaign's budget"))
                break  # one line names the mismatch; every row of it would repeat it

