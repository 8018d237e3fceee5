"""The grader time budget: every grader runs in spawned worker processes whose *parent* enforces a per-item budget.

One mechanism for all three graders and all three callers (verl's `compute_score`, the local backend, which
calls `compute_score`, and the evaluator's lm-eval hooks), so a degenerate output is a recorded `timeout`
status, never a hung reward worker and never a 0 presented as a wrong answer. A worker that overruns is
killed and replaced; finished items keep their results and the rest go to the other workers.
Signals (`signal.alarm`, math-verify's own timeout) break in threads (verl's reward loop, Ray actors), hence
processes. Processes are spawned, not forked, so a parent holding torch/Ray threads is safe.
"""

from __future__ import annotations

import atexit
import contextlib
import multiprocessing as mp
import multiprocessing.connection as mp_connection
import sys
import threading
import time
import types
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from multiprocessing.connection import Connection
from multiprocessing.process import BaseProcess

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


_READY = "ready"
WARM_UP_S = 300.0  # a worker that has not imported the graders by then is broken, not slow


def _serve(conn: Connection) -> None:
    """A worker: import the graders (outside any budget), then grade items from the pipe until the parent closes
    it or dies (EOF), so a worker never outlives its owner."""
    _warm(0)
    conn.send(_READY)
    while True:
        try:
            item = conn.recv()
        except (EOFError, OSError, KeyboardInterrupt):
            return
        conn.send(_worker(item))


@dataclass(eq=False)
class _Worker:
    proc: BaseProcess
    conn: Connection
    ready: bool = False
    item: int | None = None  # the index being graded
    deadline: float = 0.0


def _kill(worker: _Worker) -> None:
    worker.conn.close()
    worker.proc.kill()
    worker.proc.join()


class GraderPool:
    """Spawned grader processes, each fed through its own pipe, with a parent-enforced per-item budget; a worker
    past its budget is killed and replaced.

    Pipes, not `multiprocessing.Pool`: a Pool's queues hold named POSIX semaphores, which outlive a process that
    ends without running its atexit hooks (a Ray actor or stage job being ended), and every verl reward worker and
    stage job left six in /dev/shm (issue 56). A pipe is two file descriptors that close with their process; a
    worker whose parent died reads EOF and exits."""

    def __init__(self, processes: int = 2):
        if processes < 1:
            raise ValueError(f"processes must be >= 1, got {processes}")
        self.processes = processes
        self._workers: list[_Worker] = []
        self._lock = threading.Lock()
        self.restarts = 0

    def _spawn(self) -> _Worker:
        ctx = mp.get_context("spawn")
        parent, child = ctx.Pipe()
        with _without_main_module():
            proc = ctx.Process(target=_serve, args=(child,), daemon=True, name="windtunnel-grader")
            proc.start()
        child.close()  # the worker holds the only other end: its death is EOF here
        return _Worker(proc, parent)

    def _ensure(self) -> None:
        while len(self._workers) < self.processes:
            self._workers.append(self._spawn())

    def _replace(self, worker: _Worker) -> None:
        """Retire a stuck or dead worker (killed in the background, so the caller gets its `timeout` at the
        budget, not after the kill) and start its replacement."""
        self._workers.remove(worker)
        threading.Thread(target=_kill, args=(worker,), daemon=True).start()
        self._workers.append(self._spawn())

    def close(self) -> None:
        """Stop every worker (also from atexit, so without the lock a grading thread may hold)."""
        workers, self._workers = self._workers, []
        for w in workers:
            _kill(w)

    def grade_items(self, grader: str, responses: Sequence[str], golds: Sequence[str],
                    n_options: Sequence[int | None] | None = None, timeout_s: float = 5.0,
                    tags: ThinkTags | None = DEFAULT_TAGS) -> list[GradeResult]:
        """Grade pairs in order; an item not back `timeout_s` after a worker took it is a `timeout`, a worker that
        died on it an `error`; `tags`: the reasoning block's tags (`evaluation.graders.conclusion`)."""
        if len(responses) != len(golds):
            raise ValueError(f"{len(responses)} responses but {len(golds)} golds")
        opts = list(n_options) if n_options is not None else [None] * len(golds)
        if len(opts) != len(golds):
            raise ValueError(f"{len(opts)} n_options for {len(golds)} items")
        if not timeout_s > 0:
            raise ValueError(f"timeout_s must be positive, got {timeout_s!r}")
        with self._lock:
            self._ensure()
            results: list[GradeResult | None] = [None] * len(responses)
            todo = deque(range(len(responses)))
            while todo or any(w.item is not None for w in self._workers):
                self._dispatch(todo, lambda i: (grader, responses[i], golds[i], opts[i], tags), timeout_s)
                self._collect(results)
            return [r for r in results if r is not None]

    def _dispatch(self, todo: deque[int], item: Callable[[int], Item], timeout_s: float) -> None:
        for w in list(self._workers):
            if w.ready and w.item is None and todo:
                i = todo.popleft()
                try:
                    w.conn.send(item(i))
                except OSError:  # died while idle: the item waits for the replacement
                    todo.appendleft(i)
                    self._replace(w)
                    continue
                w.item, w.deadline = i, time.monotonic() + timeout_s

    def _collect(self, results: list[GradeResult | None]) -> None:
        """Wait for the next result, ready signal or deadline, and record what arrived or expired."""
        busy = [w for w in self._workers if w.item is not None]
        waiting = busy + [w for w in self._workers if not w.ready]
        now = time.monotonic()
        wait_s = max(0.0, min(w.deadline for w in busy) - now) if busy else WARM_UP_S
        arrived = set(mp_connection.wait([w.conn for w in waiting], timeout=wait_s))
        if not arrived and not busy:
            raise RuntimeError(f"grader workers did not start within {WARM_UP_S:.0f} s")
        for w in [w for w in waiting if w.conn in arrived]:
            try:
                msg = w.conn.recv()
            except (EOFError, OSError):  # the worker died (on its item: a grader crash)
                if not w.ready:  # before it could import the graders: every replacement would die the same way
                    self._workers.remove(w)
                    _kill(w)
                    raise RuntimeError(f"a grader worker exited with {w.proc.exitcode} while importing the "
                                       "graders; run `python -c 'import evaluation.graders'` to see why") from None
                if w.item is not None:
                    results[w.item] = GradeResult(0.0, None, "error")
                    w.item = None
                self.restarts += 1
                self._replace(w)
                continue
            if msg == _READY:
                w.ready = True
            elif w.item is not None:
                s, p, st = msg
                results[w.item] = GradeResult(s, p, st)
                w.item = None
        now = time.monotonic()
        for w in [w for w in busy if w.item is not None and w.conn not in arrived and now >= w.deadline]:
            results[w.item] = GradeResult(0.0, None, "timeout")  # type: ignore[index]
            self.restarts += 1
            self._replace(w)


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
