"""The prompts of a generative sweep (its ``profiles.Workload``): synthetic ones of ISL tokens from the
tokenizer's words, a JSONL file, or a ShareGPT file.

Pure apart from reading the prompts file. Prompts travel to the load processes as payloads of the classic
path (``input_ids``, ``text``, ``osl`` arrays; sweep.write_payloads), so distributed workers get them too.
"""

from __future__ import annotations

import json
import os
import random
from pathlib import Path
from typing import Any

import numpy as np

from accelbench.errors import BadInputError
from accelbench.loadtests import tokens
from accelbench.loadtests.profiles import Workload

PROMPT_COUNT = 256  # distinct synthetic prompts (rotated); a prompts file is used whole, up to MAX_PROMPTS
MAX_PROMPTS = 20_000


def _tokenizer(workload: Workload) -> str:
    return workload.tokenizer or tokens.DEFAULT_TOKENIZER


def lengths(rng: random.Random, value: int, ratio: float) -> int:
    return value if ratio >= 1 else rng.randint(max(1, int(round(value * ratio))), value)


def synthetic_prompts(workload: Workload, count: int = PROMPT_COUNT, seed: int = 0) -> list[dict[str, Any]]:
    """Prompts of plain-word tokens (one token per word, tokens.word_ids): exactly the drawn ISL each."""
    words = tokens.word_ids(_tokenizer(workload))
    rng = random.Random(f"prompts/{seed}")
    out = []
    for _ in range(count):
        ids = [rng.choice(words) for _ in range(lengths(rng, workload.isl, workload.isl_range))]
        out.append({"input_ids": ids, "text": tokens.text_of(_tokenizer(workload), ids),
                    "osl": lengths(rng, workload.osl, workload.osl_range)})  # fmt: skip
    return out


def _osl_of(entry: dict[str, Any], where: str, default: int) -> int:
    for key in ("output_tokens", "max_tokens", "osl", "output_len"):
        if key in entry:
            value = entry[key]
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise BadInputError(f"{where}: {key} must be a whole number >= 1, got {value!r}")
            return value
    return default


def read_jsonl(path: Path, default_osl: int) -> list[dict[str, Any]]:
    """``{"prompt": "...", "output_tokens": N}`` per line (output length optional; ``text`` also accepted)."""
    out = []
    with open(path, encoding="utf-8", errors="strict") as handle:
        try:
            lines = list(handle)
        except UnicodeDecodeError as err:
            raise BadInputError(f"{path}: not UTF-8 text ({err.reason})") from None
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        where = f"{path}:{number}"
        try:
            entry = json.loads(line)
        except ValueError as err:
            raise BadInputError(f"{where}: not a JSON object ({err})") from None
        if not isinstance(entry, dict):
            raise BadInputError(f"{where}: expected a JSON object with a prompt, got {type(entry).__name__}")
        prompt = entry.get("prompt", entry.get("text"))
        if not isinstance(prompt, str) or not prompt.strip():
            raise BadInputError(f'{where}: no "prompt" text')
        out.append({"text": prompt, "osl": _osl_of(entry, where, default_osl)})
    return out


def read_sharegpt(path: Path, data: Any, workload: Workload) -> list[dict[str, Any]]:
    """ShareGPT: a list of ``{"conversations": [{"from": "human", "value": ...}, {"from": "gpt", ...}]}``;
    the first human turn is the prompt, the answer's length (in the tokenizer's tokens) the output length,
    as vLLM's and SGLang's benchmarks read it. Entries with fewer than two turns are skipped (as there)."""
    if not isinstance(data, list):
        raise BadInputError(f"{path}: a ShareGPT file is a JSON list of conversations")
    out = []
    for number, entry in enumerate(data, start=1):
        turns = entry.get("conversations", entry.get("conversation")) if isinstance(entry, dict) else None
        if not isinstance(turns, list) or not all(isinstance(t, dict) and isinstance(t.get("value"), str)
                                                  for t in turns):  # fmt: skip
            raise BadInputError(f"{path}: entry {number}: expected conversations of {{from, value}} turns")
        if len(turns) < 2 or not turns[0]["value"].strip():
            continue
        osl = tokens.count(_tokenizer(workload), turns[1]["value"]) or workload.osl
        out.append({"text": turns[0]["value"], "osl": osl})
    return out


def file_prompts(path: str | os.PathLike, workload: Workload) -> list[dict[str, Any]]:
    """Prompts of a JSONL or ShareGPT file, tokenized; one line naming the file (and line) when bad."""
    path = Path(path)
    if not path.is_file():
        raise BadInputError(f"--prompts {path}: no such file")
    head = path.read_bytes()[:4096].lstrip()
    if head.startswith(b"[") and path.suffix.lower() != ".jsonl":  # a ShareGPT JSON list
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except ValueError as err:
            raise BadInputError(f"{path}: not a JSON file ({err})") from None
        prompts = read_sharegpt(path, data, workload)
    else:
        prompts = read_jsonl(path, workload.osl)
    if not prompts:
        raise BadInputError(f"--prompts {path}: no prompts in it")
    prompts = prompts[:MAX_PROMPTS]
    tok = tokens.load_tokenizer(_tokenizer(workload))
    for prompt, enc in zip(prompts, tok.encode_batch([p["text"] for p in prompts], add_special_tokens=False),
                           strict=True):  # fmt: skip
        prompt["input_ids"] = list(enc.ids)
    return prompts


def make_prompts(
    workload: Workload, prompts_file: str | os.PathLike | None, seed: int = 0
) -> list[dict[str, Any]]:
    return file_prompts(prompts_file, workload) if prompts_file else synthetic_prompts(workload, seed=seed)


def as_payloads(prompts: list[dict[str, Any]]) -> list[dict[str, np.ndarray]]:
    """Prompts as the classic path's payloads (arrays per name), so they travel to every load process."""
    return [
        {
            "input_ids": np.asarray(p["input_ids"], dtype=np.int64),
            "text": np.array([p["text"].encode("utf-8")], dtype=object),
            "osl": np.array([int(p["osl"])], dtype=np.int64),
        }
        for p in prompts
    ]


def from_payload(payload: dict[str, np.ndarray]) -> dict[str, Any]:
    text = payload["text"].reshape(-1)[0]
    return {
        "input_ids": [int(i) for i in payload["input_ids"]],
        "text": text.decode("utf-8") if isinstance(text, bytes) else str(text),
        "osl": int(payload["osl"].reshape(-1)[0]),
    }


def longest(prompts: list[dict[str, Any]]) -> tuple[int, int]:
    """The longest prompt and the longest output asked, in tokens."""
    return max(len(p["input_ids"]) for p in prompts), max(int(p["osl"]) for p in prompts)
