"""Generative projections: efficiencies fitted on published LLM results, and the projected frontier per target.

A published point (accelbench/hardware/llm_published.py) says what a stack reached; its roofline
(accelbench/hardware/llm_roofline.py) says what the hardware allows for the same model, precision, ISL/OSL and
batch. Their ratio is the point's efficiency:
- decode: output tokens/s ÷ the decode roofline at the point's batch (a fixed-batch point), or ÷ the whole
  steady-batch roofline at the largest batch the memory holds (a maximum-throughput point: prefill and decode
  both at peak, so its efficiency is the fraction of that bound);
- prefill: the prefill compute roofline time ÷ the measured prefill time (points that publish a prefill).
Efficiencies above 1 (a figure beyond the catalog roofline, e.g. a quantized LM head the weights formula does not
know) are clamped to 1 and say so.

For a target: the median of its own points (range = their min–max), else the median over the points of its
toolchain's targets, else over every published LLM point — labelled by which, with the points' software and
dates, so a projected row always names its efficiency's source. ``leave_one_out`` refits without each point and
projects it back (``bench/projection_check.py``).
"""

from __future__ import annotations

import statistics
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from typing import Any, ClassVar

from accelbench.errors import BadInputError
from accelbench.hardware.catalog import Catalog, HardwareTarget
from accelbench.hardware.llm_memory import ModelShape, fit_bytes, fit_on, load_shape
from accelbench.hardware.llm_published import LlmPoint, load_llm_points
from accelbench.hardware.llm_roofline import (
    FrontierPoint,
    LlmCost,
    decode_context,
    frontier,
    roof,
    tpot_s,
    ttft_s,
)
from accelbench.hardware.roofline import roofline_point
from accelbench.models.builtin.transformer import BERT_BASE
from accelbench.reports import efficiency as ef


@dataclass(frozen=True)
class PointEfficiency:
    point: LlmPoint
    batch: int
    bound_tokens_per_s: float
    decode: float  # published ÷ bound, clamped to 1
    decode_raw: float
    prefill: float | None


@dataclass(frozen=True)
class Efficiency:
    decode: float
    decode_low: float
    decode_high: float
    prefill: float
    prefill_low: float
    prefill_high: float
    kind: str  # published | toolchain-median | all-llm-median
    label: str
    n_points: int
    step_floor_s: float = 0.0  # no decode step shorter (step_floor): 0 where none is published on the chip
    step_floor_source: str = ""
    # the fixed cost of one transformer layer on the chip's stack (layer_floor): × a model's layers, no decode
    # step is shorter; 0 where the toolchain published no transformer at several batches
    layer_floor_s: float = 0.0
    layer_floor_source: str = ""

    def floor_s(self, layers: int) -> float:
        """The shortest decode step of a model of ``layers`` layers: the chip's published batch-1 step, and its
        layers' fixed cost (a model whose layer count is unknown, 0, gets the published floor only)."""
        return max(self.step_floor_s, self.layer_floor_s * max(layers, 0))


def _shape(name: str) -> ModelShape:
    return load_shape(name)


def point_efficiency(point: LlmPoint, target: HardwareTarget) -> PointEfficiency:
    """The efficiency one published point implies on its own target."""
    shape = _shape(point.model)
    cost = LlmCost.of(shape, point.precision, point.kv_dtype)
    r = roof(target, point.precision)
    context = decode_context(point.isl, point.osl)
    if point.batch:
        batch = point.batch
        bound = batch / tpot_s(cost, r, batch, context, point.tp)
    else:
        fit = fit_on(shape, target, point.precision, point.isl + point.osl, point.kv_dtype)
        if not fit.fits:
            raise BadInputError(f"published point {point.label}: the model does not fit ({fit.reason})")
        batch = fit.sequences
        bound = frontier(cost, r, point.isl, point.osl, batch, point.tp)[-1].output_tokens_per_s
    raw = point.output_tokens_per_s / bound
    prefill = None
    if point.prefill_ms and point.prefill_tokens:
        n = point.batch or 1
        bound_s = n * ttft_s(cost, r, max(1, round(point.prefill_tokens / n)), point.tp)
        prefill = min(1.0, bound_s / (point.prefill_ms / 1000.0))
    return PointEfficiency(point, batch, bound, min(raw, 1.0), raw, prefill)


