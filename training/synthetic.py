"""Synthetic verifiable data in the study's three domains, generated from a seed.

Why: CPU runs and CI need a training corpus and benchmark fixtures that a tiny model can learn and
that the real graders score, without any download. Rows follow the study's `multidomain_3` schema
(STUDY.md §4.1) so the same loaders, reward routing and mixers work on it:
`data_source, prompt=[{"role": "user", "content": ...}], ability, reward_model={"style": "rule",
"ground_truth": ...}, extra_info={"index", "n_options", ...}, domain`.

* math (`synthetic_math`): small arithmetic, answer in `\\boxed{}`; single-digit addition is the
  easiest task and the one a tiny model learns within minutes.
* logic (`synthetic_logic`): two-person Knights & Knaves with a unique solution.
* science (`synthetic_science`): 4-option multiple choice ("which number is largest/smallest").

Evaluation fixtures (schema: evaluation/benchmark_data.py) reuse the generators: one Parquet per suite benchmark with
`item_id, prompt, answer, n_options`.
"""

from __future__ import annotations

import itertools
import random
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from collections.abc import Callable

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
from wtcommon.atomic import atomic_path
from wtcommon.errors import UserError


class SyntheticConfigError(UserError):
    """A synthetic corpus asked for cannot be built as configured (domain, held-out split, sizes); says what to
    change."""

DOMAINS: tuple[str, ...] = ("math", "logic", "science")
DATA_SOURCES = {"math": "synthetic_math", "logic": "synthetic_logic", "science": "synthetic_science"}
MATH_INSTRUCTION = "Put the final answer in \\boxed{}."
LOGIC_INSTRUCTION = "Answer with one 'X is a knight/knave' statement per person."
SCIENCE_INSTRUCTION = "Answer with one letter out of A, B, C, D."
NAMES = ("Alice", "Bob", "Carol", "Dave", "Emma", "Frank", "Grace", "Henry")
LETTERS = "ABCD"


@dataclass(frozen=True)
class Item:
    """One generated problem: the user message, the gold answer, an example correct response."""

    domain: str
    prompt: str
    answer: str
    response: str
    n_options: int


# --- generators -------------------------------------------------------------------------------


def math_item(rng: random.Random, level: int = 1) -> Item:
    """level 0: a+b with a, b in 0..4 (25 prompts: the tiny model's learnable task); 1: single-digit a+b;
    2: two-digit addition or subtraction; 3: a*b + c."""
    if level <= 1:
        hi = 4 if level <= 0 else 9
        a, b = rng.randint(0, hi), rng.randint(0, hi)
        q, ans = f"What is {a} + {b}?", a + b
    elif level == 2:
        a, b = rng.randint(10, 99), rng.randint(1, 99)
        if rng.random() < 0.5:
            q, ans = f"What is {a} + {b}?", a + b
        else:
            a, b = max(a, b), min(a, b)
            q, ans = f"What is {a} - {b}?", a - b
    else:
        a, b, c = rng.randint(2, 9), rng.randint(2, 9), rng.randint(1, 20)
        q, ans = f"What is {a} * {b} + {c}?", a * b + c
    return Item("math", f"{q} {MATH_INSTRUCTION}", str(ans), f"\\boxed{{{ans}}}", 0)


def _kk_statement(rng: random.Random, speaker: int, other: int, names: tuple[str, str]):
    """A statement by `speaker` as (text, truth function of the assignment (True = knight))."""
    kind = rng.randrange(4)
    o = names[other]
    if kind == 0:
        role = rng.random() < 0.5
        return f"{o} is a {'knight' if role else 'knave'}.", lambda a: a[other] == role
    if kind == 1:
        role = rng.random() < 0.5
        word = "knights" if role else "knaves"
        return f"{o} and I are both {word}.", lambda a: a[speaker] == role and a[other] == role
    if kind == 2:
        return f"{o} and I are the same kind.", lambda a: a[speaker] == a[other]
    return f"{o} and I are different kinds.", lambda a: a[speaker] != a[other]


