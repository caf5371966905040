"""What a published point says: its roofline, its graph's kind, its chip, and the facts fitted from several points.

A published point (catalog ``published_results.toml``) gives inferences/s of a graph at a batch on a target; its
``FittedPoint`` adds the roofline of its own graph cost there. The chip (toolchain + compute capability), the kind
of graph (cnn | transformer), MLPerf BERT's variable-length work factor, the toolchain's class offset between the
kinds, the fixed term of a series and the latency floor are read from the points here; ``efficiency.py`` fits
them into an ``EfficiencyModel``. Pure functions over catalog dataclasses; the roofline is passed in.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass

from accelbench.hardware.catalog import Catalog, HardwareTarget
from accelbench.hardware.published import PublishedPoint
from accelbench.hardware.roofline import RooflinePoint
from accelbench.reports.efficiency_curve import RooflineFn


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
        float(cost["flops_per_inference"]),
        float(cost["activation_bytes_per_inference"]),
        int(point.batch),
        target,
        point.precision,
        weight_bytes=float(cost["weight_bytes"]),
    )
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
        mine = [
            p
            for p in catalog.published_for(tid)
            if p.model == model and p.precision == precision and variable_length(p) and use(p)
        ]
        if not mine:
            continue
        arch = architecture(t)
        fixed = [
            p
            for sid, s in sorted(catalog.targets.items())
            if architecture(s) == arch
            for p in catalog.published_for(sid)
            if p.model == model and p.precision == precision and p.fit and use(p)
        ]
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
            p
            for tid in tids
            for p in catalog.published_for(tid)
            if p.batch == 1
            and use(p)
            and p.engines == "gpu"
            and float(catalog.published_costs[p.model][p.precision]["flops_per_inference"]) <= flops
        ]
        if pts:
            best = max(pts, key=lambda p: p.throughput_ips)
            return 1.0 / best.throughput_ips, (
                f"latency floor {1e3 / best.throughput_ips:.3g} ms: the fastest batch-1 inference of a graph no "
                f"bigger, {best.model} on {best.target} ({best.software.split(';')[0]}, {best.date})"
            )
    return None


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