def _describe(pts: list[PointEfficiency]) -> str:
    software = sorted({p.point.software.split(",")[0] for p in pts})
    dates = sorted({p.point.date for p in pts})
    clamped = sum(1 for p in pts if p.decode_raw > 1)
    text = (
        f"{len(pts)} point(s) of {', '.join(sorted({p.point.model for p in pts}))}; {' / '.join(software)} "
        f"({' – '.join(sorted({dates[0], dates[-1]}))})"
    )
    return text + (f"; {clamped} above the roofline clamped to 1" if clamped else "")


def _combine(pts: list[PointEfficiency], kind: str, label: str, fallback_prefill: list[float]) -> Efficiency:
    dec = [p.decode for p in pts]
    pre = [p.prefill for p in pts if p.prefill is not None] or fallback_prefill or dec
    return Efficiency(
        statistics.median(dec),
        min(dec),
        max(dec),
        statistics.median(pre),
        min(pre),
        max(pre),
        kind,
        label,
        len(pts),
    )


class LlmEfficiencies:
    """Every published LLM point's efficiency, and the efficiency model of any catalog target."""

    def __init__(self, catalog: Catalog, points: Iterable[LlmPoint] | None = None):
        self.catalog = catalog
        if points is None:
            points = load_llm_points(frozenset(catalog.targets))
        self.points = [point_efficiency(p, catalog.get(p.target)) for p in points]

    def for_target(
        self, target: HardwareTarget, exclude: LlmPoint | None = None, without_target: bool = False
    ) -> Efficiency | None:
        """The target's Efficiency (None without any published point); ``exclude`` leaves one point out,
        ``without_target`` all of the target's own (as if it had never been published)."""
        pts = [
            p
            for p in self.points
            if p.point is not exclude and not (without_target and p.point.target == target.id)
        ]
        eff = self._median(target, pts)
        if eff is None:
            return None
        floor = step_floor(self.catalog, target, [p.point for p in pts])
        if floor:
            eff = replace(eff, step_floor_s=floor[0], step_floor_source=floor[1])
        per_layer = layer_floor(self.catalog, target)
        if per_layer:
            eff = replace(eff, layer_floor_s=per_layer[0], layer_floor_source=per_layer[1])
        floors = [f for f in (eff.step_floor_source, eff.layer_floor_source) if f]
        # the row names what bounds its step from below, beside what its efficiency rests on
        return replace(eff, label=f"{eff.label}; {' and '.join(floors)}") if floors else eff

    def _median(self, target: HardwareTarget, pts: list[PointEfficiency]) -> Efficiency | None:
        all_prefill = [p.prefill for p in pts if p.prefill is not None]
        own = [p for p in pts if p.point.target == target.id]
        if own:
            return _combine(
                own, "published", f"published: fitted on {target.id}'s {_describe(own)}", all_prefill
            )
        same = [p for p in pts if self.catalog.get(p.point.target).toolchain == target.toolchain]
        if same:
            where = ", ".join(sorted({p.point.target for p in same}))
            return _combine(
                same,
                "toolchain-median",
                f"{target.toolchain} toolchain median of {_describe(same)} "
                f"on {where} (no published LLM result for this target)",
                all_prefill,
            )
        if pts:
            where = ", ".join(sorted({p.point.target for p in pts}))
            return _combine(
                pts,
                "all-llm-median",
                f"median of every published LLM point ({_describe(pts)} on "
                f"{where}): no published {target.toolchain} LLM result",
                all_prefill,
            )
        return None


