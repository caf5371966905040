"""Projected capacity for hardware that was not measured: roofline bound × calibrated efficiency.

The roofline gives a latency lower bound and a throughput upper bound for a batch; real serving reaches
a fraction of it (the efficiency). That fraction comes, in order of preference, from the
target's published results (``accelbench.reports.efficiency``: the fraction of peak they reached, fitted
on batch, scaled by a measured target of the same toolchain when the report has one), from its toolchain's published
median, from measured targets of the same toolchain (measured inferences/s ÷ roofline bound at the batch the
server ran, median over the steps that met the SLO), or else an assumed default that the report labels as such.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from accelbench.documents import Step
from accelbench.hardware.catalog import HardwareTarget
from accelbench.hardware.roofline import RooflinePoint, roofline_point
from accelbench.reports.efficiency import EfficiencyModel, RooflineFn

# No measurement of the toolchain → this fraction of the roofline bound. A conservative placeholder,
# not a measurement: serving stacks commonly reach well under half of peak on small batches (launch
# overhead, HTTP, non-GEMM ops), and under-promising is the safer error in a cost report.
DEFAULT_EFFICIENCY = 0.3
DEFAULT_EFFICIENCY_SOURCE = "assumed 0.3 (conservative placeholder; no measured target of this toolchain)"
BATCH_SIZES = (1, 2, 4, 8, 16, 32, 64, 128, 256)
PRECISION_FALLBACK = {
    "int8": ("int8", "fp8", "fp16", "bf16", "fp32"),
    "fp8": ("fp8", "fp16", "bf16", "fp32"),
    "fp16": ("fp16", "bf16", "fp32"),
    "bf16": ("bf16", "fp16", "fp32"),
    "fp32": ("fp32", "tf32", "fp16", "bf16"),
}


def default_roofline() -> RooflineFn:
    return roofline_point


def bytes_per_inference(graph_cost: Mapping[str, Any], batch: int) -> float:
    """Bytes a batch moves (weights once, activations per inference), divided over the batch."""
    total = float(graph_cost["weight_bytes"]) + batch * float(graph_cost["activation_bytes_per_inference"])
    return total / batch


# Toolchains that run an FP32 network's matmuls and convolutions in TF32 by default where the GPU has it (Ampere
# and later): TensorRT's builder sets BuilderFlag.TF32 unless told not to (trtexec --noTF32), so an FP32 engine
# reaches the TF32 tensor-core peak, not the FP32 CUDA-core one. ONNX Runtime's CPU, Neuron (its compiler casts
# matmuls to BF16 by its own --auto-cast rule, which accelbench's Neuron variants pin) and CPUs keep FP32.
TF32_BY_DEFAULT = frozenset({"tensorrt"})


def precision_on(target: HardwareTarget, precision: str) -> str | None:
    """The precision the target would run a ``precision`` variant in (its peak table decides; FP32 runs as TF32
    where the toolchain does so by default and the target has a TF32 peak: TF32_BY_DEFAULT)."""
    peaks = target.peak_tflops or {}
    if precision == "fp32" and target.toolchain in TF32_BY_DEFAULT and peaks.get("tf32"):
        return "tf32"
    for candidate in PRECISION_FALLBACK.get(precision, (precision,)):
        if peaks.get(candidate):
            return candidate
    return None


def roofline_at(
    roofline: RooflineFn, graph_cost: Mapping[str, Any], batch: int, target: HardwareTarget, precision: str
) -> RooflinePoint:
    """§2's roofline_point for a batch: activations per inference, weights read once per batch."""
    return roofline(
        float(graph_cost["flops_per_inference"]),
        float(graph_cost["activation_bytes_per_inference"]),
        batch,
        target,
        precision,
        weight_bytes=float(graph_cost["weight_bytes"]),
    )


def usable_graph_cost(graph_cost: Mapping[str, Any] | None) -> bool:
    if not graph_cost:
        return False
    try:
        values = [
            float(graph_cost[k])
            for k in ("flops_per_inference", "weight_bytes", "activation_bytes_per_inference")
        ]
    except (KeyError, TypeError, ValueError):
        return False
    # a pure data-movement model (0 FLOPs) is still memory-bound on a roofline
    return min(values) >= 0 and sum(values) > 0


def step_efficiency(
    step: Step,
    batch: int,
    graph_cost: Mapping[str, Any],
    target: HardwareTarget,
    precision: str,
    roofline: RooflineFn | None = None,
) -> float | None:
    """Measured inferences/s ÷ the roofline's upper bound at the batch the server ran."""
    roofline = roofline or default_roofline()
    run_precision = precision_on(target, precision)
    ips = step.throughput_ips
    if run_precision is None or not ips:
        return None
    point = roofline_at(roofline, graph_cost, batch, target, run_precision)
    bound = float(point.throughput_upper_bound_ips)
    return float(ips) / bound if bound > 0 else None


