"""The `hf` rollout's server (policies/verl/hf_rollout.py) on a tiny random Qwen2, without Ray: what verl's
agent loop relies on (token-in/token-out, per-token log-probs, EOS/length stop, seeds) and weight loading."""

from __future__ import annotations

import asyncio
import types

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from policies.verl.hf_rollout import HFRolloutServer, filter_logits
from policies.verl.rollout_seeds import request_seed


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    from training.tiny_model import build_tiny_model

    path = build_tiny_model(tmp_path_factory.mktemp("tiny"), seed=0)
    cfg = types.SimpleNamespace(seed=7, response_length=12, prompt_length=32)
    return HFRolloutServer(cfg, {"path": str(path)}, replica_rank=0, node_rank=0)


def _gen(server, prompt, **params):
    return asyncio.run(server.generate(prompt_ids=prompt, sampling_params=dict(params), request_id="r"))


def test_logprobs_are_the_temperature_scaled_logprobs_of_the_sampled_tokens(server):
    prompt = [5, 9, 17, 3]
    out = _gen(server, prompt, temperature=0.7, top_p=1.0, top_k=-1, logprobs=True, ignore_eos=True)
    assert len(out.token_ids) == 12 and len(out.log_probs) == 12  # response budget reached
    ids = torch.tensor([prompt + out.token_ids])
    with torch.no_grad():
        logits = server.model(input_ids=ids).logits[0, len(prompt) - 1:-1] / 0.7
    ref = torch.log_softmax(logits, -1).gather(-1, torch.tensor(out.token_ids)[:, None])[:, 0]
    assert torch.allclose(torch.tensor(out.log_probs), ref, atol=1e-4)
    assert out.stop_reason == "completed"
    assert _gen(server, prompt, temperature=1.0, logprobs=False).log_probs is None


def test_generation_stops_at_eos(server):
    greedy = _gen(server, [5, 9], temperature=0.0, ignore_eos=True).token_ids
    assert len(greedy) == 12
    eos_ids = server.eos_ids
    server.eos_ids = [greedy[2]]  # the third greedy token plays EOS: the response ends right there
    try:
        out = _gen(server, [5, 9], temperature=0.0)
    finally:
        server.eos_ids = eos_ids
    assert out.token_ids == greedy[: greedy.index(greedy[2]) + 1]


def test_same_prompt_occurrences_get_distinct_reproducible_seeds(server):
    a = [_gen(server, [4, 4, 4], temperature=1.0).token_ids for _ in range(3)]
    server.seeds.reset()  # what a weight update does: the step's sampling restarts
    b = [_gen(server, [4, 4, 4], temperature=1.0).token_ids for _ in range(3)]
    assert a == b and len({tuple(x) for x in a}) > 1
    assert request_seed(1, 0, 0, [1, 2], 0) != request_seed(1, 0, 0, [1, 2], 1) != request_seed(1, 0, 1, [1, 2], 1)


def test_update_weights_loads_the_actors_weights_and_refuses_unknown_names(server):
    before = server.weights_digest()
    state = {k: v.clone() + 0.01 for k, v in server.model.state_dict().items() if "layers.0." in k}
    info = server.update_weights(state, global_steps=3)
    assert info["n"] == len(state) and server.version >= 1 and server.global_steps == 3
    assert server.weights_digest() != before
    for k, v in state.items():
        assert torch.equal(server.model.state_dict()[k], v)
    with pytest.raises(KeyError, match="not parameters"):
        server.update_weights({"model.nope.weight": torch.zeros(1)})


@settings(max_examples=50, deadline=None)
@given(st.lists(st.floats(-5, 5), min_size=2, max_size=12), st.integers(-1, 12), st.floats(0.05, 1.0))
def test_filter_logits_keeps_the_top_k_and_the_top_p_nucleus(vals, top_k, top_p):
    x = torch.tensor(vals)
    out = filter_logits(x, top_k, top_p)
    kept = torch.isfinite(out)
    assert kept.any() and torch.equal(out[kept], x[kept])  # kept entries unchanged, at least one kept
    if 0 < top_k < len(vals):
        assert int(kept.sum()) <= len(vals) and x[kept].min() >= torch.topk(x, top_k).values[-1]
    # the nucleus never drops a token more likely than a kept one
    if (~kept).any():
        assert x[~kept].max() <= x[kept].min()
