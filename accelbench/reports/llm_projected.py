"""Projected generative rows: THE path ``report --project`` and ``accelbench project`` take (project_generative),
with the serving recipe, every tensor-parallel degree (choose_tp), the range (fit_spread), and the published
``[[llm_points]]`` reproduced through it (reproduce)."""

from __future__ import annotations

import math
import weakref
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from accelbench.errors import BadInputError
from accelbench.hardware.catalog import HardwareTarget
from accelbench.hardware.llm_memory import (
    KV_PRECISION,
    ModelShape,
    activation_bytes,
    load_shape,
    runs_precision,
    serving_recipe,
    tp_degrees,
)
from accelbench.hardware.llm_published import LlmPoint
from accelbench.hardware.llm_roofline import FrontierPoint, LlmCost
from accelbench.loadtests.statistics import FAIL, PASS
from accelbench.reports.cost import PriceQuote
from accelbench.reports.llm_projection import (
    UNPUBLISHED_TOOLCHAIN_LOW,
    Efficiency,
    LlmEfficiencies,
    Projection,
    cost_from_graph_cost,
    project,
)
from accelbench.reports.llm_rows import GenPoint, GenRow, combine


@dataclass(frozen=True)
class ProjectionRequest:
    """What a projected generative row is asked for: a model (a card name or path), its weights' precision, the
    workload's ISL/OSL and the KV cache dtype (None: the engines' default for the weights and target)."""

    model: str
    precision: str
    isl: int | None
    osl: int | None
    kv_dtype: str | None = None
    shape: ModelShape | None = None  # the model's shape when known (hf:DIR); else its card by ``model``
    tp: int | None = None  # None: every TP degree the instance allows, the cheapest per token kept


def project_generative(
    req: ProjectionRequest,
    target: HardwareTarget,
    efficiencies: LlmEfficiencies | None,
    ttft_ms: float,
    tpot_ms: float,
    prices: Mapping[str, PriceQuote],
    graph_cost: Mapping[str, Any] | None = None,
    efficiency: Efficiency | None = None,
    with_range: bool = True,
) -> GenRow:
    """THE projected generative row (``report --project`` and ``accelbench project`` both call it): the serving
    recipe (llm_memory.serving_recipe), the model's roofline cost in it, the frontier (llm_projection.project)
    at every TP degree (choose_tp), each point's verdicts at the objectives and its range (fit_spread); the
    capacity is the fastest point meeting both. ``efficiency``: this one, not the target's (fit_spread's own
    use), ``with_range`` False: no range (the points the range is built from)."""
    isl, osl = req.isl, req.osl
    row = GenRow(req.model, req.precision, target.id, "projected", isl, osl, [], None, "", prices=prices)
    if not isl or not osl:
        return replace(row, reason="not projected: the workload records no ISL/OSL")
    try:
        recipe = serving_recipe(target, req.precision, req.kv_dtype)
    except BadInputError as err:
        return replace(row, reason=f"not projected: {err}")
    why_not = runs_precision(target, req.precision)
    if why_not:  # no recipe to name: the target has no such compute
        return replace(row, reason=f"does not run {req.precision}: {why_not}")
    row = replace(row, recipe=recipe)
    try:  # a card with the published shape beats the graph cost (it knows the attention size and KV heads)
        shape = req.shape or load_shape(req.model)
        activations = activation_bytes(shape)
        cost = LlmCost.of(shape, req.precision, recipe.kv_cache)
        kv_heads, weights = shape.kv_heads, shape.weight_bytes(req.precision)
    except BadInputError:
        activations = 0.0  # a graph cost has no layer shapes to size them by
        got = cost_from_graph_cost(graph_cost or {})
        if got is None:
            return replace(
                row,
                reason="not projected: the results carry no generative graph_cost (params, weight and KV bytes)",
            )
        cost, kv_heads, weights = got[0], 1, got[0].weight_bytes
        kv = KV_PRECISION.get(str((graph_cost or {}).get("kv_dtype")), recipe.kv_cache)
        row = replace(row, recipe=replace(recipe, kv_cache=kv, kv_source="the results' graph_cost"))
    eff = efficiency or (
        efficiencies.for_target(target, precision=req.precision) if efficiencies is not None else None
    )
    band = fit_spread(efficiencies, target, eff) if with_range and efficiencies and eff else None
    options = []
    for tp in (req.tp,) if req.tp else linked_tp_degrees(target):
        try:
            proj = project(cost, kv_heads, target, req.precision, isl, osl, eff, weights, tp, activations)
        except BadInputError as err:
            return replace(row, reason=f"not projected: {err}")
        options.append(_tp_option(proj, band, isl, osl, ttft_ms, tpot_ms))
    best = choose_tp(options)
    proj, points, capacity = best.projection, best.points, best.capacity
    reason = proj.reason
    if proj.points and capacity is None:
        reason = f"does not meet the objective (projected): {proj.reason}"
    elif len([o for o in options if o.projection.points]) > 1:
        reason += (
            f"; TP {proj.tp} of {', '.join(str(o.tp) for o in options if o.projection.points)} ({TP_RULE})"
        )
    return replace(
        row,
        points=points,
        capacity=capacity,
        reason=reason,
        tp=proj.tp,
        max_batch=proj.max_batch,
        efficiency_source=None if eff is None else f"{eff.label}; {band.text}" if band else eff.label,
        efficiency_kind=eff.kind if eff is not None else None,
        tp_options=tuple(o.summary() for o in options if o.projection.points),
    )


