"""Item-level evidence: the evaluator's per-item logs as records, and a CI that counts item sampling.

A benchmark is a sample of items, so a score difference has two sources of noise: seeds (training
randomness) and items (which questions happen to be in the benchmark). More seeds never reduce the
second. Layer: one row per (run, benchmark, item) with score, status, finish_reason and tokens, read
from `<records>.items.jsonl.gz` (evaluation/evaluator.py writes it beside each run's records) and
validated like run records: every problem located by file, line and field.

Two-way clustered SE (Cameron, Gelbach & Miller 2011) of a paired difference, paired on the same
seeds *and* the same items: D[s, i] = score(method, s, i) - score(reference, s, i); the estimate
theta = sum_{s,i} a_i D[s, i] / S with item weights a (sum 1: 1/I for one benchmark, w_b/I_b for an
aggregate); residuals e = D - (benchmark mean of D); then

    V_seed = S/(S-1) * sum_s (sum_i a_i e[s,i] / S)^2
    V_item = I/(I-1) * sum_i (sum_s a_i e[s,i] / S)^2
    V_both = N/(N-1) * sum_{s,i} (a_i e[s,i] / S)^2          (N = S*I)
    V = max(V_seed + V_item - V_both, V_seed)  (never narrower than the seed-only CI; when the
        sum is negative, max(V_seed, V_item) as CGM advise)

and the CI is theta +- t_{S-1} sqrt(V) (df from the smaller dimension, the seeds). V_seed alone is
the seed-only variance (var of per-seed scores / S), so both CIs are shown side by side.

Sampled decoding (k samples per item, evaluation/sampling.py): an item's `score` is its k-sample value
(avg@k: the mean of its k outcomes), so the sampling noise sits inside each seed x item cell and enters the
seed sums above; the same two-way clustered interval is then the seed + item + sample interval (its coverage
at k = 1, 4, 16 is simulated in benchmarks/interval_coverage.py). `n_samples`, `sample_mean` and `sample_var`
(the unbiased within-item variance of the k outcomes) feed the variance split of analysis/sampling_noise.py.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
from scipy import stats

from analysis.schema import Problem, RecordsError
from evaluation import item_log
from wtcommon.errors import UserError

class MissingItemLogs(UserError, KeyError):
    """Runs a paired item comparison needs have no item log (a KeyError too: callers note it and go on)."""

    def __str__(self) -> str:  # KeyError's str would quote the message
        return str(self.args[0]) if self.args else ""


ITEM_COLUMNS = ("run_id", "benchmark", "item_id", "score", "status", "finish_reason", "tokens", "n_samples",
                "sample_mean", "sample_var")
STATUSES = ("ok", "no_answer", "hedged", "truncated", "timeout", "error")  # evaluation.graders.STATUSES (v5)
NO_ITEMS_REASON = ("no item logs: these records carry one accuracy per benchmark and no *.items.jsonl.gz lies "
                   "beside them (the released CSV has none), so item-sampling error cannot be estimated; pass "
                   "--items FOLDER where the runs' item logs are, or evaluate with the evaluator, to get the "
                   "seed + item CI")


def read_item_log(path: str | Path, run_id: str) -> pd.DataFrame:
    """One run's item log -> ITEM_COLUMNS frame; RecordsError lists every bad line/field."""
    p = Path(path)
    f = str(p)
    problems: list[Problem] = []
    rows = []
    try:
        lines = item_log.read_lines(p)
    except item_log.UnreadableItemLog as e:
        raise RecordsError([Problem(f, None, None, f"not a readable gzip JSON-lines item log ({e.reason})")]) from None
    seen: set[tuple[str, str]] = set()
    for line in lines:
        i, r = line.number, line.row
        if r is None:
            fix = "; fix or remove this line" if line.json_error is not None else ""
            problems.append(Problem(f, i, None, line.problem + fix))
            continue
        bad = False
        for col in ("benchmark", "item_id"):
            if not isinstance(r.get(col), (str, int)) or str(r.get(col)).strip() == "":
                problems.append(Problem(f, i, col, "is missing or empty; every item needs it"))
                bad = True
        score = r.get("score")
        if isinstance(score, bool) or not isinstance(score, (int, float)) or not 0 <= float(score) <= 1:
            problems.append(Problem(f, i, "score", f"{score!r} is not a number in [0, 1]"))
            bad = True
        if r.get("status") not in STATUSES:
            problems.append(Problem(f, i, "status", f"{r.get('status')!r}; expected one of {list(STATUSES)}"))
            bad = True
        key = (str(r.get("benchmark")), str(r.get("item_id")))
        if not bad and key in seen:
            problems.append(Problem(f, i, "item_id", f"{key[1]!r} of {key[0]!r} appears twice; keep one"))
            bad = True
        outs = r.get("samples")
        k, s_mean, s_var = 1, float("nan"), float("nan")
        if outs is not None:
            vals = [o.get("score") if isinstance(o, dict) else None for o in outs] if isinstance(outs, list) else []
            if not vals or any(isinstance(v, bool) or not isinstance(v, (int, float)) or not 0 <= v <= 1
                               for v in vals):
                problems.append(Problem(f, i, "samples", "must be a non-empty list of {score: number in [0, 1], ...} "
                                        "(one per sampled generation)"))
                bad = True
            else:
                arr = np.asarray(vals, dtype=float)
                k, s_mean = len(arr), float(arr.mean())
                s_var = float(arr.var(ddof=1)) if k > 1 else float("nan")
        if bad:
            continue
        seen.add(key)
        assert isinstance(score, (int, float))  # a row whose score failed the check above was skipped
        tok = r.get("response_tokens")
        rows.append({"run_id": run_id, "benchmark": key[0], "item_id": key[1], "score": float(score),
                     "status": r["status"], "finish_reason": r.get("finish_reason") or "",
                     "tokens": float(tok) if isinstance(tok, (int, float)) and not isinstance(tok, bool) else np.nan,
                     "n_samples": k, "sample_mean": s_mean if outs is not None else float(score),
                     "sample_var": s_var})
    if problems:
        raise RecordsError(problems)
    if not rows:
        raise RecordsError([Problem(f, None, None, "has no item rows")])
    return pd.DataFrame(rows, columns=list(ITEM_COLUMNS))


