"""What the report says, independent of its format: the answer, tables, provenance, method.

Markdown and HTML render the same sections, so the two files never disagree. Projected figures carry
"(proj)" in every cell, so a number cannot be quoted without its label.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from accelbench.documents import to_dict
from accelbench.hardware.catalog import HOURS_PER_YEAR
from accelbench.reports import projection as proj
from accelbench.reports.capacity import (
    percentile_key,
    step_latency_interval,
    step_slo,
    step_throughput_interval,
)
from accelbench.reports.cost import DEFAULT_AMORTIZATION_YEARS, HOURS_PER_MONTH
from accelbench.reports.formatting import attempts_text, num, offered_text, round_in_text, when, with_interval
from accelbench.reports.rows import PlanRow, ReportRow

if TYPE_CHECKING:
    from accelbench.reports.build import ReportData


@dataclass
class Table:
    title: str
    headers: list[str]
    rows: list[list[str]]
    note: str = ""


@dataclass
class Section:
    title: str
    paragraphs: list[str] = field(default_factory=list)
    bullets: list[str] = field(default_factory=list)
    tables: list[Table] = field(default_factory=list)


fmt = num  # the report's figures: at most four significant figures (formatting.num)


def _usd(value: float | None) -> str:
    return "—" if value is None else f"${fmt(value)}"


def _measured(row: ReportRow, value: float | None, low: float | None, high: float | None, **kw: Any) -> str:
    if row.status == "projected":
        return with_interval(value, None, None, kind="projected", **kw)
    return with_interval(value, low, high, **kw)


def _p(row: ReportRow | PlanRow, text: str) -> str:
    """Label a figure that is (or depends on) a projection."""
    return f"{text} (proj)" if text != "—" and row.status == "projected" else text


def _ratio(row: ReportRow, value: float | None) -> str:
    text = "—" if value is None else f"{value:.3g}×"
    if text != "—" and (row.status == "projected" or row.baseline_status == "projected"):
        text += " (proj)"
    return text


_KIND_TEXT = {
    "published": "fitted on this target's published results",
    "toolchain-median": "its toolchain's median of published results (none for this target)",
    "measured": "calibrated on measured targets of its toolchain",
    "assumed": "assumed (no published or measured data)",
}


def efficiency_label(row: ReportRow) -> str:
    """Where a projected row's efficiency came from, its projected range and its calibration, in one phrase."""
    e = "—" if row.efficiency is None else f"{row.efficiency:.3g}"
    text = f"efficiency {e} {_KIND_TEXT.get(row.efficiency_kind or 'assumed', 'assumed')}"
    lo, hi = row.projected_capacity_rps_low, row.projected_capacity_rps_high
    if lo is not None and hi is not None and hi > lo * 1.001:
        text += (
            f"; projected range {fmt(lo)}–{fmt(hi)} req/s (spread of the efficiency fit and of its validation, "
            "not a measurement)"
        )
    elif lo is not None:
        text += "; projected range: none (the fit passes through every published point: no spread to show)"
    calibration = row.calibration or "none"
    if row.efficiency_kind in ("published", "toolchain-median"):
        text += f"; calibration {calibration}"
    return text


_KIND_SHORT = {
    "published": "published",
    "toolchain-median": "toolchain median",
    "measured": "measured",
    "assumed": "assumed",
}
PROJECTED_LEGEND = (
    "Projected rows (proj): roofline × efficiency. The note gives the efficiency and where it came from "
    "(published: fitted on this target's published results; toolchain median: its toolchain's median, none "
    "published for this target; measured: calibrated on measured targets of its toolchain; assumed: no data), "
    "the projected range of the capacity (the spread of the efficiency fit and of its validation, not a "
    "measurement), the calibration factor where one applies (how it was made: Provenance) and the batch."
)


def projected_note(row: ReportRow) -> str:
    """What is particular to one projected row; what every projected row shares is in PROJECTED_LEGEND."""
    e = "—" if row.efficiency is None else f"{row.efficiency:.3g}"
    text = f"efficiency {e} ({_KIND_SHORT.get(row.efficiency_kind or 'assumed', 'assumed')})"
    lo, hi = row.projected_capacity_rps_low, row.projected_capacity_rps_high
    if lo is not None and hi is not None and hi > lo * 1.001:
        text += f"; range {fmt(lo)}–{fmt(hi)} req/s"
    elif lo is not None:
        text += "; no range (the fit passes through every published point)"
    if row.calibration and row.calibration != "none":  # its factor; how it was made: Provenance, once per row
        text += f"; calibration {row.calibration.split(' = ')[0]}"
    return text + f"; batch {row.projected_batch}"


