"""The generative part of the report (Markdown and HTML render the same sections): cost per million tokens, the
answer at a target interactivity, the steps, the memory fit, the token capacity plan and the method."""

from __future__ import annotations

from typing import TYPE_CHECKING

from accelbench.hardware.llm_memory import Fit
from accelbench.reports.cost import HOURS_PER_MONTH, PRICE_BASES
from accelbench.reports.options import ReportOptions
from accelbench.reports.sections import Section, Table, fmt

if TYPE_CHECKING:
    from accelbench.reports.llm_report import GenerativeReport
    from accelbench.reports.llm_rows import GenRow


def _usd(v: float | None, projected: bool = False) -> str:
    if v is None:
        return "—"
    text = f"${v:.2f}" if v >= 0.1 else f"${v:.4g}"
    return f"{text} (proj)" if projected else text


def _n(v: float | None, projected: bool = False) -> str:
    text = fmt(v)
    return f"{text} (proj)" if projected and text != "—" else text


def _ivl(value: float | None, low: float | None, high: float | None, money: bool = False) -> str:
    if value is None:
        return "—"
    one = _usd if money else fmt
    return one(value) if low is None or high is None else f"{one(value)} [{one(low)}, {one(high)}]"


def _proj(text: str, projected: bool) -> str:
    return f"{text} (proj)" if projected and text != "—" else text


def _range(r: GenRow, low: float | None, high: float | None) -> str:
    """A projected figure's range after it in the answer (a measured one's interval is in its table)."""
    if r.status != "projected" or low is None or high is None:
        return ""
    return f" (range {_usd(low)}–{_usd(high)})"


def answer(gen: GenerativeReport) -> str:
    """The generative answer: per model the cheapest target at the objective (and at the interactivity)."""
    parts = []
    basis = gen.price_basis
    for model in sorted({r.model for r in gen.rows}):
        rows = [r for r in gen.rows if r.model == model]
        # (cost, row, its capacity point): a row with a cost has a capacity
        priced = [
            (cost, r, point)
            for r in rows
            if (cost := r.cost(basis)) is not None and (point := r.capacity) is not None
        ]
        obj = f"TTFT p99 ≤ {gen.ttft_ms:g} ms and TPOT p99 ≤ {gen.tpot_ms:g} ms"
        if priced:
            cost, best, point = min(priced, key=lambda x: (x[0], x[1].status != "measured", x[1].target))
            label = (
                "measured"
                if best.status == "measured"
                else f"projected, not measured: {best.efficiency_source}"
            )
            parts.append(
                f"For **{model}** at {obj}, the cheapest target is **{best.target}** ({best.precision}, "
                f"{label}): **{_usd(cost)} per million output tokens**{_range(best, *best.cost_interval(basis))} "
                f"({basis}; capacity "
                f"{fmt(point.output_tps)} output tokens/s per accelerator)."
            )
        else:
            parts.append(f"For **{model}**, no priced target meets {obj}.")
        if gen.min_tokens_per_user is not None:
            at = [(r.cost(basis, "output", r.answer_tps), r) for r in rows if r.answer_tps]
            at = [(c, r) for c, r in at if c is not None]
            n = f"{gen.min_tokens_per_user:g} tokens/s per user"
            if at:
                cost, best = min(at, key=lambda x: (x[0], x[1].status != "measured", x[1].target))
                label = "measured" if best.status == "measured" else "projected"
                parts.append(
                    f"At **{n}** (and the TTFT objective), the cheapest is **{best.target}** "
                    f"({best.precision}, {label}): **{_usd(cost)} per million output tokens**"
                    f"{_range(best, *best.answer_cost_interval(basis))} "
                    f"({fmt(best.answer_tps)} tokens/s per accelerator; {best.answer_how})."
                )
            else:
                parts.append(f"No target reaches {n} within its measured or projected points.")
    return " ".join(parts)


