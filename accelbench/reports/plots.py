"""The three report plots as SVG text (matplotlib, Agg), identical bytes for identical input.

Determinism: a fixed ``svg.hashsalt`` (clip-path ids), no ``Date`` metadata, text kept as text, and
every series drawn in sorted order. One colour per target and one marker per precision in every plot;
filled markers are measured, hollow ones projected.
"""

from __future__ import annotations

import io
import re
from typing import TYPE_CHECKING, Any

from accelbench.documents import Step
from accelbench.hardware.catalog import HardwareTarget
from accelbench.reports import projection as proj
from accelbench.reports.capacity import (
    latency_at,
    percentile_key,
    step_latency_interval,
    step_throughput_interval,
    step_usable,
)

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure
    from matplotlib.typing import RcKeyType

    from accelbench.reports.build import ReportData
    from accelbench.reports.llm_report import GenerativeReport

_STYLE: dict[RcKeyType, Any] = {
    "svg.hashsalt": "accelbench-report",
    "svg.fonttype": "none",
    "font.family": "DejaVu Sans",
    "font.size": 9,
    "axes.grid": True,
    "grid.alpha": 0.3,
    # every text is drawn as given: a model or target name with '$' (mathtext) must not break a plot
    "text.parse_math": False,
}
_MARKERS = {"int8": "o", "fp8": "P", "fp16": "^", "bf16": "v", "tf32": "D", "fp32": "s"}
_LINES = {"int8": "-", "fp32": "--"}


def _svg(fig: Figure) -> str:
    import matplotlib.pyplot as plt

    buf = io.StringIO()
    fig.savefig(buf, format="svg", bbox_inches="tight", metadata={"Date": None})
    plt.close(fig)
    text = buf.getvalue()
    text = text[text.index("<svg") :]  # drop the XML prolog and DOCTYPE so it can sit inside HTML
    # the RDF metadata block names four namespace URLs; nothing in a self-contained report should
    return re.sub(r"\s*<metadata>.*?</metadata>", "", text, count=1, flags=re.DOTALL)


def _figure(nrows: int = 1, width: float = 7.5, height: float = 3.6) -> tuple[Figure, list[Axes]]:
    import matplotlib

    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt

    matplotlib.rcParams.update(_STYLE)
    fig, axes = plt.subplots(nrows, 1, figsize=(width, height * nrows), squeeze=False)
    fig.subplots_adjust(hspace=0.45)  # room for the x label above the next panel's title
    return fig, [row[0] for row in axes]


def _colors(data: ReportData) -> dict[str, Any]:
    import matplotlib

    cmap = matplotlib.colormaps["tab10"]
    return {tid: cmap(i % 10) for i, tid in enumerate(sorted(data.targets))}


def _models(data: ReportData) -> list[str]:
    return sorted({r.model for r in data.rows})


def _legend(ax: Axes) -> None:
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0.0)


Bounds = tuple[float, float]  # (low, high) of an error bar


def _point(step: Step, key: str) -> tuple[float, float, Bounds, Bounds] | None:
    """(throughput, latency ms, throughput interval, latency interval): the error bars of one measured step;
    an open upper end is drawn to the point itself (no bar where nothing bounds it). None without both."""
    thr = step_throughput_interval(step) or {}
    value, low, high = step_latency_interval(step, key)
    if step.throughput_rps is None or value is None:
        return None
    rps = float(step.throughput_rps)
    return (rps, value / 1000.0, (thr.get("low") or rps, thr.get("high") or rps),
            ((low or value) / 1000.0, (high or value) / 1000.0))  # fmt: skip


def _err(values: list[float], bounds: list[Bounds]) -> list[list[float]]:
    # a batch-means interval can reach below zero; on log axes the bar stops at a tenth of the value
    return [[min(0.9 * v, max(0.0, v - lo)) for v, (lo, _) in zip(values, bounds, strict=True)],
            [max(0.0, hi - v) for v, (_, hi) in zip(values, bounds, strict=True)]]  # fmt: skip


