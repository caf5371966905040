"""The report's plots as SVG text, written directly (reports/svg.py; no plotting library, so a report over
hundreds of runs draws them in milliseconds), identical bytes for identical input.

One colour per target and one marker per precision in every plot; filled markers are measured, hollow ones
projected. Every series is drawn in sorted order. Model and target names are drawn as written.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from accelbench.documents import Step
from accelbench.hardware.catalog import HardwareTarget
from accelbench.hardware.roofline import roof_polyline
from accelbench.reports import projection as proj
from accelbench.reports.capacity import (
    latency_at,
    percentile_key,
    step_latency_interval,
    step_throughput_interval,
    step_usable,
)
from accelbench.reports.headline import cost_bounds
from accelbench.reports.svg import TAB10, Bar, ErrorBar, Figure, Style

if TYPE_CHECKING:
    from accelbench.reports.build import ReportData
    from accelbench.reports.llm_report import GenerativeReport

_MARKERS = {"int8": "o", "fp8": "P", "fp16": "^", "bf16": "v", "tf32": "D", "fp32": "s"}
_LINES = {"int8": "solid", "fp32": "dashed"}
_SLO = Style("red", None, line="dotted", width=1.2)


def _colors(names: list[str]) -> dict[str, str]:
    return {name: TAB10[i % len(TAB10)] for i, name in enumerate(sorted(names))}


def _models(data: ReportData) -> list[str]:
    return sorted({r.model for r in data.rows})


def _ends(value: float, low: float | None, high: float | None) -> tuple[float, float]:
    """An error bar's ends: an open end is drawn to the point itself (no bar where nothing bounds it); a
    batch-means interval can reach below zero, so on log axes the bar stops at a tenth of the value."""
    return max(0.1 * value, min(value, low or value)), max(value, high or value)


def _point(step: Step, key: str) -> ErrorBar | None:
    """(throughput, latency ms, and the two 95 % intervals' ends) of one measured step; None without both."""
    thr = step_throughput_interval(step) or {}
    value, low, high = step_latency_interval(step, key)
    if step.throughput_rps is None or value is None:
        return None
    rps, ms = float(step.throughput_rps), value / 1000.0
    x_ends = _ends(rps, thr.get("low"), thr.get("high"))
    y_ends = _ends(ms, low and low / 1000.0, high and high / 1000.0)
    return (rps, ms, *x_ends, *y_ends)


def _owned_tag(data: ReportData, target: str) -> str:
    """The label tag of a device priced as bought (capex amortized + power), not rented: " [owned]"."""
    owned = any(r.target == target and (r.price_basis or "").startswith("owned") for r in data.rows)
    return " [owned]" if owned else ""


def latency_vs_throughput(data: ReportData) -> str:
    """Per model: usable measured steps per target (percentile vs requests/s) with their 95 % intervals as
    error bars, projected points, and the SLO line."""
    opts = data.options
    key = percentile_key(opts.percentile)
    colors = _colors(list(data.targets))
    models = _models(data)
    fig = Figure(
        f"{key} latency against throughput per target and precision, measured and projected, with the "
        f"SLO of {opts.slo_ms:g} ms: {', '.join(models)}"
    )
    for model in models:
        ax = fig.axes(
            f"{model}: {key} latency vs throughput", "throughput (requests/s)", f"{key} latency (ms)"
        )
        for (m, precision, tid), group in data.groups.items():
            if m != model:
                continue
            pts = sorted(
                p
                for s in group.steps_only()
                if step_usable(s) and latency_at(s, key) is not None and (p := _point(s, key))
            )
            if pts:
                ax.errorbar(pts, colors[tid])
                ax.line(
                    [p[:2] for p in pts],
                    Style(colors[tid], _MARKERS.get(precision, "o"), line=_LINES.get(precision, "solid")),
                    label=f"{tid} {precision} (measured, 95 % intervals)" + _owned_tag(data, tid),
                )
        for row in data.rows:
            if (
                row.model == model
                and row.status == "projected"
                and row.capacity_rps
                and row.latency_us is not None
            ):
                ms = row.latency_us / 1000.0
                lo, hi = row.projected_capacity_rps_low, row.projected_capacity_rps_high
                ranged = lo is not None and hi is not None and hi > lo * 1.001
                if ranged:  # the capacity's projected range: dashed, unlike a measured interval
                    ax.errorbar(
                        [(row.capacity_rps, ms, *_ends(row.capacity_rps, lo, hi), ms, ms)],
                        colors[row.target],
                        "dashed",
                    )
                ax.line(
                    [(row.capacity_rps, ms)],
                    Style(colors[row.target], _MARKERS.get(row.precision, "o"), filled=False, line=None),
                    label=f"{row.target} {row.precision} (projected"
                    + (", dashed: range)" if ranged else ")")
                    + _owned_tag(data, row.target),
                )
        # log axes need data: a model with no usable step and no projection keeps linear axes
        ax.xlog = ax.ylog = bool(ax.lines)
        ax.ref("h", opts.slo_ms, _SLO, f"SLO {key} {opts.slo_ms:g} ms")
        for row in data.rows:  # the baseline's capacity as a line across, where it has one
            if row.model == model and row.target == data.baseline_id and row.capacity_rps and ax.xlog:
                status = " (proj)" if row.status == "projected" else ""
                ax.ref("v", row.capacity_rps, _BASELINE, f"baseline {row.target} {row.precision}{status}")
    return fig.svg()


_BASELINE = Style("red", None, line="dashdot", width=1.0)
_WHISKERS = (  # (projected?, legend text, sample)
    (False, "measured: 95 % interval", Style("#111", None, line="solid", width=1.4)),
    (True, "projected: range (not measured)", Style("#111", None, line="dashed", width=1.4)),
)


def cost_vs_baseline(data: ReportData) -> str:
    """Per model: cost per million requests of every row that has one, with its measured 95 % interval (solid
    whisker) or projected range (dashed, open brackets); projected hatched; the baseline outlined red and drawn
    as a line across; owned devices (capex amortized, not rented) say so in their label."""
    colors = _colors(list(data.targets))
    models = [m for m in _models(data) if any(r.model == m and r.cost_per_million_usd for r in data.rows)]
    fig = Figure(
        f"Cost per million requests at the SLO per target and precision, log scale: {', '.join(models)}"
    )
    for model in models:
        costs = [
            (r, r.cost_per_million_usd)
            for r in data.rows
            if r.model == model and r.cost_per_million_usd is not None
        ]
        costs.sort(key=lambda rc: (-rc[1], rc[0].target, rc[0].precision))
        ax = fig.axes(
            f"{model}: cost per million requests (hatched = projected; red outline = baseline)",
            "USD per million requests at the SLO (log scale)",
            "",
            height=22.0 * len(costs) + 16,
        )
        ax.xlog = True
        whiskers = set()
        for r, cost in costs:
            projected, base = r.status == "projected", r.target == data.baseline_id
            label = (
                f"{r.target} {r.precision}"
                + (" (proj)" if projected else "")
                + _owned_tag(data, r.target)
                + (" [baseline]" if base else "")
                + (" [accuracy FAIL]" if r.accuracy_verdict == "FAIL" else "")
            )
            low, high = cost_bounds(r)
            if low is not None and high is not None:
                whiskers.add(projected)
            ax.bars.append(
                Bar(
                    cost,
                    colors[r.target],
                    label,
                    opacity=0.55 if projected else 0.95,
                    hatch=projected,
                    edge="red" if base else "black",
                    edge_width=2.0 if base else 0.6,
                    low=low,
                    high=high,
                    range_dashed=projected,
                )
            )
        ax.legend += [(text, s) for p, text, s in _WHISKERS if p in whiskers]
        for r, cost in costs:
            if r.target == data.baseline_id:
                status = " (proj)" if r.status == "projected" else ""
                ax.ref("v", cost, _BASELINE, f"baseline {r.target} {r.precision}{status}")
        if any((r.price_basis or "").startswith("owned") for r, _ in costs):
            ax.legend.append(("[owned] = bought: capex amortized + power", Style("white", None, line=None)))
    if not models:
        fig.axes("cost per million requests", "", "", height=60.0).note = "no row has a cost at the SLO"
    return fig.svg()


def _roof(target: HardwareTarget, precision: str) -> tuple[float, float, str] | None:
    used = proj.precision_on(target, precision)
    if used is None or not target.memory_bw_gbs:
        return None
    return float(target.peak_tflops[used]) * 1e12, float(target.memory_bw_gbs) * 1e9, used


def roofline_chart(data: ReportData) -> str:
    """Each target's roof, min(peak, bandwidth × intensity), with every row's point at its capacity."""
    colors = _colors(list(data.targets))
    fig = Figure(
        "Roofline: achieved FLOP/s against arithmetic intensity, each target's roof and each row's point "
        "at its capacity (filled = measured, hollow = projected)"
    )
    ax = fig.axes(
        "Roofline: each row's point at its capacity",
        "arithmetic intensity (FLOP/byte, at the batch that set the capacity)",
        "achieved FLOP/s",
        height=280.0,
    )
    ax.xlog = ax.ylog = True
    marks = "o^sDvP*X"  # more models than marks: they repeat (the legend still names each model)
    model_marks = {m: marks[i % len(marks)] for i, m in enumerate(_models(data))}
    drawn: set[tuple[str, str]] = set()
    for row in sorted(data.rows, key=lambda r: (r.target, r.precision, r.model)):
        roof = _roof(data.targets[row.target], row.precision)
        if roof is None:
            continue
        color = colors[row.target]
        if (row.target, roof[2]) not in drawn:
            drawn.add((row.target, roof[2]))
            ax.line(
                roof_polyline(roof[0], roof[1], 0.1, 1e4),
                Style(color, None, line=_LINES.get(roof[2], "dashdot"), width=1.0),
                label=f"{row.target} roof ({roof[2]})",
            )
        gc = data.graph_costs.get((row.model, row.precision))
        if not gc or not row.capacity_ips:
            continue
        batch = row.projected_batch or row.served_batch or 1
        x = float(gc["flops_per_inference"]) / proj.bytes_per_inference(gc, batch)
        y = float(row.capacity_ips) * float(gc["flops_per_inference"])
        if x <= 0 or y <= 0:
            continue  # a 0-FLOP model has no place on log axes
        ax.line([(x, y)], Style(color, model_marks[row.model], filled=row.status == "measured", line=None))
    ax.legend += [(m, Style("gray", mk, line=None)) for m, mk in model_marks.items()]
    ax.legend += [
        ("filled = measured", Style("gray", "o", line=None)),
        ("hollow = projected", Style("gray", "o", filled=False, line=None)),
    ]
    return fig.svg()


def all_plots(data: ReportData) -> dict[str, str]:
    """name → SVG text, in a fixed order (the generative frontier when the report has generative rows)."""
    plots = {}
    if data.rows:  # a report of generative results only has no classic rows to draw
        plots = {
            "latency_vs_throughput": latency_vs_throughput(data),
            "cost_vs_baseline": cost_vs_baseline(data),
            "roofline": roofline_chart(data),
        }
    if data.generative is not None:
        plots["frontier"] = frontier_chart(data.generative)
    return plots


def frontier_chart(gen: GenerativeReport) -> str:
    """Per model: each row's frontier, output tokens/s per accelerator vs tokens/s per user; measured solid with
    filled markers, projected dashed with hollow ones; each row's band where its points carry one (a measured
    95 % interval, or a projected range: dashed edge); the asked interactivity as a vertical line."""
    models = sorted({r.model for r in gen.rows}) or [""]
    colors = _colors(list({r.target for r in gen.rows}))
    fig = Figure(
        "Generative frontier: output tokens/s per accelerator against tokens/s per user, per target and "
        f"precision (solid = measured, dashed = projected): {', '.join(models)}"
    )
    for model in models:
        ax = fig.axes(
            f"{model}: throughput vs interactivity (solid = measured, dashed = projected)",
            "interactivity (tokens/s per user = 1000 / TPOT p50 ms)",
            "output tokens/s per accelerator",
            height=250.0,
        )
        for r in sorted(
            (r for r in gen.rows if r.model == model), key=lambda r: (r.status, r.target, r.precision)
        ):
            pts = sorted(
                (p.tokens_per_user, p.output_tps) for p in r.points if p.tokens_per_user and p.output_tps
            )
            if not pts:
                continue
            projected = r.status == "projected"
            band = [
                (p.tokens_per_user, p.output_tps_low, p.output_tps_high)
                for p in r.points
                if p.tokens_per_user and p.output_tps_low and p.output_tps_high
            ]
            if band:  # a measured 95 % interval band (solid edge), or a projected range (dashed edge)
                ax.band(band, colors[r.target], "dashed" if projected else "solid")
            ax.line(
                pts,
                Style(
                    colors[r.target],
                    _MARKERS.get(r.precision, "o"),
                    filled=not projected,
                    line="dashed" if projected else "solid",
                    size=2.8,
                ),
                label=f"{r.target} {r.precision} ({'projected' if projected else 'measured'}"
                + (f", band: {'range' if projected else '95 % interval'})" if band else ")"),
            )
        ax.xlog = ax.ylog = bool(ax.lines)
        if gen.min_tokens_per_user is not None:
            ax.ref("v", gen.min_tokens_per_user, _SLO, f"{gen.min_tokens_per_user:g} tok/s per user")
    return fig.svg()


def trend_chart(title: str, runs: list[dict[str, Any]], percentile: str, generative: bool = False) -> str:
    """The history of one (model, target, precision): capacity and the percentile at capacity per run, in
    order; runs flagged as moved beyond the run-to-run spread are drawn as red crosses.

    ``runs``: dicts with ``label`` (x tick), ``capacity_rps``, ``latency_us`` (None allowed), ``flagged``.
    ``generative``: the runs carry output tokens/s in ``capacity_rps``, TTFT p99 in ``latency_us`` and TPOT p99 in
    ``tpot_us`` (a third panel).
    """
    panels = [
        ("capacity_rps", 1.0, "capacity at SLO (req/s)"),
        ("latency_us", 1000.0, f"{percentile} at capacity (ms)"),
    ]
    if generative:
        panels = [
            ("capacity_rps", 1.0, "output tokens/s at the objective"),
            ("latency_us", 1000.0, "TTFT p99 (ms)"),
            ("tpot_us", 1000.0, "TPOT p99 (ms)"),
        ]
    fig = Figure(
        f"{title}: {', '.join(p[2] for p in panels)}, per run in order; red crosses moved more than the "
        "run-to-run spread"
    )
    labels = [str(r["label"]) for r in runs]
    for i, (key, scale, ylabel) in enumerate(panels):
        ax = fig.axes(title if i == 0 else "", "", ylabel, height=150.0)
        ax.xcategories = labels
        pts = [(float(x), r[key] / scale) for x, r in enumerate(runs) if r.get(key) is not None]
        if pts:  # hundreds of runs: smaller dots, so that the line between them still shows
            ax.line(pts, Style("#1f77b4", "o", size=2.8 if len(runs) <= 60 else 1.6))
        bad = [(float(x), r[key] / scale) for x, r in enumerate(runs) if r.get("flagged") and r.get(key)]
        if bad:
            ax.line(
                bad, Style("#d62728", "x", line=None, size=4.5), label="moved more than the run-to-run spread"
            )
    return fig.svg()
