"""Tiny models that *can* score: overfit the random tiny Qwen2 on (prompt -> response) pairs.

A random model only proves the pipeline runs; a score of 0 from it cannot tell a working grader
from a broken one. Overfitting for a few seconds until the model writes the training answer
format (`The answer is \\boxed{<gold>}.` + EOS) gives a model whose correct score is known
(100%) — the non-zero end-to-end check of STUDY.md §5.5, also used by `campaign calibrate`.
"""

from __future__ import annotations

from pathlib import Path
from collections.abc import Sequence


def overfit_tiny_model(
    out_dir: str | Path,
    pairs: Sequence[tuple[str, str]],
    *,
    steps: int = 200,
    lr: float = 3e-3,
    seed: int = 0,
) -> Path:
    """Build a tiny model whose tokenizer covers `pairs`, train it on them, save HF-style to `out_dir`.

    Loss is on the response tokens (+ EOS) only, after the ChatML prompt, i.e. exactly what
    lm-eval's HF backend feeds it with `apply_chat_template=True`.
    """
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from training.tiny_model import build_tiny_model

    if not pairs:
        raise ValueError("overfit_tiny_model needs at least one (prompt, response) pair")
    out = Path(out_dir)
    corpus = [p + "\n" + r for p, r in pairs]
    build_tiny_model(out, corpus=corpus, seed=seed)
    tok = AutoTokenizer.from_pretrained(out)
    model = AutoModelForCausalLM.from_pretrained(out, dtype=torch.float32)
    seqs, masks = [], []
    for prompt, response in pairs:
        ctx = tok.apply_chat_template([{"role": "user", "content": prompt}], tokenize=False, add_generation_prompt=True)
        c = tok(ctx, add_special_tokens=False)["input_ids"]
        r = tok(response, add_special_tokens=False)["input_ids"] + [tok.eos_token_id]
        seqs.append(c + r)
        masks.append([0] * len(c) + [1] * len(r))
    width = max(len(s) for s in seqs)
    pad = tok.pad_token_id
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
    return out


def boxed_answer_pairs(prompts: Sequence[str], golds: Sequence[str]) -> list[tuple[str, str]]:
    """(prompt, `The answer is \\boxed{gold}.`) pairs: the math training answer format."""
    return [(p, f"The answer is \\boxed{{{g}}}.") for p, g in zip(prompts, golds, strict=True)]
