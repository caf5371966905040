"""Token economics for generative results: cost per million tokens, capacity at a TTFT/TPOT objective, the
throughput–interactivity frontier, the answer at a target interactivity, projections and the memory fit.

One generative row per model × precision × target, beside the classic report rows (reports/build.py), built from
result documents whose steps carry a ``generative`` block (docs/llm.md):
- Cost per million tokens = $/accelerator-hour ÷ (tokens/s × 3600) × 10⁶: output tokens, input tokens and both
  (blended, at the workload's ISL/OSL), on every price basis the catalog has (reports/cost.quote_price: a
  multi-GPU instance per accelerator, Jetson capex amortized); its interval is the output-rate interval inverted.
- Capacity at the objective: the highest output tokens/s among usable steps whose TTFT p99 and TPOT p99 verdicts
  are both PASS (docs/statistics.md: PASS when the exact interval's upper end is within the bound, FAIL when its
  lower end is above, else INCONCLUSIVE; a step's verdict is FAIL if either is, else INCONCLUSIVE if either is).
- The frontier: each step's (tokens/s per user = 1000 / TPOT p50 ms, output tokens/s per accelerator). The answer
  at ``min_tokens_per_user`` N keeps the points whose TTFT p99 meets its bound, takes their upper (Pareto) hull
  and interpolates throughput monotonically between measured points (scipy PchipInterpolator on the hull);
  N above the most interactive point is "not reached" (never extrapolated), N below the least interactive
  point takes that point (it already serves more than N).
Projected rows use accelbench/reports/llm_projection.py and say so, with their efficiency's source.
"""

from __future__ import annotations

import csv
import io
import json
import math
import weakref
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field, replace
from typing import Any

from accelbench.documents import GenerativeStep, LatencyUs, Step, to_dict
from accelbench.errors import BadInputError
from accelbench.hardware.catalog import Catalog, HardwareTarget
from accelbench.hardware.llm_memory import (
    COMPUTE_PRECISION,
    KV_PRECISION,
    Fit,
    ModelShape,
    ServingRecipe,
    activation_bytes,
    compute_precision,
    fit_bytes,
    fit_on,
    load_shape,
    serving_recipe,
    tp_degrees,
)
from accelbench.hardware.llm_published import LlmPoint
from accelbench.hardware.llm_roofline import FrontierPoint, LlmCost
from accelbench.loadtests.statistics import FAIL, INCONCLUSIVE, PASS, slo_verdict
from accelbench.loadtests.verdict import USABLE
from accelbench.reports.cost import HOURS_PER_MONTH, PRICE_BASES, PriceQuote, quote_price
from accelbench.reports.groups import Group, GroupKey
from accelbench.reports.llm_projection import (
    Efficiency,
    LlmEfficiencies,
    Projection,
    cost_from_graph_cost,
    project,
)
from accelbench.reports.options import ReportOptions
from accelbench.reports.rows import TOKEN_COLUMNS, TokenPlanRow, TokenRow

MLPERF_LLAMA_8B_TTFT_MS = 2000.0  # MLPerf Llama3.1-8B standard objectives (LLM-NOTES), the default
MLPERF_LLAMA_8B_TPOT_MS = 100.0
FIT_PRECISIONS = ("fp16", "fp8", "int4")
DEFAULT_FIT_CONTEXT = 8192


def is_generative(group: Group) -> bool:
    return any(
        r.doc.task == "text-generation" or any(s.generative for s in r.doc.steps) for r in group.results
    )


def usd_per_million_tokens(usd_per_hour: float, tokens_per_s: float) -> float:
    """$/hour ÷ (tokens/s × 3600) × 10⁶."""
    if tokens_per_s <= 0:
        raise ValueError("tokens_per_s must be positive")
    return usd_per_hour / (tokens_per_s * 3600.0) * 1e6


def _f(v: float | None) -> float | None:
    return None if v is None else float(v)


def _pct(lat: LatencyUs | None, key: str = "p99") -> float | None:
    return None if lat is None else _f(lat.at(key))


