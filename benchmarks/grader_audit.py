"""Cost of `campaign audit graders`' generated suite at the default N (issue 39 Done-when: under 60 s on 2 cores).

Runs every class of every family at `DEFAULT_N` examples, in this process (the graders' in-process functions),
and prints the wall time, its ratio to the 60 s budget and the per-family exploit / false-negative counts.
Usage: PYTHONPATH=. python benchmarks/grader_audit.py
"""

from __future__ import annotations

import time

from evaluation.grader_audit.suite import DEFAULT_N, family_rates, run_suite

BUDGET_S = 60.0


def main() -> None:
    t0, c0 = time.perf_counter(), time.process_time()
    results = run_suite(n=DEFAULT_N)
    secs, cpu = time.perf_counter() - t0, time.process_time() - c0
    n = sum(r.n for r in results)
    for row in family_rates(results):
        print(f"{row['family']:16s} exploit {row['false_positives']}/{row['exploit_n']}  "
              f"false negative {row['false_negatives']}/{row['credit_n']}  "
              f"reflection refused {row['reflections_refused']}/{row['reflect_n']}")
    print(f"generated suite: {n} responses in {len(results)} classes, N={DEFAULT_N}: {secs:.1f} s "
          f"(ratio to the {BUDGET_S:.0f} s budget: {secs / BUDGET_S:.2f}); {cpu:.1f} CPU-s in this process (wall above "
          "that is waiting on a shared machine)")


if __name__ == "__main__":
    main()
