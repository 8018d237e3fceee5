"""Straightforward re-implementations of the curriculum rules, written from the papers' pseudo-code with plain
loops (heapq, sorted, one draw at a time), for tests/policies/test_curricula.py. Where a test needs the same ids
as the vectorised rule, the reference consumes the generator the same way (the same uniforms in the same order,
noted at each function); everything else about it is its own code."""

from __future__ import annotations

import heapq
import math

import numpy as np


def mopps_select(rng: np.random.Generator, alpha, beta, cand, n: int, target: float) -> list[int]:
    """MoPPS topk: one Beta draw per candidate (in candidate order), the n nearest the target."""
    draws = [(float(rng.beta(alpha[i], beta[i])), int(i)) for i in cand]
    return [i for _, i in sorted(draws, key=lambda t: (t[0] - target) ** 2)[:n]]


def mopps_update(alpha, beta, ids, correct, decay: float, a0: float = 1.0, b0: float = 1.0) -> None:
    for i, row in zip(ids, correct, strict=True):
        k, s = len(row), sum(row) / len(row)
        alpha[i] = alpha[i] * decay + a0 * (1 - decay) + s * k
        beta[i] = beta[i] * decay + b0 * (1 - decay) + (1 - s) * k


def learnability_draw(rng: np.random.Generator, weights, allowed, n: int) -> list[int]:
    """Sequential sampling without replacement: each draw proportional to p(1 - p) among those left."""
    left = [i for i in allowed if weights[i] > 0]
    out = []
    for _ in range(n):
        w = np.array([weights[i] for i in left])
        j = int(rng.choice(len(left), p=w / w.sum()))
        out.append(left.pop(j))
    return out


class PrioritizedReplayRef:
    """Priorities p(1 - p) (1.0 unseen) sampled without replacement one draw at a time, each prompt's key
    u_i^(1/w_i) (Efraimidis-Spirakis: the largest key among those left is drawn next), parked solved/unsolved
    prompts retested periodically. Draws u = rng.random(pool) once per step, as the vectorised rule does."""

    def __init__(self, pool: int, interval: int, fraction: float, seed: int) -> None:
        self.rng = np.random.default_rng(seed)
        self.succ = [0.0] * pool
        self.n = [0.0] * pool
        self.last = [-1] * pool
        self.interval, self.fraction, self.pool = interval, fraction, pool

    def propose(self, step: int, size: int) -> list[int]:
        u = self.rng.random(self.pool)
        heap, parked = [], []
        for i in range(self.pool):
            if self.n[i] == 0:
                heapq.heappush(heap, (-(u[i] ** (1.0 / 1.0)), i))
                continue
            p = self.succ[i] / self.n[i]
            if p in (0.0, 1.0):
                heapq.heappush(parked, (self.last[i] + 0.5 * u[i], i))
            else:
                heapq.heappush(heap, (-(u[i] ** (1.0 / (p * (1 - p)))), i))
        r = round(self.fraction * size) if step % self.interval == 0 else 0
        r = max(min(r, len(parked)), size - len(heap))
        out = [heapq.heappop(heap)[1] for _ in range(size - r)]
        out += [heapq.heappop(parked)[1] for _ in range(r)]
        return out

    def update(self, step: int, ids, correct) -> None:
        for i, row in zip(ids, correct, strict=True):
            self.succ[i] += float(sum(row))
            self.n[i] += len(row)
            self.last[i] = step


