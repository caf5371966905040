"""Per-target efficiency (achieved ÷ roofline) fitted on published results, as a function of intensity.

A published point (catalog ``published_results.toml``) gives inferences/s for a model, precision and batch on
a target; the roofline of the same graph cost, batch and precision on that target gives the upper bound; their
ratio is the efficiency the vendor's own stack reached at that point's arithmetic intensity (FLOP/byte of the
batch). Per target the points are fitted in log space, ``log e = a + b·log I`` (least squares; b = 0 with one
distinct intensity), evaluated with the intensity clamped to the fitted range and the result clamped to the
fitted efficiencies, so it never extrapolates past what was published. The spread of the points around the
fit is the projected range. A target without points falls back to the median over its toolchain's points.

Pure functions over plain numbers and catalog dataclasses; the roofline is passed in.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

RooflineFn = Callable[..., Any]  # accelbench.hardware.roofline.roofline_point


@dataclass(frozen=True)
class EfficiencyModel:
    """``at(intensity)`` → (efficiency, low, high); ``kind`` says where it came from."""

    kind: str  # "published" | "toolchain-median" | "measured" | "assumed"
    label: str
    intercept: float  # log efficiency at log intensity 0
    slope: float
    log_i_min: float
    log_i_max: float
    e_min: float
    e_max: float
    resid_lo: float = 0.0  # most negative log residual of the fitted points
    resid_hi: float = 0.0
    n_points: int = 0
    scale: float = 1.0  # calibration by a measured target of the same toolchain
    calibration: str = "none"

    def at(self, intensity: float | None) -> tuple[float, float, float]:
        if intensity is None or not math.isfinite(intensity) or intensity <= 0:
            log_i = self.log_i_max
        else:
            log_i = min(max(math.log(intensity), self.log_i_min), self.log_i_max)
        e = min(max(math.exp(self.intercept + self.slope * log_i), self.e_min), self.e_max)
        lo, hi = e * math.exp(self.resid_lo), e * math.exp(self.resid_hi)
        return e * self.scale, min(lo, e) * self.scale, max(hi, e) * self.scale

    def scaled(self, factor: float, calibration: str) -> EfficiencyModel:
        return replace(self, scale=self.scale * factor, calibration=calibration)


def constant(e: float, kind: str, label: str, lo: float | None = None, hi: float | None = None, n: int = 0):
    """An efficiency that does not depend on intensity, with an optional range around it."""
    lo, hi = lo if lo is not None else e, hi if hi is not None else e
    return EfficiencyModel(
        kind, label, math.log(e), 0.0, -math.inf, math.inf, e, e,
        resid_lo=math.log(lo / e), resid_hi=math.log(hi / e), n_points=n,
    )  # fmt: skip


def fit(samples: Sequence[tuple[float, float]], kind: str, label: str) -> EfficiencyModel:
    """Least squares of log efficiency on log intensity over (intensity, efficiency) samples (≥ 1)."""
    pts = [(math.log(i), math.log(e)) for i, e in samples if i > 0 and e > 0 and math.isfinite(i)]
    if not pts:
        raise ValueError("fit needs at least one sample with positive intensity and efficiency")
    xs, ys = [x for x, _ in pts], [y for _, y in pts]
    mx, my = statistics.fmean(xs), statistics.fmean(ys)
    var = sum((x - mx) ** 2 for x in xs)
    slope = sum((x - mx) * (y - my) for x, y in pts) / var if var > 1e-12 else 0.0
    intercept = my - slope * mx
    resid = [y - (intercept + slope * x) for x, y in pts]
    return EfficiencyModel(
        kind, label, intercept, slope, min(xs), max(xs), math.exp(min(ys)), math.exp(max(ys)),
        resid_lo=min(resid), resid_hi=max(resid), n_points=len(pts),
    )  # fmt: skip


@dataclass(frozen=True)
class FittedPoint:
    point: Any  # catalog.PublishedPoint
    intensity: float
    bound_ips: float

    @property
    def efficiency(self) -> float:
        return self.point.throughput_ips / self.bound_ips


def point_roofline(point: Any, cost: Mapping[str, float], target: Any, roofline: RooflineFn) -> FittedPoint:
    """The roofline of a published point's own graph cost, batch and precision on its target."""
    rp = roofline(
        float(cost["flops_per_inference"]), float(cost["activation_bytes_per_inference"]), int(point.batch),
        target, point.precision, weight_bytes=float(cost["weight_bytes"]),
    )  # fmt: skip
    return FittedPoint(point, float(rp.intensity), float(rp.throughput_upper_bound_ips))


def fitted_points(catalog: Any, target_id: str, roofline: RooflineFn, exclude_model: str | None = None):
    """The target's published points that enter its fit (``fit = true``), minus ``exclude_model``."""
    target = catalog.get(target_id)
    return [
        point_roofline(p, catalog.published_costs[p.model][p.precision], target, roofline)
        for p in catalog.published_for(target_id)
        if p.fit and p.model != exclude_model
    ]