def logic_item(rng: random.Random, level: int = 0) -> Item:
    """Two inhabitants, one statement each, resampled until exactly one assignment is consistent."""
    while True:
        first, second = rng.sample(NAMES, 2)
        names = (first, second)
        stmts = [_kk_statement(rng, 0, 1, names), _kk_statement(rng, 1, 0, names)]
        consistent = [
            a
            for a in itertools.product((True, False), repeat=2)
            if all(truth(a) == a[i] for i, (_, truth) in enumerate(stmts))
        ]
        if len(consistent) == 1:
            break
    sol = consistent[0]
    says = " ".join(f'{names[i]} says: "{text}"' for i, (text, _) in enumerate(stmts))
    prompt = (
        "Knights always tell the truth and knaves always lie. "
        f"{says} Who is a knight and who is a knave? {LOGIC_INSTRUCTION}"
    )
    parts = [f"{n} is a {'knight' if k else 'knave'}" for n, k in zip(names, sol, strict=True)]
    gold = f"{parts[0]}, and {parts[1]}."
    return Item("logic", prompt, gold, gold, 0)


def choice_item(rng: random.Random, level: int = 0, domain: str = "science") -> Item:
    """Four distinct numbers; ask for the largest or the smallest; gold is the option letter."""
    hi = 9 if level <= 0 else 99
    values = rng.sample(range(0, hi + 1), 4)
    largest = rng.random() < 0.5
    target = max(values) if largest else min(values)
    letter = LETTERS[values.index(target)]
    options = "\n".join(f"{LETTERS[i]}. {v}" for i, v in enumerate(values))
    word = "largest" if largest else "smallest"
    prompt = f"Which number is {word}?\n\n{options}\n\n{SCIENCE_INSTRUCTION}"
    return Item(domain, prompt, letter, f"Answer: {letter}", 4)


GENERATORS: dict[str, Callable[..., Item]] = {"math": math_item, "logic": logic_item, "science": choice_item}


# --- training corpus --------------------------------------------------------------------------


def _row(item: Item, index: int, split: str) -> dict[str, Any]:
    return {
        "data_source": DATA_SOURCES[item.domain],
        "prompt": [{"role": "user", "content": item.prompt}],
        "ability": item.domain,
        "reward_model": {"style": "rule", "ground_truth": item.answer},
        "extra_info": {"index": index, "n_options": item.n_options, "split": split},
        "domain": item.domain,
    }


def generate_items(seed: int, per_domain: int, domains=DOMAINS, levels: dict[str, int] | None = None) -> list[Item]:
    """`per_domain` items per domain from one `random.Random(seed)` consumed in domain order."""
    rng = random.Random(seed)
    levels = levels or {}
    out: list[Item] = []
    for d in domains:
        if d not in GENERATORS:
            raise SyntheticConfigError(f"unknown synthetic domain {d!r}; choose from {list(GENERATORS)}")
        out.extend(GENERATORS[d](rng, levels.get(d, 0)) for _ in range(per_domain))
    return out


def corpus_frame(items: list[Item], split: str, seed: int) -> pd.DataFrame:
    """Rows in the study's schema; shuffled with the seed like the study's builder."""
    rows = [_row(it, i, split) for i, it in enumerate(items)]
    random.Random(seed).shuffle(rows)
    return pd.DataFrame(rows)


def _atomic_parquet(df: pd.DataFrame, path: Path) -> None:
    with atomic_path(path) as tmp:
        pq.write_table(pa.Table.from_pandas(df, preserve_index=False), tmp)