# A target with no published LLM point of its own borrows its toolchain's (or every target's) efficiencies; how far
# that can be off is what leaving a target out shows (issue 48 item 7 bounds it at 1.5×), so its range is the
# borrowed points' spread widened this much either way.
RANGE_WIDEN = 1.5
_SPREADS: weakref.WeakKeyDictionary[LlmEfficiencies, dict[tuple[str, ...], tuple[float, float]]] = (
    weakref.WeakKeyDictionary()
)


@dataclass(frozen=True)
class Band:
    """A projection's range as factors of it: [value × low, value × high], and what it rests on."""

    low: float
    high: float
    text: str


def _pool(efficiencies: LlmEfficiencies, target: HardwareTarget, eff: Efficiency) -> list[LlmPoint]:
    """The published points ``eff`` rests on: the target's own, else its chip's, else its toolchain's, else all
    (by its kind, llm_projection.LlmEfficiencies._fit)."""
    pts = [p.point for p in efficiencies.points]
    if eff.kind == "published":
        return [p for p in pts if p.target == target.id]
    if eff.kind == "chip":
        return [
            p
            for p in pts
            if (
                efficiencies.catalog.get(p.target).toolchain,
                efficiencies.catalog.get(p.target).compute_capability,
            )
            == (target.toolchain, target.compute_capability)
        ]
    if eff.kind == "toolchain":
        return [p for p in pts if efficiencies.catalog.get(p.target).toolchain == target.toolchain]
    return pts


def fit_spread(efficiencies: LlmEfficiencies, target: HardwareTarget, eff: Efficiency) -> Band | None:
    """The range of a projection on ``target`` with ``eff``: the fit's spread. Each published point ``eff`` rests
    on (its own, else its toolchain's, else all) is projected back through this same path with ``eff``'s decode
    and prefill efficiencies (its own target's floors) and divided by what was published; the projection ÷ the
    highest and lowest of those ratios (and never excluding the projection itself) bound the range, widened
    RANGE_WIDEN× either way where the target has no published LLM point of its own. None without points."""
    pool = _pool(efficiencies, target, eff)
    key = (eff.kind, f"{eff.decode!r}/{eff.prefill!r}", *sorted(p.label for p in pool))
    cache = _SPREADS.setdefault(efficiencies, {})
    if key not in cache:
        ratios = []
        for p in pool:
            own = efficiencies.for_target(efficiencies.catalog.get(p.target))
            forced = replace(own, decode=eff.decode, prefill=eff.prefill) if own else eff
            got = reproduce(p, efficiencies.catalog.get(p.target), efficiencies, forced)
            if got is not None:
                ratios.append(got.ratio)
        if not ratios:
            return None
        cache[key] = (min(1.0, *ratios), max(1.0, *ratios))
    lo, hi = cache[key]
    widen = 1.0 if eff.kind == "published" and len(pool) > 1 else RANGE_WIDEN
    what = (
        f"range: the fit's spread over its {len(pool)} point(s) (projected ÷ published {lo:.2f}–{hi:.2f})"
        if widen == 1.0
        else f"range: the spread of the {len(pool)} point(s) it rests on ({lo:.2f}–{hi:.2f}) widened {widen:g}× "
        "either way (no published LLM point of its own, or one)"
    )
    low = 1.0 / (hi * widen)
    if eff.kind == "other-toolchain":  # its toolchain published no LLM point: never another's fit silently
        low *= UNPUBLISHED_TOOLCHAIN_LOW
        what += (
            f"; {1 / UNPUBLISHED_TOOLCHAIN_LOW:g}× lower still: no published {target.toolchain} LLM result"
        )
    return Band(low, widen / lo, what)


