"""Per-benchmark builders: pure functions from source rows to benchmark-data items (STUDY.md §5.1).

Each builder takes the rows of its hub source(s) as plain dicts and returns a DataFrame with
`item_id, prompt, answer, n_options`. Subsets and seeded samples follow the study: ZebraLogic and
MMLU-Pro draw 500 with `random.Random(42)` and sort; GPQA shuffles [correct, 3 incorrect] with one
`Random(42)` across items; MMLU-Pro skips `N/A` options while later options keep their letters.
Every multiple-choice gold is validated as a letter of its item (no "?" golds, STUDY.md §5.3).
"""

from __future__ import annotations

import random
import re
import string
from pathlib import Path
from typing import Any
from collections.abc import Callable, Iterable

import pandas as pd

from evaluation.clean_benchmark import CLEAN_ID, build_clean, generated_rows
from evaluation.prompts import kk_prompt, math_prompt, mc_prompt, mc_instruction
from wtcommon.errors import UserError

Rows = Iterable[dict[str, Any]]
LETTERS = string.ascii_uppercase


class BuildError(UserError):
    """A source row cannot become an item; names the benchmark, the row and the field."""


def _frame(rows: list[dict[str, Any]]) -> pd.DataFrame:
    return pd.DataFrame(rows, columns=["item_id", "prompt", "answer", "n_options"])


def _need(bid: str, i: int, row: dict[str, Any], *keys: str) -> list[Any]:
    for k in keys:
        if k not in row or row[k] is None:
            raise BuildError(f"{bid}: source row {i} has no field {k!r} (fields: {sorted(row)})")
    return [row[k] for k in keys]


def build_math(bid: str, rows: Rows, problem_key: str, answer_key: str, id_key: str | None = None) -> pd.DataFrame:
    out = []
    for i, r in enumerate(rows):
        problem, answer = _need(bid, i, r, problem_key, answer_key)
        if isinstance(answer, list):  # OlympiadBench: final_answer is a list of one LaTeX string
            if not answer:
                raise BuildError(f"{bid}: source row {i} field {answer_key!r} is empty")
            answer = answer[0]
        answer = str(answer).strip().strip("$").strip()
        out.append({"item_id": f"{bid}-{r.get(id_key, i) if id_key else i}", "prompt": math_prompt(str(problem)),
                    "answer": answer, "n_options": 0})
    return _frame(out)


def gsm8k_answer(solution: str) -> str:
    """The number after `####` in a GSM8K solution, without thousands separators."""
    if "####" not in solution:
        raise BuildError(f"gsm8k: solution has no '####' final answer: {solution[-80:]!r}")
    return solution.split("####")[-1].strip().replace(",", "")


def build_gsm8k(rows: Rows) -> pd.DataFrame:
    rows = [dict(r, final=gsm8k_answer(_need("gsm8k", i, r, "answer")[0])) for i, r in enumerate(rows)]
    return build_math("gsm8k", rows, "question", "final")


def build_kk(rows: Rows) -> pd.DataFrame:
    """K&K test items (people7 + people8 files): puzzle + the training K&K instruction; gold = solution_text."""
    out = []
    for i, r in enumerate(rows):
        quiz, sol = _need("kk_hard", i, r, "quiz", "solution_text")
        out.append({"item_id": f"kk_hard-{i}", "prompt": kk_prompt(str(quiz)), "answer": str(sol), "n_options": 0})
    return _frame(out)


_BBH_OPTION = re.compile(r"^\(([A-Z])\)\s", re.MULTILINE)


def build_bbh(bid: str, rows: Rows) -> pd.DataFrame:
    """BBH tasks: input (with its `(A) ...` option lines) + request to finish with `The answer is: (X)`."""
    out = []
    for i, r in enumerate(rows):
        text, target = _need(bid, i, r, "input", "target")
        letters = _BBH_OPTION.findall(text)
        m = re.fullmatch(r"\(?([A-Z])\)?", str(target).strip())
        if not letters or m is None or m.group(1) not in letters:
            raise BuildError(f"{bid}: source row {i} target {target!r} is not one of its options {letters}")
        n = LETTERS.index(max(letters)) + 1
        out.append({"item_id": f"{bid}-{r.get('_subtask', '')}{i}", "prompt": f"{text.strip()}\n\n{mc_instruction(n)}",
                    "answer": m.group(1), "n_options": n})
    return _frame(out)