COST_HEADERS = [
    "target",
    "precision",
    "status",
    "capacity (output tok/s per accelerator)",
    "tok/s per user",
    "concurrency",
    "TTFT p99 (ms)",
    "TPOT p99 (ms)",
    "objective",
    "$/hour",
    "$ per M output tokens",
    "$ per M input tokens",
    "$ per M blended tokens",
]


GEN_PROJECTED_LEGEND = (
    "Projected rows (proj): decode and prefill rooflines at the largest batch the memory holds, times the "
    "compute and memory efficiencies fitted on published LLM results (Generative method). The note names the "
    "row's fit (numbered below, said once: what it rests on, its efficiencies, its range and the floor under a "
    "decode step), its tensor-parallel degree (of those that fit, the one with the most output tokens/s per "
    "accelerator at the objective, all-reduces over the instance's links included), the most sequences at "
    "ISL + OSL it holds, and its serving recipe (weights, KV cache and compute dtypes)."
)


def _fit_ref(r: GenRow, fits: dict[str, int]) -> str:
    """The row's fit as a number into the legend's list (``fits``: its full text → number, filled here)."""
    if not r.efficiency_source:
        return "no efficiency fit"
    n = fits.setdefault(r.efficiency_source, len(fits) + 1)
    return f"fit [{n}]"


def _projected_note(r: GenRow, fits: dict[str, int]) -> str:
    """What is particular to one projected row; what every projected row shares is in GEN_PROJECTED_LEGEND."""
    if not r.points:  # not projected, or does not run the precision: its reason is particular
        return r.reason
    parts = [_fit_ref(r, fits)]
    if r.capacity is None:
        parts.insert(0, "does not meet the objective")
    if r.tp:
        degrees = [str(o["tp"]) for o in r.tp_options]
        parts.append(f"TP {r.tp} of {', '.join(degrees)}" if len(degrees) > 1 else f"TP {r.tp}")
    if r.max_batch:
        parts.append(f"up to {r.max_batch:,} sequences")
    return "; ".join(parts)


def cost_table(gen: GenerativeReport, model: str) -> Table:
    basis = gen.price_basis
    others = [b for b in PRICE_BASES if b != basis]
    headers = COST_HEADERS + [f"$ per M output ({b})" for b in others] + ["note"]
    rows = []
    fits: dict[str, int] = {}
    for r in (r for r in gen.rows if r.model == model):
        c, proj = r.capacity, r.status == "projected"
        q = r.prices.get(basis)
        low, high = r.cost_interval(basis)
        # a projected figure carries its range (llm_projected.fit_spread), a measured one its 95 % interval
        out_cost = _proj(_ivl(r.cost(basis), low, high, money=True), proj)
        cap = "—" if c is None else _proj(_ivl(c.output_tps, c.output_tps_low, c.output_tps_high), proj)
        verdict = (
            "PASS"
            if c is not None
            else ("—" if not r.points else ("INCONCLUSIVE" if "INCONCLUSIVE" in r.reason else "FAIL"))
        )
        searched = r.reason.startswith("the SLO-capacity search")  # its answer and interval, as found
        measured_note = r.reason if c is None or searched else ""
        note = _projected_note(r, fits) if proj else measured_note
        if r.recipe is not None:
            note = f"{note}; {r.recipe.label}" if note else r.recipe.label
        rows.append(
            [
                r.target,
                r.precision,
                r.status,
                cap,
                _n(c.tokens_per_user if c else None, proj),
                fmt(c.concurrency) if c else "—",
                _n(c.ttft_p99_ms if c else None, proj),
                _n(c.tpot_p99_ms if c else None, proj),
                verdict,
                _usd(q.usd_per_hour if q else None),
                out_cost,
                _usd(r.cost(basis, "input"), proj),
                _usd(r.cost(basis, "blended"), proj),
                *[_usd(r.cost(b), proj) for b in others],
                note.strip("; "),
            ]
        )
    legend = (
        "Cost per million tokens = $/accelerator-hour ÷ (tokens/s × 3600) × 10⁶ at the capacity step; input "
        "and blended at the workload's ISL/OSL. Measured figures carry their 95 % interval (from the output "
        "token rate's interval), projected ones their range [low, high] (the efficiency fit's spread, widened "
        "where the target has no published LLM point of its own). A basis the catalog lacks for a target shows —."
    )
    if any(r.status == "projected" and r.points for r in gen.rows if r.model == model):
        legend += " " + GEN_PROJECTED_LEGEND
    if fits:
        legend += " Fits: " + " ".join(
            f"[{n}] {text}." for text, n in sorted(fits.items(), key=lambda x: x[1])
        )
    return Table(f"{model}: cost per million tokens at the objective ({basis})", headers, rows, legend)


