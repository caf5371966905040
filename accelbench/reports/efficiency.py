"""Per-target efficiency fitted on published results (catalog ``published_results.toml``), for any graph.

A published point gives inferences/s for a model, precision and batch on a target. Batch latency is affine,
``t(b) = t0 + b·t1`` (a fixed cost per batch — kernel launches, clocks, the host round trip — plus a cost per
sample), so throughput ``b ÷ (t0 + b·t1)`` saturates in batch. ``t0`` is a chip factor times a graph factor
fitted on every series published at several batches (``fixed_term.py``); ``t1`` is FLOPs ÷ (c∞ × peak), where
c∞, the fraction of the dense peak the per-sample term reaches, is what carries from one model to another on the
same stack, fitted on the points whose time is not mostly t0. The spread of the points around the fit, and of
the fit with each point left out (jackknife), is the projected range. A target without points uses its chip's,
else its toolchain's. Points marked ``fit = false`` are checked, not fitted, except MLPerf's variable-length
BERT Offline points, which enter with their padded graph's work divided by ``work_factor`` (measured where a chip
published both MLPerf's BERT and demoBERT's fixed-length tables of the same graph).

Projected throughput of a graph at batch b = min(c(b) × peak ÷ FLOPs, b × bandwidth ÷ weight bytes): the
weights must stream from memory once per batch, while activations are taken to stay on chip; never above the
dense peak nor above the roofline bound. That is what the published data says — at large batch these stacks
reach compute fractions that the roofline's activation traffic (every matmul/conv operand through DRAM,
``graph_cost``) would forbid — and it is why the fit is on the compute fraction, not on achieved ÷ roofline
directly. The report still shows the efficiency as achieved ÷ roofline bound at the chosen batch
(``at_point``). ``bench/projection_check.py`` validates it (``validation.py``). Without ``t0`` (no series at
several batches anywhere in the pool's toolchain) the older power law in batch, ``log c = a + b·log batch``,
clamped to the fitted range, is the fallback.

Pure functions over plain numbers and catalog dataclasses; the roofline is passed in.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Protocol

from accelbench.hardware.catalog import Catalog, HardwareTarget
from accelbench.hardware.published import PublishedPoint
from accelbench.hardware.roofline import RooflinePoint
from accelbench.reports.fixed_term import FixedTerms, series_t0
from accelbench.reports.fixed_term import factor as factor_fixed_terms


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
    by_model: dict[tuple[str, str, str], list[tuple[float, float]]] = {}
    # one series per target, model and precision: pooled across targets, each keeps its level
    for p in points:
        key = (p.point.target, p.point.model, p.point.precision)
        by_model.setdefault(key, []).append((math.log(p.point.batch), math.log(p.peak_fraction)))
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
    point: PublishedPoint
    roofline: RooflinePoint  # of its own graph cost, batch and precision on its target
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


# ---------------------------------------------------------------- what a point says about other graphs
# The fraction of peak a stack reaches depends on the chip, the toolchain, the batch and the kind of graph:
# TensorRT runs BERT's fused attention and GEMMs at a different fraction than ResNet's convolutions. So a
# projection prefers points of the same kind of model, on the same target, then on targets with the same chip
# (same toolchain and compute capability: H200 and H100, L40S and L4, the A100s), and only then shifts points
# of the other kind by the toolchain's measured difference between the kinds (``class_offset``).
MODEL_CLASSES = (
    ("cnn", ("resnet", "mobilenet", "efficientnet", "vgg", "yolo", "densenet", "inception")),
    ("transformer", ("bert", "distilbert", "roberta", "minilm", "vit", "gpt", "llama", "t5")),
)


def model_class(name: str | None) -> str | None:
    """``cnn`` | ``transformer`` from a model's name (the published models and the built-ins), else None."""
    low = (name or "").lower()
    for cls, prefixes in MODEL_CLASSES:
        if low.startswith(prefixes):
            return cls
    return None


def architecture(target: HardwareTarget) -> str:
    """Targets that share a chip and a toolchain (and so fractions of peak): toolchain + compute capability."""
    cc = target.compute_capability
    return f"{target.toolchain}/{cc}" if cc else f"{target.toolchain}/{target.id}"


