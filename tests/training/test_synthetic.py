"""Synthetic corpus and fixtures: schema, gold answers that the real graders accept, seeded, held-out."""

from __future__ import annotations

import itertools
import re

import pandas as pd
import pytest

from evaluation.reward import compute_score
from evaluation.suite import load_suite
from training import synthetic


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    d = tmp_path_factory.mktemp("syn")
    paths = synthetic.write_corpus(d, seed=7, train_per_domain=60, test_per_domain=10)
    return pd.read_parquet(paths["train"]), pd.read_parquet(paths["test"])


def test_study_schema_and_counts(corpus):
    train, test = corpus
    assert list(train.columns) == ["data_source", "prompt", "ability", "reward_model", "extra_info", "domain"]
    assert train["domain"].value_counts().to_dict() == {"math": 60, "logic": 60, "science": 60}
    assert test["domain"].value_counts().to_dict() == {"math": 10, "logic": 10, "science": 10}
    row = train.iloc[0]
    assert len(row.prompt) == 1 and row.prompt[0]["role"] == "user"
    assert row.reward_model["style"] == "rule"
    assert row.data_source == synthetic.DATA_SOURCES[row.domain]
    assert set(train["extra_info"].map(lambda e: e["n_options"])) == {0, 4}


def test_disjoint_heldout(corpus):
    train, test = corpus
    texts = lambda df: set(df.prompt.map(lambda p: p[0]["content"]))  # noqa: E731
    assert not texts(train) & texts(test)


def test_gold_answers_score_one_and_wrong_ones_zero(corpus):
    """Rewards come from the evaluation graders: the canonical response earns 1, a wrong one 0."""
    train, _ = corpus
    sample = train.groupby("domain").head(4)
    for row in sample.itertuples():
        gold = row.reward_model["ground_truth"]
        good = {"math": f"\\boxed{{{gold}}}", "logic": gold, "science": f"Answer: {gold}"}[row.domain]
        if row.domain == "math":
            wrong = f"\\boxed{{{int(gold) + 1}}}"
        elif row.domain == "logic":
            wrong = gold.replace("knight", "KX").replace("knave", "knight").replace("KX", "knave")
        else:
            wrong = "Answer: " + ("A" if gold != "A" else "B")
        assert compute_score(row.data_source, good, gold, row.extra_info)["score"] == 1.0
        assert compute_score(row.data_source, wrong, gold, row.extra_info)["score"] == 0.0


def _kk_solutions(prompt: str) -> list[dict[str, bool]]:
    """Brute-force the puzzle from its text, independently of the generator."""
    says = re.findall(r'(\w+) says: "([^"]+)"', prompt)
    names = [n for n, _ in says]

    def truth(stmt: str, speaker: str, a: dict[str, bool]) -> bool:
        m = re.fullmatch(r"(\w+) is a (knight|knave)\.", stmt)
        if m:
            return a[m[1]] == (m[2] == "knight")
        m = re.fullmatch(r"(\w+) and I are both (knights|knaves)\.", stmt)
        if m:
            role = m[2] == "knights"
            return a[m[1]] == role and a[speaker] == role
        m = re.fullmatch(r"(\w+) and I are the same kind\.", stmt)
        if m:
            return a[m[1]] == a[speaker]
        m = re.fullmatch(r"(\w+) and I are different kinds\.", stmt)
        assert m, stmt
        return a[m[1]] != a[speaker]

    sols = []
    for roles in itertools.product((True, False), repeat=len(names)):
        a = dict(zip(names, roles, strict=True))
        if all(truth(s, n, a) == a[n] for n, s in says):
            sols.append(a)
    return sols


def test_knights_knaves_have_a_unique_solution_matching_the_gold(corpus):
    train, _ = corpus
    for row in train[train.domain == "logic"].itertuples():
        sols = _kk_solutions(row.prompt[0]["content"])
        assert len(sols) == 1
        gold = dict((n, r == "knight")
                    for n, r in re.findall(r"(\w+) is a (knight|knave)", row.reward_model["ground_truth"]))
        assert gold == sols[0]


def test_choice_gold_is_the_extreme_option():
    import random

    rng = random.Random(3)
    for _ in range(50):
        it = synthetic.choice_item(rng)
        opts = dict(re.findall(r"^([ABCD])\. (\d+)$", it.prompt, flags=re.M))
        vals = {k: int(v) for k, v in opts.items()}
        pick = max if "largest" in it.prompt else min
        assert it.answer == pick(vals, key=vals.get)


def test_same_seed_same_bytes_other_seed_differs(tmp_path):
    a = synthetic.write_corpus(tmp_path / "a", seed=1, train_per_domain=20, test_per_domain=4)
    b = synthetic.write_corpus(tmp_path / "b", seed=1, train_per_domain=20, test_per_domain=4)
    c = synthetic.write_corpus(tmp_path / "c", seed=2, train_per_domain=20, test_per_domain=4)
    assert a["train"].read_bytes() == b["train"].read_bytes()
    assert a["train"].read_bytes() != c["train"].read_bytes()


def test_eval_fixtures_cover_the_suite_in_the_benchmark_data_schema(tmp_path):
    paths = synthetic.write_eval_fixtures(tmp_path, n_items=5)
    suite = load_suite("db12")
    assert sorted(paths) == sorted(b.id for b in suite.benchmarks)
    for b in suite.benchmarks:
        df = pd.read_parquet(tmp_path / f"{b.id}.parquet")
        assert list(df.columns) == ["item_id", "prompt", "answer", "n_options"]
        assert len(df) == 5 and df.item_id.is_unique
        if b.grader == "multiple_choice":
            assert (df.n_options == 4).all() and df.answer.isin(list("ABCD")).all()
        else:
            assert (df.n_options == 0).all()