def sample_sorted(rows: list[dict[str, Any]], k: int, seed: int = 42) -> list[dict[str, Any]]:
    """`Random(seed).sample` of k row indices, in source order (the study's subset rule)."""
    if len(rows) < k:
        raise BuildError(f"need {k} rows to sample, the source has {len(rows)}")
    idx = sorted(random.Random(seed).sample(range(len(rows)), k))
    return [rows[i] for i in idx]


def build_zebra(rows: Rows, k: int = 500) -> pd.DataFrame:
    rows = sample_sorted(list(rows), k)
    out = []
    for i, r in enumerate(rows):
        puzzle, question, choices, answer = _need("zebra_logic_mc", i, r, "puzzle", "question", "choices", "answer")
        choices = list(choices)
        if answer in choices:
            gold = LETTERS[choices.index(answer)]
        elif isinstance(answer, str) and len(answer.strip()) == 1 and answer.strip().upper() in LETTERS[:len(choices)]:
            gold = answer.strip().upper()
        else:
            raise BuildError(f"zebra_logic_mc: row {r.get('id', i)} answer {answer!r} is not among its choices "
                             "(hidden answers? use the config with answers)")
        opts = " ".join(f"({LETTERS[j]}) {c}" for j, c in enumerate(choices))
        prompt = (f"{str(puzzle).strip()}\n\n{str(question).strip()}\n\nChoices: "
                  f"{opts}\n\n{mc_instruction(len(choices))}")
        out.append({"item_id": f"zebra_logic_mc-{r.get('id', i)}", "prompt": prompt, "answer": gold,
                    "n_options": len(choices)})
    return _frame(out)


def build_gpqa(rows: Rows, seed: int = 42) -> pd.DataFrame:
    rng = random.Random(seed)
    out = []
    for i, r in enumerate(rows):
        q, c, w1, w2, w3 = _need("gpqa_diamond", i, r, "Question", "Correct Answer", "Incorrect Answer 1",
                                 "Incorrect Answer 2", "Incorrect Answer 3")
        opts = [" ".join(str(x).split()) for x in (c, w1, w2, w3)]
        order = list(range(4))
        rng.shuffle(order)
        shuffled = [opts[j] for j in order]
        out.append({"item_id": f"gpqa_diamond-{r.get('Record ID', i)}", "prompt": mc_prompt(str(q), shuffled),
                    "answer": LETTERS[order.index(0)], "n_options": 4})
    return _frame(out)


def build_mmlu_pro(bid: str, rows: Rows, category: str, k: int = 500) -> pd.DataFrame:
    cat = [r for r in rows if r.get("category") == category]
    picked = sample_sorted(cat, k)
    out = []
    for i, r in enumerate(picked):
        q, options, answer = _need(bid, i, r, "question", "options", "answer")
        kept = {LETTERS[j]: o for j, o in enumerate(options) if str(o).strip() != "N/A"}
        if answer not in kept:
            raise BuildError(f"{bid}: question {r.get('question_id', i)} answer {answer!r} is not a kept option")
        out.append({"item_id": f"{bid}-{r.get('question_id', i)}", "prompt": mc_prompt(str(q), kept),
                    "answer": str(answer), "n_options": LETTERS.index(max(kept)) + 1})
    return _frame(out)


def build_competition(bid: str, rows: Rows, *, aime: bool) -> pd.DataFrame:
    """A final-answer competition in MathArena's schema (`problem_idx`, `problem`, `answer`; HMMT adds
    `problem_type`): one math item per row, id `<bid>-<problem_idx>`. An AIME answer must be an integer 0-999 (the
    contest's answer sheet); every gold must be graded correct by the math grader when stated as the answer."""
    out = []
    for i, r in enumerate(rows):
        idx = r.get("problem_idx", i + 1)
        problem, answer = _need(bid, i, r, "problem", "answer")
        text = str(answer).strip().strip("$").strip()
        if not text:
            raise BuildError(f"{bid}: source row {i} (problem_idx {idx}) field 'answer' is empty")
        if aime and not (re.fullmatch(r"\d{1,3}", text) and not isinstance(answer, (bool, float))):
            raise BuildError(f"{bid}: source row {i} (problem_idx {idx}) answer {answer!r} is not an AIME answer "
                             "(an integer from 0 to 999)")
        out.append({"item_id": f"{bid}-{idx}", "prompt": math_prompt(str(problem)), "answer": str(int(text)) if aime
                    else text, "n_options": 0})
    df = _frame(out)
    check_math_golds(bid, df)
    return df


