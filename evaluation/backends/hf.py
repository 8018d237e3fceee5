"""lm-eval's HF backend with per-generation token counts and finish reasons (CPU tests, small GPUs)."""

from __future__ import annotations

from typing import Any

from lm_eval.models.huggingface import HFLM

from evaluation.backends.tracking import GenerationInfoHook


class TrackedHFLM(HFLM):
    """HFLM that records, for each generated sequence, its token count and whether EOS ended it."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.info_hook = GenerationInfoHook()
        self.cache_hook = self.info_hook
        # HF pads finished rows with pad (or eos) after the EOS it emitted
        self._end_ids = {i for i in (self.tokenizer.eos_token_id, self.tokenizer.pad_token_id) if i is not None}

    def set_cache_hook(self, cache_hook: Any) -> None:  # keep ours; lm-eval's CachingLM is not used
        pass

    def generate_samples(self, groups: list[tuple[list[Any], int]]) -> list[list[str]]:
        """k samples per item: each group is one item's k (identical) requests, generated as one batch after
        seeding torch's generator with the item's seed, so the same seed gives the same samples."""
        import torch

        out = []
        for requests, seed in groups:
            torch.manual_seed(int(seed))
            out.append(self.generate_until(list(requests), disable_tqdm=True))
        return out

    def tok_decode(self, tokens: Any, skip_special_tokens: bool = True) -> str:
        text = super().tok_decode(tokens, skip_special_tokens=skip_special_tokens)
        if isinstance(tokens, list) and skip_special_tokens:
            n = len(tokens)
            eos = None
            for i, t in enumerate(tokens):
                if t in self._end_ids:
                    n, eos = i, (t == self.tokenizer.eos_token_id)
                    break
            self.info_hook.note(n, "stop" if eos is not None else None, text)
        return text
