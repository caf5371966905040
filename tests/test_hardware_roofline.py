"""Roofline math: table-driven cases computed by hand, and hypothesis properties."""

from __future__ import annotations

import dataclasses
import functools
import math
from types import MappingProxyType

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from accelbench.errors import BadInputError
from accelbench.hardware import roofline as rf
from accelbench.hardware.catalog import load_catalog


@pytest.fixture(scope="module")
def catalog():
    return load_catalog()


@functools.cache
def _base_target():
    return load_catalog().get("l4")


def target_with(peak_tflops: float, bw_gbs: float, precision: str = "fp16"):
    base = _base_target()
    return dataclasses.replace(
        base, peak_tflops=MappingProxyType({precision: peak_tflops}), memory_bw_gbs=bw_gbs
    )


@pytest.mark.parametrize(
    ("flops", "bytes_moved", "expected"),
    [(100.0, 10.0, 10.0), (0.0, 10.0, 0.0), (5.0, 0.0, math.inf), (0.0, 0.0, 0.0), (3e9, 1.5e9, 2.0)],
)
def test_arithmetic_intensity(flops, bytes_moved, expected):
    assert rf.arithmetic_intensity_flop_per_byte(flops, bytes_moved) == expected


@pytest.mark.parametrize(
    ("target_id", "precision", "ridge"),
    [
        ("l4", "int8", 242.5e12 / 300e9),  # ≈ 808 FLOP/byte
        ("a100-sxm4-80gb", "fp16", 312e12 / 2039e9),  # ≈ 153
        ("h200-sxm", "fp8", 1978.9e12 / 4800e9),
        ("c7i.large", "fp32", 0.2048e12 / 6.4e9),  # = 32
    ],
)
def test_ridge_point_of_catalog_targets(catalog, target_id, precision, ridge):
    target = catalog.get(target_id)
    got = rf.ridge_point_flop_per_byte(
        rf.peak_flops_per_s(target, precision), rf.bandwidth_bytes_per_s(target)
    )
    assert got == pytest.approx(ridge)


# (flops/inference, activation bytes/inference, weight bytes, batch, peak TFLOPS, GB/s) -> bound, latency s
CASES = [
    # memory-bound: 1 GFLOP, 100 MB weights at batch 1 on 100 TFLOPS / 1000 GB/s -> 1e-4 s moving bytes
    (1e9, 0.0, 1e8, 1, 100.0, 1000.0, "memory", 1e-4),
    # same model at batch 1000: 1e12 FLOP -> 1e-2 s compute vs 1e-4 s memory
    (1e9, 0.0, 1e8, 1000, 100.0, 1000.0, "compute", 1e-2),
    # exactly on the ridge (intensity 100 = 100e12/1e12): counts as compute-bound
    (1e11, 1e9, 0.0, 1, 100.0, 1000.0, "compute", 1e-3),
    # activations dominate: 8 x 1 GB at 10 GB/s
    (1.0, 1e9, 0.0, 8, 1.0, 10.0, "memory", 0.8),
]


@pytest.mark.parametrize(("flops", "act", "weights", "batch", "peak", "bw", "bound", "latency_s"), CASES)
def test_roofline_point_table(flops, act, weights, batch, peak, bw, bound, latency_s):
    point = rf.roofline_point(flops, act, batch, target_with(peak, bw), "fp16", weight_bytes=weights)
    assert point.bound == bound
    assert point.latency_lower_bound_s == pytest.approx(latency_s)
    assert point.throughput_upper_bound_ips == pytest.approx(batch / latency_s)
    assert point.bytes_per_batch == pytest.approx(weights + batch * act)
    assert point.kind == "projected-roofline"


def test_efficiency_scales_the_roof():
    target = target_with(100.0, 1000.0)
    ideal = rf.roofline_point(1e12, 0.0, 1, target, "fp16", weight_bytes=1.0)
    half = rf.roofline_point(1e12, 0.0, 1, target, "fp16", weight_bytes=1.0, compute_efficiency=0.5)
    assert half.latency_lower_bound_s == pytest.approx(2 * ideal.latency_lower_bound_s)
    with pytest.raises(BadInputError, match=r"compute_efficiency must be in \(0, 1\]"):
        rf.roofline_point(1.0, 1.0, 1, target, "fp16", compute_efficiency=1.5)


def test_int8_uses_tops_and_missing_precision_is_a_clear_error(catalog):
    assert rf.peak_flops_per_s(catalog.get("l4"), "int8") == pytest.approx(242.5e12)
    with pytest.raises(BadInputError, match=r"'tpu-v5e' has no fp16 peak"):
        rf.roofline_point(1e9, 1e6, 1, catalog.get("tpu-v5e"), "fp16")
    with pytest.raises(BadInputError, match="unknown precision 'int4'"):
        rf.peak_flops_per_s(catalog.get("l4"), "int4")


@pytest.mark.parametrize(
    ("args", "pattern"),
    [((-1.0, 1.0, 1), "flops_per_inference must be a number >= 0"), ((1.0, 1.0, 0), "batch must be an integer"),
     ((0.0, 0.0, 1), "both are 0"), ((float("nan"), 1.0, 1), "flops_per_inference")],
)  # fmt: skip
def test_bad_inputs(args, pattern):
    with pytest.raises(BadInputError, match=pattern):
        rf.roofline_point(*args, target_with(1.0, 1.0), "fp16")