def check_math_golds(bid: str, df: pd.DataFrame) -> None:
    """Each gold, stated as a response's boxed answer, must score 1 under the math grader (the public
    `grade_batch`): a gold the grader cannot read would score every model 0 on that item (STUDY.md §5.3)."""
    from evaluation.graders import grade_batch

    golds = [str(a) for a in df["answer"]]
    results = grade_batch("math", [f"The answer is $\\boxed{{{g}}}$." for g in golds], golds, processes=1)
    bad = [i for i, res in enumerate(results) if res.score != 1.0]
    if bad:
        i = bad[0]
        raise BuildError(f"{bid}: source row {i} ({df['item_id'].iloc[i]}) answer {golds[i]!r} is not graded correct "
                         f"by the math grader when stated as the answer ({results[i].status}); {len(bad)} such row(s)")


# Hub sources. Revisions: fill in the commit sha (`huggingface-cli` / the dataset page) to pin a
# source; the manifest always records the sha actually downloaded and each file's sha256.
SOURCES: dict[str, dict[str, Any]] = {
    "math500": {"path": "HuggingFaceH4/MATH-500", "split": "test", "revision": None},
    "aime24": {"path": "Maxwell-Jia/AIME_2024", "split": "train", "revision": None},
    "olympiadbench": {"path": "Hothan/OlympiadBench", "name": "OE_TO_maths_en_COMP", "split": "train",
                      "revision": None},
    "minerva_math": {"path": "math-ai/minervamath", "split": "test", "revision": None},
    "gsm8k": {"path": "openai/gsm8k", "name": "main", "split": "test", "revision": None},
    "kk_hard": {"path": "K-and-K/knights-and-knaves", "name": "test", "split": ["7ppl", "8ppl"], "revision": None},
    "bbh_logical_deduction": {"path": "lukaemon/bbh", "split": "test", "revision": None,
                              "name": ["logical_deduction_three_objects", "logical_deduction_five_objects",
                                       "logical_deduction_seven_objects"]},
    "bbh_tracking": {"path": "lukaemon/bbh", "split": "test", "revision": None,
                     "name": ["tracking_shuffled_objects_three_objects", "tracking_shuffled_objects_five_objects",
                              "tracking_shuffled_objects_seven_objects"]},
    "zebra_logic_mc": {"path": "WildEval/ZebraLogic", "name": "mc_mode", "split": "test", "revision": None},
    "gpqa_diamond": {"path": "Idavidrein/gpqa", "name": "gpqa_diamond", "split": "train", "revision": None,
                     "gated": True},
    "mmlu_pro_chemistry": {"path": "TIGER-Lab/MMLU-Pro", "split": "test", "revision": None},
    "mmlu_pro_physics": {"path": "TIGER-Lab/MMLU-Pro", "split": "test", "revision": None},
    # Post-cutoff competitions (issue 52), MathArena's uncontaminated copies (arXiv 2505.23281), one `train` split
    # each: `problem_idx`, `problem`, `answer` (an int64 for AIME 2026, a string for HMMT) and, for HMMT,
    # `problem_type`. Pinned to full commit shas found verbatim in public code that pins these datasets (the hub
    # itself was not reachable here; `--revision ID=SHA` overrides, the manifest records the sha downloaded):
    # aime_2025 c94da77...: several public pins, e.g. `.../MathArena/aime_2025/resolve/<sha>/data/train-00000-of-
    #   00001.parquet` with that parquet's sha256 9f9066ff48ad2e31f9bf1b1ac6d5e80693195f987985f2859f89dd25ffa51c2d;
    # aime_2026 d2de22f..., hmmt_feb_2025 6fdc427..., hmmt_feb_2026 02fba4f...: scitix/sieval's loaders
    #   (sieval/datasets/<name>.py, `..._REVISION`), aime_2026's also with its parquet's sha256 d91db799651b4cc1f07
    #   34f52792a695c9cc60dac342524b3d8e5b2ff31c3e957 elsewhere. Later commits exist (seen as short ids: aime_2026
    #   2548a41, hmmt_feb_2025 caf7304, hmmt_feb_2026 afb530a); MathArena edits these sets after publication.
    "aime25": {"path": "MathArena/aime_2025", "split": "train",
               "revision": "c94da77eb22bbd6439e62a323bec18493a421302"},
    "aime26": {"path": "MathArena/aime_2026", "split": "train",
               "revision": "d2de22f3c656b4f56cf8981212186377d1e23bc3"},
    "hmmt_feb25": {"path": "MathArena/hmmt_feb_2025", "split": "train",
                   "revision": "6fdc4277120810ff75aa22d2d5489b91f7a262a1"},
    "hmmt_feb26": {"path": "MathArena/hmmt_feb_2026", "split": "train",
                   "revision": "02fba4f74d8e68e73e66a02d540fd979c05c274c"},
}