def write_corpus(
    out_dir: str | Path,
    *,
    seed: int = 42,
    train_per_domain: int = 2000,
    test_per_domain: int = 64,
    domains=DOMAINS,
    levels: dict[str, int] | None = None,
    heldout: str = "disjoint",
) -> dict[str, Path]:
    """Write `train.parquet` and `test.parquet` and return their paths.

    `heldout="disjoint"`: test prompts never occur in training. `"iid"`: test prompts are independent
    draws from the same generator and may repeat training prompts (like the study's math validation
    set); the right choice when the task space is tiny (single-digit addition has 100 prompts) and the
    held-out set should measure the task, not generalisation to unseen pairs.
    """
    if heldout not in ("disjoint", "iid"):
        raise SyntheticConfigError(f"heldout: got {heldout!r}; choose disjoint or iid")
    out = Path(out_dir)
    rng = random.Random(seed)
    levels = levels or {}
    train: list[Item] = []
    test: list[Item] = []
    for d in domains:
        if d not in GENERATORS:
            raise SyntheticConfigError(f"unknown synthetic domain {d!r}; choose from {list(GENERATORS)}")
        held: dict[str | int, Item] = {}  # by prompt (disjoint) or by draw order (iid)
        for _ in range(test_per_domain * 50):  # held-out prompts are distinct and never trained on
            it = GENERATORS[d](rng, levels.get(d, 0))
            held.setdefault(it.prompt if heldout == "disjoint" else len(held), it)
            if len(held) == test_per_domain:
                break
        if len(held) < test_per_domain:
            raise SyntheticConfigError(f"domain {d} (level {levels.get(d, 0)}): only {len(held)} distinct prompts "
                                       f"could be held out, {test_per_domain} were asked for; lower test_per_domain "
                                       "(--test-per-domain) or use heldout 'iid' (--heldout iid)")
        test.extend(held.values())
        n = tries = 0
        while n < train_per_domain:
            it = GENERATORS[d](rng, levels.get(d, 0))
            tries += 1
            if heldout == "iid" or it.prompt not in held:
                train.append(it)
                n += 1
            elif tries > 50 * train_per_domain + 1000:  # every prompt of the task space is held out
                raise SyntheticConfigError(f"domain {d} (level {levels.get(d, 0)}): the held-out set covers "
                                           "(nearly) every prompt of the task, none is left to train on; lower "
                                           "test_per_domain or use heldout 'iid'")
    paths = {"train": out / "train.parquet", "test": out / "test.parquet"}
    _atomic_parquet(corpus_frame(train, "train", seed), paths["train"])
    _atomic_parquet(corpus_frame(test, "test", seed + 1), paths["test"])
    return paths


def tokenizer_corpus(seed: int = 42, n: int = 300) -> list[str]:
    """Text the tiny tokenizer is trained on: prompts and responses of every domain, all levels."""
    texts: list[str] = []
    for level in (0, 1, 2, 3):
        for it in generate_items(seed + level, n, DOMAINS, dict.fromkeys(DOMAINS, level)):
            texts.extend([it.prompt, it.response])
    return texts


# --- evaluation fixtures (benchmark-data schema) -----------------------------------------------

# benchmark id -> (generator domain, level); math benchmarks get arithmetic of rising difficulty,
# logic gets Knights & Knaves (kk_hard) or multiple choice, science gets multiple choice.
FIXTURE_KIND: dict[str, tuple[str, int]] = {
    "math500": ("math", 0),
    "gsm8k": ("math", 1),
    "minerva_math": ("math", 1),
    "olympiadbench": ("math", 2),
    "aime24": ("math", 3),
    "kk_hard": ("logic", 0),
    "bbh_logical_deduction": ("science", 0),
    "bbh_tracking": ("science", 1),
    "zebra_logic_mc": ("science", 1),
    "gpqa_diamond": ("science", 1),
    "mmlu_pro_chemistry": ("science", 0),
    "mmlu_pro_physics": ("science", 0),
}


def write_eval_fixtures(data_dir: str | Path, *, seed: int = 42, n_items: int = 16,
                        suite: str = "db12") -> dict[str, Path]:
    """One Parquet per suite benchmark with `item_id, prompt, answer, n_options` (evaluation/benchmark_data.py)."""
    from evaluation.suite import load_suite

    out = Path(data_dir)
    paths: dict[str, Path] = {}
    for k, bench in enumerate(load_suite(suite).benchmarks):
        domain, level = FIXTURE_KIND.get(bench.id, (bench.domain, 0))
        rng = random.Random(seed * 1000 + k)
        items = [GENERATORS[domain](rng, level) for _ in range(n_items)]
        df = pd.DataFrame(
            {
                "item_id": [f"{bench.id}-{i:04d}" for i in range(n_items)],
                "prompt": [it.prompt for it in items],
                "answer": [it.answer for it in items],
                "n_options": [int(it.n_options) for it in items],
            }
        )
        paths[bench.id] = out / f"{bench.id}.parquet"
        _atomic_parquet(df, paths[bench.id])
    return paths