def test_graph_cost_adapter(catalog):
    cost = {"flops_per_inference": 2.3e9, "weight_bytes": 2.2e7, "activation_bytes_per_inference": 4e6,
            "precision": "int8", "params": 0}  # fmt: skip
    point = rf.roofline_from_graph_cost(cost, 8, catalog.get("l4"))
    assert point.precision == "int8" and point.bytes_per_batch == pytest.approx(2.2e7 + 8 * 4e6)
    assert point.to_dict()["bound"] == point.bound
    with pytest.raises(BadInputError, match="graph_cost lacks 'weight_bytes'"):
        rf.roofline_from_graph_cost(
            {"flops_per_inference": 1, "activation_bytes_per_inference": 1}, 1, catalog.get("l4")
        )


def test_to_dict_has_no_infinity():
    point = rf.roofline_point(1e9, 0.0, 1, target_with(1.0, 1.0), "fp16")
    assert point.intensity == math.inf and point.to_dict()["intensity"] is None


# ---- properties ------------------------------------------------------------------------------------------

# no deadline: two shared cores make single examples slow now and then; these are pure math, not timings
pure_math = settings(deadline=None, max_examples=200)

positive = st.floats(min_value=1e-3, max_value=1e6, allow_nan=False, allow_infinity=False)
amount = st.floats(min_value=0.0, max_value=1e15, allow_nan=False, allow_infinity=False)
batches = st.integers(min_value=1, max_value=4096)


@pure_math
@given(flops=amount, act=amount, weights=amount, batch=batches, peak=positive, bw=positive,
       factor=st.floats(min_value=1.0, max_value=100.0))  # fmt: skip
def test_throughput_bound_is_monotone_in_peak_and_bandwidth(flops, act, weights, batch, peak, bw, factor):
    if flops == 0 and act == 0 and weights == 0:
        return
    base = rf.roofline_point(flops, act, batch, target_with(peak, bw), "fp16", weight_bytes=weights)
    more_peak = rf.roofline_point(
        flops, act, batch, target_with(peak * factor, bw), "fp16", weight_bytes=weights
    )
    more_bw = rf.roofline_point(
        flops, act, batch, target_with(peak, bw * factor), "fp16", weight_bytes=weights
    )
    tolerance = 1 + 1e-9
    assert more_peak.throughput_upper_bound_ips * tolerance >= base.throughput_upper_bound_ips
    assert more_bw.throughput_upper_bound_ips * tolerance >= base.throughput_upper_bound_ips
    for point in (base, more_peak, more_bw):
        assert point.latency_lower_bound_s >= 0 and point.throughput_upper_bound_ips > 0
        assert point.intensity >= 0 and point.ridge > 0


@pure_math
@given(flops=positive, act=amount, weights=amount, batch=batches)
def test_intensity_does_not_fall_as_the_batch_grows(flops, act, weights, batch):
    # bytes = weights + b·act and flops = b·f, so intensity b·f/(w + b·a) is non-decreasing in b
    small = rf.arithmetic_intensity_flop_per_byte(flops * batch, rf.bytes_per_batch(weights, act, batch))
    large = rf.arithmetic_intensity_flop_per_byte(
        flops * (batch + 1), rf.bytes_per_batch(weights, act, batch + 1)
    )
    assert large * (1 + 1e-9) >= small


@pure_math
@given(intensity=st.floats(min_value=0, max_value=1e9), peak=positive, bw=positive)
def test_attainable_never_exceeds_either_roof(intensity, peak, bw):
    attained = rf.attainable_flops_per_s(intensity, peak, bw)
    assert 0 <= attained <= peak
    assert attained <= intensity * bw * (1 + 1e-12)


@given(
    peak=st.floats(1e9, 1e16),
    bandwidth=st.floats(1e8, 1e13),
    lo=st.floats(1e-3, 10.0),
    span=st.floats(2.0, 1e6),
    t=st.floats(0.0, 1.0),
)
@settings(max_examples=200, deadline=None)
def test_the_charts_roof_polyline_is_the_roof_on_log_axes(peak, bandwidth, lo, span, t):
    """Joined straight on log-log axes (what both roofline charts draw), the polyline is min(peak, bw × I)."""
    hi = lo * span
    points = rf.roof_polyline(peak, bandwidth, lo, hi)
    assert points[0][0] == lo and points[-1][0] == hi
    assert (len(points) == 3) == (lo < peak / bandwidth < hi)
    for x, y in points:
        assert y == pytest.approx(rf.attainable_flops_per_s(x, peak, bandwidth), rel=1e-12)
    x = min(max(lo * span**t, lo), hi)  # any intensity between, on the joined segment
    (x0, y0), (x1, y1) = next(
        (a, b) for a, b in zip(points[:-1], points[1:], strict=True) if a[0] <= x <= b[0]
    )
    f = 0.0 if x1 == x0 else (math.log(x) - math.log(x0)) / (math.log(x1) - math.log(x0))
    y = math.exp(math.log(y0) + f * (math.log(y1) - math.log(y0)))
    assert y == pytest.approx(rf.attainable_flops_per_s(x, peak, bandwidth), rel=1e-9)
