"""Per-request sampling seeds for verl's rollout servers (the `hf` rollout and verl's own vLLM server).

Why: verl seeds a vLLM engine once per replica (`vllm_async_server.py:343`) and, only with `full_determinism`, gives
EVERY request the same seed (`:627`), so the n samples of one prompt would be identical. Without it the samples come
from the engine's one generator in the order the async requests arrive, which moves with the machine's load: two
invocations of one campaign trained on different rollouts (issue 57: Δ −2.29 and −0.62 at the same seed). A seed
per request, from what identifies the sample and not from when it arrived, makes a step's groups reproducible up to
the order of samples inside a group (exchangeable for GRPO), and a resumed run draws what an uninterrupted one did.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence


def request_seed(base_seed: int, replica_rank: int, step: int, prompt_ids: Sequence[int], occurrence: int) -> int:
    """A 63-bit seed from (rollout.seed, replica, the weights' global step, prompt, occurrence of that prompt)."""
    h = hashlib.sha256(f"{base_seed}|{replica_rank}|{step}|{occurrence}|".encode()
                       + bytes(str([int(t) for t in prompt_ids]), "ascii"))
    return int.from_bytes(h.digest()[:8], "little") & ((1 << 63) - 1)


class RequestSeeds:
    """Numbers each prompt's requests under one set of weights (occurrence 0, 1, ... of the same prompt) and turns
    them into seeds. Keyed on the trainer's step of the weights, not on how many syncs the server saw, so a run
    resumed from a checkpoint draws the same samples as one that never stopped."""

    def __init__(self, base_seed: int, replica_rank: int) -> None:
        self.base_seed = int(base_seed)
        self.replica_rank = int(replica_rank)
        self._step: int | None = None
        self._seen: dict[tuple[int, ...], int] = {}

    def next(self, prompt_ids: Sequence[int], step: int | None) -> int:
        s = -1 if step is None else int(step)
        if s != self._step:  # new weights: occurrences count afresh
            self._step, self._seen = s, {}
        key = tuple(int(t) for t in prompt_ids)
        occ = self._seen.get(key, 0)
        self._seen[key] = occ + 1
        return request_seed(self.base_seed, self.replica_rank, s, key, occ)

    def reset(self) -> None:
        """Forget the occurrences (new weights at the same step number)."""
        self._seen = {}
