"""Triton's Prometheus endpoint (``/metrics``) parsed with prometheus_client's own parser.

GPU lines (utilization, power, energy, memory) appear only where the server sees a GPU through DCGM;
on a CPU-only host those keys are None rather than 0, so a report never shows a made-up figure.
"""

from __future__ import annotations

from typing import Any

from accelbench.errors import ServerError
from accelbench.serving.http_client import get_text

_GPU = {
    "nv_gpu_utilization": "utilization",
    "nv_gpu_power_usage": "power_w",
    "nv_gpu_power_limit": "power_limit_w",
    "nv_energy_consumption": "energy_j",
    "nv_gpu_memory_used_bytes": "memory_used_bytes",
    "nv_gpu_memory_total_bytes": "memory_total_bytes",
}
_CPU = {
    "nv_cpu_utilization": "cpu_utilization",
    "nv_cpu_memory_used_bytes": "cpu_memory_used_bytes",
    "nv_cpu_memory_total_bytes": "cpu_memory_total_bytes",
}
_MODEL_PREFIX = "nv_inference_"


def parse_metrics(text: str) -> dict:
    """Metrics text → ``{cpu_utilization, cpu_memory_*_bytes, gpus{uuid: {...}}, gpu_utilization (mean),
    gpu_power_w (sum), energy_j (sum), gpu_memory_used_bytes (sum), models{name: {counter: value}}}``.

    Summary metrics add ``models[name]["<metric>_quantiles"] = {"0.5": µs, ...}`` (a sliding window
    on the server, not cumulative); the summary's ``_sum``/``_count`` appear as plain counters.
    """
    from prometheus_client.parser import text_string_to_metric_families

    out: dict[str, Any] = {key: None for key in _CPU.values()}
    gpus: dict[str, dict[str, float]] = {}
    models: dict[str, dict[str, Any]] = {}  # counter -> float; "<metric>_quantiles" -> {quantile: float}
    try:
        families = list(text_string_to_metric_families(text))
    except ValueError as err:
        raise ServerError(f"metrics endpoint returned unparsable text: {err}") from None
    for family in families:
        for sample in family.samples:
            # the parser adds "_total" to counter samples; Triton's own names have none
            name = family.name if sample.name == family.name + "_total" else sample.name
            labels, value = sample.labels, float(sample.value)
            if name in _CPU:
                out[_CPU[name]] = value
            elif name in _GPU:
                gpus.setdefault(labels.get("gpu_uuid", "?"), {})[_GPU[name]] = value
            elif name.startswith(_MODEL_PREFIX) and "model" in labels:
                counters = models.setdefault(labels["model"], {})
                key = name[len(_MODEL_PREFIX) :]
                key = "inference_count" if key == "count" else key
                if "quantile" in labels:  # --metrics-config summary_latencies=true: server-side percentiles
                    counters.setdefault(f"{key}_quantiles", {})[labels["quantile"]] = value
                else:
                    counters[key] = counters.get(key, 0.0) + value  # failure reasons and versions summed
    out["gpus"] = gpus
    out["models"] = models
    out.update(_gpu_totals(gpus))
    return out


def _gpu_totals(gpus: dict[str, dict[str, float]]) -> dict[str, float | None]:
    def total(key: str) -> float | None:
        values = [g[key] for g in gpus.values() if key in g]
        return sum(values) if values else None

    util = [g["utilization"] for g in gpus.values() if "utilization" in g]
    return {
        "gpu_utilization": sum(util) / len(util) if util else None,
        "gpu_power_w": total("power_w"),
        "energy_j": total("energy_j"),
        "gpu_memory_used_bytes": total("memory_used_bytes"),
    }


def scrape_metrics(metrics_url: str, timeout_s: float = 10.0) -> dict:
    """GET and parse the metrics endpoint (``http://host:port/metrics``); http_client's errors otherwise."""
    return parse_metrics(get_text(metrics_url, timeout_s))


def metrics_delta(before: dict, after: dict, model: str | None = None) -> dict:
    """Energy and per-model counter differences between two scrapes (gauges are taken from ``after``)."""
    energy = None
    if before.get("energy_j") is not None and after.get("energy_j") is not None:
        energy = after["energy_j"] - before["energy_j"]
    out: dict[str, Any] = {
        "cpu_utilization": after.get("cpu_utilization"),
        "gpu_utilization": after.get("gpu_utilization"),
        "gpu_power_w": after.get("gpu_power_w"),
        "energy_j": energy,
    }
    if model is not None:
        b = before.get("models", {}).get(model, {})
        a = after.get("models", {}).get(model, {})
        out["model"] = {
            key: a[key] - b.get(key, 0.0)
            for key in a
            if not key.startswith("pending") and not isinstance(a[key], dict)
        }
    return out
