"""Roofline bounds: how fast a model could possibly run on a target, from FLOPs, bytes moved and peaks.

Pure functions, units in every name. The numbers are *projections* (upper bounds on throughput, lower
bounds on latency); reports label them so and never mix them with measurements.

Bytes moved by a batch of ``b`` ≈ ``weight_bytes + b × activation_bytes_per_inference`` (the weights are
read once per batch), which is why larger batches raise arithmetic intensity.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import Any

from accelbench.errors import BadInputError
from accelbench.hardware.catalog import HardwareTarget

TERA = 1e12
GIGA = 1e9


@dataclass(frozen=True)
class RooflinePoint:
    target_id: str
    precision: str
    batch: int
    flops_per_batch: float
    bytes_per_batch: float
    peak_flops_per_s: float
    bandwidth_bytes_per_s: float
    intensity: float  # FLOP/byte of this batch
    ridge: float  # FLOP/byte where the target turns compute-bound
    bound: str  # "compute" | "memory"
    latency_lower_bound_s: float  # per batch
    throughput_upper_bound_ips: float  # inferences per second
    kind: str = "projected-roofline"

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        # JSON has no infinity: a batch that moves no bytes has unbounded intensity
        for key in ("intensity", "throughput_upper_bound_ips"):
            if math.isinf(data[key]):
                data[key] = None
        return data


def _non_negative(name: str, value: float) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or math.isnan(value) or value < 0:
        raise BadInputError(f"{name} must be a number >= 0, got {value!r}")
    return float(value)


def _positive(name: str, value: float) -> float:
    if _non_negative(name, value) == 0:
        raise BadInputError(f"{name} must be > 0, got {value!r}")
    return float(value)


def arithmetic_intensity_flop_per_byte(flops: float, bytes_moved: float) -> float:
    """FLOPs per byte moved; infinite when nothing is moved (pure compute)."""
    flops = _non_negative("flops", flops)
    bytes_moved = _non_negative("bytes_moved", bytes_moved)
    if bytes_moved == 0:
        return math.inf if flops > 0 else 0.0
    return flops / bytes_moved


def ridge_point_flop_per_byte(peak_flops_per_s: float, bandwidth_bytes_per_s: float) -> float:
    """Intensity at which the compute roof meets the memory roof."""
    return _positive("peak_flops_per_s", peak_flops_per_s) / _positive(
        "bandwidth_bytes_per_s", bandwidth_bytes_per_s
    )


def attainable_flops_per_s(intensity: float, peak_flops_per_s: float, bandwidth_bytes_per_s: float) -> float:
    """The roofline itself: min(peak, intensity × bandwidth)."""
    peak = _positive("peak_flops_per_s", peak_flops_per_s)
    bandwidth = _positive("bandwidth_bytes_per_s", bandwidth_bytes_per_s)
    intensity = _non_negative("intensity", intensity)
    return peak if math.isinf(intensity) else min(peak, intensity * bandwidth)


def roof_polyline(
    peak_flops_per_s: float, bandwidth_bytes_per_s: float, lo: float, hi: float
) -> list[tuple[float, float]]:
    """The roof, min(peak, bandwidth × intensity), over [lo, hi] FLOP/byte as the points a log-log chart joins:
    the slope, the ridge and the flat roof (straight on log axes, so exact). Both roofline charts draw it (the
    report's SVG, reports/plots.py; ``roofline --plot``'s PNG, models/roofline_report.py)."""
    ridge = peak_flops_per_s / bandwidth_bytes_per_s
    xs = [lo] + ([ridge] if lo < ridge < hi else []) + [hi]
    return [(x, attainable_flops_per_s(x, peak_flops_per_s, bandwidth_bytes_per_s)) for x in xs]


def bytes_per_batch(weight_bytes: float, activation_bytes_per_inference: float, batch: int) -> float:
    """Bytes moved by one batch: weights once, activations per inference."""
    return _non_negative("weight_bytes", weight_bytes) + _batch(batch) * _non_negative(
        "activation_bytes_per_inference", activation_bytes_per_inference
    )


def latency_lower_bound_s(
    flops: float, bytes_moved: float, peak_flops_per_s: float, bandwidth_bytes_per_s: float
) -> float:
    """No faster than the slower of doing the math and moving the bytes (perfect overlap assumed)."""
    compute_s = _non_negative("flops", flops) / _positive("peak_flops_per_s", peak_flops_per_s)
    memory_s = _non_negative("bytes_moved", bytes_moved) / _positive(
        "bandwidth_bytes_per_s", bandwidth_bytes_per_s
    )
    return max(compute_s, memory_s)


def peak_flops_per_s(target: HardwareTarget, precision: str, efficiency: float = 1.0) -> float:
    """Dense peak for ``precision`` (int8/fp8 are TOPS in the catalog) in FLOP/s, times an efficiency."""
    return target.peak_for(precision) * TERA * checked_efficiency("compute_efficiency", efficiency)


def bandwidth_bytes_per_s(target: HardwareTarget, efficiency: float = 1.0) -> float:
    return target.memory_bw_gbs * GIGA * checked_efficiency("bandwidth_efficiency", efficiency)


def checked_efficiency(name: str, value: float) -> float:
    """``value`` as a float when it is an efficiency in (0, 1]; else a BadInputError naming ``name``."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 < value <= 1:
        raise BadInputError(f"{name} must be in (0, 1], got {value!r}")
    return float(value)


