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
from collections.abc import Iterable
from dataclasses import dataclass, replace

from accelbench.hardware.catalog import Catalog, HardwareTarget
from accelbench.hardware.published import PublishedPoint
from accelbench.reports.efficiency_curve import EfficiencyModel, RooflineFn, constant, fit
from accelbench.reports.fixed_term import FixedTerms, series_t0
from accelbench.reports.fixed_term import factor as factor_fixed_terms
from accelbench.reports.published_points import (
    MODEL_CLASSES,
    FittedPoint,
    Use,
    architecture,
    class_offset,
    every_point,
    fitted_points,
    fixed_term,
    kind_fractions,
    latency_floor,
    model_class,
    per_sample_fraction,
    point_roofline,
    siblings,
    variable_length,
    within_model_slope,
    work_factor,
)

# the fit's vocabulary lives in efficiency_curve.py and published_points.py; callers keep reading it here
__all__ = [
    "EfficiencyModel",
    "FittedPoint",
    "MODEL_CLASSES",
    "RooflineFn",
    "Use",
    "architecture",
    "class_offset",
    "constant",
    "every_point",
    "fit",
    "fitted_points",
    "fixed_term",
    "graph_fixed_term",
    "kind_fractions",
    "latency_floor",
    "model_class",
    "model_for",
    "per_sample_fraction",
    "point_roofline",
    "published_sizes",
    "siblings",
    "target_model",
    "toolchain_fixed_terms",
    "toolchain_model",
    "variable_length",
    "with_floor",
    "within_model_slope",
    "work_factor",
]


def _describe(points: Iterable[FittedPoint]) -> str:
    pts = list(points)
    srcs = sorted({p.point.software.split(";")[0] for p in pts})
    models = sorted({p.point.model for p in pts})
    dates = sorted({p.point.date for p in pts})
    span = " – ".join(sorted({dates[0], dates[-1]}))
    return f"{len(pts)} point(s) of {', '.join(models)}; {' / '.join(srcs)} ({span})"


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


def target_model(
    catalog: Catalog,
    target_id: str,
    roofline: RooflineFn,
    exclude_model: str | None = None,
    model: str | None = None,
    use: Use = every_point,
    depth: float | None = None,
) -> EfficiencyModel | None:
    """Fit on the published points that speak for ``target_id`` (its own, else its chip's: ``_pool``) for a
    graph of ``model``'s kind (of ``depth``, from its ``graph_cost``, where it was never published); None when
    there are none.

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
    eff = _fit_points(target_id, pool, others, target.toolchain, cls, catalog, model, depth)
    if len(pool.points) > 1:
        jackknife = tuple(
            _fit_points(target_id, _without(pool, i), others, target.toolchain, cls, catalog, model, depth)
            for i in range(len(pool.points))
        )
        eff = replace(eff, jackknife=jackknife)
    return eff


def with_floor(
    eff: EfficiencyModel,
    catalog: Catalog,
    target: HardwareTarget,
    roofline: RooflineFn,
    flops: float | None,
    use: Use = every_point,
) -> EfficiencyModel:
    """``eff`` with the target's latency floor for a graph of ``flops`` per inference, where one exists."""
    floor = latency_floor(catalog, target, roofline, flops, use)
    return replace(eff, floor_s=floor[0], floor_source=floor[1]) if floor else eff


def _without(pool: _Pool, i: int) -> _Pool:
    pts = pool.points[:i] + pool.points[i + 1 :]
    shifted = frozenset(j - (j > i) for j in pool.shifted if j != i)
    return _Pool(pts, shifted, pool.offset, pool.where)


def _kind_graphs(points: Iterable[FittedPoint], cls: str | None) -> list[str]:
    return sorted({p.point.model for p in points if cls is not None and model_class(p.point.model) == cls})


def published_sizes(catalog: Catalog, key: str = "depth") -> dict[str, float]:
    """Each published graph's ``depth`` (or ``ops``) from its ``[models.*]`` graph cost, where counted (the
    same at every precision: the graph is counted once per precision)."""
    return {
        graph: float(cost[key])
        for graph, by_precision in catalog.published_costs.items()
        for cost in by_precision.values()
        if cost.get(key)
    }