@dataclass
class GenPoint:
    """One measured (or projected) load level of a generative row."""

    concurrency: float | None
    output_tps: float
    output_tps_low: float | None
    output_tps_high: float | None
    input_tps: float | None
    tokens_per_user: float | None
    ttft_p99_ms: float | None
    tpot_p99_ms: float | None
    ttft_verdict: str
    tpot_verdict: str
    verdict: str
    step_index: int | None = None
    run_id: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


def _metric_verdict(gen: GenerativeStep, metric: str, bound_ms: float) -> tuple[float | None, str]:
    latency: LatencyUs | None = getattr(gen, metric)  # ttft_us | tpot_us
    value = _pct(latency)
    ivl = ((gen.intervals or {}).get(metric) or {}).get("p99") if gen.intervals else None
    if value is None:
        return None, INCONCLUSIVE
    low, high = (value, value) if ivl is None else (_f(ivl.low), _f(ivl.high))
    return value / 1000.0, slo_verdict(low, high, bound_ms * 1000.0)


def combine(*verdicts: str) -> str:
    if FAIL in verdicts:
        return FAIL
    return INCONCLUSIVE if INCONCLUSIVE in verdicts else PASS


def step_point(
    run_id: str, step: Step, ttft_ms: float, tpot_ms: float, accelerators: int = 1
) -> GenPoint | None:
    gen = step.generative
    thr = gen.output_tokens_per_s if gen is not None else None
    if gen is None or thr is None or thr.value is None:
        return None
    ttft, v_ttft = _metric_verdict(gen, "ttft_us", ttft_ms)
    tpot, v_tpot = _metric_verdict(gen, "tpot_us", tpot_ms)
    per_user = _f(gen.tokens_per_s_per_user)
    tpot_p50 = gen.tpot_us.p50 if gen.tpot_us is not None else None
    if per_user is None and tpot_p50:
        per_user = 1e6 / float(tpot_p50)
    n = max(1, accelerators)
    return GenPoint(
        concurrency=_f(step.offered.concurrency) or _f(step.offered.users),
        output_tps=float(thr.value) / n,
        output_tps_low=None if thr.low is None else float(thr.low) / n,
        output_tps_high=None if thr.high is None else float(thr.high) / n,
        input_tps=None if gen.input_tokens_per_s is None else float(gen.input_tokens_per_s) / n,
        tokens_per_user=per_user,
        ttft_p99_ms=ttft,
        tpot_p99_ms=tpot,
        ttft_verdict=v_ttft,
        tpot_verdict=v_tpot,
        verdict=combine(v_ttft, v_tpot),
        step_index=step.index,
        run_id=run_id,
    )


# ------------------------------------------------------------------------------------------ the frontier
def pareto(points: list[tuple[float, float]]) -> list[tuple[float, float]]:
    """Upper hull of (interactivity, throughput): the points no other point beats on both, by interactivity.
    A less interactive point must serve more by more than rounding (1e-12 relative): the batches past a
    projected frontier's saturation serve the same tokens/s, give or take the last bit of a float."""
    best: list[tuple[float, float]] = []
    for x, y in sorted(points, key=lambda p: (-p[0], -p[1])):
        if not best or y > best[-1][1] + abs(best[-1][1]) * 1e-12:
            best.append((x, y))
    return sorted(best)


def throughput_at(points: list[tuple[float, float]], min_per_user: float) -> tuple[float | None, str]:
    """Throughput on the frontier at interactivity ``min_per_user``: PCHIP between hull points, the least
    interactive point below the range, "not reached" above it. Returns (throughput or None, how)."""
    hull = pareto([(x, y) for x, y in points if x and y and x > 0 and y > 0])
    if not hull:
        return None, "no point meets the TTFT objective"
    xs, ys = [p[0] for p in hull], [p[1] for p in hull]
    if min_per_user > xs[-1] * (1 + 1e-12):
        return None, f"not reached: the most interactive point serves {xs[-1]:.3g} tok/s per user"
    if min_per_user <= xs[0]:
        return ys[0], f"at its least interactive point, {xs[0]:.3g} tok/s per user (≥ the target)"
    if len(hull) == 1:
        return ys[0], "the only point"
    from scipy.interpolate import PchipInterpolator

    value = float(PchipInterpolator(xs, ys)(min_per_user))
    return value, f"interpolated (PCHIP) between {len(hull)} frontier points"


