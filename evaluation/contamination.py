"""Contamination audit: training prompts vs benchmark items (exact, normalised, 13-gram Jaccard).

Vectorised: word 13-grams are hashed to uint64 with numpy (token ids from one vocabulary, then a
polynomial roll over a sliding window), and the overlap between every training prompt and every
benchmark item comes from one sorted join on the hash instead of 15,000 x 6,194 comparisons.
Instruction text is removed before comparing (every prompt carries one), and n-grams present in
more than `max_df` benchmark items are dropped as boilerplate so the join cannot blow up.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any
from collections.abc import Iterable

import numpy as np
import pandas as pd

from evaluation.prompts import KK_INSTRUCTION, MATH_INSTRUCTION
from wtcommon.errors import UserError

_INSTRUCTION_PATTERNS = [re.escape(MATH_INSTRUCTION), re.escape(KK_INSTRUCTION),
                         r"Please reason step by step, and finish with \"The answer is: \(X\)\"[^\n]*",
                         r"Let's think step by step\.?"]
_INSTR = re.compile("|".join(_INSTRUCTION_PATTERNS), re.IGNORECASE)
_NON_ALNUM = re.compile(r"[^0-9a-z]+")


class AuditError(UserError):
    """The training file cannot be audited; names the file and column."""


def prompt_text(value: Any) -> str:
    """The user text of a verl prompt cell (list of chat messages) or a plain string."""
    if isinstance(value, str):
        return value
    if isinstance(value, dict):
        return str(value.get("content", ""))
    if value is None:
        return ""
    try:
        return "\n".join(str(m.get("content", "")) for m in value if isinstance(m, dict)
                         and m.get("role", "user") == "user")
    except TypeError:
        return str(value)


def normalise(text: str) -> str:
    """Lower-case words of the text without instruction boilerplate or punctuation."""
    return _NON_ALNUM.sub(" ", _INSTR.sub(" ", text).lower()).strip()


def ngram_hashes(docs: list[str], n: int = 13, vocab: dict[str, int] | None = None) -> tuple[np.ndarray, np.ndarray]:
    """(doc index, n-gram hash) pairs, unique per doc. docs are normalised strings.

    Pass one shared `vocab` for every corpus whose hashes will be compared.
    """
    vocab = {} if vocab is None else vocab
    words = [d.split() for d in docs]
    lens = np.array([len(w) for w in words], dtype=np.int64)
    if not len(docs) or lens.max(initial=0) < n:
        return np.empty(0, np.int64), np.empty(0, np.uint64)
    allw = [w for ws in words for w in ws]
    codes, uniq = pd.factorize(pd.Series(allw, dtype=object))
    for w in uniq:
        vocab.setdefault(w, len(vocab))
    ids = np.array([vocab[w] for w in uniq], dtype=np.uint64)
    flat = ids[codes]
    starts = np.concatenate([[0], np.cumsum(lens)[:-1]])
    with np.errstate(over="ignore"):
        # rolling polynomial hash over a window of n token ids (uint64 wrap-around is intended)
        base = np.uint64(1_000_003)
        h = np.zeros(max(len(flat) - n + 1, 0), dtype=np.uint64)
        for k in range(n):
            h = h * base + flat[k:len(flat) - n + 1 + k] + np.uint64(1)
    doc_of = np.repeat(np.arange(len(docs)), lens)[: len(h)]
    pos = np.arange(len(h)) - starts[doc_of]
    valid = pos + n <= lens[doc_of]  # the window must not cross into the next doc
    pairs = pd.DataFrame({"doc": doc_of[valid].astype(np.int64), "h": h[valid]}).drop_duplicates()
    return pairs["doc"].to_numpy(), pairs["h"].to_numpy()


def audit(
    train_texts: list[str],
    bench_items: pd.DataFrame,
    *,
    n: int = 13,
    threshold: float = 0.5,
    max_df: int = 50,
) -> pd.DataFrame:
    """Matches between training prompts and `bench_items` (columns benchmark, item_id, prompt).

    Returns one row per (train_index, benchmark, item_id) with the strongest `kind`
    (exact > normalised > ngram) and the 13-gram `jaccard` (NaN when a text has no 13-gram).
    """
    b_raw = bench_items["prompt"].astype(str).tolist()
    t_norm = [normalise(t) for t in train_texts]
    b_norm = [normalise(t) for t in b_raw]
    found: list[pd.DataFrame] = []
    # exact and normalised: hash joins on the whole text
    for kind, tl, bl in (("exact", [t.strip() for t in train_texts], [b.strip() for b in b_raw]),
                         ("normalised", t_norm, b_norm)):
        tdf = pd.DataFrame({"train_index": np.arange(len(tl)), "key": tl})
        bdf = pd.DataFrame({"bench_row": np.arange(len(bl)), "key": bl})
        m = tdf[tdf["key"] != ""].merge(bdf[bdf["key"] != ""], on="key")[["train_index", "bench_row"]]
        m["kind"] = kind
        found.append(m)
    # 13-gram Jaccard via one join on n-gram hashes
    vocab: dict[str, int] = {}
    td, th = ngram_hashes(t_norm, n, vocab)
    bd, bh = ngram_hashes(b_norm, n, vocab)
    tsize = np.bincount(td, minlength=len(t_norm))
    bsize = np.bincount(bd, minlength=len(b_norm))
    bpairs = pd.DataFrame({"bench_row": bd, "h": bh})
    df_count = bpairs.groupby("h")["bench_row"].transform("size")
    bpairs = bpairs[df_count <= max_df]
    joined = pd.DataFrame({"train_index": td, "h": th}).merge(bpairs, on="h")
    if len(joined):
        inter = joined.groupby(["train_index", "bench_row"]).size().rename("inter").reset_index()
        union = tsize[inter["train_index"]] + bsize[inter["bench_row"]] - inter["inter"].to_numpy()
        inter["jaccard"] = inter["inter"].to_numpy() / np.maximum(union, 1)
        ng = inter[inter["jaccard"] > threshold][["train_index", "bench_row", "jaccard"]].copy()
        ng["kind"] = "ngram"
        found.append(ng)
    allm = pd.concat(found, ignore_index=True) if found else pd.DataFrame(columns=["train_index", "bench_row", "kind"])
    if allm.empty:
        return pd.DataFrame(columns=["train_index", "benchmark", "item_id", "kind", "jaccard"])
    rank = {"exact": 0, "normalised": 1, "ngram": 2}
    allm["rank"] = allm["kind"].map(rank)
    allm = allm.sort_values(["train_index", "bench_row", "rank"]).drop_duplicates(["train_index", "bench_row"])
    # Jaccard for every reported pair (also exact/normalised ones), NaN where a text has no 13-gram
    if len(joined):
        jac = inter.set_index(["train_index", "bench_row"])["jaccard"]
        key = pd.MultiIndex.from_arrays([allm["train_index"], allm["bench_row"]])
        allm["jaccard"] = jac.reindex(key).to_numpy()
    else:
        allm["jaccard"] = np.nan
    no_grams = (tsize[allm["train_index"]] == 0) | (bsize[allm["bench_row"]] == 0)
    allm.loc[no_grams, "jaccard"] = np.nan
    allm.loc[~no_grams & allm["jaccard"].isna(), "jaccard"] = 0.0
    rows = bench_items.iloc[allm["bench_row"].to_numpy()]
    return pd.DataFrame({
        "train_index": allm["train_index"].to_numpy(),
        "benchmark": rows["benchmark"].to_numpy(),
        "item_id": rows["item_id"].to_numpy(),
        "kind": allm["kind"].to_numpy(),
        "jaccard": allm["jaccard"].to_numpy(dtype=float),
    }).sort_values(["benchmark", "item_id", "train_index"]).reset_index(drop=True)


def read_train_prompts(path: Path) -> list[str]:
    path = Path(path)
    if not path.is_file():
        raise AuditError(f"{path}: training file not found")
    try:
        df = pd.read_parquet(path)
    except Exception as e:
        raise AuditError(f"{path}: not a readable Parquet file ({e})") from e
    if "prompt" not in df.columns:
        raise AuditError(f"{path}: no 'prompt' column (verl schema: a list of chat messages); columns: "
                         f"{list(df.columns)}")
    return [prompt_text(v) for v in df["prompt"].tolist()]


def summarise(matches: pd.DataFrame, bench_items: pd.DataFrame) -> pd.DataFrame:
    """Per benchmark: items, contaminated items by strongest kind."""
    n = bench_items.groupby("benchmark", sort=False).size().rename("n_items")
    if matches.empty:
        out = n.to_frame()
        for k in ("exact", "normalised", "ngram", "contaminated"):
            out[k] = 0
        return out.reset_index()
    rank = {"exact": 0, "normalised": 1, "ngram": 2}
    best = (matches.assign(r=matches["kind"].map(rank)).sort_values("r")
            .drop_duplicates(["benchmark", "item_id"]))
    counts = best.groupby(["benchmark", "kind"]).size().unstack(fill_value=0)
    out = n.to_frame().join(counts).fillna(0)
    for k in ("exact", "normalised", "ngram"):
        out[k] = out.get(k, 0)
    out = out[["n_items", "exact", "normalised", "ngram"]].astype(int)
    out["contaminated"] = out[["exact", "normalised", "ngram"]].sum(axis=1)
    return out.reset_index()


def bench_items_frame(data_dir: Path, benchmark_ids: Iterable[str]) -> pd.DataFrame:
    from evaluation.benchmark_data import read_benchmark

    parts = []
    for bid in benchmark_ids:
        df = read_benchmark(Path(data_dir), bid)
        parts.append(pd.DataFrame({"benchmark": bid, "item_id": df["item_id"], "prompt": df["prompt"]}))
    return pd.concat(parts, ignore_index=True)
