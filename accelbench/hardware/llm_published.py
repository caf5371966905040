"""Published generative (LLM) results per catalog target: the ``[[llm_points]]`` of ``published_results.toml``.

Each point is an output-token rate someone else measured and published (NVIDIA's TensorRT-LLM performance
overview, TensorRT Edge-LLM's Jetson benchmarks, ...), with the model card, precision, ISL/OSL, batch (absent for
a maximum-throughput run), tensor-parallel degree, an optional measured prefill, software, source URL and date.
``accelbench/reports/llm_projection.py`` fits the efficiencies on them.
"""

from __future__ import annotations

import functools
import sys
from dataclasses import dataclass
from importlib import resources

from accelbench.errors import BadInputError
from accelbench.hardware import catalog_schema as schema
from accelbench.hardware.llm_memory import KV_DTYPE_BYTES, WEIGHT_FORMATS

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised on 3.10 only
    import tomli as tomllib

LLM_POINT_KEYS: dict[str, tuple[str, bool]] = {
    "target": ("str", True),
    "model": ("str", True),
    "precision": ("str", True),
    "kv_dtype": ("str", False),
    "isl": ("int", True),
    "osl": ("int", True),
    "batch": ("int", False),
    "max_batch": ("int", False),
    "tp": ("int", False),
    "output_tokens_per_s": ("pos", True),
    "prefill_ms": ("pos", False),
    "prefill_tokens": ("int", False),
    "software": ("str", True),
    "source": ("str", True),
    "date": ("str", True),
    "note": ("str", False),
    "family": ("str", False),
}


@dataclass(frozen=True)
class LlmPoint:
    target: str
    model: str
    precision: str
    isl: int
    osl: int
    output_tokens_per_s: float
    software: str
    source: str
    date: str
    kv_dtype: str = "fp16"
    batch: int | None = None  # None: a maximum-throughput run (batch = what the memory holds)
    # a maximum-throughput run whose engine was compiled for at most this many sequences (Neuron graphs have a
    # fixed batch): its steady batch is the smaller of this and what the memory holds
    max_batch: int | None = None
    tp: int = 1
    prefill_ms: float | None = None
    prefill_tokens: int | None = None
    note: str = ""
    # the published source family (one table of one release: "trtllm-v0.14", "trtllm-v1.0", "edge-llm", ...):
    # bench/projection_check.py fits without a family and judges the fit on it
    family: str = ""

    @property
    def label(self) -> str:
        b = (
            f"batch {self.batch}"
            if self.batch
            else f"max throughput (batch <= {self.max_batch})"
            if self.max_batch
            else "max throughput"
        )
        return f"{self.target} {self.model} {self.precision} {self.isl}/{self.osl} {b}"


def load_llm_points(
    target_ids: frozenset[str], text: str | None = None, label: str = "published_results.toml (packaged)"
) -> tuple[LlmPoint, ...]:
    """The validated ``[[llm_points]]`` (every point sourced and dated, its target known)."""
    if text is None:
        return _packaged(target_ids)
    return _load(target_ids, text, label)


@functools.lru_cache(maxsize=8)
def _packaged(target_ids: frozenset[str]) -> tuple[LlmPoint, ...]:
    text = resources.files("accelbench.hardware").joinpath("published_results.toml").read_text("utf-8")
    return _load(target_ids, text, "published_results.toml (packaged)")


def _load(target_ids: frozenset[str], text: str, label: str) -> tuple[LlmPoint, ...]:
    try:
        raw = tomllib.loads(text)
    except tomllib.TOMLDecodeError as err:
        raise BadInputError(f"{label}: TOML syntax error: {err}") from None

    def origin(_path):
        return label

    points = raw.get("llm_points", [])
    if not isinstance(points, list):
        raise schema.fail(origin, ("llm_points",), "must be an array of tables ([[llm_points]])")
    out = []
    for index, point in enumerate(points):
        path = (f"llm_points[{index}]",)
        schema.check_table(point, LLM_POINT_KEYS, path, origin, partial=False)
        if point["target"] not in target_ids:
            raise schema.fail(origin, (*path, "target"), f"names unknown target {point['target']!r}")
        if point["precision"] not in WEIGHT_FORMATS:
            raise schema.fail(origin, (*path, "precision"), f"use one of {', '.join(WEIGHT_FORMATS)}")
        if point.get("kv_dtype", "fp16") not in KV_DTYPE_BYTES:
            raise schema.fail(origin, (*path, "kv_dtype"), f"use one of {', '.join(KV_DTYPE_BYTES)}")
        if "://" not in point["source"]:
            raise schema.fail(origin, (*path, "source"), "must be the URL the figure was read from")
        date = point["date"]
        if len(date) < 7 or not date[:4].isdigit() or date[4] != "-" or len(date) > 10:
            raise schema.fail(
                origin, (*path, "date"), f"must be the source's date as YYYY-MM[-DD], got {date!r}"
            )
        if "batch" in point and "max_batch" in point:
            raise schema.fail(
                origin,
                path,
                "batch (a fixed batch) and max_batch (a maximum-throughput run) exclude each other",
            )
        if ("prefill_ms" in point) != ("prefill_tokens" in point):
            raise schema.fail(origin, path, "prefill_ms and prefill_tokens go together")
        out.append(LlmPoint(**{**point, "output_tokens_per_s": float(point["output_tokens_per_s"])}))
    return tuple(out)