def _accuracy(row: ReportRow) -> str:
    if not row.accuracy_verdict:
        return "not recorded"
    value = "" if row.accuracy_value is None else f" {row.accuracy_value:.4g}"
    return f"{row.accuracy_metric or ''}{value} {row.accuracy_verdict}".strip()


def answer(data: ReportData) -> str:
    """The one paragraph at the top: per model, the cheapest target meeting the SLO and its ratio."""
    opts = data.options
    key = percentile_key(opts.percentile)
    parts = []
    for model in sorted({r.model for r in data.rows}):
        best = next((r for r in data.rows if r.model == model and r.rank == 1), None)
        if best is None:
            parts.append(f"For **{model}**, no priced target meets {key} ≤ {opts.slo_ms:g} ms.")
            continue
        label = "measured"
        if best.status != "measured":
            label = f"projected, not measured: roofline × {efficiency_label(best)}"
        ratio = best.cost_vs_baseline
        base = (
            f"{ratio:.3g}× the cost of the {data.baseline_id} baseline"
            + (" (baseline projected)" if best.baseline_status == "projected" else "")
            if ratio is not None
            else f"no cost ratio: the {data.baseline_id} baseline has no cost at this SLO"
        )
        parts.append(
            f"For **{model}** at {key} ≤ {opts.slo_ms:g} ms, the cheapest target is **{best.target}** "
            f"({best.precision}, {label}): **{_cost(best)} per million requests** "
            f"(capacity {_capacity(best)} requests/s at {_usd(best.usd_per_hour)}/h), {base}."
        )
        parts += _comparisons(data, model)
        if best.status != "measured":
            parts.append(_best_measured(data, model))
    return " ".join(parts)


def _best_measured(data: ReportData, model: str) -> str:
    # (rank, row): every ranked row has a rank
    ranked = [
        (r.rank, r)
        for r in data.rows
        if r.model == model and r.ranked and r.status == "measured" and r.rank is not None
    ]
    if not ranked:
        return "No measured target meets the SLO."
    _, r = min(ranked, key=lambda rank_row: rank_row[0])
    ratio = "" if r.cost_vs_baseline is None else f", {r.cost_vs_baseline:.3g}× the baseline's cost"
    if ratio and r.baseline_status == "projected":
        ratio += " (baseline projected)"
    return (
        f"The cheapest measured target is {r.target} ({r.precision}): {_cost(r)} "
        f"per million requests (capacity {_capacity(r)} requests/s at {_usd(r.usd_per_hour)}/h{ratio})."
    )


def _cost(r: ReportRow) -> str:
    return _measured(r, r.cost_per_million_usd, r.cost_low, r.cost_high, prefix="$")


def _capacity(r: ReportRow) -> str:
    return _measured(r, r.capacity_rps, r.capacity_low, r.capacity_high)


def _latency(r: ReportRow) -> str:
    return _measured(r, r.latency_us, r.latency_low_us, r.latency_high_us, scale=1000.0)


def _comparisons(data: ReportData, model: str) -> list[str]:
    """The measured rows compared with the cheapest measured one, as the ranking's significance."""
    rows = [r for r in data.rows if r.model == model and r.comparison]
    return [f"Against {r.target} ({r.precision}): {r.comparison}." for r in rows]


RESULT_HEADERS = [
    "rank",
    "target",
    "precision",
    "status",
    "capacity (req/s)",
    "{key} (ms)",
    "SLO",
    "step",
    "$/hour",
    "$ per million req",
    "capacity vs base",
    "{key} vs base",
    "cost vs base",
    "accuracy",
    "note",
]


