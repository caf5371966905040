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
from typing import Any, TypedDict

import numpy as np

from accelbench.errors import BadInputError
from accelbench.loadtests import tokens, traces
from accelbench.loadtests.profiles import Workload


class Prompt(TypedDict, total=False):
    """One prompt as the workload builds it (a file's line has ``text`` and ``osl`` until it is tokenized)
    and as a load process reads it back from its payload (``from_payload``)."""

    input_ids: list[int]
    text: str
    osl: int
    turns: list[str]  # a conversation's questions, the first one's ids in input_ids
    at_s: float  # a trace request's arrival, seconds after the trace's first
    group: int  # a shared-prefix prompt's group


PROMPT_COUNT = 256  # distinct synthetic prompts (rotated); a prompts file is used whole, up to MAX_PROMPTS
MAX_PROMPTS = 20_000


def _tokenizer(workload: Workload) -> str:
    return workload.tokenizer or tokens.DEFAULT_TOKENIZER


def lengths(rng: random.Random, value: int, ratio: float) -> int:
    return value if ratio >= 1 else rng.randint(max(1, int(round(value * ratio))), value)


def synthetic_prompts(workload: Workload, count: int = PROMPT_COUNT, seed: int = 0) -> list[Prompt]:
    """Prompts of plain-word tokens (one token per word, tokens.word_ids): exactly the drawn ISL each."""
    words = tokens.word_ids(_tokenizer(workload))
    rng = random.Random(f"prompts/{seed}")
    out: list[Prompt] = []
    for _ in range(count):
        ids = [rng.choice(words) for _ in range(lengths(rng, workload.isl, workload.isl_range))]
        out.append(
            {
                "input_ids": ids,
                "text": tokens.text_of(_tokenizer(workload), ids),
                "osl": lengths(rng, workload.osl, workload.osl_range),
            }
        )
    return out


def _osl_of(entry: traces.JsonLine, where: str, default: int) -> int:
    for key in ("output_tokens", "max_tokens", "osl", "output_len"):
        if key in entry:
            value = entry[key]
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise BadInputError(f"{where}: {key} must be a whole number >= 1, got {value!r}")
            return value
    return default


def read_jsonl(path: Path, default_osl: int) -> list[Prompt]:
    """``{"prompt": "...", "output_tokens": N}`` per line (output length optional; ``text`` also accepted)."""
    out: list[Prompt] = []
    for where, entry in traces.json_lines(path, " with a prompt"):
        prompt = entry.get("prompt", entry.get("text"))
        if not isinstance(prompt, str) or not prompt.strip():
            raise BadInputError(f'{where}: no "prompt" text')
        out.append({"text": prompt, "osl": _osl_of(entry, where, default_osl)})
    return out


def read_sharegpt(path: Path, data: Any, workload: Workload) -> list[Prompt]:
    """ShareGPT: a list of ``{"conversations": [{"from": "human", "value": ...}, {"from": "gpt", ...}]}``;
    the first human turn is the prompt, the answer's length (in the tokenizer's tokens) the output length,
    as vLLM's and SGLang's benchmarks read it. Entries with fewer than two turns are skipped (as there)."""
    if not isinstance(data, list):
        raise BadInputError(f"{path}: a ShareGPT file is a JSON list of conversations")
    out: list[Prompt] = []
    for number, entry in enumerate(data, start=1):
        turns = entry.get("conversations", entry.get("conversation")) if isinstance(entry, dict) else None
        if not isinstance(turns, list) or not all(
            isinstance(t, dict) and isinstance(t.get("value"), str) for t in turns
        ):
            raise BadInputError(f"{path}: entry {number}: expected conversations of {{from, value}} turns")
        if len(turns) < 2 or not turns[0]["value"].strip():
            continue
        osl = tokens.count(_tokenizer(workload), turns[1]["value"]) or workload.osl
        out.append({"text": turns[0]["value"], "osl": osl})
    return out


def file_prompts(path: str | os.PathLike[str], workload: Workload) -> list[Prompt]:
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
    for prompt, enc in zip(
        prompts, tok.encode_batch([p["text"] for p in prompts], add_special_tokens=False), strict=True
    ):
        prompt["input_ids"] = list(enc.ids)
    return prompts


def make_prompts(
    workload: Workload, prompts_file: str | os.PathLike[str] | None, seed: int = 0
) -> list[Prompt]:
    return file_prompts(prompts_file, workload) if prompts_file else synthetic_prompts(workload, seed=seed)


def as_payloads(prompts: list[Prompt]) -> list[dict[str, np.ndarray]]:
    """Prompts as the classic path's payloads (arrays per name), so they travel to every load process: a
    conversation's questions as ``turns``, a trace request's arrival as ``at_s``."""
    out = []
    for p in prompts:
        payload = {
            "input_ids": np.asarray(p["input_ids"], dtype=np.int64),
            "text": np.array([p["text"].encode("utf-8")], dtype=object),
            "osl": np.array([int(p["osl"])], dtype=np.int64),
        }
        if "turns" in p:
            payload["turns"] = np.array([t.encode("utf-8") for t in p["turns"]], dtype=object)
        if "at_s" in p:
            payload["at_s"] = np.array([float(p["at_s"])], dtype=np.float64)
        out.append(payload)
    return out


