"""Server-side statistics from Triton's statistics extension (``/v2/models/{m}/stats``).

Counters there are cumulative since the server started (durations in ns), so a load step takes a
snapshot before and after and reports the difference as per-request averages in µs.
"""

from __future__ import annotations

from typing import Any

from accelbench.errors import ServerError
from accelbench.serving.http_client import TritonHttp, http_base

STAGES = ("queue", "compute_input", "compute_infer", "compute_output")


def _int(value: Any) -> int:
    # int64 counters may arrive as JSON strings (protobuf JSON mapping) or numbers
    return int(value or 0)


def normalize_stats(doc: dict, model: str) -> dict:
    """One model's statistics from a stats response, summed over its versions."""
    entries = [e for e in doc.get("model_stats", []) if e.get("name") == model]
    if not entries:
        raise ServerError(f"no statistics for model {model!r} in the server's answer")
    out: dict[str, Any] = {"model": model, "inference_count": 0, "execution_count": 0, "inference_stats": {}}
    batches: dict[int, dict[str, int]] = {}
    for entry in entries:
        out["inference_count"] += _int(entry.get("inference_count"))
        out["execution_count"] += _int(entry.get("execution_count"))
        for key, stat in (entry.get("inference_stats") or {}).items():
            acc = out["inference_stats"].setdefault(key, {"count": 0, "ns": 0})
            acc["count"] += _int(stat.get("count"))
            acc["ns"] += _int(stat.get("ns"))
        for batch in entry.get("batch_stats") or []:
            size = _int(batch.get("batch_size"))
            acc = batches.setdefault(size, {"count": 0, "compute_infer_ns": 0})
            infer = batch.get("compute_infer") or {}
            acc["count"] += _int(infer.get("count"))
            acc["compute_infer_ns"] += _int(infer.get("ns"))
    out["batch_stats"] = {str(k): v for k, v in sorted(batches.items())}
    return out


def stats_snapshot(http_url: str, model: str) -> dict:
    """Cumulative statistics of ``model`` now (see :func:`normalize_stats` for the shape)."""
    return normalize_stats(TritonHttp(http_base(http_url)).model_stats(model), model)


def _avg_us(before: dict, after: dict, key: str) -> float | None:
    b = before["inference_stats"].get(key, {"count": 0, "ns": 0})
    a = after["inference_stats"].get(key, {"count": 0, "ns": 0})
    count = a["count"] - b["count"]
    return (a["ns"] - b["ns"]) / count / 1000.0 if count > 0 else None


def stats_delta(before: dict, after: dict) -> dict:
    """Per-step server statistics between two snapshots.

    Keys: ``queue_us``, ``compute_input_us``, ``compute_infer_us``, ``compute_output_us`` and
    ``request_us`` (averages per successful request; None when no request completed), ``success_count``,
    ``fail_count``, ``inference_count``, ``execution_count``, ``mean_batch_size`` (inferences per model
    execution), ``batch_histogram`` (executed batch size → executions) and ``compute_infer_us_by_batch``.
    """
    if before.get("model") != after.get("model"):
        raise ValueError("snapshots of different models")

    def diff(key: str, field: str = "count") -> int:
        return after["inference_stats"].get(key, {}).get(field, 0) - before["inference_stats"].get(
            key, {}
        ).get(field, 0)

    inferences = after["inference_count"] - before["inference_count"]
    executions = after["execution_count"] - before["execution_count"]
    histogram: dict[str, int] = {}
    per_batch_us: dict[str, float] = {}
    for size, stat in after["batch_stats"].items():
        old = before["batch_stats"].get(size, {"count": 0, "compute_infer_ns": 0})
        count = stat["count"] - old["count"]
        if count > 0:
            histogram[size] = count
            per_batch_us[size] = (stat["compute_infer_ns"] - old["compute_infer_ns"]) / count / 1000.0
    result: dict[str, Any] = {f"{stage}_us": _avg_us(before, after, stage) for stage in STAGES}
    result.update(
        request_us=_avg_us(before, after, "success"),
        success_count=diff("success"),
        fail_count=diff("fail"),
        inference_count=inferences,
        execution_count=executions,
        mean_batch_size=inferences / executions if executions > 0 else None,
        batch_histogram=histogram,
        compute_infer_us_by_batch=per_batch_us,
    )
    return result