def results_table(data: ReportData, model: str) -> Table:
    key = percentile_key(data.options.percentile)
    rows = []
    for r in (r for r in data.rows if r.model == model):
        latency = None if r.latency_us is None else r.latency_us / 1000.0
        note = r.reason if not r.meets_slo or not r.ranked else ""
        for extra in (r.runs_note, r.batching_note, r.step_reasons, r.comparison):
            if extra:
                note = (note + "; " if note else "") + extra
        resolution_us = r.latency_resolution_us or 0
        if resolution_us > 1:  # imported from a bucketed histogram (Locust)
            note = (note + "; " if note else "") + f"{key} known to {resolution_us / 1000:g} ms"
        if r.status == "projected" and r.efficiency:
            note = (note + "; " if note else "") + projected_note(r)
        rows.append(
            [
                str(r.rank) if r.rank else "—",
                r.target,
                r.precision,
                r.status,
                _capacity(r),
                _latency(r) if latency is not None else "—",
                r.slo_verdict or "—",
                r.step_verdict or "—",
                _usd(r.usd_per_hour),
                _cost(r),
                _ratio(r, r.capacity_vs_baseline),
                _ratio(r, r.latency_vs_baseline),
                _ratio(r, r.cost_vs_baseline),
                _accuracy(r),
                note,
            ]
        )
    headers = [h.format(key=key) for h in RESULT_HEADERS]
    model_rows = [r for r in data.rows if r.model == model]
    if any(r.energy_per_request_j is not None for r in model_rows):  # only where power was measured
        headers.insert(10, "J/request")
        for cells, r in zip(rows, model_rows, strict=True):
            cells.insert(10, fmt(r.energy_per_request_j))
    legend = (
        "Ranked by cost per million requests among rows that meet the SLO. Measured numbers carry their 95 % "
        'interval in brackets; see "How to read these numbers".'
    )
    if any(r.status == "projected" and r.efficiency for r in model_rows):
        legend += " " + PROJECTED_LEGEND
    return Table(f"{model}", headers, rows, legend)


def settings_section(data: ReportData) -> Section:
    o = data.options
    key = percentile_key(o.percentile)
    years = (
        f"{o.amortization_years:g} years"
        if o.amortization_years
        else f"the catalog's amortization period (default {DEFAULT_AMORTIZATION_YEARS:g} years)"
    )
    overrides = ", ".join(f"{k}=${v:g}/h" for k, v in sorted(o.price_overrides.items())) or "none"
    return Section(
        "Settings",
        bullets=[
            f"SLO: {key} latency ≤ {o.slo_ms:g} ms, judged on the 95 % interval; steps with error rate > {o.max_error_rate:.2%} or verdict INVALID do not count.",
            f"Baseline: {data.baseline_id}" + ("" if o.baseline else " (catalog default)") + ".",
            f"Price basis: {o.price_basis}; price overrides: {overrides}.",
            f"Owned devices (Jetson): purchase price (catalog capex) over {years} plus the catalog power figure at "
            f"${o.usd_per_kwh:g}/kWh; the period and the rate are assumptions, not measurements "
            "(--amortization-years, --usd-per-kwh; a price override replaces the whole figure).",
            "Accuracy FAIL variants: "
            + ("ranked (--include-failed)" if o.include_failed else "shown but not ranked")
            + ".",
            *_left_out(data),
        ],
    )


def _left_out(data: ReportData) -> list[str]:
    """A bullet for the results that could not be priced (no target or precision recorded)."""
    left_out = data.left_out
    if not left_out:
        return []
    return [
        f"Left out, not priced ({len(left_out)}: a cost needs the target and precision the run was on; "
        "`accelbench loadtest --url` without a manifest records them with --target and --precision): "
        + "; ".join(left_out)
        + "."
    ]


def plan_section(data: ReportData, plan: list[PlanRow]) -> Section:
    o = data.options
    rows = [
        [
            p.model,
            p.target,
            p.precision,
            p.unit,
            p.status,
            _p(p, fmt(p.capacity_rps)),
            _p(p, str(p.replicas)),
            _p(p, str(p.gpus)),
            _usd(p.usd_per_hour),
            _p(p, _usd(p.monthly_usd)),
        ]
        for p in plan
    ]
    headers = [
        "model",
        "target",
        "precision",
        "unit",
        "status",
        "capacity (req/s)",
        "replicas",
        "devices",
        "$/hour each",
        "$/month",
    ]
    return Section(
        f"Capacity plan for {fmt(o.target_qps)} requests/s",
        paragraphs=[
            f"Replicas = ⌈target ÷ (capacity × (1 − headroom {o.headroom:g}))⌉; month = {HOURS_PER_MONTH:g} h. "
            "MIG slices are assumed to deliver their compute fraction of the GPU's capacity and are priced by "
            "the same share of its hourly price; projected rows inherit their projection."
        ],
        tables=[Table("plan", headers, rows)],
    )


def _range(lo: float | None, hi: float | None) -> str:
    return "—" if lo is None or hi is None else f"{lo:.3g}–{hi:.3g} (projected)"