def served_batch(step: Step, doc_batch: int) -> int:
    """The batch the server executed: Triton's mean batch size when recorded, else the client's."""
    mean = (step.server_stats.mean_batch_size if step.server_stats else None) or doc_batch or 1
    return max(1, round(float(mean)))


@dataclass(frozen=True)
class Calibration:
    efficiency: float
    source: str  # "calibrated: median of N steps on cpu-local" or the assumed-default text
    samples: int


def calibrate(efficiencies: Mapping[str, Iterable[tuple[str, float]]]) -> dict[str, Calibration]:
    """toolchain → (target id, efficiency) samples ⇒ toolchain → median efficiency with its source."""
    out: dict[str, Calibration] = {}
    for toolchain, samples in sorted(efficiencies.items()):
        pairs = sorted(samples)
        values = [v for _, v in pairs if v and v > 0]
        if not values:
            continue
        targets = sorted({t for t, _ in pairs})
        med = statistics.median(values)
        source = (
            f"calibrated: median of {len(values)} qualifying step(s) measured on {', '.join(targets)} "
            f"({toolchain}), range {min(values):.3g}–{max(values):.3g}"
        )
        out[toolchain] = Calibration(med, source, len(values))
    return out


def calibration_for(toolchain: str, calibrations: Mapping[str, Calibration]) -> Calibration:
    return calibrations.get(toolchain) or Calibration(DEFAULT_EFFICIENCY, DEFAULT_EFFICIENCY_SOURCE, 0)


@dataclass(frozen=True)
class Projection:
    capacity_ips: float | None  # None: not even batch 1 fits the SLO
    batch: int | None
    latency_s: float | None  # roofline latency lower bound ÷ efficiency at that batch
    bound: str | None  # "compute" | "memory"
    intensity_flop_per_byte: float | None
    precision_used: str | None
    reason: str
    efficiency: float | None = None  # achieved ÷ roofline bound at the chosen batch
    efficiency_low: float | None = None  # the efficiency model's spread: a projected range, not a measurement
    efficiency_high: float | None = None
    capacity_low_ips: float | None = None
    capacity_high_ips: float | None = None


def _efficiency_at(
    efficiency: float | EfficiencyModel, weight_bytes: float
) -> Callable[[RooflinePoint], tuple[float, float, float]]:
    """A number (one efficiency everywhere) or a model (its ``at_point(point, weight_bytes)``) → (e, low, high)."""
    if isinstance(efficiency, EfficiencyModel):
        model = efficiency
        return lambda point: model.at_point(point, weight_bytes)
    value = float(efficiency)
    return lambda _point: (value, value, value)


def project_capacity(
    graph_cost: Mapping[str, Any],
    target: HardwareTarget,
    precision: str,
    slo_s: float,
    efficiency: float | EfficiencyModel,
    roofline: RooflineFn | None = None,
    batches: Iterable[int] = BATCH_SIZES,
) -> Projection:
    """Largest batch whose latency (roofline bound ÷ efficiency) fits the SLO and the memory; its throughput.

    ``efficiency`` is a number or an efficiency model (``at_point``), evaluated at each batch's roofline point.
    """
    roofline = roofline or default_roofline()
    run_precision = precision_on(target, precision)
    if run_precision is None:
        return Projection(None, None, None, None, None, None, f"{target.id} lists no peak for {precision}")
    eff_at = _efficiency_at(efficiency, float(graph_cost["weight_bytes"]))
    if not isinstance(efficiency, EfficiencyModel) and efficiency <= 0:
        return Projection(None, None, None, None, None, run_precision, "efficiency must be positive")
    memory_bytes = float(target.memory_gb or 0) * 1e9
    # the server batches no more than the target's Triton max_batch_size (catalog [triton] defaults)
    max_batch = int(target.triton.max_batch_size or max(batches))
    best = None
    for batch in sorted(b for b in batches if b <= max_batch):
        need = float(graph_cost["weight_bytes"]) + batch * float(graph_cost["activation_bytes_per_inference"])
        if memory_bytes and need > memory_bytes:
            break
        point = roofline_at(roofline, graph_cost, batch, target, run_precision)
        eff = eff_at(point)
        latency = float(point.latency_lower_bound_s) / eff[0]
        if latency > slo_s:
            break  # latency grows with batch on a roofline
        best = (batch, point, latency, eff)
    if best is None:
        return Projection(
            None, None, None, None, None, run_precision, "even batch 1 exceeds the SLO on the roofline"
        )
    batch, point, latency, (e, lo, hi) = best
    bound_ips = float(point.throughput_upper_bound_ips)
    return Projection(
        capacity_ips=bound_ips * e,
        batch=batch,
        latency_s=latency,
        bound=str(point.bound),
        intensity_flop_per_byte=float(point.intensity),
        precision_used=run_precision,
        reason=f"batch {batch} (max {max_batch}) fits the SLO; {point.bound}-bound",
        efficiency=e,
        efficiency_low=lo,
        efficiency_high=hi,
        capacity_low_ips=bound_ips * lo,
        capacity_high_ips=bound_ips * hi,
    )
