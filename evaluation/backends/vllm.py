"""The vLLM backend: argument building and the tracked engine (GPU: `pip install -e .[gpu]`; CPU: vLLM's CPU build
in the second environment, `make venv-vllm`, where CI checks it item by item against the HF backend).

One engine per checkpoint serves every task of a `simple_evaluate` call (STUDY.md §5.6).
Arguments guard the known failures: `max_model_len` >= longest prompt + largest generation limit
(else lm-eval left-truncates prompts with only a warning), a per-job `VLLM_CACHE_ROOT` (parallel
jobs collided in the shared compile cache, L13), explicit `gpu_memory_utilization` and `seed`.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from evaluation.backends.tracking import GenerationInfoHook
from wtcommon.errors import WindtunnelError


class VLLMUnavailableError(WindtunnelError, RuntimeError):
    """vllm is not installed; the message says how to get it (GPU machines only)."""


@dataclass(frozen=True)
class VLLMOptions:
    """What a caller may set on the engine; the rest (lengths, cache dir) `build_vllm_args` derives.

    `dtype` bfloat16 is the GPU default (as the study evaluated); float32 makes greedy generations equal the HF
    backend's, which evaluates in the checkpoint's float32 (bfloat16 changed 7 of 160 tiny-model responses).
    `enforce_eager` skips vLLM's graph compilation (CUDA graphs / torch.compile): slower generation, faster start,
    the right trade for small models and CPU."""

    gpu_memory_utilization: float = 0.85
    tensor_parallel_size: int = 1
    seed: int = 0
    margin_tokens: int = 16
    dtype: str = "bfloat16"
    enforce_eager: bool = False

    @classmethod
    def from_mapping(cls, raw: Any, where: str = "evaluation.vllm") -> VLLMOptions:
        """The options of a campaign's `evaluation: {vllm: {...}}` block; `ConfigFieldError` names the key."""
        from wtcommon.config_fields import ConfigFieldError

        if not isinstance(raw, dict):
            raise ConfigFieldError(f"{where}: got {raw!r}; a mapping such as {{dtype: float32, enforce_eager: true}}")
        unknown = sorted(set(raw) - set(cls.__dataclass_fields__))
        if unknown:
            raise ConfigFieldError(f"{where}: unknown key(s) {unknown}; allowed: {sorted(cls.__dataclass_fields__)}")
        if raw.get("dtype", "bfloat16") not in DTYPES:
            raise ConfigFieldError(f"{where}.dtype: got {raw.get('dtype')!r}; one of {', '.join(DTYPES)}")
        if "enforce_eager" in raw and not isinstance(raw["enforce_eager"], bool):
            raise ConfigFieldError(f"{where}.enforce_eager: got {raw['enforce_eager']!r}; true or false")
        for key, least in (("tensor_parallel_size", 1), ("seed", 0), ("margin_tokens", 0)):
            if key in raw and (isinstance(raw[key], bool) or not isinstance(raw[key], int) or raw[key] < least):
                raise ConfigFieldError(f"{where}.{key}: got {raw[key]!r}; an integer >= {least}")
        gmu = raw.get("gpu_memory_utilization")
        if "gpu_memory_utilization" in raw and (isinstance(gmu, bool) or not isinstance(gmu, int | float)
                                                or not 0 < gmu <= 1):
            raise ConfigFieldError(f"{where}.gpu_memory_utilization: got {raw['gpu_memory_utilization']!r}; in (0, 1]")
        return cls(**raw)


DTYPES = ("bfloat16", "float16", "float32", "auto")
CPU_KVCACHE_ENV = "VLLM_CPU_KVCACHE_SPACE"


@dataclass(frozen=True)
class VLLMArgs:
    pretrained: str
    max_model_len: int
    max_gen_toks: int
    gpu_memory_utilization: float = 0.85
    tensor_parallel_size: int = 1
    seed: int = 0
    dtype: str = "bfloat16"
    enforce_eager: bool = False
    cache_root: str = ""

    def model_args(self) -> dict[str, Any]:
        return {
            "pretrained": self.pretrained,
            "dtype": self.dtype,
            "max_model_len": self.max_model_len,
            "max_gen_toks": self.max_gen_toks,
            "gpu_memory_utilization": self.gpu_memory_utilization,
            "tensor_parallel_size": self.tensor_parallel_size,
            "seed": self.seed,
            "enforce_eager": self.enforce_eager,
            "batch_size": "auto",
            "trust_remote_code": True,
        }


def build_vllm_args(
    checkpoint: Path | str,
    *,
    longest_prompt_tokens: int,
    max_gen_toks: int,
    job_dir: Path | str,
    gpu_memory_utilization: float = 0.85,
    tensor_parallel_size: int = 1,
    seed: int = 0,
    margin_tokens: int = 16,
    dtype: str = "bfloat16",
    enforce_eager: bool = False,
) -> VLLMArgs:
    """vLLM engine arguments for one checkpoint; `job_dir` gets its own compile cache."""
    if longest_prompt_tokens <= 0 or max_gen_toks <= 0:
        raise ValueError("longest_prompt_tokens and max_gen_toks must be positive")
    if not 0.0 < gpu_memory_utilization <= 1.0:
        raise ValueError(f"gpu_memory_utilization must be in (0, 1], got {gpu_memory_utilization}")
    cache_root = Path(job_dir) / "vllm_cache"
    return VLLMArgs(
        pretrained=str(checkpoint),
        max_model_len=int(longest_prompt_tokens + max_gen_toks + margin_tokens),
        max_gen_toks=int(max_gen_toks),
        gpu_memory_utilization=float(gpu_memory_utilization),
        tensor_parallel_size=int(tensor_parallel_size),
        seed=int(seed),
        dtype=dtype,
        enforce_eager=bool(enforce_eager),
        cache_root=str(cache_root),
    )


