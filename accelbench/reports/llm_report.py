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
  point takes that point (it already serves more than N). A projected row's answer carries its range: the low
  and high ends of the same hull points interpolated the same way (range_at); a measured row's answer none.
Projected rows come from accelbench/reports/llm_projected.py (project_generative, on the efficiencies of
llm_projection.py) and say so, with their efficiency's source, TP degree and range.
"""

from __future__ import annotations

import csv
import io
import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, replace
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
    compute_precision,
    fit_bytes,
    fit_on,
    load_shape,
    serving_recipe,
)
from accelbench.loadtests.statistics import INCONCLUSIVE, PASS, slo_verdict
from accelbench.loadtests.verdict import USABLE
from accelbench.reports.cost import HOURS_PER_MONTH, PRICE_BASES, PriceQuote, quote_price
from accelbench.reports.groups import Group, GroupKey
from accelbench.reports.llm_projected import ProjectionRequest, project_generative

# re-exported ("as"): the rows and the reproduced fit points, for callers that import them from here
from accelbench.reports.llm_projected import Reproduced as Reproduced
from accelbench.reports.llm_projected import reproduce as reproduce
from accelbench.reports.llm_projection import LlmEfficiencies
from accelbench.reports.llm_rows import NOT_STREAMED
from accelbench.reports.llm_rows import GenPoint as GenPoint
from accelbench.reports.llm_rows import GenRow as GenRow
from accelbench.reports.llm_rows import combine as combine
from accelbench.reports.llm_rows import usd_per_million_tokens as usd_per_million_tokens
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


def _f(v: float | None) -> float | None:
    return None if v is None else float(v)


def _pct(lat: LatencyUs | None, key: str = "p99") -> float | None:
    return None if lat is None else _f(lat.at(key))


def _metric_verdict(gen: GenerativeStep, metric: str, bound_ms: float) -> tuple[float | None, str]:
    latency: LatencyUs | None = getattr(gen, metric)  # ttft_us | tpot_us
    value = _pct(latency)
    ivl = ((gen.intervals or {}).get(metric) or {}).get("p99") if gen.intervals else None
    if value is None:
        return None, INCONCLUSIVE
    low, high = (value, value) if ivl is None else (_f(ivl.low), _f(ivl.high))
    return value / 1000.0, slo_verdict(low, high, bound_ms * 1000.0)


def step_point(
    run_id: str, step: Step, ttft_ms: float, tpot_ms: float, accelerators: int = 1
) -> GenPoint | None:
    gen = step.generative
    thr = gen.output_tokens_per_s if gen is not None else None
    if gen is None or thr is None or thr.value is None:
        return None
    ttft, v_ttft = _metric_verdict(gen, "ttft_us", ttft_ms)
    tpot, v_tpot = _metric_verdict(gen, "tpot_us", tpot_ms)
    if gen.streamed is False:
        v_tpot = NOT_STREAMED
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
    return _pchip(xs, ys, min_per_user), f"interpolated (PCHIP) between {len(hull)} frontier points"


def _pchip(xs: list[float], ys: list[float], x: float) -> float:
    """PCHIP through (xs, ys) at ``x``, held at the ends (xs ascending)."""
    if x <= xs[0] or len(xs) == 1:
        return ys[0]
    if x >= xs[-1]:
        return ys[-1]
    from scipy.interpolate import PchipInterpolator

    return float(PchipInterpolator(xs, ys)(x))


def range_at(
    points: list[tuple[float, float, float | None, float | None]], min_per_user: float
) -> tuple[float | None, float | None]:
    """The range (low, high) of a projected frontier's throughput at ``min_per_user``: the hull throughput_at
    interpolates (chosen on the projected value), with its points' low and high ends interpolated the same
    way (PCHIP, the least interactive point below the range). PCHIP scales with its data, so where the band
    factors are one pair for the whole frontier (llm_projected.fit_spread) this is the interpolated value ×
    those factors. (None, None) where any hull point has no range or the value is not reached. Points are
    (tokens/s per user, output tokens/s, its low, its high)."""
    ends = {(x, y): (lo, hi) for x, y, lo, hi in points if x and y and x > 0 and y > 0}
    hull = pareto(list(ends))
    if not hull or min_per_user > hull[-1][0] * (1 + 1e-12):
        return None, None
    lows, highs = [ends[p][0] for p in hull], [ends[p][1] for p in hull]
    if any(v is None or v <= 0 for v in lows + highs):
        return None, None
    xs = [p[0] for p in hull]
    return _pchip(xs, [float(v or 0) for v in lows], min_per_user), _pchip(
        xs, [float(v or 0) for v in highs], min_per_user
    )


# ------------------------------------------------------------------------------------------------- rows
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
        low = high = None
        if tps is not None and row.status == "projected":  # a measured row's answer claims no interval
            passing = [p for p in row.points if p.tokens_per_user and p.ttft_verdict == PASS]
            low, high = range_at(
                [
                    (p.tokens_per_user or 0.0, p.output_tps, p.output_tps_low, p.output_tps_high)
                    for p in passing
                ],
                min_per_user,
            )
            if low is not None and high is not None:
                low, high = min(low, tps), max(high, tps)
        out.append(replace(row, answer_tps=tps, answer_tps_low=low, answer_tps_high=high, answer_how=how))
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
    alow, ahigh = row.answer_cost_interval(basis)
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
        answer_output_tokens_per_s_low=row.answer_tps_low,
        answer_output_tokens_per_s_high=row.answer_tps_high,
        answer_usd_per_million_output_tokens_low=alow,
        answer_usd_per_million_output_tokens_high=ahigh,
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