def read_items_dir(root: str | Path) -> pd.DataFrame:
    """Every `<name>.items.jsonl.gz` under root, each with the run_id of its sibling records file
    `<name>.parquet` / `<name>.csv` (the evaluator writes both). RecordsError lists every problem."""
    root = Path(root)
    logs = sorted(root.rglob(item_log.GLOB)) if root.is_dir() else [root]
    problems: list[Problem] = []
    frames = []
    if not logs:
        raise RecordsError([Problem(str(root), None, None, "no *.items.jsonl.gz item log found; pass the folder "
                                    "the evaluator wrote the run records and item logs into")])
    for log in logs:
        stem = item_log.stem_of(log)
        sib = [log.with_name(stem + ext) for ext in (".parquet", ".csv") if log.with_name(stem + ext).is_file()]
        if not sib:
            problems.append(Problem(str(log), None, None,
                                    f"no records file {stem}.parquet/.csv beside it to name its run"))
            continue
        rec = pd.read_parquet(sib[0], columns=["run_id"]) if sib[0].suffix == ".parquet" else \
            pd.read_csv(sib[0], usecols=["run_id"], dtype=str)
        ids = rec["run_id"].dropna().astype(str).unique()
        if len(ids) != 1:
            problems.append(Problem(str(sib[0]), None, "run_id",
                                    f"holds {len(ids)} run ids; an item log belongs to one run"))
            continue
        try:
            frames.append(read_item_log(log, ids[0]))
        except RecordsError as exc:
            problems += exc.problems
    if problems:
        raise RecordsError(problems)
    return pd.concat(frames, ignore_index=True)


def two_way_clustered(d: np.ndarray, weights: np.ndarray | None = None, groups: np.ndarray | None = None,
                      level: float = 0.95) -> dict[str, float]:
    """d: (S seeds, I items) paired item differences -> estimate, seed-only and two-way SE and CIs.

    weights: (I,) item weights summing to 1 (default 1/I); groups: (I,) benchmark labels whose own
    means are removed before clustering (default one group). Pure; the formulas are in the module doc.
    """
    d = np.asarray(d, dtype=float)
    s_n, i_n = d.shape
    a = np.full(i_n, 1.0 / i_n) if weights is None else np.asarray(weights, dtype=float)
    g = np.zeros(i_n, dtype=int) if groups is None else pd.factorize(pd.Series(groups))[0]
    theta = float((d * a).sum() / s_n)
    fitted = np.zeros(i_n)
    for k in np.unique(g):
        fitted[g == k] = d[:, g == k].mean()
    u = (d - fitted) * a / s_n  # (S, I) scaled residual contributions
    v_seed = s_n / (s_n - 1) * float((u.sum(axis=1) ** 2).sum()) if s_n > 1 else np.nan
    v_item = i_n / (i_n - 1) * float((u.sum(axis=0) ** 2).sum()) if i_n > 1 else np.nan
    nn = s_n * i_n
    v_both = nn / (nn - 1) * float((u ** 2).sum())
    v = v_seed + v_item - v_both
    if not v >= v_seed:  # never narrower than the seed-only CI (noise can make V_item < V_both)
        v = v_seed if v > 0 or not v_item > v_seed else max(v_seed, v_item)
    t = stats.t.ppf(0.5 + level / 2, s_n - 1) if s_n > 1 else np.nan
    se_seed, se_two = float(np.sqrt(v_seed)), float(np.sqrt(v))
    return {"estimate": theta, "se_seed": se_seed, "se_two_way": se_two, "v_seed": v_seed, "v_item": v_item,
            "v_both": v_both, "seed_lo": theta - t * se_seed, "seed_hi": theta + t * se_seed,
            "two_way_lo": theta - t * se_two, "two_way_hi": theta + t * se_two, "n_seeds": s_n, "n_items": i_n}


