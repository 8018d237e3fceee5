"""Contamination audit: vectorised 13-gram Jaccard equals a brute-force set computation."""

from __future__ import annotations

import numpy as np
import pandas as pd
from hypothesis import given, settings
from hypothesis import strategies as st

from evaluation.contamination import audit, normalise, prompt_text, summarise


def _grams(text: str, n: int = 13) -> set[tuple[str, ...]]:
    w = normalise(text).split()
    return {tuple(w[i:i + n]) for i in range(len(w) - n + 1)}


def _items(prompts: list[str]) -> pd.DataFrame:
    return pd.DataFrame({"benchmark": "b", "item_id": [f"i{k}" for k in range(len(prompts))], "prompt": prompts})


def test_kinds_exact_normalised_ngram():
    rng = np.random.default_rng(0)
    words = [f"w{i}" for i in range(300)]
    bench = [" ".join(rng.choice(words, 40)) for _ in range(30)]
    near = bench[2].split()
    near[38] = "CHANGED"  # touches 2 of 28 windows: Jaccard 26/30
    train = [bench[0],
             bench[1].upper() + " ?!\n\nPlease reason step by step, and put your final answer within \\boxed{}.",
             " ".join(near), "completely unrelated text " * 5]
    m = audit(train, _items(bench))
    got = {(r.train_index, r.item_id): r.kind for r in m.itertuples()}
    assert got == {(0, "i0"): "exact", (1, "i1"): "normalised", (2, "i2"): "ngram"}
    a, b = _grams(train[2]), _grams(bench[2])
    assert m.loc[m.train_index == 2, "jaccard"].item() == len(a & b) / len(a | b)
    s = summarise(m, _items(bench))
    assert s[["n_items", "exact", "normalised", "ngram", "contaminated"]].iloc[0].tolist() == [30, 1, 1, 1, 3]


@settings(max_examples=25, deadline=None)
@given(st.lists(st.lists(st.integers(0, 6), min_size=13, max_size=30), min_size=1, max_size=6),
       st.lists(st.lists(st.integers(0, 6), min_size=13, max_size=30), min_size=1, max_size=6))
def test_ngram_jaccard_matches_brute_force(train_ids, bench_ids):
    train = [" ".join(f"t{i}" for i in d) for d in train_ids]
    bench = [" ".join(f"t{i}" for i in d) for d in bench_ids]
    m = audit(train, _items(bench), max_df=10**9)
    got = {(r.train_index, int(r.item_id[1:])): r.jaccard for r in m.itertuples()}
    for ti, t in enumerate(train):
        for bi, b in enumerate(bench):
            a, c = _grams(t), _grams(b)
            jac = len(a & c) / len(a | c)
            exact = t.strip() == b.strip()
            if jac > 0.5 or exact:
                assert got[(ti, bi)] == jac
            else:
                assert (ti, bi) not in got


def test_prompt_text_reads_verl_chat_cells():
    assert prompt_text([{"role": "system", "content": "s"}, {"role": "user", "content": "u"}]) == "u"
    assert prompt_text(np.array([{"role": "user", "content": "x"}], dtype=object)) == "x"
    assert prompt_text("plain") == "plain"