def _describe(points: Iterable[FittedPoint]) -> str:
    pts = list(points)
    srcs = sorted({p.point.software.split(";")[0] for p in pts})
    models = sorted({p.point.model for p in pts})
    dates = sorted({p.point.date for p in pts})
    return f"{len(pts)} point(s): {', '.join(models)}; {' / '.join(srcs)} ({' – '.join(sorted({dates[0], dates[-1]}))})"


def target_model(
    catalog: Any, target_id: str, roofline: RooflineFn, exclude_model: str | None = None
) -> EfficiencyModel | None:
    """Fit on the target's own published points; None when it has none."""
    pts = fitted_points(catalog, target_id, roofline, exclude_model)
    if not pts:
        return None
    label = f"published, fitted on {target_id}'s {_describe(pts)}"
    return fit([(p.intensity, p.efficiency) for p in pts], "published", label)


def toolchain_model(
    catalog: Any, toolchain: str, roofline: RooflineFn, exclude: Callable[[FittedPoint], bool] | None = None
) -> EfficiencyModel | None:
    """Median efficiency over every fitted point of the toolchain's targets; range = their min–max."""
    pts = [
        fp
        for tid, t in sorted(catalog.targets.items())
        if t.toolchain == toolchain
        for fp in fitted_points(catalog, tid, roofline)
        if not (exclude and exclude(fp))
    ]
    if not pts:
        return None
    effs = [p.efficiency for p in pts]
    targets = sorted({p.point.target for p in pts})
    label = (
        f"{toolchain} toolchain median of {len(pts)} published point(s) on {', '.join(targets)} "
        "(no published results for this target)"
    )
    return constant(statistics.median(effs), "toolchain-median", label, min(effs), max(effs), len(pts))


def model_for(catalog: Any, target: Any, roofline: RooflineFn) -> EfficiencyModel | None:
    """The target's own fit, else its toolchain's median, else None (no published data at all)."""
    return target_model(catalog, target.id, roofline) or toolchain_model(catalog, target.toolchain, roofline)


def leave_one_model_out(catalog: Any, roofline: RooflineFn, baseline_id: str) -> list[dict[str, Any]]:
    """For every target and published model: refit without that model, project it, compare.

    ``factor`` = projected ÷ published inferences/s; ``ratio_factor`` = (projected target ÷ projected
    baseline) ÷ (published target ÷ published baseline) for the same model, precision and scenario, with both
    sides refitted without that model. A target with a single published model cannot be left out (no fit).
    """
    rows = []
    base_model_cache: dict[str, EfficiencyModel | None] = {}
    for tid in sorted({p.target for p in catalog.published}):
        target = catalog.get(tid)
        for model in sorted({p.model for p in catalog.published_for(tid)}):
            eff = target_model(catalog, tid, roofline, exclude_model=model)
            if model not in base_model_cache:
                base_model_cache[model] = target_model(catalog, baseline_id, roofline, exclude_model=model)
            base_eff = base_model_cache[model]
            for p in (p for p in catalog.published_for(tid) if p.model == model):
                rows.append(_loo_row(catalog, target, p, eff, base_eff, baseline_id, roofline))
    return rows


def _loo_row(catalog, target, p, eff, base_eff, baseline_id, roofline) -> dict[str, Any]:
    fp = point_roofline(p, catalog.published_costs[p.model][p.precision], target, roofline)
    row: dict[str, Any] = {
        "target": target.id, "model": p.model, "precision": p.precision, "batch": p.batch,
        "published_ips": p.throughput_ips, "fitted": p.fit, "engines": p.engines, "projected_ips": None,
        "factor": None, "ratio_factor": None, "reason": "",
    }  # fmt: skip
    if eff is None:
        row["reason"] = "no other published model on this target to fit on"
        return row
    e, _, _ = eff.at(fp.intensity)
    row["projected_ips"] = fp.bound_ips * e
    row["factor"] = row["projected_ips"] / p.throughput_ips
    # the same model and scenario on the baseline (offline vs offline, batch 1 vs batch 1)
    base_pub = next(
        (
            q
            for q in catalog.published_for(baseline_id)
            if (q.model, q.precision, q.scenario) == (p.model, p.precision, p.scenario)
        ),
        None,
    )
    if base_pub is not None and base_eff is not None and target.id != baseline_id:
        base = catalog.get(baseline_id)
        bfp = point_roofline(base_pub, catalog.published_costs[p.model][p.precision], base, roofline)
        projected_ratio = row["projected_ips"] / (bfp.bound_ips * base_eff.at(bfp.intensity)[0])
        row["ratio_factor"] = projected_ratio / (p.throughput_ips / base_pub.throughput_ips)
    if not p.fit:
        row["reason"] = f"not a fitted point ({p.engines}): shown for reference"
    return row