Use = Callable[[PublishedPoint], bool]  # which published points may enter a fit (validation leaves some out)


def every_point(_point: PublishedPoint) -> bool:
    """The default ``Use``: every published point may enter a fit."""
    return True


def point_roofline(
    point: PublishedPoint, cost: Mapping[str, float], target: HardwareTarget, roofline: RooflineFn
) -> FittedPoint:
    """The roofline of a published point's own graph cost, batch and precision on its target."""
    rp = roofline(
        float(cost["flops_per_inference"]), float(cost["activation_bytes_per_inference"]), int(point.batch),
        target, point.precision, weight_bytes=float(cost["weight_bytes"]),
    )  # fmt: skip
    return FittedPoint(point, rp, float(cost["weight_bytes"]))


def fitted_points(
    catalog: Catalog,
    target_id: str,
    roofline: RooflineFn,
    exclude_model: str | None = None,
    use: Use = every_point,
) -> list[FittedPoint]:
    """The target's published points that enter its fit (``fit = true``), minus ``exclude_model``; MLPerf's
    variable-length BERT points too, with their graph's work scaled by ``work_factor`` where one is known."""
    target = catalog.get(target_id)
    out = []
    for p in catalog.published_for(target_id):
        if p.model == exclude_model or not use(p):
            continue
        cost = catalog.published_costs[p.model][p.precision]
        if p.fit:
            out.append(point_roofline(p, cost, target, roofline))
        elif variable_length(p):
            k = work_factor(catalog, p.model, p.precision, roofline, use)
            if k:
                out.append(point_roofline(p, _less_work(cost, k), target, roofline))
    return out


def variable_length(p: PublishedPoint) -> bool:
    """MLPerf BERT on the GPU alone: the harness runs each SQuAD sample at its own length (no padding)."""
    return (
        not p.fit
        and p.family == "mlperf"
        and p.engines == "gpu"
        and p.model.startswith("bert")
        and p.batch > 1
    )


def _less_work(cost: Mapping[str, float], k: float) -> dict[str, float]:
    """The padded graph's cost with ``k`` times less work per sample (FLOPs and activations; same weights)."""
    return {
        **cost,
        "flops_per_inference": float(cost["flops_per_inference"]) / k,
        "activation_bytes_per_inference": float(cost["activation_bytes_per_inference"]) / k,
    }


def work_factor(
    catalog: Catalog, model: str, precision: str, roofline: RooflineFn, use: Use = every_point
) -> float | None:
    """How much more work the padded ``model`` graph counts than MLPerf's variable-length run does: on a chip
    that published both (the MLPerf result and a fixed-length table of the same graph and precision, e.g. the
    A100's demoBERT bert-large-384 tables), the fraction of peak of MLPerf's largest batch ÷ that of the table's
    largest batch, both saturated; median over such pairs. None where no chip has both (the points stay out).
    The factor is a property of the data set (SQuAD's lengths), so it carries to every target."""
    ratios = []
    for tid, t in sorted(catalog.targets.items()):
        mine = [p for p in catalog.published_for(tid) if p.model == model and p.precision == precision
                and variable_length(p) and use(p)]  # fmt: skip
        if not mine:
            continue
        arch = architecture(t)
        fixed = [
            p for sid, s in sorted(catalog.targets.items()) if architecture(s) == arch
            for p in catalog.published_for(sid)
            if p.model == model and p.precision == precision and p.fit and use(p)
        ]  # fmt: skip
        if not fixed:
            continue
        cost = catalog.published_costs[model][precision]
        a = point_roofline(max(mine, key=lambda p: p.batch), cost, t, roofline).peak_fraction
        top = max(fixed, key=lambda p: p.batch)
        b = point_roofline(top, cost, catalog.get(top.target), roofline).peak_fraction
        ratios.append(a / b)
    return statistics.median(ratios) if ratios else None


def siblings(catalog: Catalog, target: HardwareTarget) -> list[str]:
    """The other targets with the target's chip, those with its power limit first (SXM before PCIe)."""
    arch = architecture(target)
    same = [t for tid, t in sorted(catalog.targets.items()) if tid != target.id and architecture(t) == arch]
    tdp = target.tdp_w or 0
    return [t.id for t in sorted(same, key=lambda t: (abs((t.tdp_w or 0) - tdp), t.id))]


