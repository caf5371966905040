"""Per-target efficiency fitted on published results (catalog ``published_results.toml``), for any graph.

A published point gives inferences/s for a model, precision and batch on a target. What carries over from one
model to another on the same stack is the fraction of the dense peak it reached, ``c = inf/s × FLOPs per
inference ÷ peak FLOP/s``, and how that fraction grows with batch (kernel launch and per-batch overheads
amortise): per target, ``log c = a + b·log batch`` by least squares (b = 0 with one distinct batch), evaluated
with the batch clamped to the fitted range and the result clamped to the fitted fractions, so it never
extrapolates past what was published. The spread of the points around the fit, and of the fit with each point
left out (jackknife), is the projected range. A target without points falls back to the median over its
toolchain's points. Points marked ``fit = false`` (GPU + DLA results; MLPerf BERT, whose variable-length
sequences make the padded graph's FLOPs overstate the work) are only used to check the fit.

Projected throughput of a graph at batch b = min(c(b) × peak ÷ FLOPs, b × bandwidth ÷ weight bytes): the
weights must stream from memory once per batch, while activations are taken to stay on chip; never above the
dense peak nor above the roofline bound. That is what the
published data says — at large batch these stacks reach compute fractions that the roofline's activation
traffic (every matmul/conv operand through DRAM, ``graph_cost``) would forbid — and it is why the fit is on
the compute fraction, not on achieved ÷ roofline directly. The report still shows the efficiency as achieved ÷
roofline bound at the chosen batch (``at_point``). ``bench/projection_check.py`` validates it by leaving one
model out per target.

Pure functions over plain numbers and catalog dataclasses; the roofline is passed in.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, replace
from typing import Any

RooflineFn = Callable[..., Any]  # accelbench.hardware.roofline.roofline_point


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

    def _curve(self, x: float | None) -> float:
        log_x = self.log_x_max if x is None or not math.isfinite(x) or x <= 0 else math.log(x)
        log_x = min(max(log_x, self.log_x_min), self.log_x_max)
        return min(max(math.exp(self.intercept + self.slope * log_x), self.y_min), self.y_max)

    def at(self, x: float | None) -> tuple[float, float, float]:
        """The fitted curve (unscaled) at ``x``, clamped; low/high: the points' residuals and the jackknife."""
        y = self._curve(x)
        others = [m._curve(x) for m in self.jackknife]
        lo = min([y, y * math.exp(self.resid_lo), *others])
        hi = max([y, y * math.exp(self.resid_hi), *others])
        return y, lo, hi

    def at_point(self, point: Any, weight_bytes: float) -> tuple[float, float, float]:
        """Achieved ÷ roofline bound (efficiency, low, high) of a RooflinePoint whose graph has these weights."""
        bound = float(point.throughput_upper_bound_ips)
        flops = float(point.flops_per_batch) / point.batch
        cap = (
            point.batch * float(point.bandwidth_bytes_per_s) / weight_bytes if weight_bytes > 0 else math.inf
        )
        out = []
        for c in self.at(point.batch):
            # no stack runs a graph faster than its dense peak (MLPerf BERT's fractions above 1 come from
            # skipping padding), nor, in a report, faster than the roofline the report calls an upper bound
            ips = float(point.peak_flops_per_s) * min(c, 1.0) / flops if flops > 0 else cap * c
            out.append(min(ips, cap, bound) * self.scale / bound)
        return out[0], out[1], out[2]

    def scaled(self, factor: float, calibration: str) -> EfficiencyModel:
        return replace(self, scale=self.scale * factor, calibration=calibration)


def constant(y: float, kind: str, label: str, lo: float | None = None, hi: float | None = None, n: int = 0):
    """A fraction of peak that does not depend on batch, with an optional range around it."""
    lo, hi = lo if lo is not None else y, hi if hi is not None else y
    return EfficiencyModel(
        kind, label, math.log(y), 0.0, -math.inf, math.inf, y, y,
        resid_lo=math.log(lo / y), resid_hi=math.log(hi / y), n_points=n,
    )  # fmt: skip


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
        kind, label, intercept, slope, lx_min, lx_max, y_min, y_max,
        resid_lo=min(resid), resid_hi=max(resid), n_points=len(pts),
    )  # fmt: skip


