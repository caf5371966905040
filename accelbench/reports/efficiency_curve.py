"""The efficiency curve of a projection: fraction of peak against batch, its range, and how a roofline point reads it.

``EfficiencyModel`` is what a fit produces (``efficiency.py``): affine batch latency ``t(b) = t0 + b·t1`` (or the
older power law in batch where no fixed term is known), the spread of the points and of the jackknife around it,
the latency floor, a calibration scale and the validation range; ``fit`` is the least squares in log space behind
it. Pure functions over plain numbers; the roofline is passed in (``RooflineFn``).
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Protocol

from accelbench.hardware.catalog import HardwareTarget
from accelbench.hardware.roofline import RooflinePoint


class RooflineFn(Protocol):
    """How the reports call a roofline: ``accelbench.hardware.roofline.roofline_point`` (passed in)."""

    def __call__(
        self,
        flops_per_inference: float,
        bytes_per_inference: float,
        batch: int,
        target: HardwareTarget,
        precision: str,
        *,
        weight_bytes: float = ...,
    ) -> RooflinePoint: ...


@dataclass(frozen=True)
class EfficiencyModel:
    """``at(batch)`` → (fraction of peak, low, high); ``at_point`` → achieved ÷ roofline for a roofline point."""

    kind: str  # "published" | "toolchain-median"
    label: str
    intercept: float  # log fraction of peak at log batch 0
    slope: float
    log_x_min: float
    log_x_max: float
    y_min: float
    y_max: float
    resid_lo: float = 0.0  # most negative log residual of the fitted points
    resid_hi: float = 0.0
    n_points: int = 0
    scale: float = 1.0  # calibration by a measured target of the same toolchain
    calibration: str = "none"
    # the same fit with each published point left out in turn (jackknife): their spread is part of the range
    jackknife: tuple[EfficiencyModel, ...] = ()
    floor_s: float = 0.0  # no inference completes faster than this on the stack (latency_floor)
    floor_source: str = ""
    validation: tuple[float, float] | None = None  # (lowest, highest) projected ÷ published of the check
    validation_source: str = ""
    # affine batch latency t(b) = t0 + b·t1 (fit_fixed_term): the fixed cost per batch in seconds; 0 = the
    # older power law in batch. With it, ``intercept`` is log c∞, the fraction of peak of the per-sample term
    t0_s: float = 0.0

    def _curve(self, x: float | None, flops: float = 0.0, peak: float = 0.0) -> float:
        if self.t0_s > 0 and flops > 0 and peak > 0:
            return self._affine(x, flops, peak)
        log_x = self.log_x_max if x is None or not math.isfinite(x) or x <= 0 else math.log(x)
        log_x = min(max(log_x, self.log_x_min), self.log_x_max)
        return min(max(math.exp(self.intercept + self.slope * log_x), self.y_min), self.y_max)

    def _affine(self, x: float | None, flops: float, peak: float) -> float:
        """Fraction of peak at batch b when a batch takes t0 + b·t1 with t1 = FLOPs ÷ (c∞·peak):
        c(b) = c∞·b ÷ (b + t0·c∞·peak ÷ FLOPs), which saturates at c∞ instead of growing without bound."""
        c_inf = min(math.exp(self.intercept), 1.0)
        b = float(x) if x is not None and math.isfinite(x) and x > 0 else 1.0
        return c_inf * b / (b + self.t0_s * c_inf * peak / flops)

    def at(self, x: float | None, flops: float = 0.0, peak: float = 0.0) -> tuple[float, float, float]:
        """The fitted curve (unscaled) at ``x``, clamped; low/high: the points' residuals and the jackknife.
        ``flops`` per inference and ``peak`` FLOP/s place the affine model's fixed term (``t0_s``)."""
        y = self._curve(x, flops, peak)
        others = [m._curve(x, flops, peak) for m in self.jackknife]
        lo = min([y, y * math.exp(self.resid_lo), *others])
        hi = max([y, y * math.exp(self.resid_hi), *others])
        return y, lo, hi

    def at_point(self, point: RooflinePoint, weight_bytes: float) -> tuple[float, float, float]:
        """Achieved ÷ roofline bound (efficiency, low, high) of a RooflinePoint whose graph has these weights."""
        bound = float(point.throughput_upper_bound_ips)
        flops = float(point.flops_per_batch) / point.batch
        cap = (
            point.batch * float(point.bandwidth_bytes_per_s) / weight_bytes if weight_bytes > 0 else math.inf
        )
        out = []
        for c in self.at(point.batch, flops, float(point.peak_flops_per_s)):
            # no stack runs a graph faster than its dense peak (MLPerf BERT's fractions above 1 come from
            # skipping padding), nor, in a report, faster than the roofline the report calls an upper bound
            ips = float(point.peak_flops_per_s) * min(c, 1.0) / flops if flops > 0 else cap * c
            floor = point.batch / self.floor_s if self.floor_s > 0 else math.inf
            out.append(min(ips, cap, bound, floor) * self.scale / bound)
        e, lo, hi = out
        if self.validation:  # the truth lies within projected ÷ [highest, lowest] of the validation's factors
            lo, hi = min(lo, e / self.validation[1]), max(hi, e / self.validation[0])
        return e, lo, hi

    def scaled(self, factor: float, calibration: str) -> EfficiencyModel:
        return replace(self, scale=self.scale * factor, calibration=calibration)