# ------------------------------------------------------------------------------------------------- rows
@dataclass(frozen=True)
class GenRow:
    """One generative model × precision × target with its frontier points; its table row is ``token_row``."""

    model: str
    precision: str
    target: str
    status: str  # measured | projected
    isl: int | None
    osl: int | None
    points: list[GenPoint]
    capacity: GenPoint | None
    reason: str
    prices: Mapping[str, PriceQuote] = field(default_factory=dict)  # basis -> PriceQuote
    efficiency_source: str | None = None
    efficiency_kind: str | None = None
    tp: int | None = None
    max_batch: int | None = None
    answer_tps: float | None = None
    answer_how: str = ""
    # weights, KV cache and compute dtypes (None: a measured row without them)
    recipe: ServingRecipe | None = None
    tp_options: tuple[dict[str, Any], ...] = ()  # projected: every TP degree that fits (TpOption.summary)

    def cost(self, basis: str, which: str = "output", tps: float | None = None) -> float | None:
        q = self.prices.get(basis)
        point = self.capacity
        if q is None:
            return None
        if tps is not None:
            out = tps
        elif point is not None:
            out = point.output_tps
        else:
            return None
        if which == "output":
            rate = out
        elif tps is None and point is not None and point.input_tps:  # the step's own input rate
            rate = point.input_tps if which == "input" else point.input_tps + out
        else:
            if self.isl is None or not self.osl:
                return None
            inp = out * self.isl / self.osl
            rate = inp if which == "input" else inp + out
        return usd_per_million_tokens(q.usd_per_hour, rate) if rate else None

    def cost_interval(self, basis: str) -> tuple[float | None, float | None]:
        q, c = self.prices.get(basis), self.capacity
        if q is None or c is None or not c.output_tps_low or not c.output_tps_high or c.output_tps_low <= 0:
            return None, None
        return usd_per_million_tokens(q.usd_per_hour, c.output_tps_high), usd_per_million_tokens(
            q.usd_per_hour, c.output_tps_low
        )


def _workload(group: Group) -> tuple[int | None, int | None, float | None, float | None]:
    for r in group.results:
        w = r.doc.load_profile.workload if r.doc.load_profile else None
        if w is not None:
            return w.isl, w.osl, _f(w.slo_ttft_p99_ms), _f(w.slo_tpot_p99_ms)
    return None, None, None, None


def objectives(options: ReportOptions, groups: Mapping[GroupKey, Group]) -> tuple[float, float, str]:
    """(TTFT ms, TPOT ms, where they came from): each the option, else the workload's, else MLPerf
    Llama3.1-8B's; where the two came from different places the source names both."""
    wl = [_workload(g) for g in groups.values()]
    ttft, ttft_src = _objective(
        options.slo_ttft_p99_ms, "--slo-ttft-p99-ms", [w[2] for w in wl], MLPERF_LLAMA_8B_TTFT_MS
    )
    tpot, tpot_src = _objective(
        options.slo_tpot_p99_ms, "--slo-tpot-p99-ms", [w[3] for w in wl], MLPERF_LLAMA_8B_TPOT_MS
    )
    if ttft_src == tpot_src:
        return ttft, tpot, ttft_src
    if ttft_src.startswith("--") and tpot_src.startswith("--"):
        return ttft, tpot, f"{ttft_src}/{tpot_src}"
    return ttft, tpot, f"TTFT p99: {ttft_src}; TPOT p99: {tpot_src}"


def _objective(
    given: float | None, flag: str, workloads: list[float | None], default: float
) -> tuple[float, str]:
    if given is not None:
        return float(given), flag
    stored = next((w for w in workloads if w), None)
    if stored:
        return stored, "the workload's objectives"
    return default, "MLPerf Llama3.1-8B standard objectives (default)"


def target_prices(target: HardwareTarget, options: ReportOptions) -> dict[str, PriceQuote]:
    out = {}
    for basis in PRICE_BASES:
        q = quote_price(
            target, basis, options.price_overrides, options.amortization_years, options.usd_per_kwh
        )
        if q is not None and (q.basis == basis or basis == "on-demand" or q.basis not in PRICE_BASES):
            out[basis] = q
    return out


