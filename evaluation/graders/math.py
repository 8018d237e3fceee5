"""Math grader: math-verify (symbolic equivalence) on the response vs the gold answer.

math-verify's own timeouts use `signal.alarm`, which breaks in threads (verl's reward loop,
Ray actors). So workers call it with `parsing_timeout=None, timeout_seconds=None` and the
*parent* enforces the per-item timeout: a worker that overruns is killed with its pool and the
pool restarted (`MathPool`). Processes are spawned (not forked) so a parent holding torch/Ray
threads is safe.
"""

from __future__ import annotations

import atexit
import contextlib
import logging
import multiprocessing as mp
import sys
import threading
import types
from typing import Sequence

from evaluation.graders.result import GradeResult


def _gold_text(gold: str) -> str:
    g = gold.strip()
    if "\\boxed" in g or (g.startswith("$") and g.endswith("$")):
        return g
    return f"${g}$"


def _quiet() -> None:
    # math-verify warns once per process that its timeout is off; here that is by design
    logging.getLogger("math_verify").setLevel(logging.ERROR)


def grade_math_inprocess(response: str, gold: str) -> GradeResult:
    """Grade one item in this process, without any timeout (callers enforce it)."""
    _quiet()
    try:
        from math_verify import ExprExtractionConfig, LatexExtractionConfig, parse, verify

        gold_parsed = parse(_gold_text(gold), parsing_timeout=None)
        if not gold_parsed:
            gold_parsed = parse(gold, extraction_config=[ExprExtractionConfig()], parsing_timeout=None)
        if not gold_parsed:
            return GradeResult(0.0, None, "error")  # unparsable gold: a data bug, never a silent zero
        pred = parse(
            response,
            extraction_config=[LatexExtractionConfig(boxed_match_priority=0), ExprExtractionConfig()],
            parsing_timeout=None,
        )
        if not pred:
            return GradeResult(0.0, None, "no_answer")
        ok = verify(gold_parsed, pred, timeout_seconds=None)
        return GradeResult(1.0 if ok else 0.0, str(pred[-1]), "ok")
    except Exception:  # noqa: BLE001 - a crash is reported as status "error" and counted by the evaluator
        return GradeResult(0.0, None, "error")


def _worker(args: tuple[str, str]) -> tuple[float, str | None, str]:
    r = grade_math_inprocess(*args)
    return r.score, r.parsed, r.status


def _warm(_: int) -> int:
    import math_verify  # noqa: F401 - import cost paid once per worker

    return 0


@contextlib.contextmanager
def _without_main_module():
    """Start spawn workers without re-importing the caller's `__main__`.

    Workers only need this module. A spawn child normally re-runs the parent's main script,
    which breaks scripts and notebooks that lack an `if __name__ == "__main__"` guard (and any
    script doing heavy work at import). Workers are started inside this block only.
    """
    real = sys.modules["__main__"]
    sys.modules["__main__"] = types.ModuleType("__main__")
    try:
        yield
    finally:
        sys.modules["__main__"] = real


class MathPool:
    """A spawn-context process pool with a parent-enforced per-item timeout and restart on overrun."""

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

    def grade(self, responses: Sequence[str], golds: Sequence[str], timeout_s: float = 5.0) -> list[GradeResult]:
        """Grade pairs in order; an item still running `timeout_s` after its turn comes is a timeout."""
        if len(responses) != len(golds):
            raise ValueError(f"{len(responses)} responses but {len(golds)} golds")
        with self._lock:
            results: list[GradeResult | None] = [None] * len(responses)
            todo = list(range(len(responses)))
            while todo:
                pool = self._ensure()
                pending = [(i, pool.apply_async(_worker, ((responses[i], golds[i]),))) for i in todo]
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
                        self.close()
                        self.restarts += 1
                        break
            return [r for r in results if r is not None]


_shared: MathPool | None = None
_shared_lock = threading.Lock()


def shared_pool(processes: int = 2) -> MathPool:
    """One pool per process for single-item calls (the verl reward path)."""
    global _shared
    with _shared_lock:
        if _shared is None or _shared.processes != processes:
            if _shared is not None:
                _shared.close()
            _shared = MathPool(processes)
            atexit.register(_shared.close)
        return _shared


def grade_math(response: str, gold: str, timeout_s: float = 5.0) -> GradeResult:
    return shared_pool(1).grade([response], [gold], timeout_s=timeout_s)[0]


def grade_math_batch(
    responses: Sequence[str], golds: Sequence[str], processes: int = 2, timeout_s: float = 5.0
) -> list[GradeResult]:
    """processes=0 grades in this process (no timeout enforcement; for measuring the floor only)."""
    if processes == 0:
        return [grade_math_inprocess(r, g) for r, g in zip(responses, golds, strict=True)]
    return shared_pool(processes).grade(responses, golds, timeout_s=timeout_s)


__all__ = ["MathPool", "grade_math", "grade_math_batch", "grade_math_inprocess"]
