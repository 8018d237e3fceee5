"""The local trainer's prompts: the training/held-out pool as columns and verl's shuffled batch order.

Why a module of its own: the pool and the order are what the step loop reads prompts from and what a checkpoint
stores the position of (`training.resume_state.order_state`); the loop itself lives in `training.local`.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pandas as pd

from training.backend import TrainingError


class PromptPool:
    """Training prompts as columns; `domain` dense ids in the recipe's domain order."""

    def __init__(self, files: Sequence[str | Path], domains: list[str]):
        frames = []
        for f in files:
            try:
                frames.append(pd.read_parquet(f))
            except FileNotFoundError:
                raise TrainingError(f"{f}: training file not found") from None
        df = pd.concat(frames, ignore_index=True)
        required = ["data_source", "prompt", "reward_model", "domain"]
        missing = [c for c in required if c not in df.columns]
        if missing:
            raise TrainingError(f"{files}: missing column(s) {missing}; expected the study schema {required}")
        unknown = sorted(set(df["domain"]) - set(domains))
        if unknown:
            raise TrainingError(f"{files}: domain value(s) {unknown} not in the recipe's data.domains {domains}")
        self.df = df
        self.messages = [list(p) for p in df["prompt"]]
        self.ground_truth = [str(rm["ground_truth"]) for rm in df["reward_model"]]
        self.data_source = df["data_source"].astype(str).tolist()
        self.extra_info = [dict(e) if isinstance(e, dict) else {} for e in df.get("extra_info", [None] * len(df))]
        self.domain_names = domains
        self.domain = np.array([domains.index(d) for d in df["domain"]], dtype=np.int64)
        from evaluation.reward import route

        # each prompt's grader family, once per pool: what the exploit watch reads a response by
        sources = pd.unique(df["data_source"].astype(str))
        family = {src: route(src)[0] for src in sources}
        self.grader = df["data_source"].astype(str).map(family).to_numpy(dtype=object)

    def __len__(self) -> int:
        return len(self.df)


class ShuffledOrder:
    """verl's RandomSampler with `data.seed`: a seeded permutation per epoch, drop_last batches."""

    def __init__(self, n: int, batch_size: int, seed: int):
        if n < batch_size:
            raise TrainingError(f"training set has {n} prompts, fewer than prompts_per_step={batch_size}")
        self.n, self.bs = n, batch_size
        self.rng = np.random.default_rng(np.random.SeedSequence([seed, 0xDA7A]))
        self.perm, self.pos = self.rng.permutation(n), 0

    def next(self) -> np.ndarray:
        if self.pos + self.bs > self.n:
            self.perm, self.pos = self.rng.permutation(self.n), 0
        out = self.perm[self.pos : self.pos + self.bs]
        self.pos += self.bs
        return out
