"""Per-request rollout seeds (policies/verl/rollout_seeds.py): the key both verl rollouts (the `hf` server and verl's
own vLLM server, policies/verl/vllm_seeded.py) sample each request with, so arrival order does not pick samples."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from policies.verl.rollout_seeds import RequestSeeds, request_seed

prompts = st.lists(st.integers(0, 600), min_size=1, max_size=12)


@settings(max_examples=60, deadline=None)
@given(batch=st.lists(prompts, min_size=1, max_size=8), order=st.randoms(use_true_random=False))
def test_a_steps_seeds_are_the_same_set_in_any_arrival_order(batch, order):
    """The n requests of a group (the same prompt) and the groups themselves arrive in any order: per prompt the
    same seeds are handed out, so the step draws the same samples (their order within a group may differ)."""
    requests = [p for p in batch for _ in range(4)]  # rollout.n = 4
    shuffled = list(requests)
    order.shuffle(shuffled)

    def handed(seq):
        seeds = RequestSeeds(1, 0)
        out: dict[tuple[int, ...], list[int]] = {}
        for p in seq:
            out.setdefault(tuple(p), []).append(seeds.next(p, 3))
        return {k: sorted(v) for k, v in out.items()}

    assert handed(requests) == handed(shuffled)


def test_seeds_differ_by_occurrence_step_replica_and_base_seed_and_restart_with_new_weights():
    s = RequestSeeds(7, 0)
    a = [s.next([1, 2, 3], 1) for _ in range(4)]
    assert len(set(a)) == 4  # a group's samples are not copies of one another
    b = [s.next([1, 2, 3], 2) for _ in range(4)]  # the next step's weights: occurrences count afresh, other seeds
    assert not set(a) & set(b)
    s.reset()  # new weights at the same step number (a resumed run's first sync)
    assert [s.next([1, 2, 3], 2) for _ in range(4)] == b
    assert request_seed(7, 0, 1, [1, 2, 3], 0) == a[0]
    assert len({request_seed(7, 0, 1, [1], 0), request_seed(8, 0, 1, [1], 0), request_seed(7, 1, 1, [1], 0),
                request_seed(7, 0, 1, [1], 1)}) == 4
    assert all(0 <= x < 2 ** 63 for x in a + b)