def _describe(points: Iterable[FittedPoint]) -> str:
    pts = list(points)
    srcs = sorted({p.point.software.split(";")[0] for p in pts})
    models = sorted({p.point.model for p in pts})
    dates = sorted({p.point.date for p in pts})
    span = " – ".join(sorted({dates[0], dates[-1]}))
    return f"{len(pts)} point(s) of {', '.join(models)}; {' / '.join(srcs)} ({span})"


def class_offset(
    catalog: Catalog, toolchain: str, cls: str, roofline: RooflineFn, use: Use = every_point
) -> float | None:
    """Mean log fraction of peak of the per-sample term t1 (``kind_fractions``) of ``cls`` points minus that of
    the other kind, within each chip that has both (median over chips); None when no chip has both kinds."""
    by_arch: dict[str, list[FittedPoint]] = {}
    for tid, t in sorted(catalog.targets.items()):
        if t.toolchain == toolchain:
            by_arch.setdefault(architecture(t), []).extend(fitted_points(catalog, tid, roofline, use=use))
    offsets = []
    for pts in by_arch.values():
        kinds = {model_class(p.point.model) for p in pts}
        if cls not in kinds or len(kinds - {cls, None}) == 0:
            continue
        mine = kind_fractions([p for p in pts if model_class(p.point.model) == cls], pts)
        other = kind_fractions([p for p in pts if model_class(p.point.model) not in (cls, None)], pts)
        offsets.append(statistics.fmean(mine) - statistics.fmean(other))
    return statistics.median(offsets) if offsets else None


def kind_fractions(kind: list[FittedPoint], chip: list[FittedPoint]) -> list[float]:
    """Log fractions of peak of the per-sample term of one kind's points on a chip, with the kind's fixed term
    (else the chip's); the points that are mostly fixed term are left out where others remain. Comparing the
    per-sample terms compares the kinds' kernels, not the batches they happened to be published at."""
    t0 = fixed_term(kind) or fixed_term(chip) or 0.0
    says = [p for p in kind if p.point.batch / p.point.throughput_ips >= 2 * t0] or kind
    return [math.log(per_sample_fraction(p, t0)) for p in says]


def _closest_sibling_points(
    catalog: Catalog, target: HardwareTarget, roofline: RooflineFn, use: Use, cls: str | None
) -> list[FittedPoint]:
    """The points of the same-chip targets nearest in power limit that have any (of ``cls`` if some do)."""
    by_tdp: dict[float, list[FittedPoint]] = {}
    tdp = target.tdp_w or 0
    for tid in siblings(catalog, target):
        gap = abs((catalog.get(tid).tdp_w or 0) - tdp)
        by_tdp.setdefault(gap, []).extend(fitted_points(catalog, tid, roofline, use=use))
    groups = [pts for _, pts in sorted(by_tdp.items()) if pts]
    for pts in groups:
        if cls is not None and any(model_class(p.point.model) == cls for p in pts):
            return pts
    return groups[0] if groups else []


@dataclass(frozen=True)
class _Pool:
    points: list[FittedPoint]
    shifted: frozenset[int]  # indexes of points of the other kind, shifted by the class offset
    offset: float
    where: str


def _pool(
    catalog: Catalog, target: HardwareTarget, cls: str | None, roofline: RooflineFn, use: Use
) -> _Pool | None:
    """The points a projection of a ``cls`` graph on ``target`` rests on, in order of preference."""
    own = fitted_points(catalog, target.id, roofline, use=use)
    sib = _closest_sibling_points(catalog, target, roofline, use, cls)
    chip = f"same chip: {target.toolchain}, compute capability {target.compute_capability}"

    def of_class(pts: list[FittedPoint]) -> list[FittedPoint]:
        return [p for p in pts if model_class(p.point.model) == cls]

    def borrowed(pts: list[FittedPoint]) -> str:
        return f"borrowed from {', '.join(sorted({p.point.target for p in pts}))} ({chip})"

    if cls is not None:
        # the chip's fractions are the chip's: its own points and its siblings' of the kind fit together
        if of_class(own):
            mine, theirs = of_class(own), of_class(sib)
            both = f"{target.id}'s" + (f" and {borrowed(theirs)}" if theirs else "")
            return _Pool(mine + theirs, frozenset(), 0.0, both)
        if of_class(sib):
            return _Pool(of_class(sib), frozenset(), 0.0, borrowed(of_class(sib)))
    for pts, where in ((own, f"{target.id}'s"), (sib, None)):
        if not pts:
            continue
        offset = class_offset(catalog, target.toolchain, cls, roofline, use) if cls else None
        if offset is None:
            return _Pool(pts, frozenset(), 0.0, where or borrowed(pts))
        shifted = frozenset(i for i, p in enumerate(pts) if model_class(p.point.model) != cls)
        note = f"; other models shifted by the {target.toolchain} {cls} offset ×{math.exp(offset):.2f}"
        return _Pool(pts, shifted, offset, (where or borrowed(pts)) + note)
    return None