def sampling_kwargs(gen_kwargs: dict[str, Any], *, n: int, seed: int, eos: str, default_max_gen_toks: int,
                    max_prompt_tokens: int | None = None) -> dict[str, Any]:
    """`vllm.SamplingParams(**...)` for k samples of one item in ONE request (`n=k`, per-request `seed`).

    Mirrors lm-eval's `modify_gen_kwargs`: stop at the task's `until` strings plus EOS, `max_gen_toks` as
    `max_tokens`, temperature/top_p from the suite (lm-eval's own path would send k separate requests)."""
    if n < 1:
        raise ValueError(f"n (samples per item) must be >= 1, got {n}")
    g = dict(gen_kwargs)
    until = list(g.pop("until", []) or [])
    if isinstance(until, str):
        until = [until]
    if eos and eos not in until:
        until.append(eos)
    max_tokens = int(g.pop("max_gen_toks", default_max_gen_toks))
    do_sample = bool(g.pop("do_sample", False))
    temperature = float(g.pop("temperature", 0.0)) if do_sample else 0.0
    out: dict[str, Any] = {"n": int(n), "seed": int(seed), "temperature": temperature,
                           "top_p": float(g.pop("top_p", 1.0)) if do_sample else 1.0,
                           "max_tokens": max_tokens, "stop": until}
    if n > 1 and temperature == 0.0:
        raise ValueError(f"{n} samples at temperature 0 would be identical; the suite must set temperature > 0")
    return out


def response_tokens(output: Any, eos_id: int | None) -> int:
    """Generated tokens, the EOS that ended the response not counted: vLLM's `token_ids` include it, the HF
    backend's count stops before it, and every length figure (the exploit watch, truncation) reads this."""
    ids = list(output.token_ids)
    return len(ids) - 1 if ids and eos_id is not None and ids[-1] == eos_id and output.finish_reason == "stop" \
        else len(ids)


def _require_vllm() -> None:
    try:
        import vllm  # noqa: F401
    except ImportError as e:
        raise VLLMUnavailableError(
            "the vllm backend needs the `gpu` extra: `pip install -e '.[gpu]'` on a GPU machine "
            "(vllm pins a CUDA torch; never install it into the CPU venv). On CPU use --backend hf, or vLLM's "
            "CPU build in its own environment: `make venv-vllm`, then .venv-vllm/bin/campaign."
        ) from e


def make_vllm(args: VLLMArgs):
    """Construct lm-eval's VLLM model (tracked: finish reasons and token counts per generation)."""
    _require_vllm()
    os.environ["VLLM_CACHE_ROOT"] = args.cache_root  # per job, set before the engine starts
    from vllm.platforms import current_platform

    if current_platform.is_cpu():
        # vLLM's CPU build: the engine's memory is the machine's RAM, and `gpu_memory_utilization` would claim 85% of
        # it (refused at start-up when other work holds more than 15%). The KV cache gets an explicit size instead,
        # VLLM_CPU_KVCACHE_SPACE GiB (vLLM's own variable; 1 unless the user set it).
        os.environ.setdefault(CPU_KVCACHE_ENV, "1")
    Path(args.cache_root).mkdir(parents=True, exist_ok=True)
    from lm_eval.models.vllm_causallms import VLLM

    class TrackedVLLM(VLLM):
        def __init__(self, *a: Any, **kw: Any) -> None:
            super().__init__(*a, **kw)
            self.info_hook = GenerationInfoHook()
            self.cache_hook = self.info_hook

        def set_cache_hook(self, cache_hook: Any) -> None:
            pass

        def generate_samples(self, groups: list[tuple[list[Any], int]]) -> list[list[str]]:
            """k samples per item as one vLLM request each (`n=k`, the item's seed), all items in one call."""
            from vllm import SamplingParams, TokensPrompt

            eos = self.tokenizer.decode(self.eot_token_id)
            prompts, params = [], []
            for requests, seed in groups:
                context, gen_kwargs = requests[0].args
                kw = sampling_kwargs(gen_kwargs, n=len(requests), seed=seed, eos=eos,
                                     default_max_gen_toks=self.max_gen_toks)
                toks = self.tok_encode(context)[-(self.max_length - kw["max_tokens"]):]
                prompts.append(TokensPrompt(prompt_token_ids=toks))
                params.append(SamplingParams(**kw))
            outputs = self.model.generate(prompts, sampling_params=params, use_tqdm=False)
            texts = []
            for (requests, _), out in zip(groups, outputs, strict=True):
                context = requests[0].args[0]
                got = []
                for o in out.outputs:
                    self.info_hook.record(context, o.text, response_tokens(o, self.eot_token_id),
                                          "length" if o.finish_reason == "length" else "stop")
                    got.append(o.text)
                texts.append(got)
            return texts

        def _model_generate(self, *a: Any, **kw: Any):
            outputs = super()._model_generate(*a, **kw)
            if kw.get("generate", a[1] if len(a) > 1 else False):
                for out in outputs:
                    o = out.outputs[0]
                    self.info_hook.note(response_tokens(o, self.eot_token_id),
                                        "length" if o.finish_reason == "length" else "stop")
            return outputs

    return TrackedVLLM(**args.model_args())
