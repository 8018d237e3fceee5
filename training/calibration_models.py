"""Tiny models that *can* score: overfit the random tiny Qwen2 on (prompt -> response) pairs.

A random model only proves the pipeline runs; a score of 0 from it cannot tell a working grader
from a broken one. Overfitting for a few seconds until the model writes the training answer
format (`The answer is \\boxed{<gold>}.` + EOS) gives a model whose correct score is known
(100%) — the non-zero end-to-end check of STUDY.md §5.5, also used by `campaign calibrate`.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any


def overfit_tiny_model(
    out_dir: str | Path,
    pairs: Sequence[tuple[str, str]],
    *,
    steps: int = 200,
    lr: float = 3e-3,
    seed: int = 0,
    architecture: dict[str, int] | None = None,
) -> Path:
    """Build a tiny model whose tokenizer covers `pairs`, train it on them, save HF-style to `out_dir`.

    Loss is on the response tokens (+ EOS) only, after the ChatML prompt, i.e. exactly what
    lm-eval's HF backend feeds it with `apply_chat_template=True`. `architecture` overrides the tiny model's
    sizes (`build_tiny_model`'s keywords; e.g. a head size vLLM's CPU attention supports).
    """
    if not pairs:
        raise ValueError("overfit_tiny_model needs at least one (prompt, response) pair")
    out = Path(out_dir)
    tok, model = _fresh_model(out, [p + "\n" + r for p, r in pairs], seed, architecture)
    seqs, masks = [], []
    for prompt, response in pairs:
        ctx = tok.apply_chat_template([{"role": "user", "content": prompt}], tokenize=False, add_generation_prompt=True)
        c = tok(ctx, add_special_tokens=False)["input_ids"]
        r = tok(response, add_special_tokens=False)["input_ids"] + [tok.eos_token_id]
        seqs.append(c + r)
        masks.append([0] * len(c) + [1] * len(r))
    _fit_and_save(model, tok.pad_token_id, seqs, masks, out, steps=steps, lr=lr, seed=seed)
    return out


def memorize_texts(out_dir: str | Path, texts: Sequence[str], *, extra_corpus: Sequence[str] = (), steps: int = 300,
                   lr: float = 5e-3, seed: int = 0) -> Path:
    """A tiny model trained with plain next-token loss on `texts` (+ EOS) until it recalls them verbatim; its
    tokenizer also covers `extra_corpus`, text it never trains on: the positive and negative control of the
    memorization probe (`campaign audit memorization`)."""
    if not texts:
        raise ValueError("memorize_texts needs at least one text")
    out = Path(out_dir)
    tok, model = _fresh_model(out, [*texts, *extra_corpus], seed)
    seqs = [tok(t, add_special_tokens=False)["input_ids"] + [tok.eos_token_id] for t in texts]
    _fit_and_save(model, tok.pad_token_id, seqs, [[1] * len(s) for s in seqs], out, steps=steps, lr=lr, seed=seed)
    return out


def _fresh_model(out: Path, corpus: list[str], seed: int, architecture: dict[str, int] | None = None
                 ) -> tuple[Any, Any]:
    """A random tiny Qwen2 whose tokenizer covers `corpus`, saved at `out` and loaded back (tokenizer, model)."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from training.tiny_model import build_tiny_model

    build_tiny_model(out, corpus=corpus, seed=seed, **(architecture or {}))
    return AutoTokenizer.from_pretrained(out), AutoModelForCausalLM.from_pretrained(out, dtype=torch.float32)


def _fit_and_save(model: Any, pad: int, seqs: list[list[int]], masks: list[list[int]], out: Path, *, steps: int,
                  lr: float, seed: int) -> None:
    """Full-batch AdamW on the right-padded sequences, loss where the mask is 1; the model saved to `out`."""
    import torch

    width = max(len(s) for s in seqs)
    ids = torch.tensor([s + [pad] * (width - len(s)) for s in seqs])
    attn = torch.tensor([[1] * len(s) + [0] * (width - len(s)) for s in seqs])
    labels = ids.clone()
    labels[torch.tensor([m + [0] * (width - len(m)) for m in masks]) == 0] = -100
    torch.manual_seed(seed)
    opt = torch.optim.AdamW(model.parameters(), lr=lr)
    model.train()
    for _ in range(steps):
        loss = model(input_ids=ids, attention_mask=attn, labels=labels).loss
        opt.zero_grad()
        loss.backward()
        opt.step()
    model.eval()
    model.save_pretrained(out)


def boxed_answer_pairs(prompts: Sequence[str], golds: Sequence[str]) -> list[tuple[str, str]]:
    """(prompt, `The answer is \\boxed{gold}.`) pairs: the math training answer format."""
    return [(p, f"The answer is \\boxed{{{g}}}.") for p, g in zip(prompts, golds, strict=True)]