def _text(value: Any) -> str:
    return value.decode("utf-8") if isinstance(value, bytes) else str(value)


def from_payload(payload: dict[str, np.ndarray]) -> Prompt:
    out: Prompt = {
        "input_ids": [int(i) for i in payload["input_ids"]],
        "text": _text(payload["text"].reshape(-1)[0]),
        "osl": int(payload["osl"].reshape(-1)[0]),
    }
    if "turns" in payload:
        out["turns"] = [_text(t) for t in payload["turns"].reshape(-1)]
    if "at_s" in payload:
        out["at_s"] = float(payload["at_s"].reshape(-1)[0])
    return out


def longest(prompts: list[Prompt]) -> tuple[int, int]:
    """The longest prompt and the longest output asked, in tokens."""
    return max(len(p["input_ids"]) for p in prompts), max(int(p["osl"]) for p in prompts)


# ---- the traffic teams run: shared prefixes, conversations, traces ----------------------------------------
def shared_prefix_prompts(workload: Workload, count: int = PROMPT_COUNT, seed: int = 0) -> list[Prompt]:
    """Synthetic prompts whose first ``prefix_tokens`` are their group's (prompt i is in group i mod G): a
    system prompt, or G of them, then tokens of its own up to the drawn ISL. After each group's first request
    a prefix cache can reuse ``prefix_tokens`` of each prompt: the target hit rate is prefix_tokens / ISL."""
    words = tokens.word_ids(_tokenizer(workload))
    rng = random.Random(f"prompts/{seed}")
    prefixes = [
        [random.Random(f"prefix/{seed}/{g}").choice(words) for _ in range(workload.prefix_tokens)]
        for g in range(workload.prefix_groups)
    ]
    out: list[Prompt] = []
    for i in range(count):
        isl = lengths(rng, workload.isl, workload.isl_range)
        ids = prefixes[i % workload.prefix_groups] + [
            rng.choice(words) for _ in range(isl - workload.prefix_tokens)
        ]
        out.append(
            {
                "input_ids": ids,
                "text": tokens.text_of(_tokenizer(workload), ids),
                "osl": lengths(rng, workload.osl, workload.osl_range),
                "group": i % workload.prefix_groups,
            }
        )
    return out


def conversations(workload: Workload, count: int = PROMPT_COUNT, seed: int = 0) -> list[Prompt]:
    """Conversations of ``turns`` questions (each of the drawn ISL in new tokens; ``input_ids`` is the first
    one's). A user sends turn t with the whole history: every earlier question and the answer it streamed."""
    words = tokens.word_ids(_tokenizer(workload))
    rng = random.Random(f"conversations/{seed}")
    out: list[Prompt] = []
    for _ in range(count):
        turns = []
        for _turn in range(workload.turns):
            ids = [rng.choice(words) for _ in range(lengths(rng, workload.isl, workload.isl_range))]
            turns.append((ids, tokens.text_of(_tokenizer(workload), ids)))
        out.append(
            {
                "input_ids": turns[0][0],
                "text": turns[0][1],
                "turns": [t for _, t in turns],
                "osl": lengths(rng, workload.osl, workload.osl_range),
            }
        )
    return out


def trace_prompts(workload: Workload, path: str | os.PathLike[str]) -> list[Prompt]:
    """A trace's requests in arrival order: each prompt exactly its input length (equal hash blocks give
    equal tokens), its output length, and ``at_s``, its arrival in seconds after the trace's first."""
    words = tokens.word_ids(_tokenizer(workload))
    out: list[Prompt] = []
    for i, entry in enumerate(traces.read_trace(path)):
        ids = traces.prompt_ids(entry, words, i, workload.trace_block_tokens)
        out.append(
            {
                "input_ids": ids,
                "text": tokens.text_of(_tokenizer(workload), ids),
                "osl": entry.osl,
                "at_s": entry.at_s,
            }
        )
    return out


def build_prompts(
    workload: Workload,
    prompts_file: str | os.PathLike[str] | None,
    trace_file: str | os.PathLike[str] | None,
    seed: int = 0,
) -> list[Prompt]:
    """The prompts a workload sends: a trace's, conversations, shared-prefix ones, a file's, or synthetic."""
    if trace_file is not None:
        return trace_prompts(workload, trace_file)
    if workload.turns > 1:
        return conversations(workload, seed=seed)
    if workload.prefix_tokens:
        return shared_prefix_prompts(workload, seed=seed)
    return make_prompts(workload, prompts_file, seed)