class GresoRef:
    """GRESO's all_probabilistic skip rule walking the epoch stream one prompt at a time. The stream order and the
    skip coins are the vectorised rule's draws (two rng.random(m) over the epoch's remaining prompts in id
    order); the walk, streaks, retry probabilities and adaptation are written here with loops."""

    def __init__(self, pool: int, batch: int, seed: int, p: float = 0.5, target: float = 0.25,
                 delta: float = 0.01, lo: float = 0.05, hi: float = 0.95, floor: float = 0.01) -> None:
        self.rng = np.random.default_rng(seed)
        self.pool, self.batch = pool, batch
        self.z_easy, self.z_hard, self.seen = [0] * pool, [0] * pool, [False] * pool
        self.p_easy = self.p_hard = p
        self.target, self.delta, self.lo, self.hi, self.floor = target, delta, lo, hi, floor
        self.updates = 0

    def keep_p(self, i: int) -> float:
        if self.z_easy[i]:
            return max(self.p_easy ** self.z_easy[i], self.floor)
        if self.z_hard[i]:
            return max(self.p_hard ** self.z_hard[i], self.floor)
        return 1.0

    def propose(self, size: int) -> list[int]:
        keep = [self.keep_p(i) for i in range(self.pool)]  # fixed for the step, as in the rule
        out: list[int] = []
        for _ in range(2):
            rest = [i for i in range(self.pool) if not self.seen[i] and i not in out]
            if not rest:
                self.seen = [False] * self.pool
                rest = [i for i in range(self.pool) if i not in out]
            order, coin = self.rng.random(len(rest)), self.rng.random(len(rest))
            for _, i, c in sorted(zip(order, rest, coin, strict=True)):
                self.seen[i] = True
                if c < keep[i]:
                    out.append(i)
                    if len(out) == size:
                        for j in out:  # taken: seen in the epoch now running
                            self.seen[j] = True
                        return out
            self.seen = [False] * self.pool  # the epoch ran out
        raise AssertionError("the reference is only used where two passes fill the batch")

    def update(self, ids, correct) -> None:
        easy = hard = 0
        for i, row in zip(ids, correct, strict=True):
            if min(row) == 1:
                self.z_easy[i], self.z_hard[i], easy = self.z_easy[i] + 1, 0, easy + 1
            elif max(row) == 0:
                self.z_easy[i], self.z_hard[i], hard = 0, self.z_hard[i] + 1, hard + 1
            else:
                self.z_easy[i] = self.z_hard[i] = 0
        self.updates += 1
        if self.updates > self.pool // self.batch:  # GRESO's dataloader: drop_last, so floor
            if easy / len(ids) >= self.target / 3:
                self.p_easy = max(self.p_easy - self.delta, self.lo)
            else:
                self.p_easy = min(self.p_easy + self.delta, self.hi)
            if hard / len(ids) >= self.target * 2 / 3:
                self.p_hard = max(self.p_hard - self.delta, self.lo)
            else:
                self.p_hard = min(self.p_hard + self.delta, self.hi)


def hardest(pass_rates, fraction: float) -> set[int]:
    """The ceil(fraction * pool) lowest pass rates (the tests use distinct rates, so no tie-break is needed)."""
    k = math.ceil(fraction * len(pass_rates))
    return {i for _, i in sorted((r, i) for i, r in enumerate(pass_rates))[:k]}


def sec_values(rewards_by_step, alpha: float) -> list[float]:
    """SEC's TD(0) per domain: Q <- alpha r + (1 - alpha) Q at each step that sampled the domain, Q from 0."""
    q = [0.0] * len(rewards_by_step[0])
    for row in rewards_by_step:
        for d, r in enumerate(row):
            if r is not None:
                q[d] = alpha * r + (1 - alpha) * q[d]
    return q


def _uniform_draw(rng: np.random.Generator, ids: list[int], size: int) -> list[int]:
    """`size` distinct ids uniformly, consuming the generator as the vectorised epoch helper does."""
    arr = np.array(ids, dtype=np.int64)
    return [int(i) for i in (rng.permutation(arr) if size == len(ids) else rng.choice(arr, size, replace=False))]


class PromptReplayRef:
    """Prompt replay with lists: a buffer of medium prompts, replay nearest the target after a cooldown and under
    a reuse cap, the rest fresh in epoch order. Draws u = rng.random(pool) for its tie-breaks, then the fresh
    prompts as `_uniform_draw` does."""

    def __init__(self, pool: int, seed: int, fraction: float = 0.5, low: float = 0.24, high: float = 0.7,
                 target: float = 0.5, cooldown: int = 5, cap: int = 20) -> None:
        self.rng = np.random.default_rng(seed)
        self.pool, self.fraction, self.low, self.high = pool, fraction, low, high
        self.target, self.cooldown, self.cap = target, cooldown, cap
        self.rate, self.buf, self.reuse = [0.0] * pool, [False] * pool, [0] * pool
        self.last: list[int | None] = [None] * pool
        self.seen = [False] * pool

    def propose(self, step: int, size: int) -> list[int]:
        u = self.rng.random(self.pool)
        elig = [i for i in range(self.pool) if self.buf[i]
                and (self.last[i] is None or step - self.last[i] >= self.cooldown)]
        r = min(math.floor(self.fraction * size), len(elig))
        replay = sorted(elig, key=lambda i: abs(self.rate[i] - self.target) - 1e-12 * u[i])[:r]
        for i in replay:
            self.reuse[i] += 1
            if self.reuse[i] >= self.cap:
                self.buf[i] = False
        rest = [i for i in range(self.pool) if i not in set(replay)]
        unseen = [i for i in rest if not self.seen[i]]
        need = size - r
        if len(unseen) >= need:
            fresh = _uniform_draw(self.rng, unseen, need)
        else:
            for i in rest:  # a new epoch over the allowed prompts
                self.seen[i] = False
            fresh = unseen + _uniform_draw(self.rng, [i for i in rest if i not in set(unseen)], need - len(unseen))
        for i in fresh:
            self.seen[i] = True
        for i in replay + fresh:
            self.last[i] = step
        return replay + fresh

    def update(self, ids, correct) -> None:
        for i, row in zip(ids, correct, strict=True):
            self.rate[i] = float(sum(row)) / len(row)
            self.buf[i] = self.low <= self.rate[i] <= self.high and self.reuse[i] < self.cap