def projection_range(point: GenPoint) -> tuple[float, float] | None:
    """The range of a projected point's output tokens/s per accelerator (low, high), None where it has none.

    The ends are the point's projection × the row's Band (fit_spread: ÷ the highest and lowest projected ÷
    published ratio of the points its efficiency rests on, widened where the target has none of its own), so a
    published figure lies inside when ``low <= published <= high``: what a validation counts for coverage
    (``covers``; a validation that leaves points out must build the row from efficiencies fitted without them)."""
    if point.output_tps_low is None or point.output_tps_high is None:
        return None
    return point.output_tps_low, point.output_tps_high


def covers(point: GenPoint, published_tokens_per_s: float) -> bool | None:
    """Whether a projected point's range contains a published output tokens/s per accelerator (None: no range).
    For coverage over held-out points: the share of ``covers(...)`` that is True."""
    got = projection_range(point)
    return None if got is None else inside(published_tokens_per_s, *got)


def inside(value: float, low: float, high: float) -> bool:
    """``low <= value <= high``, give or take the last bits of a float (a range's end built as projected ÷ a
    ratio is the published figure itself, up to rounding)."""
    slack = 1e-9 * max(abs(low), abs(high))
    return low - slack <= value <= high + slack


TP_TIE = 0.01  # a larger degree must serve this much more per accelerator: the projection is not finer
TP_RULE = "the most output tokens/s per accelerator at the objective, all-reduces over the instance's links included"


def linked_tp_degrees(target: HardwareTarget) -> tuple[int, ...]:
    """The TP degrees projected on ``target``: every one its instance allows where the catalog gives its link
    bandwidth (interconnect_gbs, for the all-reduces), else TP 1 only."""
    degrees = tp_degrees(target)
    linked = (getattr(target, "extra", {}) or {}).get("interconnect_gbs")
    return degrees if linked else degrees[:1]


@dataclass(frozen=True)
class TpOption:
    """One tensor-parallel degree of a projected row: its projection, points and capacity at the objective."""

    tp: int
    projection: Projection
    points: list[GenPoint]
    capacity: GenPoint | None

    def summary(self) -> dict[str, Any]:
        """What the JSON row lists for every degree: its batch and capacity per accelerator."""
        c = self.capacity
        return {
            "tp": self.tp,
            "max_batch": self.projection.max_batch,
            "capacity_output_tokens_per_s": c.output_tps if c else None,
            "capacity_output_tokens_per_s_low": c.output_tps_low if c else None,
            "capacity_output_tokens_per_s_high": c.output_tps_high if c else None,
            "reason": self.projection.reason,
        }


def _tp_option(
    proj: Projection, band: Band | None, isl: int, osl: int, ttft_ms: float, tpot_ms: float
) -> TpOption:
    points = [_projected_point(fp, isl, osl, ttft_ms, tpot_ms) for fp in proj.points]
    if band is not None:
        points = [
            replace(p, output_tps_low=p.output_tps * band.low, output_tps_high=p.output_tps * band.high)
            for p in points
        ]
    passing = [p for p in points if p.verdict == PASS]
    capacity = max(passing, key=lambda p: p.output_tps) if passing else None
    return TpOption(proj.tp or 0, proj, points, capacity)


