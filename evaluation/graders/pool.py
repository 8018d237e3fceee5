"""The grader time budget: every grader runs in a spawn process pool whose *parent* enforces a per-item budget.

One mechanism for all three graders and all three callers (verl's `compute_score`, the local backend, which
calls `compute_score`, and the evaluator's lm-eval hooks), so a degenerate output is a recorded `timeout`
status, never a hung reward worker and never a 0 presented as a wrong answer. A worker that overruns is
killed with its pool and the pool restarted; finished items keep their results and the rest are resubmitted.
Signals (`signal.alarm`, math-verify's own timeout) break in threads (verl's reward loop, Ray actors), hence
processes. Processes are spawned, not forked, so a parent holding torch/Ray threads is safe.
"""

from __future__ import annotations

import atexit
import contextlib
import multiprocessing as mp
import multiprocessing.pool
import sys
import threading
import types
from collections.abc import Sequence

from evaluation.graders.conclusion import DEFAULT_TAGS, ThinkTags
from evaluation.graders.registry import get_grader
from evaluation.graders.result import GradeResult

Item = tuple[str, str, str, int | None, ThinkTags | None]  # (grader, response, gold, n_options, think tags)


def grade_inprocess(grader: str, response: str, gold: str, n_options: int | None = None,
                    tags: ThinkTags | None = DEFAULT_TAGS) -> GradeResult:
    """Grade one item in this process without a budget (pool workers; floors measured by benchmarks). The
    graders are registered: importing this module runs `evaluation.graders`, which imports each of them."""
    return get_grader(grader).grade_inprocess(response, gold, n_options, tags)


def _worker(item: Item) -> tuple[float, str | None, str]:
    r = grade_inprocess(*item)
    return r.score, r.parsed, r.status


def _warm(_: int) -> int:
    import math_verify  # noqa: F401 - import cost paid once per worker, outside any budget

    import evaluation.graders.knights_knaves
    import evaluation.graders.math
    import evaluation.graders.multiple_choice  # noqa: F401

    return 0


@contextlib.contextmanager
def _without_main_module():
    """Start spawn workers without re-importing the caller's `__main__`.

    Workers only need the graders. A spawn child normally re-runs the parent's main script, which breaks
    scripts and notebooks that lack an `if __name__ == "__main__"` guard (and any script doing heavy work at
    import). Workers are started inside this block only.
    """
    real = sys.modules["__main__"]
    sys.modules["__main__"] = types.ModuleType("__main__")
    try:
        yield
    finally:
        sys.modules["__main__"] = real


def _kill(pool: multiprocessing.pool.Pool) -> None:
    pool.terminate()
    pool.join()


class GraderPool:
    """A spawn-context process pool with a parent-enforced per-item budget and restart on overrun."""

    def __init__(self, processes: int = 2):
        if processes < 1:
            raise ValueError(f"processes must be >= 1, got {processes}")
        self.processes = processes
        self._pool: mp.pool.Pool | None = None
        self._lock = threading.Lock()
        self.restarts = 0

    def _ensure(self) -> mp.pool.Pool:
        if self._pool is None:
            with _without_main_module():
                self._pool = mp.get_context("spawn").Pool(self.processes)
            self._pool.map(_warm, range(self.processes))
        return self._pool

    def close(self) -> None:
        if self._pool is not None:
            self._pool.terminate()
            self._pool.join()
            self._pool = None

    def _abandon(self) -> None:
        """Drop the pool holding a stuck worker; it is killed in the background so the caller gets its
        `timeout` at the budget, not after the kill (tens of ms)."""
        old, self._pool = self._pool, None
        if old is not None:
            threading.Thread(target=_kill, args=(old,), daemon=True).start()

    def grade_items(self, grader: str, responses: Sequence[str], golds: Sequence[str],
                    n_options: Sequence[int | None] | None = None, timeout_s: float = 5.0,
                    tags: ThinkTags | None = DEFAULT_TAGS) -> list[GradeResult]:
        """Grade pairs in order; an item still running `timeout_s` after its turn comes is a `timeout`; `tags`:
        the reasoning block's tags (`evaluation.graders.conclusion`)."""
        if len(responses) != len(golds):
            raise ValueError(f"{len(responses)} responses but {len(golds)} golds")
        opts = list(n_options) if n_options is not None else [None] * len(golds)
        if len(opts) != len(golds):
            raise ValueError(f"{len(opts)} n_options for {len(golds)} items")
        if not timeout_s > 0:
            raise ValueError(f"timeout_s must be positive, got {timeout_s!r}")
        with self._lock:
            results: list[GradeResult | None] = [None] * len(responses)
            todo = list(range(len(responses)))
            while todo:
                pool = self._ensure()
                pending = [(i, pool.apply_async(_worker, ((grader, responses[i], golds[i], opts[i], tags),)))
                           for i in todo]
                todo = []
                for k, (i, fut) in enumerate(pending):
                    try:
                        s, p, st = fut.get(timeout=timeout_s)
                        results[i] = GradeResult(s, p, st)  # type: ignore[arg-type]
                    except mp.TimeoutError:
                        results[i] = GradeResult(0.0, None, "timeout")
                        # keep finished results, kill the stuck worker with its pool, resubmit the rest
                        for j, f in pending[k + 1:]:
                            if f.ready():
                                s, p, st = f.get()
                                results[j] = GradeResult(s, p, st)  # type: ignore[arg-type]
                            else:
                                todo.append(j)
                        self._abandon()
                        self.restarts += 1
                        break
            return [r for r in results if r is not None]


class MathPool(GraderPool):
    """The math grader's view of the pool (kept for callers that grade math pairs)."""

    def grade(self, responses: Sequence[str], golds: Sequence[str], timeout_s: float = 5.0) -> list[GradeResult]:
        return self.grade_items("math", responses, golds, timeout_s=timeout_s)


_shared: dict[int, MathPool] = {}
_shared_lock = threading.Lock()


def shared_pool(processes: int = 2) -> MathPool:
    """One pool per process count in this process, reused by every call (the verl reward path, lm-eval's
    per-item hooks); single-item calls use the 1-process pool, batches theirs, so neither restarts the other."""
    with _shared_lock:
        pool = _shared.get(processes)
        if pool is None:
            pool = _shared[processes] = MathPool(processes)
            atexit.register(pool.close)
        return pool


__all__ = ["GraderPool", "MathPool", "grade_inprocess", "shared_pool"]