def _chosen_step(r: ReportRow) -> str:
    if r.chosen_step is None:
        return "none: no usable step meets the SLO"
    offered: dict[str, Any] = {}
    for pair in (r.offered or "").split(","):  # the row's "concurrency=4" read back as "concurrency 4"
        key, _, value = pair.partition("=")
        if key:
            try:
                offered[key] = float(value)
            except ValueError:
                offered[key] = value
    return f"{r.chosen_run_id or '—'} step {r.chosen_step} ({offered_text(offered)})"


def provenance_section(data: ReportData) -> Section:
    measured = [
        [
            r.target,
            r.model,
            r.precision,
            r.origin or "",
            r.host or "",
            when(r.measured_at),
            r.versions or "",
            _chosen_step(r),
            r.sources or "",
        ]
        for r in data.rows
        if r.status == "measured"
    ]
    projected = [
        [
            r.target,
            r.model,
            r.precision,
            f"{r.efficiency:.3g}" if r.efficiency else "—",
            _range(r.efficiency_low, r.efficiency_high),
            r.efficiency_source or "",
            r.calibration or "none",
            str(r.projected_batch or "—"),
            r.roofline_bound or "—",
            r.precision_used or "—",
            r.reason,
        ]
        for r in data.rows
        if r.status == "projected"
    ]
    prices = {}
    for r in data.rows:
        prices[r.target] = [
            r.target,
            _usd(r.usd_per_hour),
            r.price_basis or "—",
            round_in_text(r.price_note or ""),
            round_in_text(r.price_source or "—"),
            r.price_as_of or "—",
        ]
    return Section(
        "Provenance",
        tables=[
            Table(
                "Measured rows",
                [
                    "target",
                    "model",
                    "precision",
                    "origin",
                    "host",
                    "measured at",
                    "versions",
                    "step that set the capacity",
                    "result files",
                ],
                measured,
            ),
            Table(
                "Projected rows (not measured)",
                [
                    "target",
                    "model",
                    "precision",
                    "efficiency",
                    "projected efficiency range",
                    "efficiency source",
                    "calibration",
                    "batch",
                    "bound",
                    "precision used",
                    "why",
                ],
                projected,
            ),
            Table(
                "Prices (per accelerator-hour)",
                ["target", "$/hour", "basis", "note", "source", "as of"],
                [prices[k] for k in sorted(prices)],
            ),
        ],
    )


def steps_section(data: ReportData) -> Section:
    """Every measured load step with its verdict, reasons and intervals: what the capacity was chosen from."""
    o = data.options
    key = percentile_key(o.percentile)
    tables = []
    for (model, precision, tid), group in data.groups.items():
        rows = []
        for run_id, step in group.steps():
            thr = step_throughput_interval(step) or {}
            value, low, high = step_latency_interval(step, key)
            has = bool(thr)
            offered = offered_text(to_dict(step.offered))
            n = step.statistics.n if step.statistics else None
            rows.append(
                [
                    run_id,
                    offered,
                    step.verdict,
                    with_interval(step.throughput_rps, thr.get("low"), thr.get("high")),
                    with_interval(value, low if has else None, high if has else None, scale=1000.0),
                    step_slo(step, o.slo_us, key) if step.verdict != "INVALID" else "—",
                    fmt(n if n is not None else step.requests),
                    attempts_text(step),
                    "; ".join(step.reasons or []) or "—",
                ]
            )
        tables.append(
            Table(
                f"{model} {precision} on {tid}",
                [
                    "run",
                    "offered",
                    "verdict",
                    "throughput (req/s)",
                    f"{key} (ms)",
                    "SLO",
                    "requests",
                    "attempts",
                    "reasons",
                ],
                rows,
            )
        )
    return Section(
        "Load steps",
        paragraphs=[
            "Every measured step. A step judged INVALID for drift or no steady state is measured again "
            "(`--retries`, default 2) and the first VALID or LOW-PRECISION attempt is used; the attempts "
            "column gives each earlier attempt's verdict and reason. A step that stayed INVALID is listed "
            "with its figures, intervals and reasons and never used."
        ],
        tables=tables,
    )