def latency_vs_throughput(data: ReportData) -> str:
    """Per model: usable measured steps per target (percentile vs requests/s) with their 95 % intervals as
    error bars, projected points, and the SLO line."""
    opts = data.options
    key = percentile_key(opts.percentile)
    colors = _colors(data)
    models = _models(data)
    fig, axes = _figure(len(models))
    for ax, model in zip(axes, models, strict=True):
        drawn = False
        for (m, precision, tid), group in data.groups.items():
            pts = sorted(
                p for _, s in group.steps()
                if m == model and step_usable(s) and latency_at(s, key) is not None and (p := _point(s, key))
            )  # fmt: skip
            if pts:
                drawn = True
                x, y, xerr, yerr = (list(v) for v in zip(*pts, strict=True))
                ax.errorbar(x, y, xerr=_err(x, xerr), yerr=_err(y, yerr), color=colors[tid], capsize=2,
                            elinewidth=0.8, marker=_MARKERS.get(precision, "o"), linestyle=_LINES.get(precision, "-"),
                            label=f"{tid} {precision} (measured, 95 % intervals)")  # fmt: skip
        for row in data.rows:
            if (
                row.model == model
                and row.status == "projected"
                and row.capacity_rps
                and row.latency_us is not None
            ):
                drawn = True
                ax.plot([row.capacity_rps], [row.latency_us / 1000.0], color=colors[row.target],
                        marker=_MARKERS.get(row.precision, "o"), fillstyle="none", linestyle="none",
                        label=f"{row.target} {row.precision} (projected)")  # fmt: skip
        ax.axhline(
            opts.slo_ms, color="red", linestyle=":", linewidth=1.2, label=f"SLO {key} {opts.slo_ms:g} ms"
        )
        if drawn:  # log axes need data: a model with no usable step and no projection keeps linear axes
            ax.set_xscale("log")
            ax.set_yscale("log")
        ax.set_xlabel("throughput (requests/s)")
        ax.set_ylabel(f"{key} latency (ms)")
        ax.set_title(f"{model}: {key} latency vs throughput", fontsize=9)
        _legend(ax)
    return _svg(fig)


def cost_vs_baseline(data: ReportData) -> str:
    """Per model: cost per million requests of every row that has one; projected hatched; baseline outlined red."""
    colors = _colors(data)
    models = [m for m in _models(data) if any(r.model == m and r.cost_per_million_usd for r in data.rows)]
    heights = [sum(1 for r in data.rows if r.model == m and r.cost_per_million_usd) for m in models]
    fig, axes = _figure(len(models) or 1, height=max(2.0, 0.28 * max(heights or [1]) + 1.0))
    for ax, model in zip(axes, models, strict=False):
        costs = [(r, r.cost_per_million_usd) for r in data.rows
                 if r.model == model and r.cost_per_million_usd is not None]  # fmt: skip
        costs.sort(key=lambda rc: (-rc[1], rc[0].target, rc[0].precision))
        labels = []
        for i, (r, cost) in enumerate(costs):
            projected, base = r.status == "projected", r.target == data.baseline_id
            ax.barh(i, cost, color=colors[r.target], alpha=0.55 if projected else 0.95,
                    hatch="//" if projected else None, edgecolor="red" if base else "black",
                    linewidth=2.0 if base else 0.6)  # fmt: skip
            labels.append(f"{r.target} {r.precision}" + (" (proj)" if projected else "")
                          + (" [baseline]" if base else "") + (" [accuracy FAIL]" if r.accuracy_verdict == "FAIL" else ""))  # fmt: skip
        ax.set_yticks(range(len(costs)))
        ax.set_yticklabels(labels)
        ax.set_xscale("log")
        ax.set_xlabel("USD per million requests at the SLO (log scale)")
        ax.set_title(
            f"{model}: cost per million requests (hatched = projected; red outline = baseline)", fontsize=9
        )
    return _svg(fig)


def _roof(target: HardwareTarget, precision: str) -> tuple[float, float, str] | None:
    used = proj.precision_on(target, precision)
    if used is None or not target.memory_bw_gbs:
        return None
    return float(target.peak_tflops[used]) * 1e12, float(target.memory_bw_gbs) * 1e9, used


