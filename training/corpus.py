"""Training corpora: the study's `multidomain_3` builder and the regime variants, content-hashed.

The builder reproduces `experiments/data/build_multidomain.py --per-domain 5000
--test-per-domain 200 --seed 42` (STUDY §4.1): one `random.Random(seed)` consumed in a fixed
order (train before test; math, logic, science), each split shuffled at the end. Source loading
(`load_sources`) uses `datasets` at the revisions in `SOURCES`; everything else is pure functions over
rows so it is testable on local fixture rows without a network. Regime variants (a 25% subset,
20% label noise) are deterministic seeded transforms of the built train split. Each corpus
directory holds a `manifest.json` with the sha256 of its rows, and that hash enters `run_key`.
"""

from __future__ import annotations

import json
import random
import re
from pathlib import Path
from typing import Any
from collections.abc import Iterable

from wtcommon.atomic import atomic_path, atomic_write_json
from wtcommon.hashing import digest, rows_digest
from wtcommon.errors import UserError

# Instructions appended after a blank line ([inferred]: the builder's exact strings are not
# quoted in STUDY.md; these follow its description — boxed answers, one statement per person,
# one letter). Checksums of the built parquets pin whatever strings are used.
MATH_INSTRUCTION = "Please reason step by step, and put your final answer within \\boxed{}."
LOGIC_INSTRUCTION = (
    "Please reason step by step, and end your answer with one statement per person of the form "
    "'X is a knight' or 'X is a knave'."
)
SCIENCE_INSTRUCTION = "Please reason step by step, and answer with a single letter out of A, B, C, D."

# Public sources ([inferred] dataset ids and configs: STUDY §4.1 names the sources, not the hub
# ids). Revisions are NOT pinned yet: this machine has no hub access to resolve commit shas.
# Set each `revision` to a commit sha before a real build; the manifest's content hash pins the
# result either way (a different upstream revision gives a different hash and run_key).
SOURCES: dict[str, dict[str, str]] = {
    "gsm8k": {"path": "openai/gsm8k", "name": "main", "split": "train", "revision": "main"},
    "deepscaler": {"path": "agentica-org/DeepScaleR-Preview-Dataset", "split": "train", "revision": "main"},
    "kk_train": {"path": "K-and-K/knights-and-knaves", "name": "train", "split": "{n}ppl", "revision": "main"},
    "kk_test": {"path": "K-and-K/knights-and-knaves", "name": "test", "split": "{n}ppl", "revision": "main"},
    "sciq_train": {"path": "allenai/sciq", "split": "train", "revision": "main"},
    "sciq_val": {"path": "allenai/sciq", "split": "validation", "revision": "main"},
}

REGIME_RE = re.compile(r"^(?:sub(?P<sub>\d+)|noise(?P<noise>\d+))(?:_.*)?$")


class CorpusError(UserError):
    """A corpus cannot be built or a regime is unknown; names the source/row/regime."""


def _user_prompt(text: str) -> list[dict[str, str]]:
    return [{"role": "user", "content": text}]


def math_row(question: str, answer: str, orig_source: str) -> dict[str, Any]:
    """Math row: prompt truncated at its first "Let's think step by step", then the boxed instruction."""
    q = question.split("Let's think step by step")[0].rstrip()
    return {
        "data_source": "HuggingFaceH4/MATH-500", "prompt": _user_prompt(f"{q}\n\n{MATH_INSTRUCTION}"),
        "ability": "math", "reward_model": {"style": "rule", "ground_truth": str(answer)},
        "extra_info": {"orig_source": orig_source}, "domain": "math",
    }


def logic_row(puzzle: str, solution_text: str, n_people: int) -> dict[str, Any]:
    return {
        "data_source": "kk_logic", "prompt": _user_prompt(f"{puzzle}\n\n{LOGIC_INSTRUCTION}"),
        "ability": "logic", "reward_model": {"style": "rule", "ground_truth": solution_text},
        "extra_info": {"n_people": int(n_people)}, "domain": "logic",
    }


def science_row(question: str, correct: str, distractors: list[str], support: str,
                rng: random.Random) -> dict[str, Any]:
    """SciQ row: options = shuffle([correct, 3 distractors]); gold = letter of the correct option."""
    if len(distractors) != 3:
        raise CorpusError(f"science item {question[:40]!r}: needs 3 distractors, got {len(distractors)}")
    opts = [correct, *distractors]
    rng.shuffle(opts)
    letter = "ABCD"[opts.index(correct)]
    body = "\n".join(f"{L}. {o}" for L, o in zip("ABCD", opts, strict=True))
    return {
        "data_source": "sciq", "prompt": _user_prompt(f"{question}\n\n{body}\n\n{SCIENCE_INSTRUCTION}"),
        "ability": "science", "reward_model": {"style": "rule", "ground_truth": letter},
        "extra_info": {"support": (support or "")[:500]}, "domain": "science",
    }