def _batch(batch: int) -> int:
    if isinstance(batch, bool) or not isinstance(batch, int) or batch < 1:
        raise BadInputError(f"batch must be an integer >= 1, got {batch!r}")
    return batch


def roofline_point(
    flops_per_inference: float,
    bytes_per_inference: float,
    batch: int,
    target: HardwareTarget,
    precision: str,
    *,
    weight_bytes: float = 0.0,
    compute_efficiency: float = 1.0,
    bandwidth_efficiency: float = 1.0,
) -> RooflinePoint:
    """Roofline of one batch of ``batch`` inferences on ``target`` at ``precision``.

    ``bytes_per_inference`` is what each inference moves on its own (activations); ``weight_bytes`` is read
    once per batch. The efficiencies (fractions of peak actually reachable) turn the ideal roof into a
    practical one; leave them at 1 for the pure upper bound.
    """
    batch = _batch(batch)
    flops = _non_negative("flops_per_inference", flops_per_inference) * batch
    moved = bytes_per_batch(weight_bytes, bytes_per_inference, batch)
    peak = peak_flops_per_s(target, precision, compute_efficiency)
    bandwidth = bandwidth_bytes_per_s(target, bandwidth_efficiency)
    return batch_point(target.id, precision, batch, flops, moved, peak, bandwidth)


def batch_point(
    target_id: str,
    precision: str,
    batch: int,
    flops: float,
    moved: float,
    peak: float,
    bandwidth: float,
) -> RooflinePoint:
    """The roofline point of one batch that does ``flops`` FLOPs and moves ``moved`` bytes under a roof of
    ``peak`` FLOP/s and ``bandwidth`` bytes/s (the generative phases come here too: hardware/llm_roofline)."""
    batch = _batch(batch)
    if flops == 0 and moved == 0:
        raise BadInputError("a roofline needs FLOPs or bytes moved; both are 0")
    intensity = arithmetic_intensity_flop_per_byte(flops, moved)
    ridge = ridge_point_flop_per_byte(peak, bandwidth)
    latency_s = latency_lower_bound_s(flops, moved, peak, bandwidth)
    return RooflinePoint(
        target_id=target_id,
        precision=precision,
        batch=batch,
        flops_per_batch=flops,
        bytes_per_batch=moved,
        peak_flops_per_s=peak,
        bandwidth_bytes_per_s=bandwidth,
        intensity=intensity,
        ridge=ridge,
        bound="compute" if intensity >= ridge else "memory",
        latency_lower_bound_s=latency_s,
        # a latency that underflows to 0 s (a subnormal amount of work) bounds nothing
        throughput_upper_bound_ips=batch / latency_s if latency_s > 0 else math.inf,
    )


def roofline_from_graph_cost(
    graph_cost: Mapping[str, Any],
    batch: int,
    target: HardwareTarget,
    precision: str | None = None,
    **kwargs: Any,
) -> RooflinePoint:
    """Roofline from a variant manifest's ``graph_cost`` block (docs/architecture.md §3)."""
    try:
        flops = graph_cost["flops_per_inference"]
        weights = graph_cost["weight_bytes"]
        activations = graph_cost["activation_bytes_per_inference"]
    except KeyError as err:
        raise BadInputError(f"graph_cost lacks {err.args[0]!r}; cannot project a roofline") from None
    precision = precision or graph_cost.get("precision") or "fp32"
    return roofline_point(flops, activations, batch, target, precision, weight_bytes=weights, **kwargs)