def roofline_chart(data: ReportData) -> str:
    """Each target's roof, min(peak, bandwidth × intensity), with every row's point at its capacity."""
    import numpy as np
    from matplotlib.lines import Line2D

    colors = _colors(data)
    fig, (ax,) = _figure(1, height=4.2)
    intensity = np.logspace(-1, 4, 200)
    marks = "o^sDvP*X"  # more models than marks: they repeat (the legend still names each model)
    model_marks = {m: marks[i % len(marks)] for i, m in enumerate(_models(data))}
    drawn: set[tuple[str, str]] = set()
    for row in sorted(data.rows, key=lambda r: (r.target, r.precision, r.model)):
        roof = _roof(data.targets[row.target], row.precision)
        if roof is None:
            continue
        if (row.target, roof[2]) not in drawn:
            drawn.add((row.target, roof[2]))
            ax.plot(intensity, np.minimum(roof[0], roof[1] * intensity), color=colors[row.target], linewidth=1,
                    linestyle=_LINES.get(roof[2], "-."), label=f"{row.target} roof ({roof[2]})")  # fmt: skip
        gc = data.graph_costs.get((row.model, row.precision))
        if not gc or not row.capacity_ips:
            continue
        batch = row.projected_batch or row.served_batch or 1
        x = float(gc["flops_per_inference"]) / proj.bytes_per_inference(gc, batch)
        y = float(row.capacity_ips) * float(gc["flops_per_inference"])
        if x <= 0 or y <= 0:
            continue  # a 0-FLOP model has no place on log axes
        ax.plot([x], [y], color=colors[row.target], marker=model_marks[row.model], linestyle="none",
                fillstyle="full" if row.status == "measured" else "none")  # fmt: skip
    proxies = [Line2D([], [], color="gray", marker=mk, linestyle="none", label=f"{m}")
               for m, mk in model_marks.items()]  # fmt: skip
    proxies += [Line2D([], [], color="gray", marker="o", linestyle="none", label="filled = measured"),
                Line2D([], [], color="gray", marker="o", fillstyle="none", linestyle="none", label="hollow = projected")]  # fmt: skip
    handles, _ = ax.get_legend_handles_labels()
    ax.legend(handles=handles + proxies, fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("arithmetic intensity (FLOP/byte, at the batch that set the capacity)")
    ax.set_ylabel("achieved FLOP/s")
    ax.set_title("Roofline: each row's point at its capacity", fontsize=9)
    return _svg(fig)


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
    filled markers, projected dashed with hollow ones; the asked interactivity as a vertical line."""
    import matplotlib

    models = sorted({r.model for r in gen.rows}) or [""]
    fig, axes = _figure(len(models), height=3.8)
    cmap = matplotlib.colormaps["tab10"]
    targets = sorted({r.target for r in gen.rows})
    colors = {t: cmap(i % 10) for i, t in enumerate(targets)}
    for ax, model in zip(axes, models, strict=True):
        drawn = False
        for r in sorted(
            (r for r in gen.rows if r.model == model), key=lambda r: (r.status, r.target, r.precision)
        ):
            pts = sorted(
                (p.tokens_per_user, p.output_tps) for p in r.points if p.tokens_per_user and p.output_tps
            )
            if not pts:
                continue
            drawn = True
            projected = r.status == "projected"
            ax.plot([p[0] for p in pts], [p[1] for p in pts], color=colors[r.target],
                    linestyle="--" if projected else "-", marker=_MARKERS.get(r.precision, "o"),
                    fillstyle="none" if projected else "full", markersize=4,
                    label=f"{r.target} {r.precision} ({'projected' if projected else 'measured'})")  # fmt: skip
        if gen.min_tokens_per_user is not None:
            ax.axvline(gen.min_tokens_per_user, color="red", linestyle=":", linewidth=1.2,
                       label=f"{gen.min_tokens_per_user:g} tok/s per user")  # fmt: skip
        if drawn:
            ax.set_xscale("log")
            ax.set_yscale("log")
        ax.set_xlabel("interactivity (tokens/s per user = 1000 / TPOT p50 ms)")
        ax.set_ylabel("output tokens/s per accelerator")
        ax.set_title(
            f"{model}: throughput vs interactivity (solid = measured, dashed = projected)", fontsize=9
        )
        _legend(ax)
    return _svg(fig)


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
        panels = [("capacity_rps", 1.0, "output tokens/s at the objective"), ("latency_us", 1000.0, "TTFT p99 (ms)"),
                  ("tpot_us", 1000.0, "TPOT p99 (ms)")]  # fmt: skip
    fig, axes = _figure(len(panels), width=7.5, height=2.6)
    cap_ax = axes[0]
    xs = list(range(len(runs)))
    for ax, (key, scale, ylabel) in zip(axes, panels, strict=True):
        pts = [(x, r[key] / scale) for x, r in zip(xs, runs, strict=True) if r.get(key) is not None]
        if pts:
            ax.plot([p[0] for p in pts], [p[1] for p in pts], "-o", color="#1f77b4", markersize=4)
        bad = [(x, r[key] / scale) for x, r in zip(xs, runs, strict=True) if r.get("flagged") and r.get(key)]
        if bad:
            ax.plot([p[0] for p in bad], [p[1] for p in bad], "x", color="#d62728", markersize=9,
                    markeredgewidth=2, label="moved more than the run-to-run spread")  # fmt: skip
            _legend(ax)
        ax.set_ylabel(ylabel)
        ax.set_xticks(xs)
        ax.set_xticklabels([r["label"] for r in runs], rotation=30, ha="right", fontsize=7)
    cap_ax.set_title(title, fontsize=9)
    return _svg(fig)