def step_floor(
    catalog: Catalog, target: HardwareTarget, points: Iterable[LlmPoint]
) -> tuple[float, str] | None:
    """The shortest decode step published on the target (else on a target with its chip) at batch 1 for the
    smallest model published there: 1 ÷ its output tokens/s. A smaller model's step is no shorter on that stack
    (launches, sampling and scheduling do not shrink with the weights). None where no batch-1 point exists:
    the datacenter GPUs' published LLM points are all maximum-throughput runs, whose step is not a floor."""
    chip = target.compute_capability

    def same_chip(tid: str) -> bool:
        t = catalog.get(tid)
        return (
            tid == target.id or bool(chip) and (t.toolchain, t.compute_capability) == (target.toolchain, chip)
        )

    pts = [p for p in points if p.batch == 1 and same_chip(p.target)]
    if not pts:
        return None
    smallest = min(_shape(p.model).params for p in pts)
    best = max((p for p in pts if _shape(p.model).params == smallest), key=lambda p: p.output_tokens_per_s)
    step = 1.0 / best.output_tokens_per_s
    return step, (
        f"decode step floor {step * 1e3:.3g} ms: the fastest batch-1 step published on the chip, "
        f"{best.model} on {best.target} ({best.software.split(',')[0]}, {best.date})"
    )


# The published transformer whose fixed term places a layer's: BERT-Base at sequence 128 (demoBERT's A100 and L40S
# tables, the Neuron tables), the smallest per-layer work of the published transformers, so the lowest floor.
FLOOR_GRAPH = "bert-base-128"


def layer_floor(catalog: Catalog, target: HardwareTarget) -> tuple[float, str] | None:
    """The fixed cost of one transformer layer on the target's stack: the fixed term t0 of BERT-Base-128 on its
    chip (``efficiency.graph_fixed_term``: chip × graph factors of the published series at several batches) ÷
    BERT-Base's layers. A decode step runs every layer's kernels once, whatever the weights' size, so a model of
    L layers never steps faster than L × this (the launches alone; sampling and scheduling add to it, and no
    datacenter batch-1 decode step is published to say how much). None where the toolchain has no series."""
    got = ef.graph_fixed_term(catalog, target, FLOOR_GRAPH, roofline_point)
    if got is None:
        return None
    t0, own_chip = got
    per_layer = t0 / BERT_BASE.layers
    chip = "this chip" if own_chip else f"the median {target.toolchain} chip (this one published no series)"
    return per_layer, (
        f"layer floor {per_layer * 1e6:.3g} µs per layer: the fixed term of {FLOOR_GRAPH} on {chip} "
        f"({t0 * 1e3:.3g} ms, from the published series at several batches) ÷ its {BERT_BASE.layers} layers"
    )


@dataclass(frozen=True)
class LlmCheckRow:
    """One published LLM point projected from the others: ``factor`` = projected ÷ published output tokens/s,
    ``factor_target_out`` = the same from the other targets' points alone."""

    target: str
    model: str
    precision: str
    isl: int  # tokens
    osl: int  # tokens
    batch: int | None  # as published (None: the largest that fits)
    inferred_batch: int  # the batch the roofline is taken at
    published_tokens_per_s: float  # output tokens/s
    bound_tokens_per_s: float  # output tokens/s, the roofline's
    efficiency: float  # decode, published ÷ roofline
    prefill_efficiency: float | None
    projected_tokens_per_s: float | None = None
    factor: float | None = None
    fitted_from: str | None = None
    factor_target_out: float | None = None
    target_out_from: str | None = None

    # every published LLM point counts towards the worst figures (validation.worst)
    counted: ClassVar[bool] = True
    counted_factor: ClassVar[bool] = True


def _floored(p: PointEfficiency, eff: Efficiency) -> float:
    """Projected output tokens/s of a published point: its roofline × the decode efficiency, and no more than
    its batch per step floor allows."""
    floor = eff.floor_s(_shape(p.point.model).layers)
    cap = p.batch / floor if floor > 0 else float("inf")
    return min(p.bound_tokens_per_s * eff.decode, cap)