def measured_row(
    group: Group, target: HardwareTarget, options: ReportOptions, ttft_ms: float, tpot_ms: float
) -> GenRow:
    isl, osl, _, _ = _workload(group)
    points = []
    for run_id, step in group.steps():
        if step.verdict not in USABLE or float(step.error_rate or 0) > options.max_error_rate:
            continue
        p = step_point(run_id, step, ttft_ms, tpot_ms)
        if p is not None:
            points.append(p)
    points.sort(key=lambda p: (p.concurrency or 0, p.output_tps))
    passing = [p for p in points if p.verdict == PASS]
    cap = max(passing, key=lambda p: (p.output_tps, -(p.concurrency or 0))) if passing else None
    if cap is not None:
        reason = f"highest output tok/s of {len(passing)} step(s) meeting TTFT p99 ≤ {ttft_ms:g} ms and TPOT p99 ≤ {tpot_ms:g} ms"
        faster = [p for p in points if p.verdict == INCONCLUSIVE and p.output_tps > cap.output_tps]
        if faster:
            reason += f"; {len(faster)} faster step(s) INCONCLUSIVE"
    elif any(p.verdict == INCONCLUSIVE for p in points):
        reason = "objective not shown (INCONCLUSIVE): the best step's interval straddles a bound"
    else:
        reason = "does not meet the TTFT/TPOT objective" if points else "no usable generative step"
    found = search_capacity(group, ttft_ms, tpot_ms)
    if found is not None:  # the search's answer is the capacity it was asked for, step verdict or not
        cap, reason = found
        points = sorted(
            [*(p for p in points if (p.run_id, p.step_index) != (cap.run_id, cap.step_index)), cap],
            key=lambda p: (p.concurrency or 0, p.output_tps),
        )
    return GenRow(
        group.model,
        group.precision,
        target.id,
        "measured",
        isl,
        osl,
        points,
        cap,
        reason,
        prices=target_prices(target, options),
        recipe=measured_recipe(group, target),
    )


def measured_recipe(group: Group, target: HardwareTarget) -> ServingRecipe | None:
    """A measured row's recipe: its precision, the KV dtype its graph cost records, the compute it ran at."""
    kv = KV_PRECISION.get(str((group.graph_cost() or {}).get("kv_dtype")))
    if kv is None or group.precision not in COMPUTE_PRECISION:
        return None
    return ServingRecipe(
        group.precision, kv, compute_precision(target, group.precision), "the results' graph_cost"
    )


def search_capacity(group: Group, ttft_ms: float, tpot_ms: float) -> tuple[GenPoint, str] | None:
    """The SLO-capacity search's answer (documents.SearchResult) as the row's capacity, when a finished
    search looked for these objectives (one it was not given holds at the answer too) and found one."""
    for r in group.results:
        s = r.doc.search
        if s is None or not s.complete or s.answer_step is None:
            continue
        if any(
            given is not None and float(given) != bound
            for given, bound in ((s.ttft_p99_ms, ttft_ms), (s.tpot_p99_ms, tpot_ms))
        ):
            continue
        step = next((x for x in r.doc.steps if x.index == s.answer_step), None)
        point = step_point(r.doc.run_id, step, ttft_ms, tpot_ms) if step is not None else None
        if point is None or any(
            v is None or v > bound
            for v, bound in ((point.ttft_p99_ms, ttft_ms), (point.tpot_p99_ms, tpot_ms))
        ):
            continue
        answer, above = to_dict(s.answer) if s.answer else {}, to_dict(s.above) if s.above else {}
        unit = "concurrency" if s.mode == "concurrency" else "rate_rps"
        top = f"{above[unit]:g} did not" if above else "no load above it was measured"
        return point, (
            f"the SLO-capacity search's answer: {unit.replace('_rps', ' (requests/s)')} {answer[unit]:g} met "
            f"TTFT p99 ≤ {ttft_ms:g} ms and TPOT p99 ≤ {tpot_ms:g} ms, {top} ({len(s.steps)} steps)"
        )
    return None


