"""Per-request latencies in completion order, packed for transport from load processes (never stored).

Each load process keeps (completion time since its measured window opened, latency) per successful request;
the statistics of a step (warm-up truncation, order-statistic intervals, batch means, drift) need them in
completion order, which no histogram keeps. They travel as zlib-compressed int64 µs pairs in base64 and
are merged by completion time; the result document keeps only their summaries.
"""

from __future__ import annotations

import base64
import zlib
from array import array
from collections.abc import Iterable

import numpy as np


def encode(done_us: array[int], latency_us: array[int]) -> str:
    pairs = np.stack([np.frombuffer(done_us, dtype=np.int64), np.frombuffer(latency_us, dtype=np.int64)])
    return base64.b64encode(zlib.compress(pairs.astype("<i8").tobytes(), 6)).decode("ascii")


def decode(text: str | None) -> tuple[np.ndarray, np.ndarray]:
    """(completion seconds, latency µs) of one encoded block; empty arrays for None."""
    if not text:
        return np.zeros(0), np.zeros(0)
    pairs = np.frombuffer(zlib.decompress(base64.b64decode(text)), dtype="<i8").reshape(2, -1)
    return pairs[0] / 1e6, pairs[1].astype(float)


def merge(encoded: Iterable[str | None]) -> tuple[np.ndarray, np.ndarray]:
    """Every process's samples in one completion-ordered pair of arrays."""
    parts = [decode(text) for text in encoded]
    done = np.concatenate([p[0] for p in parts]) if parts else np.zeros(0)
    lat = np.concatenate([p[1] for p in parts]) if parts else np.zeros(0)
    order = np.argsort(done, kind="stable")
    return done[order], lat[order]


def merge_encoded(encoded: Iterable[str | None]) -> str | None:
    """The merged samples, encoded again (what the runner hands to the caller's process)."""
    done, lat = merge(encoded)
    if not len(done):
        return None
    return encode(array("q", np.round(done * 1e6).astype(np.int64)), array("q", lat.astype(np.int64)))
