"""A tiny Qwen2-style causal LM and byte-level BPE tokenizer, built locally (no hub download).

Used by the CPU training backend, by evaluator tests and by the demo: it runs through the same
Hugging Face / lm-eval code paths as a real checkpoint (chat template, eos, safetensors).
"""

from __future__ import annotations

from pathlib import Path
from collections.abc import Iterable

CHAT_TEMPLATE = (
    "{% for message in messages %}"
    "{{ '<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}"
)
SPECIAL_TOKENS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]

_DEFAULT_CORPUS = [
    "What is 12 + 30? Put the final answer in \\boxed{}. The answer is \\boxed{42}.",
    "Alice is a knight. Bob is a knave. A knight always tells the truth, a knave always lies.",
    "Which option is correct? A. iron B. water C. gold D. carbon. The answer is: (B)",
    "Let's think step by step. 7 * 6 = 42, so the final answer is $\\boxed{42}$.",
    "0 1 2 3 4 5 6 7 8 9 + - * / = ( ) [ ] { } \\frac \\sqrt knight knave Answer: (A) (C) (D)",
]


def build_tokenizer(corpus: Iterable[str] | None = None, vocab_size: int = 512):
    """Train a byte-level BPE tokenizer on `corpus` (any text encodes: full byte alphabet)."""
    from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE())
    tok.normalizer = normalizers.NFC()
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=SPECIAL_TOKENS,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(list(corpus or _DEFAULT_CORPUS) * 4, trainer=trainer)
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tok,
        eos_token="<|im_end|>",
        pad_token="<|endoftext|>",
        bos_token=None,
        model_max_length=8192,
    )
    fast.chat_template = CHAT_TEMPLATE
    return fast


def build_tiny_model(
    out_dir: str | Path,
    *,
    corpus: Iterable[str] | None = None,
    seed: int = 0,
    hidden_size: int = 64,
    intermediate_size: int = 128,
    num_hidden_layers: int = 2,
    num_attention_heads: int = 4,
    num_key_value_heads: int = 2,
    vocab_size: int = 512,
) -> Path:
    """Build a randomly initialised tiny Qwen2 model plus tokenizer and save both to `out_dir`.

    The default head size is 64 / 4 = 16, which vLLM's CPU attention has no kernel for (it takes 32, 64, 80, ...):
    the vLLM path on CPU uses `num_attention_heads=2, num_key_value_heads=1` (campaigns/model/tiny_qwen2_h32.yaml)."""
    import torch
    from transformers import GenerationConfig, Qwen2Config, Qwen2ForCausalLM

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    tokenizer = build_tokenizer(corpus, vocab_size=vocab_size)
    cfg = Qwen2Config(
        vocab_size=len(tokenizer),
        hidden_size=hidden_size,
        intermediate_size=intermediate_size,
        num_hidden_layers=num_hidden_layers,
        num_attention_heads=num_attention_heads,
        num_key_value_heads=num_key_value_heads,
        max_position_embeddings=8192,
        tie_word_embeddings=True,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
        bos_token_id=None,
    )
    torch.manual_seed(seed)
    model = Qwen2ForCausalLM(cfg)
    model.generation_config = GenerationConfig(
        do_sample=False,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
    )
    model.save_pretrained(out)
    tokenizer.save_pretrained(out)
    return out