def answer_table(gen: GenerativeReport, model: str) -> Table | None:
    if gen.min_tokens_per_user is None:
        return None
    basis = gen.price_basis
    rows = []
    for r in sorted(
        (r for r in gen.rows if r.model == model),
        key=lambda r: (r.cost(basis, "output", r.answer_tps) if r.answer_tps else 1e30, r.target),
    ):
        proj = r.status == "projected"
        cost = r.cost(basis, "output", r.answer_tps) if r.answer_tps else None
        low, high = r.answer_cost_interval(basis)
        rows.append(
            [
                r.target,
                r.precision,
                r.status,
                _proj(_ivl(r.answer_tps, r.answer_tps_low, r.answer_tps_high), proj),
                _proj(_ivl(cost, low, high, money=True), proj),
                r.answer_how or r.reason,
            ]
        )
    return Table(
        f"{model}: at {gen.min_tokens_per_user:g} tokens/s per user and TTFT p99 ≤ {gen.ttft_ms:g} ms",
        ["target", "precision", "status", "output tok/s per accelerator", "$ per M output tokens", "how"],
        rows,
        "Throughput is interpolated monotonically (PCHIP) along each target's frontier between points "
        'that meet the TTFT objective; an interactivity beyond the most interactive point is "not '
        "reached\", never extrapolated. A projected row's range [low, high] is its frontier's low and high ends "
        "interpolated the same way.",
    )


def steps_table(gen: GenerativeReport) -> Table:
    rows = []
    for r in gen.rows:
        for p in r.points:
            proj = r.status == "projected"
            rows.append(
                [
                    r.model,
                    r.target,
                    r.precision,
                    r.status,
                    fmt(p.concurrency),
                    _proj(_ivl(p.output_tps, p.output_tps_low, p.output_tps_high), proj),
                    _n(p.tokens_per_user, proj),
                    _n(p.ttft_p99_ms, proj),
                    p.ttft_verdict,
                    _n(p.tpot_p99_ms, proj),
                    p.tpot_verdict,
                    p.verdict,
                ]
            )
    return Table(
        "Frontier points (every step; projected rows: one per batch)",
        [
            "model",
            "target",
            "precision",
            "status",
            "concurrency / batch",
            "output tok/s per accelerator",
            "tok/s per user",
            "TTFT p99 (ms)",
            "TTFT",
            "TPOT p99 (ms)",
            "TPOT",
            "objective",
        ],
        rows,
    )


def _fit_cell(fit: Fit) -> str:
    if fit.fits:
        tp = f", TP {fit.tp}" if fit.tp and fit.tp > 1 else ""
        mig = "; MIG " + ", ".join(f"{m.profile}: {m.sequences}" for m in fit.mig) if fit.mig else ""
        return f"{fit.sequences} seq{tp}{mig}"
    if fit.reason.startswith("does not run"):
        return "not supported: " + fit.reason.split(": ", 1)[-1]
    return "does not fit: " + fit.reason.split(": ", 1)[-1]