def outcome_breakdown(items: pd.DataFrame) -> pd.DataFrame:
    """Per (run, benchmark): share (points) of items correct, wrong answer, parse failure (no_answer),
    truncated (finish_reason 'length', whatever the status), grader timeout / error."""
    x = items.assign(
        correct=(items["status"] == "ok") & (items["score"] > 0),
        wrong=(items["status"] == "ok") & (items["score"] == 0),
        parse_failure=items["status"] == "no_answer",
        truncated=items["finish_reason"] == "length",
        grader_timeout=items["status"] == "timeout",
        grader_error=items["status"] == "error")
    cols = ["correct", "wrong", "parse_failure", "truncated", "grader_timeout", "grader_error"]
    out = 100.0 * x.groupby(["run_id", "benchmark"], sort=True)[cols].mean()
    out["n_items"] = x.groupby(["run_id", "benchmark"], sort=True).size()
    return out.reset_index()


def paired_item_matrix(items: pd.DataFrame, method_runs: list[str], reference_runs: list[str],
                       benchmarks: list[str]) -> tuple[np.ndarray, np.ndarray]:
    """(S, I) differences method - reference on the items both runs of every seed pair scored, and the
    benchmark label of each item column. method_runs[k] and reference_runs[k] share seed k."""
    sub = items[items["benchmark"].isin(benchmarks)]
    piv = sub.pivot_table(index=["benchmark", "item_id"], columns="run_id", values="score", aggfunc="first")
    need = list(method_runs) + list(reference_runs)
    missing = [r for r in need if r not in piv.columns]
    if missing:
        raise MissingItemLogs(f"no item log for run(s) {missing}")
    piv = piv[need].dropna()  # paired on items every run scored
    m = piv[list(method_runs)].to_numpy(float).T
    r = piv[list(reference_runs)].to_numpy(float).T
    return m - r, piv.index.get_level_values("benchmark").to_numpy()


BREAKDOWN = ("wrong", "parse_failure", "truncated", "grader_timeout", "grader_error")


def comparison_breakdown(items: pd.DataFrame, runs: pd.DataFrame, paired: pd.DataFrame) -> pd.DataFrame:
    """Per method-vs-reference comparison: seed-mean share (points, over all logged items) of wrong answers,
    parse failures, truncations and grader failures for method and reference, and their difference, so a
    score change can be read as better answers vs fewer format failures.

    runs: `run_table` (run_id -> configuration); paired: `paired_comparisons(...).table`."""
    from analysis.schema import CONFIG_KEYS, GROUP_KEYS

    per_run = outcome_breakdown(items)
    w = per_run["n_items"].to_numpy(float)
    cols = list(BREAKDOWN)
    agg = (per_run[cols].mul(w, axis=0).groupby(per_run["run_id"]).sum()
           .div(per_run.groupby("run_id")["n_items"].sum(), axis=0))
    cfg = runs.drop_duplicates("run_id").set_index("run_id")[list(CONFIG_KEYS)]
    agg = agg.join(cfg, how="inner").groupby(list(CONFIG_KEYS))[cols].mean()
    comp = paired[paired["kind"] == "effect"].drop_duplicates(list(GROUP_KEYS) + ["policy", "reference"])
    rows = []
    for _, c in comp.iterrows():
        g = tuple(c[k] for k in GROUP_KEYS)
        km, kr = g + (c["policy"],), g + (c["reference"],)
        if km not in agg.index or kr not in agg.index:
            continue
        row = {**{k: c[k] for k in GROUP_KEYS}, "policy": c["policy"], "reference": c["reference"]}
        for col in cols:
            row[f"{col}_method"] = float(agg.loc[km, col])
            row[f"{col}_reference"] = float(agg.loc[kr, col])
            row[f"{col}_delta"] = row[f"{col}_method"] - row[f"{col}_reference"]
        rows.append(row)
    return pd.DataFrame(rows)


def item_logs_beside(records: Path) -> Path | None:
    """The folder of item logs that belong to RECORDS, when there is one: the records' own folder, or for
    `<workdir>/results/<campaign>/records.parquet` the work dir's `runs/<campaign>` (where runs write them)."""
    r = Path(records).resolve()
    cands = [(r.parent, item_log.GLOB), (r.parent / "runs", "**/" + item_log.GLOB)]  # never all of /tmp
    if r.parent.parent.name == "results":
        cands.insert(0, (r.parent.parent.parent / "runs" / r.parent.name, "**/" + item_log.GLOB))
    for c, pattern in cands:
        if c.is_dir() and next(c.glob(pattern), None) is not None:
            return c
    return None


def no_items_note(records: Path) -> str:
    """Why the seed + item CI is missing without --items: item logs exist but were not read (the fix is
    --items), or there are none for these records (only then: evaluate with the evaluator)."""
    found = item_logs_beside(records)
    if found is not None:
        return f"item logs not read: pass --items {found} for the seed + item CI"
    return NO_ITEMS_REASON