def reading_section(data: ReportData) -> Section:
    """How to read the intervals and verdicts, in plain words (docs/statistics.md has the sources)."""
    key = percentile_key(data.options.percentile)
    return Section(
        "How to read these numbers",
        bullets=[
            "`58.1 [55.0, 61.2]` is a measured value and its 95 % interval: repeating the measurement would land "
            "in such an interval 95 times in 100. `open` means too few requests to bound that side.",
            "Throughput intervals come from 10 equal-time batch means of the step (Student t); percentile intervals "
            "are exact order statistics of the step's requests, with no assumption about the latency distribution.",
            f"SLO verdict: PASS when the upper end of the {key} interval is within the SLO, FAIL when its lower end "
            "is above it, INCONCLUSIVE otherwise (a longer step narrows the interval). Capacity is the highest "
            "throughput among PASS steps, with that step's interval; cost per million follows from it.",
            "Step verdict: VALID; LOW-PRECISION (fewer requests than the percentile needs, 662 for p99 by MLPerf's "
            "early stopping, or a throughput interval wider than ±10 %): shown and used, with wider intervals; "
            "INVALID (errors, a saturated load generator, no steady state after warm-up, or drift during the step): "
            "never used. Each reason is stated beside the row.",
            '"A is 6–12 % cheaper than B (95 %)" is a Welch interval on the ratio of their costs, Holm-corrected '
            'across the ranking; "no significant difference" means the interval includes equal cost.',
            'Projected rows are roofline estimates: they carry "(proj)" and a range at most, never a measured '
            "interval.",
        ]
        + _repeats_bullet(data),
    )


def _repeats_bullet(data: ReportData) -> list[str]:
    """Only when some row combines repeated runs, so a report of single runs reads as it always did."""
    if not any(r.runs for r in data.rows):
        return []
    return [
        'Repeated runs (`--repeats N`): a row marked "mean of N runs" is the mean of each run\'s capacity; '
        "its interval uses the between-run standard error when the runs differ more than each run's own "
        "batch means allow (Kalibera & Jones 2013), and needs at least 3 runs to estimate it well. Latency "
        "and the step shown are those of the run closest to the mean."
    ]


def method_section(data: ReportData) -> Section:
    key = percentile_key(data.options.percentile)
    return Section(
        "Method",
        bullets=[
            f"Capacity at the SLO: the highest throughput (requests/s) among VALID or LOW-PRECISION load steps whose "
            f"{key} SLO verdict is PASS (the upper end of its exact 95 % interval within the SLO) and whose error "
            "rate is within the limit, pooled over all result files of a model × precision × target. None "
            'qualifying: "does not meet the SLO" (or INCONCLUSIVE when an interval straddles it).',
            "Cost per million requests = $/hour ÷ (capacity × 3600) × 10⁶, with $/hour and capacity as in the table.",
            "A multi-accelerator instance is priced per accelerator: instance $/hour ÷ accelerators per instance "
            f"(one replica per accelerator). Owned devices: capex ÷ (years × {HOURS_PER_YEAR:g} h) + power W × $/kWh ÷ 1000.",
            f"Projected rows: roofline over the model's graph cost (FLOPs, weight bytes + batch × activation bytes) at "
            f"the target's dense peak and memory bandwidth; the largest batch in {list(proj.BATCH_SIZES)} whose latency "
            "bound ÷ efficiency fits the SLO sets throughput = roofline bound × efficiency. The efficiency comes from the "
            "target's published results in the catalog (MLPerf, NVIDIA Jetson, AWS Neuron tables: the fraction of the "
            "dense peak they reached, fitted on batch in log space and clamped to the fitted range; weights stream "
            "once per batch; never above the roofline), else from its toolchain's median of published points; a "
            "measured target of the same "
            "toolchain scales it by measured ÷ published efficiency (the calibration column). Without published data "
            "it is the median of measured targets of the toolchain (measured ÷ roofline at the served batch, steps "
            f"that met the SLO), else {proj.DEFAULT_EFFICIENCY_SOURCE}. The projected range is the spread of the "
            "published points around the fit and of the fit with each point left out, a projection's uncertainty, "
            "not a measured interval. See "
            "docs/projections.md. A projected latency is a batch latency "
            "without queueing, so it is optimistic for tail percentiles. Measured rows always replace projected ones.",
            f'Ratios are to the {data.baseline_id} row of the same model and precision; "(proj)" marks a ratio '
            "involving a projected figure.",
            "Imported results: perf_analyzer latencies are µs; Locust percentiles are bucketed (1 ms below 100 ms, "
            "10 ms below 1 s), so a Locust p99 is known only to that resolution.",
            "Accuracy is the INT8 (or other precision) variant's check against FP32 as recorded with the results; "
            "projected rows show the accuracy of the measured variant named in the table file (accuracy_of).",
        ],
    )
