"""Rollouts with HF `generate` and per-token log-probabilities of the sampled responses.

Why a module of its own: the GRPO loop, the held-out evaluation and the warm-up all need the same
prompt encoding (chat template, left padding) and the same response masking (up to and including
the first eos), so the log-probs used in the loss line up with what was sampled.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch


@dataclass
class Rollout:
    """B = prompts × n sequences. Tensors are (B, P) for prompts and (B, L) for responses."""

    prompt_ids: torch.Tensor
    prompt_mask: torch.Tensor
    response_ids: torch.Tensor
    response_mask: torch.Tensor  # float, 1 up to and including the first eos
    truncated: torch.Tensor  # (B,) bool: no eos within max_new_tokens
    texts: list[str]

    @property
    def input_ids(self) -> torch.Tensor:
        return torch.cat([self.prompt_ids, self.response_ids], dim=1)

    @property
    def attention_mask(self) -> torch.Tensor:
        return torch.cat([self.prompt_mask, self.response_mask.to(self.prompt_mask.dtype)], dim=1)


def encode_prompts(tokenizer, messages: list[list[dict]]) -> tuple[torch.Tensor, torch.Tensor]:
    """Chat-template the user messages and left-pad them (generation continues at the right edge)."""
    texts = [tokenizer.apply_chat_template(m, tokenize=False, add_generation_prompt=True) for m in messages]
    tokenizer.padding_side = "left"
    enc = tokenizer(texts, return_tensors="pt", padding=True, add_special_tokens=False)
    return enc["input_ids"], enc["attention_mask"]


def response_mask_from_ids(response_ids: torch.Tensor, eos_id: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Mask of valid response tokens (through the first eos) and whether each row was truncated."""
    is_eos = response_ids == eos_id
    seen_before = (is_eos.cumsum(dim=1) - is_eos.long()) > 0  # an eos occurred strictly earlier
    mask = (~seen_before).float()
    truncated = ~is_eos.any(dim=1)
    return mask, truncated


@torch.no_grad()
def generate(
    model,
    tokenizer,
    messages: list[list[dict]],
    *,
    n: int,
    max_new_tokens: int,
    do_sample: bool = True,
    temperature: float = 1.0,
    top_p: float = 1.0,
    top_k: int = 0,
    seed: int | None = None,
) -> Rollout:
    """`n` samples per prompt (rows grouped: prompt i occupies rows i*n .. i*n+n-1)."""
    prompt_ids, prompt_mask = encode_prompts(tokenizer, messages)
    prompt_ids = prompt_ids.repeat_interleave(n, dim=0)
    prompt_mask = prompt_mask.repeat_interleave(n, dim=0)
    if seed is not None:
        torch.manual_seed(seed)  # HF sampling draws from the global generator
    kwargs = (dict(do_sample=True, temperature=temperature, top_p=top_p, top_k=top_k) if do_sample
              else dict(do_sample=False))
    out = model.generate(
        input_ids=prompt_ids,
        attention_mask=prompt_mask,
        max_new_tokens=max_new_tokens,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
        **kwargs,
    )
    response_ids = out[:, prompt_ids.shape[1] :]
    if response_ids.shape[1] < max_new_tokens:  # every row stopped early: pad to a fixed width
        pad = torch.full((response_ids.shape[0], max_new_tokens - response_ids.shape[1]), tokenizer.pad_token_id)
        response_ids = torch.cat([response_ids, pad], dim=1)
    mask, truncated = response_mask_from_ids(response_ids, tokenizer.eos_token_id)
    response_ids = torch.where(mask.bool(), response_ids, torch.full_like(response_ids, tokenizer.pad_token_id))
    texts = tokenizer.batch_decode(response_ids, skip_special_tokens=True)
    return Rollout(prompt_ids, prompt_mask, response_ids, mask, truncated, texts)


def response_log_probs(model, input_ids: torch.Tensor, attention_mask: torch.Tensor, response_len: int) -> torch.Tensor:
    """(B, L) log p(token) of the last `response_len` tokens, positions matching left-padded generate."""
    position_ids = (attention_mask.long().cumsum(dim=1) - 1).clamp(min=0)
    logits = model(input_ids=input_ids, attention_mask=attention_mask, position_ids=position_ids).logits
    logits = logits[:, -response_len - 1 : -1, :].float()
    targets = input_ids[:, -response_len:]
    return torch.log_softmax(logits, dim=-1).gather(-1, targets.unsqueeze(-1)).squeeze(-1)


def take_rows(rolls: list[Rollout], rows: list[torch.Tensor], pad_id: int) -> Rollout:
    """The rows `rows[i]` of each rollout `rolls[i]`, stacked into one (dynamic sampling's kept groups from several
    rounds): prompts left-padded to the widest round (positions come from the mask, so extra left padding changes
    no log-prob), responses right-padded to the widest."""
    width_p = max(r.prompt_ids.shape[1] for r in rolls)
    width_r = max(r.response_ids.shape[1] for r in rolls)
    parts: list[tuple[torch.Tensor, ...]] = []
    texts: list[str] = []
    for roll, idx in zip(rolls, rows, strict=True):
        lp, rp = width_p - roll.prompt_ids.shape[1], width_r - roll.response_ids.shape[1]
        parts.append((torch.nn.functional.pad(roll.prompt_ids[idx], (lp, 0), value=pad_id),
                      torch.nn.functional.pad(roll.prompt_mask[idx], (lp, 0), value=0),
                      torch.nn.functional.pad(roll.response_ids[idx], (0, rp), value=pad_id),
                      torch.nn.functional.pad(roll.response_mask[idx], (0, rp), value=0.0),
                      roll.truncated[idx]))
        texts += [roll.texts[int(i)] for i in idx]
    cols = [torch.cat([p[k] for p in parts], dim=0) for k in range(5)]
    return Rollout(cols[0], cols[1], cols[2], cols[3], cols[4], texts)