def fit_tables(gen: GenerativeReport) -> list[Table]:
    out = []
    for ft in gen.fits:
        precisions = list(ft.rows[0].fits) if ft.rows else []
        rows = [[r.target, fmt(r.memory_gb), *[_fit_cell(r.fits[p]) for p in precisions]] for r in ft.rows]
        first = ft.rows[0].fits[precisions[0]] if ft.rows and precisions else None
        kv = f"{first.kv_bytes_per_sequence / ft.context:,.0f} B per token" if first else ""
        weights = (
            ", ".join(f"{p} {ft.rows[0].fits[p].weight_bytes / 1e9:.3g} GB" for p in precisions)
            if ft.rows
            else ""
        )
        out.append(
            Table(
                f"Memory fit: {ft.model} at {ft.context:,} tokens of context",
                ["target", "memory (GB)", *[f"{p} weights" for p in precisions]],
                rows,
                f"Weights {weights}; KV cache {kv} (FP16 KV unless the model's own); source: {ft.source}. "
                "Concurrent sequences = ⌊(90 % of memory − weights) ÷ KV bytes per sequence⌋ on the smallest "
                "tensor-parallel degree of one instance that holds one sequence; MIG slices where one fits.",
            )
        )
    return out


def plan_section(gen: GenerativeReport, target_tps: float, headroom: float) -> Section:
    rows = [
        [
            p.model,
            p.target,
            p.precision,
            p.status,
            _n(p.capacity_tps, p.status == "projected"),
            str(p.replicas),
            _usd(p.usd_per_hour),
            _usd(p.monthly_usd, p.status == "projected"),
        ]
        for p in gen.plan or []
    ]
    return Section(
        f"Capacity plan for {fmt(target_tps)} output tokens/s",
        paragraphs=[
            f"Replicas = ⌈target ÷ (capacity at the objective × (1 − headroom {headroom:g}))⌉; month = {HOURS_PER_MONTH:g} h."
        ],
        tables=[
            Table(
                "token plan",
                [
                    "model",
                    "target",
                    "precision",
                    "status",
                    "capacity (tok/s)",
                    "replicas",
                    "$/hour each",
                    "$/month",
                ],
                rows,
            )
        ],
    )


def method_bullets(gen: GenerativeReport) -> list[str]:
    return [
        f"Objectives: TTFT p99 ≤ {gen.ttft_ms:g} ms and TPOT p99 ≤ {gen.tpot_ms:g} ms ({gen.objective_source}); a "
        "step PASSes when both exact 95 % intervals lie within their bounds, FAILs when either lies above, else "
        "INCONCLUSIVE. Capacity = the highest output tokens/s among PASS steps.",
        "Tokens/s per user = 1000 / TPOT p50 ms (InferenceX); tokens/s per accelerator = the step's output rate ÷ "
        "accelerators used (one for a measured row).",
        "Projected rows: decode roofline (weights read + KV cache per step over bandwidth) and prefill roofline "
        "(2 × params × ISL + attention over the compute peak) at the largest batch the memory holds, times the "
        "efficiency fitted on published LLM results (accelbench/hardware/published_results.toml [[llm_points]]: "
        "the target's own, else its toolchain's median, else all; docs/projections.md). They are not "
        "measurements and say so.",
    ]


def sections(gen: GenerativeReport, opts: ReportOptions) -> list[Section]:
    models = sorted({r.model for r in gen.rows})
    tables: list[Table] = []
    for m in models:
        tables.append(cost_table(gen, m))
        at = answer_table(gen, m)
        if at is not None:
            tables.append(at)
    out = [Section("Generative models: cost per million tokens", paragraphs=[answer(gen)], tables=tables)]
    fits = fit_tables(gen)
    if fits:
        out.append(Section("Memory and fit", tables=fits))
    if opts.target_tokens_per_s:
        out.append(plan_section(gen, opts.target_tokens_per_s, opts.headroom))
    out.append(Section("Generative steps", tables=[steps_table(gen)]))
    out.append(Section("Generative method", bullets=method_bullets(gen)))
    return out