def within_model_slope(points: Iterable[FittedPoint]) -> tuple[float, float, tuple[float, float] | None]:
    """Sums (Σ dx·dy, Σ dx²) of log fraction of peak on log batch within each model, and the batch range.

    Only a model published at several batches says how the fraction grows with batch; comparing one model
    at batch 2048 with another at 1280 would mistake the models' difference for a batch effect.
    """
    by_model: dict[str, list[tuple[float, float]]] = {}
    for p in points:
        by_model.setdefault(p.point.model, []).append((math.log(p.point.batch), math.log(p.peak_fraction)))
    sxy = sxx = 0.0
    batches: list[float] = []
    for pts in by_model.values():
        mx, my = statistics.fmean(x for x, _ in pts), statistics.fmean(y for _, y in pts)
        sxy += sum((x - mx) * (y - my) for x, y in pts)
        sxx += sum((x - mx) ** 2 for x, _ in pts)
        if len({x for x, _ in pts}) > 1:
            batches += [math.exp(x) for x, _ in pts]
    return sxy, sxx, (min(batches), max(batches)) if batches else None


@dataclass(frozen=True)
class FittedPoint:
    point: Any  # catalog.PublishedPoint
    roofline: Any  # RooflinePoint of its own graph cost, batch and precision on its target
    weight_bytes: float

    @property
    def bound_ips(self) -> float:
        return float(self.roofline.throughput_upper_bound_ips)

    @property
    def efficiency(self) -> float:
        """Achieved ÷ roofline bound."""
        return self.point.throughput_ips / self.bound_ips

    @property
    def peak_fraction(self) -> float:
        """Achieved FLOP/s ÷ dense peak."""
        flops = float(self.roofline.flops_per_batch) / self.point.batch
        return self.point.throughput_ips * flops / float(self.roofline.peak_flops_per_s)


def point_roofline(point: Any, cost: Any, target: Any, roofline: RooflineFn) -> FittedPoint:
    """The roofline of a published point's own graph cost, batch and precision on its target."""
    rp = roofline(
        float(cost["flops_per_inference"]), float(cost["activation_bytes_per_inference"]), int(point.batch),
        target, point.precision, weight_bytes=float(cost["weight_bytes"]),
    )  # fmt: skip
    return FittedPoint(point, rp, float(cost["weight_bytes"]))


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
    span = " – ".join(sorted({dates[0], dates[-1]}))
    return f"{len(pts)} point(s) of {', '.join(models)}; {' / '.join(srcs)} ({span})"


def target_model(
    catalog: Any, target_id: str, roofline: RooflineFn, exclude_model: str | None = None
) -> EfficiencyModel | None:
    """Fit on the target's own published points; None when it has none.

    The batch slope comes from the target's models published at several batches, else from those of the
    other targets of its toolchain (the toolchain's shape, this target's level). The range adds the
    jackknife: the fit redone with each point left out, so a fit through two points still shows how much
    it rests on each.
    """
    pts = fitted_points(catalog, target_id, roofline, exclude_model)
    if not pts:
        return None
    toolchain = catalog.get(target_id).toolchain
    others = [
        fp
        for tid, t in sorted(catalog.targets.items())
        if t.toolchain == toolchain and tid != target_id
        for fp in fitted_points(catalog, tid, roofline)
    ]
    model = _fit_points(target_id, pts, others, toolchain)
    if len(pts) > 1:
        jackknife = tuple(
            _fit_points(target_id, pts[:i] + pts[i + 1 :], others, toolchain) for i in range(len(pts))
        )
        model = replace(model, jackknife=jackknife)
    return model