def leave_one_out(eff: LlmEfficiencies) -> list[LlmCheckRow]:
    """Each published point projected from the others: projected ÷ published output tokens/s (``factor``), and
    from the other targets' points alone (``factor_target_out``: how a target never published would fare)."""
    rows = []
    for p in eff.points:
        target = eff.catalog.get(p.point.target)
        model = eff.for_target(target, exclude=p.point)
        row = LlmCheckRow(
            target=p.point.target,
            model=p.point.model,
            precision=p.point.precision,
            isl=p.point.isl,
            osl=p.point.osl,
            batch=p.point.batch,
            inferred_batch=p.batch,
            published_tokens_per_s=p.point.output_tokens_per_s,
            bound_tokens_per_s=p.bound_tokens_per_s,
            efficiency=p.decode_raw,
            prefill_efficiency=p.prefill,
        )
        other = eff.for_target(target, without_target=True)
        if other is not None:
            row = replace(
                row,
                factor_target_out=_floored(p, other) / p.point.output_tokens_per_s,
                target_out_from=f"{other.kind} ({other.n_points} point(s))",
            )
        if model is not None:
            projected = _floored(p, model)
            row = replace(
                row,
                projected_tokens_per_s=projected,
                factor=projected / p.point.output_tokens_per_s,
                fitted_from=f"{model.kind} ({model.n_points} point(s))",
            )
        rows.append(row)
    return rows


# ------------------------------------------------------------------------------------ projecting a model
def cost_from_graph_cost(gc: Mapping[str, Any]) -> tuple[LlmCost, float] | None:
    """(roofline cost, KV bytes per token) from a result document's generative graph_cost, else None.

    The graph cost has no layer/head counts, so attention FLOPs come from its per-token figures when given
    (flops_per_decode_token − 2 × params is the attention share at its context) and are otherwise left out."""
    try:
        params = float(gc["params"])
        weights = float(gc["weight_bytes"])
        kv = float(gc["kv_cache_bytes_per_token"])
    except (KeyError, TypeError, ValueError):
        return None
    if params <= 0 or weights <= 0 or kv <= 0:
        return None
    return LlmCost(params, weights, kv, 0, 0, 0), kv


@dataclass(frozen=True)
class Projection:
    target: str
    precision: str
    tp: int | None
    max_batch: int
    points: list[FrontierPoint]  # with efficiencies applied
    efficiency: Efficiency | None
    reason: str


def project(
    cost: LlmCost,
    kv_heads: int,
    target: HardwareTarget,
    precision: str,
    isl: int,
    osl: int,
    efficiency: Efficiency | None,
    fit_weight_bytes: float | None = None,
    tp: int | None = None,
    activations: float = 0.0,
) -> Projection:
    """The projected frontier of a model on ``target``: the fit at ISL + OSL (at ``tp`` accelerators, else the
    smallest TP degree that holds a sequence; ``activations`` as llm_memory.fit_bytes), then one point per batch."""
    fit = fit_bytes(
        target,
        precision,
        fit_weight_bytes or cost.weight_bytes,
        cost.kv_bytes_per_token,
        kv_heads,
        isl + osl,
        tp=tp,
        activations=activations,
    )
    if not fit.fits:
        return Projection(target.id, precision, None, 0, [], efficiency, fit.reason)
    if efficiency is None:
        return Projection(
            target.id,
            precision,
            fit.tp,
            fit.sequences,
            [],
            None,
            "no published LLM result to take an efficiency from",
        )
    pts = frontier(
        cost,
        roof(target, precision),
        isl,
        osl,
        fit.sequences,
        fit.tp or 1,
        decode_efficiency=efficiency.decode,
        prefill_efficiency=efficiency.prefill,
        step_floor_s=efficiency.floor_s(cost.layers),
    )
    return Projection(
        target.id,
        precision,
        fit.tp,
        fit.sequences,
        pts,
        efficiency,
        f"projected: roofline × {efficiency.label}",
    )