def latency_floor(
    catalog: Catalog,
    target: HardwareTarget,
    roofline: RooflineFn,
    flops: float | None,
    use: Use = every_point,
) -> tuple[float, str] | None:
    """The fastest batch-1 inference published on the target (else on its chip) of a graph no bigger than
    ``flops``: a bigger graph does not complete faster on that stack (kernel launches, clocks and the host round
    trip cost time a roofline of FLOPs and bytes does not see). None when no such point exists."""
    if not flops:
        return None
    for tids in ([target.id], siblings(catalog, target)):
        pts = [
            p for tid in tids for p in catalog.published_for(tid)
            if p.batch == 1 and use(p) and p.engines == "gpu"
            and float(catalog.published_costs[p.model][p.precision]["flops_per_inference"]) <= flops
        ]  # fmt: skip
        if pts:
            best = max(pts, key=lambda p: p.throughput_ips)
            return 1.0 / best.throughput_ips, (
                f"latency floor {1e3 / best.throughput_ips:.3g} ms: the fastest batch-1 inference of a graph no "
                f"bigger, {best.model} on {best.target} ({best.software.split(';')[0]}, {best.date})"
            )
    return None


def target_model(
    catalog: Catalog,
    target_id: str,
    roofline: RooflineFn,
    exclude_model: str | None = None,
    model: str | None = None,
    use: Use = every_point,
) -> EfficiencyModel | None:
    """Fit on the published points that speak for ``target_id`` (its own, else its chip's: ``_pool``) for a
    graph of ``model``'s kind; None when there are none.

    The batch slope comes from the pool's models published at several batches, else from those of the other
    targets of its toolchain (the toolchain's shape, this target's level). The range adds the jackknife: the
    fit redone with each point left out, so a fit through two points still shows how much it rests on each.
    """
    target = catalog.get(target_id)

    def keep(p: PublishedPoint) -> bool:
        return p.model != exclude_model and use(p)

    pool = _pool(catalog, target, model_class(model), roofline, keep)
    if pool is None:
        return None
    others = [
        fp
        for tid, t in sorted(catalog.targets.items())
        if t.toolchain == target.toolchain and tid != target_id
        for fp in fitted_points(catalog, tid, roofline, use=keep)
    ]
    cls = model_class(model)
    eff = _fit_points(target_id, pool, others, target.toolchain, cls, catalog, model)
    if len(pool.points) > 1:
        jackknife = tuple(
            _fit_points(target_id, _without(pool, i), others, target.toolchain, cls, catalog, model)
            for i in range(len(pool.points))
        )
        eff = replace(eff, jackknife=jackknife)
    return eff


def with_floor(eff: EfficiencyModel, catalog: Catalog, target: HardwareTarget, roofline: RooflineFn, flops: float | None,
               use: Use = every_point) -> EfficiencyModel:  # fmt: skip
    """``eff`` with the target's latency floor for a graph of ``flops`` per inference, where one exists."""
    floor = latency_floor(catalog, target, roofline, flops, use)
    return replace(eff, floor_s=floor[0], floor_source=floor[1]) if floor else eff


def _without(pool: _Pool, i: int) -> _Pool:
    pts = pool.points[:i] + pool.points[i + 1 :]
    shifted = frozenset(j - (j > i) for j in pool.shifted if j != i)
    return _Pool(pts, shifted, pool.offset, pool.where)