def frontier_points(row: GenRow, ttft_only: bool = True) -> list[tuple[float, float]]:
    """(tokens/s per user, output tokens/s per accelerator) of the points meeting the TTFT objective."""
    return [
        (p.tokens_per_user, p.output_tps)
        for p in row.points
        if p.tokens_per_user and (not ttft_only or p.ttft_verdict == PASS)
    ]


def answer_rows(rows: list[GenRow], min_per_user: float | None) -> list[GenRow]:
    """The rows with their throughput at ``min_per_user`` tokens/s per user on the frontier (None: as they are)."""
    if min_per_user is None:
        return list(rows)
    out = []
    for row in rows:
        tps, how = throughput_at(frontier_points(row), min_per_user)
        out.append(replace(row, answer_tps=tps, answer_how=how))
    return out


def plan(rows: list[GenRow], target_tps: float, headroom: float, basis: str) -> list[TokenPlanRow]:
    """Replicas per row for an output-token rate: ⌈target ÷ (capacity × (1 − headroom))⌉ and the month."""
    out = []
    for r in rows:
        q = r.prices.get(basis)
        if r.capacity is None or q is None:
            continue
        n = max(1, math.ceil(target_tps / (r.capacity.output_tps * (1 - headroom)) - 1e-9))
        out.append(
            TokenPlanRow(
                model=r.model,
                target=r.target,
                precision=r.precision,
                status=r.status,
                capacity_tps=r.capacity.output_tps,
                replicas=n,
                usd_per_hour=q.usd_per_hour,
                monthly_usd=q.usd_per_hour * n * HOURS_PER_MONTH,
            )
        )
    return sorted(out, key=lambda p: (p.model, p.monthly_usd, p.target))


def token_row(row: GenRow, basis: str, min_per_user: float | None) -> TokenRow:
    """The row's table row: the capacity point, costs on every basis, the answer at the interactivity."""
    c = row.capacity
    low, high = row.cost_interval(basis)
    per_basis = {
        f"usd_per_million_output_tokens_{b.replace('-', '_')}": row.cost(b, "output") for b in PRICE_BASES
    }
    return TokenRow(
        model=row.model,
        precision=row.precision,
        target=row.target,
        status=row.status,
        isl=row.isl,
        osl=row.osl,
        meets_objective=c is not None,
        capacity_output_tokens_per_s=c.output_tps if c else None,
        capacity_output_tokens_per_s_low=c.output_tps_low if c else None,
        capacity_output_tokens_per_s_high=c.output_tps_high if c else None,
        capacity_tokens_per_s_per_user=c.tokens_per_user if c else None,
        capacity_concurrency=c.concurrency if c else None,
        ttft_p99_ms=c.ttft_p99_ms if c else None,
        tpot_p99_ms=c.tpot_p99_ms if c else None,
        price_basis=basis,
        usd_per_hour=row.prices[basis].usd_per_hour if basis in row.prices else None,
        usd_per_million_output_tokens=row.cost(basis, "output"),
        usd_per_million_output_tokens_low=low,
        usd_per_million_output_tokens_high=high,
        usd_per_million_input_tokens=row.cost(basis, "input"),
        usd_per_million_blended_tokens=row.cost(basis, "blended"),
        min_tokens_per_user=min_per_user,
        answer_output_tokens_per_s=row.answer_tps,
        answer_usd_per_million_output_tokens=row.cost(basis, "output", row.answer_tps)
        if row.answer_tps
        else None,
        answer_how=row.answer_how,
        efficiency_source=row.efficiency_source,
        weights_dtype=row.recipe.weights if row.recipe else None,
        kv_dtype=row.recipe.kv_cache if row.recipe else None,
        compute_dtype=row.recipe.compute if row.recipe else None,
        kv_dtype_source=row.recipe.kv_source if row.recipe else None,
        tp=row.tp,
        max_batch=row.max_batch,
        reason=row.reason,
        **per_basis,
    )


def points_dicts(row: GenRow) -> list[dict[str, Any]]:
    return [p.to_dict() for p in row.points]


