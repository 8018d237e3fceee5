"""Is a folder a loadable HF model? Checked before any model is loaded, by every command that takes one (`eval`,
`audit memorization`, `data difficulty`), so a bad folder is exit 2 naming the file and the fix.

Why: random bytes in `model.safetensors` were a SafetensorError traceback after the suite and data were read, and
a folder without tokenizer files probed nothing, said "0 probed" and exited 0 (issue 59). A safetensors file's
header is read (its tensor names and shapes: no tensor data, no pickle); `*.bin` weights are torch pickles and
are left to the loader (transformers loads them with weights_only)."""

from __future__ import annotations

from pathlib import Path

# any of these makes a tokenizer transformers can load (a fast tokenizer, a config naming one, or a BPE/SP vocab)
TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "vocab.json", "tokenizer.model")


def model_dir_problem(model: Path, option: str) -> str | None:
    """A one-line problem naming `option`, the file and the fix, or None when `model` looks loadable."""
    if not model.is_dir():
        return (f"{option} {model}: no such directory; pass an HF-format model directory (config.json, weights, "
                "tokenizer), e.g. a checkpoint `campaign train` wrote or a local snapshot from `huggingface-cli "
                "download MODEL --local-dir DIR`")
    if not (model / "config.json").is_file():
        return f"{option} {model}: not an HF model directory (no config.json); pass the folder that holds it"
    tensors = sorted(model.glob("*.safetensors"))
    if not tensors and not any(model.glob("*.bin")):
        return f"{option} {model}: no weights (*.safetensors or *.bin); pass a complete model directory"
    for f in tensors:
        if (why := _unreadable_safetensors(f)) is not None:
            return f"{option} {model}: {f.name} is not a readable safetensors file ({why}); re-save or re-download it"
    if not any((model / n).is_file() for n in TOKENIZER_FILES):
        return (f"{option} {model}: no tokenizer (none of {', '.join(TOKENIZER_FILES)}); save the tokenizer beside "
                "the weights (`tokenizer.save_pretrained(DIR)`)")
    return None


def _unreadable_safetensors(path: Path) -> str | None:
    from safetensors import safe_open

    try:
        with safe_open(str(path), framework="pt") as fh:
            fh.keys()
    except Exception as e:  # SafetensorError, OSError: the header could not be read
        return f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else 'unreadable header'}"
    return None


__all__ = ["TOKENIZER_FILES", "model_dir_problem"]