def build_multidomain(
    sources: dict[str, list[dict[str, Any]]], *, per_domain: int = 5000, test_per_domain: int = 200, seed: int = 42
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """(train, test) rows from source rows, consuming one `Random(seed)` in the builder's order.

    `sources` keys: gsm8k, deepscaler (question, answer), kk_train, kk_test (quiz, solution_text,
    n_people), sciq_train, sciq_val (question, correct_answer, distractor1..3, support).
    """
    need = {"gsm8k", "deepscaler", "kk_train", "kk_test", "sciq_train", "sciq_val"}
    missing = sorted(need - set(sources))
    if missing:
        raise CorpusError(f"build_multidomain: sources {missing} are missing; load them with load_sources()")
    rng = random.Random(seed)
    half = per_domain // 2

    def sample(name: str, k: int) -> list[dict[str, Any]]:
        pool = sources[name]
        if len(pool) < k:
            raise CorpusError(f"source {name}: has {len(pool)} rows, needs {k}; lower per_domain or fix the source")
        return rng.sample(pool, k)

    def sci(r: dict[str, Any]) -> dict[str, Any]:
        return science_row(r["question"], r["correct_answer"], [r["distractor1"], r["distractor2"], r["distractor3"]],
                           r.get("support", ""), rng)

    train: list[dict[str, Any]] = []
    train += [math_row(r["question"], r["answer"], "gsm8k") for r in sample("gsm8k", half)]
    train += [math_row(r["question"], r["answer"], "deepscaler") for r in sample("deepscaler", per_domain - half)]
    kk = list(sources["kk_train"])
    rng.shuffle(kk)
    if len(kk) < per_domain:
        raise CorpusError(f"source kk_train: has {len(kk)} rows, needs {per_domain}")
    train += [logic_row(r["quiz"], r["solution_text"], r["n_people"]) for r in kk[:per_domain]]
    train += [sci(r) for r in sample("sciq_train", per_domain)]
    test: list[dict[str, Any]] = []
    test += [math_row(r["question"], r["answer"], "gsm8k") for r in sample("gsm8k", test_per_domain)]
    test += [logic_row(r["quiz"], r["solution_text"], r["n_people"]) for r in sample("kk_test", test_per_domain)]
    test += [sci(r) for r in sample("sciq_val", test_per_domain)]
    rng.shuffle(train)
    rng.shuffle(test)
    return train, test


SOURCE_FILES = ("gsm8k", "deepscaler", "kk_train", "kk_test", "sciq_train", "sciq_val")


def read_sources_dir(folder: Path) -> dict[str, list[dict[str, Any]]]:
    """The public sources from local `<source>.jsonl` files (one JSON object per line) instead of the hub: what
    `campaign data train --sources DIR` reads. A missing file is a `CorpusError` (exit 2) naming it."""
    import json

    sources = {}
    for name in SOURCE_FILES:
        p = folder / f"{name}.jsonl"
        if not p.exists():
            raise CorpusError(f"{p}: missing source file; provide one JSON object per line")
        sources[name] = [json.loads(ln) for ln in p.read_text().splitlines() if ln.strip()]
    return sources


def load_sources(cache_dir: Path | None = None) -> dict[str, list[dict[str, Any]]]:  # pragma: no cover - network
    """Load the public sources at the revisions in SOURCES with `datasets` (needs network or a cache)."""
    import datasets

    out: dict[str, list[dict[str, Any]]] = {}
    for key in ("gsm8k", "deepscaler", "sciq_train", "sciq_val"):
        s = SOURCES[key]
        ds = datasets.load_dataset(s["path"], s.get("name"), split=s["split"], revision=s["revision"],
                                   cache_dir=str(cache_dir) if cache_dir else None)
        rows = [dict(r) for r in ds]
        if key == "deepscaler":
            rows = [{"question": r["problem"], "answer": r["answer"]} for r in rows]
        elif key == "gsm8k":
            rows = [{"question": r["question"], "answer": r["answer"].split("####")[-1].strip()} for r in rows]
        out[key] = rows
    for key in ("kk_train", "kk_test"):
        s = SOURCES[key]
        rows = []
        for n in range(2, 9):
            ds = datasets.load_dataset(s["path"], s["name"], split=s["split"].format(n=n), revision=s["revision"],
                                       cache_dir=str(cache_dir) if cache_dir else None)
            rows += [{"quiz": r["quiz"], "solution_text": r["solution_text"], "n_people": n} for r in ds]
        out[key] = rows
    return out


# ---- regime variants -------------------------------------------------------------------------

def parse_regime(regime: str) -> tuple[str, float]:
    """("none", 0) for the standard corpus; ("subset", f) for `sub25_…`; ("noise", f) for `noise20_…`."""
    if not regime:
        return "none", 0.0
    m = REGIME_RE.match(regime)
    if not m:
        raise CorpusError(f"regime '{regime}': unknown; use '' or sub<pct>_<label> or noise<pct>_<label>")
    if m.group("sub"):
        return "subset", int(m.group("sub")) / 100
    return "noise", int(m.group("noise")) / 100


def subset(rows: list[dict[str, Any]], frac: float, seed: int) -> list[dict[str, Any]]:
    """A stratified `frac` subset per domain, order preserved, chosen by `Random(seed)`."""
    rng = random.Random(seed)
    keep: set[int] = set()
    by_dom: dict[str, list[int]] = {}
    for i, r in enumerate(rows):
        by_dom.setdefault(r["domain"], []).append(i)
    for dom in sorted(by_dom):
        idx = by_dom[dom]
        keep.update(rng.sample(idx, round(len(idx) * frac)))
    return [r for i, r in enumerate(rows) if i in keep]


def _corrupt(row: dict[str, Any], rng: random.Random, pool: list[str]) -> str:
    gt = row["reward_model"]["ground_truth"]
    if row["domain"] == "science":
        return rng.choice([L for L in "ABCD" if L != gt])
    if row["domain"] == "logic":  # flip one person's role
        parts = re.split(r"(knight|knave)", gt)
        roles = [i for i, p in enumerate(parts) if p in ("knight", "knave")]
        if roles:
            j = rng.choice(roles)
            parts[j] = "knave" if parts[j] == "knight" else "knight"
            return "".join(parts)
    others = [a for a in pool if a != gt]
    return rng.choice(others) if others else gt + "1"


def label_noise(rows: list[dict[str, Any]], frac: float, seed: int) -> list[dict[str, Any]]:
    """Replace the gold label of a seeded `frac` of rows per domain with a wrong one (recorded in extra_info)."""
    rng = random.Random(seed)
    out = [dict(r) for r in rows]
    by_dom: dict[str, list[int]] = {}
    for i, r in enumerate(out):
        by_dom.setdefault(r["domain"], []).append(i)
    for dom in sorted(by_dom):
        idx = by_dom[dom]
        pool = sorted({out[i]["reward_model"]["ground_truth"] for i in idx})
        for i in sorted(rng.sample(idx, round(len(idx) * frac))):
            r = out[i]
            r["reward_model"] = {**r["reward_model"], "ground_truth": _corrupt(r, rng, pool)}
            r["extra_info"] = {**r["extra_info"], "noisy_label": True}
    return out


def apply_regime(rows: list[dict[str, Any]], regime: str, seed: int) -> list[dict[str, Any]]:
    kind, frac = parse_regime(regime)
    if kind == "subset":
        return subset(rows, frac, seed)
    if kind == "noise":
        return label_noise(rows, frac, seed)
    return rows


# ---- hashing, writing, identity --------------------------------------------------------------

def content_hash(rows: Iterable[dict[str, Any]]) -> str:
    """A corpus split's identity: the digest of its rows in order (what `train_sha256` records)."""
    return rows_digest(rows)


def write_corpus(out_dir: Path, train: list[dict[str, Any]], test: list[dict[str, Any]],
                 meta: dict[str, Any]) -> dict[str, Any]:
    """Write train/test Parquet + manifest atomically (manifest last: its presence means complete)."""
    import pandas as pd

    out_dir.mkdir(parents=True, exist_ok=True)
    for name, rows in (("train", train), ("test", test)):
        with atomic_path(out_dir / f"{name}.parquet") as tmp:
            pd.DataFrame(rows).to_parquet(tmp, index=False)
    manifest = {**meta, "train_rows": len(train), "test_rows": len(test),
                "train_sha256": content_hash(train), "test_sha256": content_hash(test)}
    atomic_write_json(out_dir / "manifest.json", manifest, indent=2)
    return manifest


def corpus_dir(root: Path, corpus: str, regime: str) -> Path:
    return root / corpus / (regime or "standard")


def corpus_identity(data_spec: Any, regime: str, data_root: Path | None) -> dict[str, Any]:
    """What enters run_key for the data: the built corpus's content hash when a manifest exists,
    else the hash of its deterministic recipe (sources + seed + regime) marked `spec:`."""
    parse_regime(regime)
    ident: dict[str, Any] = {"corpus": data_spec.corpus, "regime": regime, "seed": data_spec.seed}
    root = Path(data_spec.root) if getattr(data_spec, "root", None) else data_root
    if root is not None:
        man = corpus_dir(Path(root), data_spec.corpus, regime) / "manifest.json"
        if man.exists():
            ident["hash"] = json.loads(man.read_text())["train_sha256"]
            return ident
    recipe = {"sources": SOURCES if data_spec.corpus == "multidomain_3" else data_spec.corpus, **ident}
    ident["hash"] = "spec:" + digest(recipe, spaced=True)
    return ident


def build_variants(train: list[dict[str, Any]], test: list[dict[str, Any]], root: Path, corpus: str,
                   regimes: Iterable[str], seed: int) -> dict[str, dict[str, Any]]:
    """Write the standard corpus and each regime variant (test split unchanged); return manifests."""
    out = {}
    for regime in ["", *[r for r in regimes if r]]:
        rows = apply_regime(train, regime, seed)
        out[regime or "standard"] = write_corpus(corpus_dir(root, corpus, regime), rows, test,
                                                 {"corpus": corpus, "regime": regime, "seed": seed})
    return out