def choose_tp(options: Sequence[TpOption]) -> TpOption:
    """The cheapest degree per token (TP_RULE): a degree's price is t accelerator-hours, so the most output
    tokens/s per accelerator at the objective (within TP_TIE of each other: the smaller degree, which needs fewer
    accelerators per replica); the smallest that fits where none meets it."""
    fitting = [o for o in options if o.projection.points] or list(options)
    best = fitting[0]
    for o in fitting[1:]:
        if o.capacity is not None and (
            best.capacity is None or o.capacity.output_tps > best.capacity.output_tps * (1 + TP_TIE)
        ):
            best = o
    return best


def _projected_point(fp: FrontierPoint, isl: int, osl: int, ttft_ms: float, tpot_ms: float) -> GenPoint:
    v_ttft = PASS if fp.ttft_s * 1000 <= ttft_ms else FAIL
    v_tpot = PASS if fp.tpot_s * 1000 <= tpot_ms else FAIL
    return GenPoint(
        fp.batch,
        fp.output_tokens_per_s_per_accelerator,
        None,
        None,
        fp.output_tokens_per_s_per_accelerator * isl / osl,
        fp.tokens_per_s_per_user,
        fp.ttft_s * 1000,
        fp.tpot_s * 1000,
        v_ttft,
        v_tpot,
        combine(v_ttft, v_tpot),
    )


@dataclass(frozen=True)
class Reproduced:
    """A published ``[[llm_points]]`` point projected back through the report's own path (project_generative)."""

    point: LlmPoint
    row: GenRow
    projected_tokens_per_s: float  # as the point publishes it: whole TP group
    ratio: float  # projected ÷ published
    low_tokens_per_s: float | None = None  # the range (fit_spread), as projected_tokens_per_s
    high_tokens_per_s: float | None = None

    @property
    def covered(self) -> bool | None:
        """Whether the published figure lies inside the projected range (None: no range)."""
        if self.low_tokens_per_s is None or self.high_tokens_per_s is None:
            return None
        return inside(self.point.output_tokens_per_s, self.low_tokens_per_s, self.high_tokens_per_s)


def reproduce(
    point: LlmPoint,
    target: HardwareTarget,
    efficiencies: LlmEfficiencies,
    efficiency: Efficiency | None = None,
) -> Reproduced | None:
    """``point`` projected as ``report``/``project`` would project its model, precision and ISL/OSL on its target
    (the default serving recipe, no objective; ``efficiency`` instead of the target's, without a range: how
    fit_spread uses it): a maximum-throughput point is the capacity (the largest batch),
    read for the whole TP group; a fixed-batch point the decode rate at its batch (batch ÷ TPOT, as published).
    None where the row has no such point (its reason says why)."""
    req = ProjectionRequest(point.model, point.precision, point.isl, point.osl, tp=point.tp)
    row = project_generative(
        req,
        target,
        efficiencies,
        math.inf,
        math.inf,
        {},
        efficiency=efficiency,
        with_range=efficiency is None,
    )
    if point.batch:
        at = next((p for p in row.points if p.concurrency == point.batch), None)
    elif point.max_batch:  # the engine's compiled batch, where the memory holds more
        held = [p for p in row.points if p.concurrency is not None and p.concurrency <= point.max_batch]
        at = max(held, key=lambda p: p.concurrency or 0.0, default=None)
    else:
        at = row.capacity
    if at is None or (point.batch and not at.tokens_per_user):
        return None
    # whole group; a fixed-batch point's decode rate scales with its range as the point's output rate does
    got = (at.tokens_per_user or 0) * point.batch if point.batch else at.output_tps * (row.tp or 1)
    scale = got / at.output_tps
    rng = projection_range(at)
    low, high = (rng[0] * scale, rng[1] * scale) if rng else (None, None)
    return Reproduced(point, row, got, got / point.output_tokens_per_s, low, high)