def constant(
    y: float, kind: str, label: str, lo: float | None = None, hi: float | None = None, n: int = 0
) -> EfficiencyModel:
    """A fraction of peak that does not depend on batch, with an optional range around it."""
    lo, hi = lo if lo is not None else y, hi if hi is not None else y
    return EfficiencyModel(
        kind,
        label,
        math.log(y),
        0.0,
        -math.inf,
        math.inf,
        y,
        y,
        resid_lo=math.log(lo / y),
        resid_hi=math.log(hi / y),
        n_points=n,
    )


def fit(
    samples: Sequence[tuple[float, float]],
    kind: str,
    label: str,
    slope: float | None = None,
    x_range: tuple[float, float] | None = None,
) -> EfficiencyModel:
    """Least squares of log y on log x over (x, y) samples (≥ 1 with both positive).

    ``slope`` fixes the slope (only the level is fitted); ``x_range`` widens the clamp range of x, and then y
    is clamped only to the fitted y range stretched along the slope over that range.
    """
    pts = [(math.log(x), math.log(y)) for x, y in samples if x > 0 and y > 0 and math.isfinite(x)]
    if not pts:
        raise ValueError("fit needs at least one sample with positive x and y")
    xs, ys = [x for x, _ in pts], [y for _, y in pts]
    mx, my = statistics.fmean(xs), statistics.fmean(ys)
    var = sum((x - mx) ** 2 for x in xs)
    if slope is None:
        slope = sum((x - mx) * (y - my) for x, y in pts) / var if var > 1e-12 else 0.0
    intercept = my - slope * mx
    resid = [y - (intercept + slope * x) for x, y in pts]
    lx_min, lx_max = min(xs), max(xs)
    y_min, y_max = math.exp(min(ys)), math.exp(max(ys))
    if x_range is not None:
        lx_min, lx_max = min(lx_min, math.log(x_range[0])), max(lx_max, math.log(x_range[1]))
        ends = [math.exp(intercept + slope * lx) for lx in (lx_min, lx_max)]
        y_min, y_max = min(y_min, *ends), max(y_max, *ends)
    return EfficiencyModel(
        kind,
        label,
        intercept,
        slope,
        lx_min,
        lx_max,
        y_min,
        y_max,
        resid_lo=min(resid),
        resid_hi=max(resid),
        n_points=len(pts),
    )