POST_CUTOFF = ("aime25", "aime26", "hmmt_feb25", "hmmt_feb26")

BUILDERS: dict[str, Callable[[list[dict[str, Any]]], pd.DataFrame]] = {
    "math500": lambda rows: build_math("math500", rows, "problem", "answer", "unique_id"),
    "aime24": lambda rows: build_math("aime24", rows, "Problem", "Answer", "ID"),
    "olympiadbench": lambda rows: build_math("olympiadbench", rows, "question", "final_answer", "id"),
    "minerva_math": lambda rows: build_math("minerva_math", rows, "question", "answer"),
    "gsm8k": build_gsm8k,
    "kk_hard": build_kk,
    "bbh_logical_deduction": lambda rows: build_bbh("bbh_logical_deduction", rows),
    "bbh_tracking": lambda rows: build_bbh("bbh_tracking", rows),
    "zebra_logic_mc": build_zebra,
    "gpqa_diamond": build_gpqa,
    "mmlu_pro_chemistry": lambda rows: build_mmlu_pro("mmlu_pro_chemistry", rows, "chemistry"),
    "mmlu_pro_physics": lambda rows: build_mmlu_pro("mmlu_pro_physics", rows, "physics"),
    CLEAN_ID: build_clean,
    "aime25": lambda rows: build_competition("aime25", rows, aime=True),
    "aime26": lambda rows: build_competition("aime26", rows, aime=True),
    "hmmt_feb25": lambda rows: build_competition("hmmt_feb25", rows, aime=False),
    "hmmt_feb26": lambda rows: build_competition("hmmt_feb26", rows, aime=False),
}

# Benchmarks made here, not downloaded: id -> (n_items, the suite's options) -> (rows, provenance). Their rows go
# through BUILDERS like a download's; the seed is in the options (evaluation/clean_benchmark.py).
GENERATED: dict[str, Callable[[int, dict[str, Any]], tuple[list[dict[str, Any]], dict[str, Any]]]] = {
    CLEAN_ID: generated_rows,
}


def local_rows(sources_dir: Path, bid: str) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """Rows of a benchmark's source from `<sources_dir>/<bid>.jsonl` (one row per line, in the hub source's schema):
    builds without the network (the shipped fixture rows, or a copy of the hub's); the file's sha256 is the
    provenance."""
    import json

    from wtcommon.hashing import sha256_file

    path = Path(sources_dir) / f"{bid}.jsonl"
    if not path.is_file():
        raise BuildError(f"{path}: source rows of {bid} not found; put its rows there (one JSON object per line, in "
                         f"the hub source's schema) or leave out --sources to download them")
    rows = []
    for n, line in enumerate(path.read_text().splitlines(), 1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError as exc:
            raise BuildError(f"{path}: line {n} is not JSON ({exc.msg})") from None
        if not isinstance(row, dict):
            raise BuildError(f"{path}: line {n} is not a JSON object")
        rows.append(row)
    return rows, {"path": str(path), "sha256": sha256_file(path)}


def download_rows(bid: str, revision: str | None = None) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """Rows of a benchmark's hub source(s) via `datasets.load_dataset(..., revision=)` (needs network)."""
    import datasets

    src = dict(SOURCES[bid])
    rev = revision or src.get("revision")
    names = src.get("name")
    splits = src["split"]
    rows: list[dict[str, Any]] = []
    for name in (names if isinstance(names, list) else [names]):
        for split in (splits if isinstance(splits, list) else [splits]):
            ds = datasets.load_dataset(src["path"], name, split=split, revision=rev)
            tag = f"{name}-" if isinstance(names, list) else ""
            rows.extend(dict(r, _subtask=tag) for r in ds)
    try:
        from huggingface_hub import HfApi

        sha = HfApi().dataset_info(src["path"], revision=rev).sha
    except Exception:
        sha = None
    return rows, {"path": src["path"], "name": names, "split": splits, "revision_requested": rev, "revision_sha": sha}