def _fixed_terms(
    catalog: Catalog, points: list[FittedPoint], model: str | None
) -> tuple[FixedTerms, list[str]]:
    """The chip × graph fixed terms of ``points``' series (with the published graphs' depths), and the published
    graphs that are ``model`` (its name, else those named ``model``-…, e.g. bert-base → bert-base-128, -384)."""
    # a variable-length point's work is not its graph's: it places no fixed term
    rows = [
        (
            architecture(catalog.get(p.point.target)),
            p.point.target,
            p.point.model,
            p.point.precision,
            p.point.batch,
            p.point.batch / p.point.throughput_ips,
        )
        for p in points
        if p.point.fit
    ]
    terms = replace(factor_fixed_terms(series_t0(rows)), depth=published_sizes(catalog))
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
    depth: float | None = None,
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
    t0 = terms.at(chip, graphs, kinds[cls], depth)
    if not t0:
        return fit(samples, "published", label, slope=slope, x_range=batch_range)
    own = [
        terms.at(
            architecture(catalog.get(p.point.target)), [p.point.model], kinds[model_class(p.point.model)]
        )
        or t0
        for p in pts
    ]
    # a point whose time is mostly the fixed term says little about t1: the others fit it where there are any
    says = [i for i, p in enumerate(pts) if p.point.batch / p.point.throughput_ips >= 2 * own[i]] or range(
        len(pts)
    )
    per_sample = [
        (samples[i][0], per_sample_fraction(pts[i], own[i]) * samples[i][1] / pts[i].peak_fraction)
        for i in says
    ]
    _, how, placed_by = terms.placed(graphs, kinds[cls], depth)
    if how == "published":
        whose = f"{placed_by[0]}'s fixed term"
    elif how == "depth":
        whose = f"the fixed term per op of {', '.join(placed_by)}, scaled by its depth of {depth:.0f} ops,"
    else:
        whose = f"the median {cls or ''} graph's fixed term"
    label = label.split("; batch slope")[0] + (
        f"; batch latency t0 + b·t1 with t0 = {t0 * 1e3:.3g} ms ({whose} on this chip: chip × graph "
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
    terms, graphs = toolchain_fixed_terms(catalog, target.toolchain, roofline, graph, use)
    t0 = terms.at(architecture(target), graphs, []) if graph in graphs else None
    return (t0, architecture(target) in terms.chip) if t0 else None


def toolchain_fixed_terms(
    catalog: Catalog, toolchain: str, roofline: RooflineFn, graph: str | None = None, use: Use = every_point
) -> tuple[FixedTerms, list[str]]:
    """The chip × graph fixed terms over every series of the toolchain's targets, and the graphs that are
    ``graph`` (``_fixed_terms``)."""
    pts = [
        fp
        for tid, t in sorted(catalog.targets.items())
        if t.toolchain == toolchain
        for fp in fitted_points(catalog, tid, roofline, use=use)
    ]
    return _fixed_terms(catalog, pts, graph)


def toolchain_model(
    catalog: Catalog,
    toolchain: str,
    roofline: RooflineFn,
    model: str | None = None,
    use: Use = every_point,
    depth: float | None = None,
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
    pool = _Pool(chosen, shifted, offset or 0.0, where)
    eff = _fit_points("", pool, pts, toolchain, cls, catalog, model, depth)
    return replace(eff, kind="toolchain-median", label=eff.label.replace("published: ", "toolchain: ", 1))


def model_for(
    catalog: Catalog,
    target: HardwareTarget,
    roofline: RooflineFn,
    model: str | None = None,
    use: Use = every_point,
    depth: float | None = None,
) -> EfficiencyModel | None:
    """The fit for ``model``'s kind on the target (or its chip), else its toolchain's, else None; ``depth``
    (its ``graph_cost``'s) places the fixed term of a graph never published."""
    return target_model(catalog, target.id, roofline, model=model, use=use, depth=depth) or toolchain_model(
        catalog, target.toolchain, roofline, model=model, use=use, depth=depth
    )