def _kind_graphs(points: Iterable[FittedPoint], cls: str | None) -> list[str]:
    return sorted({p.point.model for p in points if cls is not None and model_class(p.point.model) == cls})


def _fixed_terms(
    catalog: Catalog, points: list[FittedPoint], model: str | None
) -> tuple[FixedTerms, list[str]]:
    """The chip × graph fixed terms of ``points``' series, and the published graphs that are ``model`` (its name,
    else the published graphs named ``model``-…, e.g. bert-base → bert-base-128, bert-base-384)."""
    # a variable-length point's work is not its graph's: it places no fixed term
    rows = [(architecture(catalog.get(p.point.target)), p.point.target, p.point.model, p.point.precision,
             p.point.batch, p.point.batch / p.point.throughput_ips) for p in points if p.point.fit]  # fmt: skip
    terms = factor_fixed_terms(series_t0(rows))
    names = sorted(terms.graph)
    graphs = [model] if model in terms.graph else [g for g in names if model and g.startswith(f"{model}-")]
    return terms, graphs


def _fit_points(
    target_id: str,
    pool: _Pool,
    others: list[FittedPoint],
    toolchain: str,
    cls: str | None,
    catalog: Catalog,
    model: str | None,
) -> EfficiencyModel:
    """The level from the pool; the batch slope from the pool's own models published at several batches, else
    from the toolchain's models of the kind (pool and others), else from all of the toolchain's."""
    pts = pool.points
    sxy, sxx, batch_range = within_model_slope(pts)
    shape = "its own models"
    if sxx <= 1e-12:
        everything = list({id(p.point): p for p in [*pts, *others]}.values())
        same_kind = [p for p in everything if cls is not None and model_class(p.point.model) == cls]
        sxy, sxx, batch_range = within_model_slope(same_kind)
        shape = f"the {toolchain} toolchain's {cls} models"
        if sxx <= 1e-12:
            sxy, sxx, batch_range = within_model_slope(everything)
            shape = f"the {toolchain} toolchain's models"
    slope = sxy / sxx if sxx > 1e-12 else 0.0
    label = (
        f"published: fraction of peak fitted on {pool.where} {_describe(pts)}; batch slope {slope:.2f} "
        f"from {shape} models published at several batches"
    )
    samples = [
        (p.point.batch, p.peak_fraction * (math.exp(pool.offset) if i in pool.shifted else 1.0))
        for i, p in enumerate(pts)
    ]
    everything = list({id(p.point): p for p in [*pts, *others]}.values())
    terms, graphs = _fixed_terms(catalog, everything, model)
    chip = architecture(catalog.get(target_id)) if target_id else ""
    kinds = {k: _kind_graphs(everything, k) for k in {cls, *(model_class(p.point.model) for p in pts)}}
    t0 = terms.at(chip, graphs, kinds[cls])
    if not t0:
        return fit(samples, "published", label, slope=slope, x_range=batch_range)
    own = [terms.at(architecture(catalog.get(p.point.target)), [p.point.model],
                    kinds[model_class(p.point.model)]) or t0 for p in pts]  # fmt: skip
    # a point whose time is mostly the fixed term says little about t1: the others fit it where there are any
    says = [i for i, p in enumerate(pts) if p.point.batch / p.point.throughput_ips >= 2 * own[i]] or range(
        len(pts)
    )
    per_sample = [
        (samples[i][0], per_sample_fraction(pts[i], own[i]) * samples[i][1] / pts[i].peak_fraction)
        for i in says
    ]
    whose = f"{graphs[0]}'s" if graphs and graphs[0] in terms.graph else f"the median {cls or ''} graph's"
    label = label.split("; batch slope")[0] + (
        f"; batch latency t0 + b·t1 with t0 = {t0 * 1e3:.3g} ms ({whose} fixed term on this chip: chip × graph "
        f"factors fitted on {terms.n_series} series published at several batches), fraction of peak of t1 fitted"
    )
    # n_points: every point the fit rests on (the fixed term included), not only those that placed t1
    return replace(fit(per_sample, "published", label, slope=0.0), t0_s=t0, n_points=len(pts))


