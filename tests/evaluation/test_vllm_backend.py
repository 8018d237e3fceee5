"""vLLM backend up to the engine boundary: argument building and the missing-extra message."""

from __future__ import annotations

import importlib.util

import pytest

from evaluation.backends.vllm import VLLMUnavailableError, build_vllm_args, make_vllm


def test_args_cover_longest_prompt_plus_limit_and_per_job_cache(tmp_path):
    a = build_vllm_args("/ckpt/step_300", longest_prompt_tokens=1500, max_gen_toks=8192, job_dir=tmp_path / "job7",
                        gpu_memory_utilization=0.8, seed=3)
    assert a.max_model_len >= 1500 + 8192
    assert a.cache_root == str(tmp_path / "job7" / "vllm_cache")
    ma = a.model_args()
    assert ma["max_gen_toks"] == 8192 and ma["gpu_memory_utilization"] == 0.8 and ma["seed"] == 3
    assert ma["pretrained"] == "/ckpt/step_300" and "device" not in ma
    b = build_vllm_args("/ckpt", longest_prompt_tokens=10, max_gen_toks=20, job_dir=tmp_path / "job8")
    assert b.cache_root != a.cache_root


@pytest.mark.parametrize("kw",
                         [{"longest_prompt_tokens": 0, "max_gen_toks": 5},
                          {"longest_prompt_tokens": 5, "max_gen_toks": 5,
                                                                                  "gpu_memory_utilization": 1.5}])
def test_bad_args_are_rejected(tmp_path, kw):
    with pytest.raises(ValueError):
        build_vllm_args("/ckpt", job_dir=tmp_path, **kw)


@pytest.mark.skipif(importlib.util.find_spec("vllm") is not None, reason="vllm installed (GPU machine)")
def test_missing_vllm_says_how_to_install(tmp_path):
    a = build_vllm_args("/ckpt", longest_prompt_tokens=10, max_gen_toks=20, job_dir=tmp_path)
    with pytest.raises(VLLMUnavailableError, match=r"pip install -e '\.\[gpu\]'.*--backend hf"):
        make_vllm(a)