# ------------------------------------------------------------------------------------------- projections
def projected_row(
    model: str,
    precision: str,
    target: HardwareTarget,
    group: Group,
    options: ReportOptions,
    efficiencies: LlmEfficiencies | None,
    ttft_ms: float,
    tpot_ms: float,
) -> GenRow:
    """A projected row beside a measured group: its workload's ISL/OSL, its graph cost where no card exists."""
    isl, osl, _, _ = _workload(group)
    return project_generative(
        ProjectionRequest(model, precision, isl, osl, options.kv_dtype),
        target,
        efficiencies,
        ttft_ms,
        tpot_ms,
        target_prices(target, options),
        group.graph_cost(),
    )


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
    eff = efficiency or (efficiencies.for_target(target) if efficiencies is not None else None)
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
    """The published points ``eff`` rests on: the target's own, else its toolchain's, else all (by its kind)."""
    pts = [p.point for p in efficiencies.points]
    if eff.kind == "published":
        return [p for p in pts if p.target == target.id]
    if eff.kind == "toolchain-median":
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
    return Band(1.0 / (hi * widen), widen / lo, what)


def projection_range(point: GenPoint) -> tuple[float, float] | None:
    """The range of a projected point's output tokens/s per accelerator (low, high), None where it has none.

    The low and high ends are the same batch projected at the low and high ends of efficiency_bounds, so
    a published figure lies inside when ``low <= published <= high``: what a validation counts for coverage
    (``covers``)."""
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


@dataclass
class FitTable:
    model: str
    context: int
    source: str
    rows: list[FitRow]  # one per target


@dataclass(frozen=True)
class FitRow:
    """One target of a memory-fit table: its memory and the fit at each precision (hardware/llm_memory.Fit)."""

    target: str
    memory_gb: float
    fits: Mapping[str, Fit]


def fit_table(
    model: str | ModelShape,
    targets: Mapping[str, HardwareTarget],
    context: int,
    precisions: Sequence[str] = FIT_PRECISIONS,
    kv_dtype: str | None = None,
) -> FitTable:
    shape = model if isinstance(model, ModelShape) else load_shape(model)
    rows = []
    for tid in sorted(targets):
        t = targets[tid]
        rows.append(
            FitRow(
                tid,
                t.memory_gb,
                {
                    p: fit_on(shape, t, p, min(context, shape.context_length), fit_kv_dtype(t, p, kv_dtype))
                    for p in precisions
                },
            )
        )
    return FitTable(shape.name, context, shape.source, rows)


def fit_kv_dtype(target: HardwareTarget, precision: str, kv_dtype: str | None) -> str:
    """The KV dtype a fit reads: the serving recipe's (the option, else the engines' default)."""
    try:
        return serving_recipe(target, precision, kv_dtype).kv_cache
    except BadInputError:
        return kv_dtype or "fp16"


def measured_fit_table(
    model: str, precision: str, gc: Mapping[str, Any], targets: Mapping[str, HardwareTarget], context: int
) -> FitTable | None:
    """The fit of a measured model at its own precision, from its graph cost (weights, KV bytes per token)."""
    try:
        weights, kv = float(gc["weight_bytes"]), float(gc["kv_cache_bytes_per_token"])
    except (KeyError, TypeError, ValueError):
        return None
    rows = [
        FitRow(
            tid,
            targets[tid].memory_gb,
            {precision: fit_bytes(targets[tid], precision, weights, kv, 1, context)},
        )
        for tid in sorted(targets)
    ]
    return FitTable(model, context, "the results' graph_cost", rows)


@dataclass
class GenerativeReport:
    rows: list[GenRow]
    ttft_ms: float
    tpot_ms: float
    objective_source: str
    min_tokens_per_user: float | None
    fits: list[FitTable]
    plan: list[TokenPlanRow] | None
    price_basis: str


