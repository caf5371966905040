"""Request traces replayed at their own timestamps: the two public formats teams have.

- Mooncake-style JSONL (kvcache-ai/Mooncake ``mooncake_trace.jsonl``; also AIPerf's ``mooncake_trace``): one
  ``{"timestamp": ms, "input_length": N, "output_length": M, "hash_ids": [..]}`` per line. Each hash id names
  a block of ``block_tokens`` (512) prompt tokens; two requests with the same leading ids share that prefix.
- BurstGPT CSV (HPMLL/BurstGPT): a header with ``Timestamp`` (s), ``Request tokens`` and ``Response tokens``
  (``Model``, ``Total tokens``, ``Log Type`` are read past). No prefix information: every prompt is its own.

Pure apart from reading the file; every bad line is one line naming the file and line. Arrival times are
seconds from the trace's first request; ``prompts`` turns the entries into prompts of exactly their input
length, built from the tokenizer's plain-word tokens (one token per word), equal blocks for equal hash ids.
"""

from __future__ import annotations

import csv
import json
import os
import random
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from accelbench.errors import BadInputError
from accelbench.loadtests.jsonwire import UserJson

JsonLine = UserJson  # one line of a prompts file or a Mooncake trace, as written

BLOCK_TOKENS = 512  # Mooncake's hash block size
MAX_ENTRIES = 20_000


@dataclass(frozen=True)
class TraceEntry:
    """One request of a trace: its arrival (s after the first), prompt and output lengths, prefix blocks."""

    at_s: float
    isl: int
    osl: int
    hash_ids: tuple[int, ...] = ()


def _whole(value: Any, where: str, key: str, minimum: int) -> int:
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if not isinstance(value, int) or isinstance(value, bool) or value < minimum:
        raise BadInputError(f"{where}: {key} must be a whole number >= {minimum}, got {value!r}")
    return value


def _time(value: Any, where: str, key: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value != value or value < 0:
        raise BadInputError(f"{where}: {key} must be a number >= 0, got {value!r}")
    return float(value)


def json_lines(path: Path, what: str = "") -> Iterator[tuple[str, JsonLine]]:
    """Each non-blank line of a JSONL file as (``FILE:LINE``, its object); one line naming the bad one."""
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
            row = json.loads(line)
        except ValueError as err:
            raise BadInputError(f"{where}: not a JSON object ({err})") from None
        if not isinstance(row, dict):
            raise BadInputError(f"{where}: expected a JSON object{what}, got {type(row).__name__}")
        yield where, row


def read_mooncake(path: Path) -> list[TraceEntry]:
    out = []
    for where, row in json_lines(path):
        missing = [k for k in ("timestamp", "input_length", "output_length") if k not in row]
        if missing:
            raise BadInputError(
                f"{where}: missing {', '.join(missing)} (Mooncake trace: timestamp ms, "
                "input_length, output_length, hash_ids)"
            )
        ids = row.get("hash_ids") or []
        if not isinstance(ids, list) or not all(isinstance(i, int) and not isinstance(i, bool) for i in ids):
            raise BadInputError(f"{where}: hash_ids must be a list of whole numbers")
        out.append(
            TraceEntry(
                _time(row["timestamp"], where, "timestamp") / 1000.0,
                _whole(row["input_length"], where, "input_length", 1),
                _whole(row["output_length"], where, "output_length", 1),
                tuple(ids),
            )
        )
    return out


def read_burstgpt(path: Path) -> list[TraceEntry]:
    with open(path, newline="", encoding="utf-8") as handle:
        reader = csv.DictReader(handle)
        need = ("Timestamp", "Request tokens", "Response tokens")
        missing = [k for k in need if k not in (reader.fieldnames or [])]
        if missing:
            raise BadInputError(
                f"{path}: a BurstGPT CSV needs the columns {', '.join(need)} (missing {', '.join(missing)})"
            )
        out = []
        for number, row in enumerate(reader, start=2):
            where = f"{path}:{number}"
            try:
                at = float(row["Timestamp"])
                isl, osl = int(float(row["Request tokens"])), int(float(row["Response tokens"]))
            except (TypeError, ValueError):
                raise BadInputError(
                    f"{where}: Timestamp, Request tokens and Response tokens must be numbers"
                ) from None
            if isl < 1 or osl < 1:  # BurstGPT logs failed requests with 0 response tokens: not replayable
                continue
            out.append(TraceEntry(_time(at, where, "Timestamp"), isl, osl))
    return out


def read_trace(path: str | os.PathLike[str]) -> list[TraceEntry]:
    """A Mooncake JSONL or BurstGPT CSV trace (by its first character), sorted by arrival, times from 0."""
    path = Path(path)
    if not path.is_file():
        raise BadInputError(f"--trace {path}: no such file")
    head = path.read_bytes()[:1].lstrip()
    entries = read_mooncake(path) if head.startswith(b"{") or path.suffix == ".jsonl" else read_burstgpt(path)
    if len(entries) < 2:
        raise BadInputError(f"--trace {path}: fewer than two requests to replay")
    entries = sorted(entries, key=lambda e: e.at_s)[:MAX_ENTRIES]
    t0 = entries[0].at_s
    entries = [TraceEntry(e.at_s - t0, e.isl, e.osl, e.hash_ids) for e in entries]
    if entries[-1].at_s <= 0:
        raise BadInputError(f"--trace {path}: every request has the same timestamp; nothing to replay")
    return entries


def own_rate_rps(entries: list[TraceEntry]) -> float:
    """The trace's own mean arrival rate: (n - 1) arrivals over its span."""
    return (len(entries) - 1) / entries[-1].at_s


def block(words: tuple[int, ...], hash_id: int, size: int) -> list[int]:
    """The ``size`` tokens hash block ``hash_id`` stands for: the same id, the same tokens."""
    rng = random.Random(f"block/{hash_id}")
    return [rng.choice(words) for _ in range(size)]


def prompt_ids(entry: TraceEntry, words: tuple[int, ...], index: int, block_tokens: int) -> list[int]:
    """Exactly ``entry.isl`` tokens: its hash blocks in order, then (past them) tokens of its own."""
    ids: list[int] = []
    for hash_id in entry.hash_ids:
        if len(ids) >= entry.isl:
            break
        ids += block(words, hash_id, block_tokens)
    rng = random.Random(f"trace/{index}")
    ids += [rng.choice(words) for _ in range(entry.isl - len(ids))]
    return ids[: entry.isl]
