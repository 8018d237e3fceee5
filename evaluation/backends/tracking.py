"""Finish reason and token count per generation, which lm-eval's backends compute but discard.

Both lm-eval backends call `self.cache_hook.add_partial("generate_until", (context, gen_kwargs),
text)` once per generated sequence, right after decoding it. The backend subclasses record the
raw generation (`note_generation`) and this hook pairs it with the request key, so the truncation
gate reads a real finish reason instead of guessing from text length.
"""

from __future__ import annotations

from typing import Any


def request_key(context: str) -> str:
    """Backends rewrite gen_kwargs before the hook sees them, so the rendered prompt is the key."""
    return context


class GenerationInfoHook:
    """Stands in for lm-eval's CacheHook; collects `key -> {n_tokens, finish_reason}`."""

    def __init__(self) -> None:
        self.info: dict[str, dict[str, Any]] = {}
        # (key, text) -> info: the k samples of one prompt share a key, so sampled decoding looks up by text too
        self.by_text: dict[tuple[str, str], dict[str, Any]] = {}
        self.pending: list[dict[str, Any]] = []

    def record(self, context: str, text: str, n_tokens: int, finish_reason: str | None) -> None:
        got = {"n_tokens": int(n_tokens), "finish_reason": finish_reason}
        self.info[request_key(context)] = got
        self.by_text[(request_key(context), text)] = got

    def note(self, n_tokens: int, finish_reason: str | None, raw_text: str | None = None) -> None:
        self.pending.append({"n_tokens": int(n_tokens), "finish_reason": finish_reason, "raw_text": raw_text})

    def add_partial(self, attr: str, req: Any, res: Any) -> None:
        if attr != "generate_until" or not self.pending:
            return
        raw = self.pending.pop(0)
        context, gen_kwargs = req
        finish = raw["finish_reason"]
        if finish is None:
            # no EOS: either a stop string cut the text (stop) or the token limit was reached (length)
            cut = raw["raw_text"] is not None and res != raw["raw_text"]
            limit = int(gen_kwargs.get("max_gen_toks", 256)) if isinstance(gen_kwargs, dict) else 256
            finish = "stop" if cut or raw["n_tokens"] < limit else "length"
        self.record(context, res, raw["n_tokens"], finish)


def item_seed(seed: int, task: str, doc_id: Any) -> int:
    """The sampling seed of one item: the suite's decoding seed mixed with task and item (stable across runs,
    independent of batch composition and of which items a cache already holds)."""
    import hashlib

    return int(hashlib.sha256(f"{seed}:{task}:{doc_id}".encode()).hexdigest()[:8], 16)