def build_generative(
    groups: Mapping[GroupKey, Group],
    catalog: Catalog,
    targets: Mapping[str, HardwareTarget],
    options: ReportOptions,
    baseline_id: str,
) -> GenerativeReport:
    """Every generative row (measured, then projected for --project and the baseline) and the fit tables."""
    ttft_ms, tpot_ms, src = objectives(options, groups)
    rows = [measured_row(g, targets[g.target_id], options, ttft_ms, tpot_ms) for g in groups.values()]
    efficiencies: LlmEfficiencies | None
    try:
        efficiencies = LlmEfficiencies(catalog)
    except BadInputError:
        efficiencies = None
    wanted = set(options.project) | {baseline_id}
    by_pair: dict[tuple[str, str], Group] = {}
    for (m, p, _), g in groups.items():
        by_pair.setdefault((m, p), g)
    for (model, precision), g in sorted(by_pair.items()):
        measured = {t for m, p, t in groups if (m, p) == (model, precision)}
        for tid in sorted(wanted - measured):
            rows.append(
                projected_row(model, precision, targets[tid], g, options, efficiencies, ttft_ms, tpot_ms)
            )
    min_per_user = options.min_tokens_per_user
    rows = answer_rows(rows, min_per_user)
    context = int(options.fit_context or DEFAULT_FIT_CONTEXT)
    fits = []
    for (model, precision), g in sorted(by_pair.items()):
        gc = g.graph_cost() or {}
        ctx = min(context, int(gc.get("context_length") or context))
        table = measured_fit_table(model, precision, gc, targets, ctx)
        if table is not None:
            fits.append(table)
    all_targets = dict(catalog.targets)
    for model in options.fit_models:
        fits.append(fit_table(model, all_targets, context, kv_dtype=options.kv_dtype))
    basis = options.price_basis
    target_tps = options.target_tokens_per_s
    gen_plan = plan(rows, target_tps, options.headroom, basis) if target_tps else None
    rows.sort(key=lambda r: (r.model, r.precision, r.status != "measured", r.target))
    return GenerativeReport(rows, ttft_ms, tpot_ms, src, min_per_user, fits, gen_plan, basis)


def generative_files(gen: GenerativeReport) -> dict[str, bytes]:
    """generative.csv (one row per model × precision × target) and generative.json (rows with their points)."""
    table = [token_row(r, gen.price_basis, gen.min_tokens_per_user).as_columns() for r in gen.rows]
    buf = io.StringIO()
    if table:
        writer = csv.DictWriter(buf, fieldnames=[c.name for c in TOKEN_COLUMNS], lineterminator="\n")
        writer.writeheader()
        writer.writerows(table)
    doc = {
        "objectives": {
            "ttft_p99_ms": gen.ttft_ms,
            "tpot_p99_ms": gen.tpot_ms,
            "source": gen.objective_source,
        },
        "min_tokens_per_user": gen.min_tokens_per_user,
        "rows": [
            {**t, "points": points_dicts(r), "tp_options": list(r.tp_options)}
            for t, r in zip(table, gen.rows, strict=True)
        ],
        "plan": None if gen.plan is None else [asdict(p) for p in gen.plan],
    }
    text = json.dumps(doc, indent=2, sort_keys=True, allow_nan=False) + "\n"
    return {"generative.csv": buf.getvalue().encode("utf-8"), "generative.json": text.encode("utf-8")}


# ------------------------------------------------------------------------------------ the fit, reproduced
@dataclass(frozen=True)
class Reproduced:
    """A published ``[[llm_points]]`` point projected back through the report's own path (project_generative)."""

    point: LlmPoint
    row: GenRow
    projected_tokens_per_s: float  # as the point publishes it: whole TP group
    ratio: float  # projected ÷ published
    low_tokens_per_s: float | None = None  # the range (efficiency_bounds), as projected_tokens_per_s
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
    at = next((p for p in row.points if p.concurrency == point.batch), None) if point.batch else row.capacity
    if at is None or (point.batch and not at.tokens_per_user):
        return None
    # whole group; a fixed-batch point's decode rate scales with its range as the point's output rate does
    got = (at.tokens_per_user or 0) * point.batch if point.batch else at.output_tps * (row.tp or 1)
    scale = got / at.output_tps
    rng = projection_range(at)
    low, high = (rng[0] * scale, rng[1] * scale) if rng else (None, None)
    return Reproduced(point, row, got, got / point.output_tokens_per_s, low, high)