def graph_fixed_term(
    catalog: Catalog, target: HardwareTarget, graph: str, roofline: RooflineFn, use: Use = every_point
) -> tuple[float, bool] | None:
    """(t0 in seconds, whether the chip itself published a series) of the published ``graph`` on ``target``'s chip,
    from the chip × graph factors fitted over every series of its toolchain (the median chip's where the chip
    published none); None where the toolchain has no series or the graph was never published at several batches."""
    pts = [
        fp
        for tid, t in sorted(catalog.targets.items())
        if t.toolchain == target.toolchain
        for fp in fitted_points(catalog, tid, roofline, use=use)
    ]
    terms, graphs = _fixed_terms(catalog, pts, graph)
    t0 = terms.at(architecture(target), graphs, []) if graph in graphs else None
    return (t0, architecture(target) in terms.chip) if t0 else None


def fixed_term(points: Iterable[FittedPoint]) -> float | None:
    """Median over each (target, model, precision) series published at several batches of the intercept t0 of
    batch latency b ÷ inf/s = t0 + b·t1 through its two smallest batches: the fixed cost per batch (launches,
    clocks, host). The smallest batches, because that is where the line holds: at the largest ones a table
    often stops gaining (the L40S's demoBERT rates fall from batch 32 to 128), and a least-squares line through
    all of them puts t0 near zero."""
    series: dict[tuple[str, str, str], dict[float, float]] = {}
    for p in points:
        key = (p.point.target, p.point.model, p.point.precision)
        series.setdefault(key, {})[float(p.point.batch)] = p.point.batch / p.point.throughput_ips
    t0s = []
    for pts in series.values():
        if len(pts) < 2:
            continue
        (b1, t1b), (b2, t2b) = sorted(pts.items())[:2]
        slope = (t2b - t1b) / (b2 - b1)
        t0s.append(min(max(t1b - slope * b1, 0.0), t1b))
    return statistics.median(t0s) if t0s else None


def per_sample_fraction(p: FittedPoint, t0: float) -> float:
    """The fraction of peak of a point's per-sample term t1 = (b ÷ inf/s − t0) ÷ b, given the fixed term; a
    point faster than t0 allows (another graph's t0) keeps at least half its time per sample."""
    t_batch = p.point.batch / p.point.throughput_ips
    t1 = max(t_batch - t0, 0.5 * t_batch) / p.point.batch
    flops = float(p.roofline.flops_per_batch) / p.point.batch
    return flops / (t1 * float(p.roofline.peak_flops_per_s))


def toolchain_model(
    catalog: Catalog, toolchain: str, roofline: RooflineFn, model: str | None = None, use: Use = every_point
) -> EfficiencyModel | None:
    """Every fitted point of the toolchain's targets (of ``model``'s kind when there are any, else all, shifted
    by the class offset), fitted with the batch slope; range = the points' spread around it."""
    pts = [
        fp
        for tid, t in sorted(catalog.targets.items())
        if t.toolchain == toolchain
        for fp in fitted_points(catalog, tid, roofline, use=use)
    ]
    if not pts:
        return None
    cls = model_class(model)
    same = [p for p in pts if cls is not None and model_class(p.point.model) == cls]
    offset = class_offset(catalog, toolchain, cls, roofline, use) if cls and not same else None
    chosen = same or pts
    shifted = frozenset(
        i for i, p in enumerate(chosen) if offset is not None and model_class(p.point.model) != cls
    )
    where = (
        f"the {toolchain} toolchain (no published results for this target or its chip): "
        f"{', '.join(sorted({p.point.target for p in chosen}))}"
    )
    eff = _fit_points("", _Pool(chosen, shifted, offset or 0.0, where), pts, toolchain, cls, catalog, model)
    return replace(eff, kind="toolchain-median", label=eff.label.replace("published: ", "toolchain: ", 1))


def model_for(
    catalog: Catalog,
    target: HardwareTarget,
    roofline: RooflineFn,
    model: str | None = None,
    use: Use = every_point,
) -> EfficiencyModel | None:
    """The fit for ``model``'s kind on the target (or its chip), else its toolchain's, else None."""
    return target_model(catalog, target.id, roofline, model=model, use=use) or toolchain_model(
        catalog, target.toolchain, roofline, model=model, use=use
    )
