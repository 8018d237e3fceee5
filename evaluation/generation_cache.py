"""Generation cache keyed by (checkpoint content hash, task, item, generation config).

lm-eval's own `use_cache` (CachingLM) keys by request arguments only and pickles values; this one
adds the checkpoint hash and task/item to the key, stores JSON (response, token count, finish
reason) in SQLite, and commits after every chunk so an interrupted evaluation resumes. A rerun or
a re-grade (graders changed, generations did not) therefore regenerates nothing.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any
from collections.abc import Callable

from lm_eval.api.model import LM

from evaluation.backends.tracking import request_key
from wtcommon.hashing import digest

_SCHEMA = """CREATE TABLE IF NOT EXISTS generations (
  key TEXT PRIMARY KEY, checkpoint TEXT NOT NULL, task TEXT NOT NULL, item TEXT NOT NULL,
  response TEXT NOT NULL, n_tokens INTEGER, finish_reason TEXT)"""


def generation_key(checkpoint_hash: str, task: str, doc_id: Any, context: str, gen_kwargs: dict[str, Any],
                   sample: tuple[int, int] | None = None) -> str:
    """`sample` = (sample index, decoding seed) for sampled decoding; greedy keys are unchanged (old caches hold)."""
    parts: list[Any] = [checkpoint_hash, task, str(doc_id), context, gen_kwargs]
    if sample is not None:
        parts.append({"sample": int(sample[0]), "seed": int(sample[1])})
    return digest(parts, 64, spaced=True)


class GenerationStore:
    """SQLite table of generations; `None` path keeps it in memory (no cache_dir given)."""

    def __init__(self, path: Path | None):
        if path is not None:
            Path(path).parent.mkdir(parents=True, exist_ok=True)
        self.conn = sqlite3.connect(str(path) if path is not None else ":memory:")
        self.conn.execute("PRAGMA journal_mode=WAL")
        self.conn.execute(_SCHEMA)

    def get_many(self, keys: list[str]) -> dict[str, dict[str, Any]]:
        out: dict[str, dict[str, Any]] = {}
        for i in range(0, len(keys), 500):
            part = keys[i:i + 500]
            q = ("SELECT key, response, n_tokens, finish_reason FROM generations "
                 f"WHERE key IN ({','.join('?' * len(part))})")
            for k, r, n, f in self.conn.execute(q, part):
                out[k] = {"response": r, "n_tokens": n, "finish_reason": f}
        return out

    def put_many(self, rows: list[tuple[str, str, str, str, str, int | None, str | None]]) -> None:
        with self.conn:
            self.conn.executemany("INSERT OR REPLACE INTO generations VALUES (?,?,?,?,?,?,?)", rows)

    def close(self) -> None:
        self.conn.close()


class CachedLM(LM):
    """Wraps an lm-eval LM: `generate_until` answers from the store, generates only the misses.

    Misses are generated in chunks (`chunk_size`) so progress is reported and stored as it goes.
    Chat templating, rank and the rest delegate to the wrapped LM (as lm-eval's CachingLM does);
    it subclasses `LM` because `simple_evaluate` type-checks a pre-built model.
    """

    def __init__(self, lm: Any, store: GenerationStore, checkpoint_hash: str, *, chunk_size: int = 64,
                 on_progress: Callable[[int, int], None] | None = None, seeds: dict[str, int] | None = None):
        super().__init__()
        # task name -> decoding seed of the tasks decoded by sampling (k requests per item, lm-eval `repeats`)
        self.seeds = dict(seeds or {})
        self.lm = lm
        self.store = store
        self.checkpoint_hash = checkpoint_hash
        self.chunk_size = chunk_size
        self.on_progress = on_progress
        self.info: dict[tuple[str, str], dict[str, Any]] = {}  # (task, doc_id) -> generation info
        self.sample_info: dict[tuple[str, str], list[dict[str, Any]]] = {}  # (task, doc_id) -> per sample
        self.n_generated = 0
        self.n_cached = 0

    def __getattr__(self, attr: str) -> Any:
        if attr == "lm":
            raise AttributeError(attr)
        return getattr(self.lm, attr)

    @property
    def rank(self) -> int:
        return self.lm.rank

    @property
    def world_size(self) -> int:
        return self.lm.world_size

    @property
    def device(self):
        return self.lm.device

    @property
    def tokenizer_name(self) -> str:
        return self.lm.tokenizer_name

    def apply_chat_template(self, chat_history: list[dict[str, str]], add_generation_prompt: bool = True) -> str:
        return self.lm.apply_chat_template(chat_history, add_generation_prompt=add_generation_prompt)

    def chat_template(self, chat_template: bool | str = False) -> str | None:
        return self.lm.chat_template(chat_template)

    def get_model_info(self) -> dict:
        return self.lm.get_model_info() if hasattr(self.lm, "get_model_info") else {}

    def _info_for(self, context: str, response: str, gen_kwargs: dict[str, Any]) -> tuple[int | None, str | None]:
        hook = getattr(self.lm, "info_hook", None)
        if hook is not None and (request_key(context), response) in hook.by_text:
            got = hook.by_text[(request_key(context), response)]
            return got["n_tokens"], got["finish_reason"]
        if hook is not None and request_key(context) in hook.info:
            got = hook.info[request_key(context)]
            return got["n_tokens"], got["finish_reason"]
        # backends without a hook: count tokens of the text; at the limit it was truncated
        tok = getattr(self.lm, "tokenizer", None)
        if tok is None:
            return None, None
        n = len(tok.encode(response, add_special_tokens=False))
        return n, ("length" if n >= int(gen_kwargs.get("max_gen_toks", 256)) else "stop")

    def _keys(self, requests: list[Any]) -> list[str]:
        """Cache keys; the j-th request of an item of a sampled task (lm-eval clones it k times) is sample j."""
        occ: dict[tuple[str, str], int] = {}
        keys = []
        for r in requests:
            sample = None
            if r.task_name in self.seeds:
                item = (r.task_name, str(r.doc_id))
                sample = (occ.get(item, 0), self.seeds[r.task_name])
                occ[item] = sample[0] + 1
            keys.append(generation_key(self.checkpoint_hash, r.task_name, r.doc_id, r.args[0], r.args[1], sample))
        return keys

    def _generate(self, requests: list[Any], idx: list[int]) -> list[tuple[int, str]]:
        """Generate the missing requests `idx`: greedy ones in one backend call, sampled ones item by item
        (all k samples of an item together, seeded by the item, through the backend's `generate_samples`)."""
        greedy = [i for i in idx if requests[i].task_name not in self.seeds]
        out: list[tuple[int, str]] = []
        if greedy:
            out += list(zip(greedy, self.lm.generate_until([requests[i] for i in greedy]), strict=True))
        groups: dict[tuple[str, str], list[int]] = {}
        for i in idx:
            r = requests[i]
            if r.task_name in self.seeds:
                groups.setdefault((r.task_name, str(r.doc_id)), []).append(i)
        if groups:
            from evaluation.backends.tracking import item_seed

            plan = [(g, item_seed(self.seeds[t], t, d)) for (t, d), g in groups.items()]
            texts = self.lm.generate_samples([([requests[i] for i in g], seed) for g, seed in plan])
            for (g, _), got in zip(plan, texts, strict=True):
                out += list(zip(g, got, strict=True))
        return out

    def _chunks(self, requests: list[Any], miss: list[int]) -> list[list[int]]:
        """Misses in chunks of about `chunk_size` requests; an item's k samples never straddle two chunks."""
        items: dict[tuple[str, str], list[int]] = {}
        for i in miss:
            r = requests[i]
            key = (r.task_name, str(r.doc_id)) if r.task_name in self.seeds else (r.task_name, f"#{i}")
            items.setdefault(key, []).append(i)
        chunks: list[list[int]] = [[]]
        for g in items.values():
            if len(chunks[-1]) >= self.chunk_size:
                chunks.append([])
            chunks[-1].extend(g)
        return [c for c in chunks if c]

    def generate_until(self, requests: list[Any], disable_tqdm: bool = False) -> list[str]:
        keys = self._keys(requests)
        hits = self.store.get_many(keys)
        self.n_cached += sum(1 for k in keys if k in hits)
        miss = [i for i, k in enumerate(keys) if k not in hits]
        if self.seeds:  # an item of a sampled task regenerates all its samples (one seeded call), or none
            bad = {(requests[i].task_name, str(requests[i].doc_id)) for i in miss}
            miss = [i for i, r in enumerate(requests) if (r.task_name, str(r.doc_id)) in bad]
        total = len(requests)
        done = total - len(miss)
        if self.on_progress:
            self.on_progress(done, total)
        for idx in self._chunks(requests, miss):
            rows = []
            for i, text in self._generate(requests, idx):
                r = requests[i]
                n, fin = self._info_for(r.args[0], text, r.args[1])
                hits[keys[i]] = {"response": text, "n_tokens": n, "finish_reason": fin}
                rows.append((keys[i], self.checkpoint_hash, r.task_name, str(r.doc_id), text, n, fin))
            self.store.put_many(rows)
            self.n_generated += len(idx)
            done += len(idx)
            if self.on_progress:
                self.on_progress(done, total)
        for r, k in zip(requests, keys, strict=True):
            self.info[(r.task_name, str(r.doc_id))] = hits[k]
            if r.task_name in self.seeds:
                self.sample_info.setdefault((r.task_name, str(r.doc_id)), []).append(hits[k])
        return [hits[k]["response"] for k in keys]

    def loglikelihood(self, requests: list[Any], disable_tqdm: bool = False):
        return self.lm.loglikelihood(requests)

    def loglikelihood_rolling(self, requests: list[Any], disable_tqdm: bool = False):
        return self.lm.loglikelihood_rolling(requests)