def _fit_points(target_id: str, pts: list[FittedPoint], others: list[FittedPoint], toolchain: str):
    sxy, sxx, batch_range = within_model_slope(pts)
    shape = f"{target_id}'s"
    if sxx <= 1e-12:
        sxy, sxx, batch_range = within_model_slope(others)
        shape = f"the {toolchain} toolchain's"
    slope = sxy / sxx if sxx > 1e-12 else 0.0
    label = (
        f"published: fraction of peak fitted on {target_id}'s {_describe(pts)}; batch slope {slope:.2f} "
        f"from {shape} models published at several batches"
    )
    samples = [(p.point.batch, p.peak_fraction) for p in pts]
    return fit(samples, "published", label, slope=slope, x_range=batch_range)


def toolchain_model(catalog: Any, toolchain: str, roofline: RooflineFn) -> EfficiencyModel | None:
    """Median fraction of peak over every fitted point of the toolchain's targets; range = their min–max."""
    pts = [
        fp
        for tid, t in sorted(catalog.targets.items())
        if t.toolchain == toolchain
        for fp in fitted_points(catalog, tid, roofline)
    ]
    if not pts:
        return None
    fractions = [p.peak_fraction for p in pts]
    targets = sorted({p.point.target for p in pts})
    label = (
        f"{toolchain} toolchain median of {len(pts)} published point(s) on {', '.join(targets)} "
        "(no published results for this target)"
    )
    return constant(
        statistics.median(fractions), "toolchain-median", label, min(fractions), max(fractions), len(pts)
    )


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
    base_models: dict[str, EfficiencyModel | None] = {}
    for tid in sorted({p.target for p in catalog.published}):
        target = catalog.get(tid)
        for model in sorted({p.model for p in catalog.published_for(tid)}):
            eff = target_model(catalog, tid, roofline, exclude_model=model)
            if model not in base_models:
                base_models[model] = target_model(catalog, baseline_id, roofline, exclude_model=model)
            for p in (p for p in catalog.published_for(tid) if p.model == model):
                rows.append(_loo_row(catalog, target, p, eff, base_models[model], baseline_id, roofline))
    return rows


def _projected_ips(eff: EfficiencyModel, fp: FittedPoint) -> float:
    return fp.bound_ips * eff.at_point(fp.roofline, fp.weight_bytes)[0]


def _loo_row(catalog, target, p, eff, base_eff, baseline_id, roofline) -> dict[str, Any]:
    fp = point_roofline(p, catalog.published_costs[p.model][p.precision], target, roofline)
    row: dict[str, Any] = {
        "target": target.id, "model": p.model, "precision": p.precision, "batch": p.batch,
        "scenario": p.scenario, "published_ips": p.throughput_ips, "fitted": p.fit, "engines": p.engines,
        "counted": p.engines == "gpu",
        "projected_ips": None, "factor": None, "ratio_factor": None, "reason": "",
    }  # fmt: skip
    if eff is None:
        row["reason"] = "no other published model on this target to fit on"
        return row
    row["projected_ips"] = _projected_ips(eff, fp)
    row["factor"] = row["projected_ips"] / p.throughput_ips
    # the same model and scenario on the baseline (offline vs offline, batch 1 vs batch 1)
    same = (p.model, p.precision, p.scenario)
    base_pub = next(
        (q for q in catalog.published_for(baseline_id) if (q.model, q.precision, q.scenario) == same), None
    )
    if base_pub is not None and base_eff is not None and target.id != baseline_id:
        bfp = point_roofline(
            base_pub, catalog.published_costs[p.model][p.precision], catalog.get(baseline_id), roofline
        )
        projected_ratio = row["projected_ips"] / _projected_ips(base_eff, bfp)
        row["ratio_factor"] = projected_ratio / (p.throughput_ips / base_pub.throughput_ips)
    if not p.fit and p.engines != "gpu":
        row["reason"] = f"not a fitted point ({p.engines}): shown for reference"
    elif not p.fit:
        row["reason"] = "not a fitted point (" + p.note.split(":")[0] + "): projected from the other models"
    return row
