"""The report's first screen: one line per model (and per generative model and objective) with the cheapest
target, its cost with its 95 % interval (measured) or range (projected), its ratio to the baseline and the
cheapest *measured* target beside it; then one short sentence per line on what matters most.

Pure: rows in, a table and sentences out (Markdown and HTML render the same). The full answer, with the
efficiency's source and the significance tests, stays below the table (sections.answer, the generative
section and the Method).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from accelbench.reports.capacity import percentile_key
from accelbench.reports.formatting import num

if TYPE_CHECKING:
    from accelbench.reports.build import ReportData
    from accelbench.reports.llm_report import GenerativeReport, GenRow
    from accelbench.reports.rows import ReportRow

WIDE = 1.5  # a range wider than high ÷ low of this reads as "measure it before buying"


@dataclass(frozen=True)
class Pick:
    """One target of a headline line: its cost (per million requests or output tokens), the cost's 95 %
    interval (measured) or projected range (projected; None where the row has none), its ratio to the
    baseline."""

    target: str
    precision: str
    status: str  # measured | projected
    owned: bool  # priced as an owned device (capex amortized + power), not a rental
    usd_per_million: float
    low: float | None
    high: float | None
    vs_baseline: float | None
    baseline_projected: bool = False

    @property
    def width(self) -> float | None:
        """high ÷ low: how many times wider the top of the range is than its bottom."""
        if self.low is None or self.high is None or self.low <= 0:
            return None
        return self.high / self.low


@dataclass(frozen=True)
class Line:
    model: str
    objective: str
    best: Pick | None
    best_measured: Pick | None

    @property
    def sentence(self) -> str:
        return _sentence(self)


@dataclass(frozen=True)
class Headline:
    lines: list[Line]
    baseline_id: str
    owned_note: str  # how owned devices are priced; "" when no line names one

    @property
    def headers(self) -> list[str]:
        base = f"vs {self.baseline_id}"
        return [
            "model",
            "objective",
            "cheapest target",
            "$ per million",
            base,
            "cheapest measured",
            "$ per million",
            base,
        ]

    @property
    def rows(self) -> list[list[str]]:
        return [_cells(line) for line in self.lines]

    @property
    def footnotes(self) -> list[str]:
        notes = [
            "Measured costs carry their 95 % interval in brackets; projected ones (proj) their range, the spread "
            "of the efficiency fit: a projection's uncertainty, not a measurement."
        ]
        if self.owned_note:
            notes.append(f"Owned: {self.owned_note}")
        return notes


def _money(v: float | None) -> str:
    return "—" if v is None else f"${num(v)}"


def cost_text(p: Pick) -> str:
    if p.status == "projected":
        if p.low is None or p.high is None:
            return f"{_money(p.usd_per_million)} (proj, no range)"
        return f"{_money(p.usd_per_million)} (proj, range {_money(p.low)}–{_money(p.high)})"
    if p.low is None or p.high is None:
        return _money(p.usd_per_million)
    return f"{_money(p.usd_per_million)} [{_money(p.low)}, {_money(p.high)}]"


def _who(p: Pick | None) -> str:
    if p is None:
        return "none"
    tags = [p.status] + (["owned"] if p.owned else [])
    return f"{p.target} {p.precision} ({', '.join(tags)})"


def _ratio(p: Pick | None) -> str:
    if p is None or p.vs_baseline is None:
        return "—"
    proj = p.status == "projected" or p.baseline_projected
    return f"{p.vs_baseline:.3g}×" + (" (proj)" if proj else "")


def _cells(line: Line) -> list[str]:
    best, measured = line.best, line.best_measured
    same = best is not None and measured is not None and best == measured
    return [
        line.model,
        line.objective,
        _who(best),
        "—" if best is None else cost_text(best),
        _ratio(best),
        "the same" if same else _who(measured),
        "" if same or measured is None else cost_text(measured),
        "" if same else _ratio(measured),
    ]


def _sentence(line: Line) -> str:
    """What matters most about one line, in one short sentence."""
    best, measured = line.best, line.best_measured
    if best is None:
        return f"{line.model}: no priced target meets the objective: relax it or measure more targets."
    who = f"{best.target} (owned)" if best.owned else best.target
    if best.status == "projected":
        width = best.width
        spread = "no range" if width is None else f"range {width:.2g}× wide"
        tail = (
            "no measured target meets it."
            if measured is None
            else f"the cheapest measured, {measured.target}, costs {measured.usd_per_million / best.usd_per_million:.3g}× more."
        )
        return f"{line.model}: {who} is projected, {spread}: measure it before buying; {tail}"
    width = best.width
    if width is not None and width > WIDE:
        return f"{line.model}: {who} is measured, but its interval is {width:.2g}× wide: measure longer before deciding."
    if width is None:
        return f"{line.model}: {who} is measured, with no 95 % interval recorded: its uncertainty is unknown."
    half = (best.high or 0.0) - (best.low or 0.0)
    return f"{line.model}: {who} is measured, ±{half / 2 / best.usd_per_million:.0%} (95 %)."


# ------------------------------------------------------------------------------------------ request rows
def _owned(basis: str | None) -> bool:
    return bool(basis and basis.startswith("owned"))


def cost_bounds(r: ReportRow) -> tuple[float | None, float | None]:
    """A row's cost per million requests, low and high: its 95 % interval when measured, its projected range
    when projected (cost ∝ 1 / capacity: the capacity's range turned over), (None, None) without one."""
    cost, capacity = r.cost_per_million_usd, r.capacity_rps
    if r.status != "projected":
        return r.cost_low, r.cost_high
    lo, hi = r.projected_capacity_rps_low, r.projected_capacity_rps_high
    if not (cost and capacity and lo and hi and hi > lo * 1.001):
        return None, None
    return cost * capacity / hi, cost * capacity / lo


def _row_pick(r: ReportRow) -> Pick:
    cost = float(r.cost_per_million_usd or 0.0)
    low, high = cost_bounds(r)
    return Pick(
        r.target,
        r.precision,
        r.status,
        _owned(r.price_basis),
        cost,
        low,
        high,
        r.cost_vs_baseline,
        r.baseline_status == "projected",
    )


def _request_lines(data: ReportData) -> list[Line]:
    key = percentile_key(data.options.percentile)
    objective = f"requests at {key} ≤ {data.options.slo_ms:g} ms"
    lines = []
    for model in sorted({r.model for r in data.rows}):
        ranked = sorted(
            (r for r in data.rows if r.model == model and r.rank and r.cost_per_million_usd),
            key=lambda r: r.rank or 0,
        )
        best = ranked[0] if ranked else None
        measured = next((r for r in ranked if r.status == "measured"), None)
        lines.append(
            Line(
                model,
                objective,
                None if best is None else _row_pick(best),
                None if measured is None else _row_pick(measured),
            )
        )
    return lines


# --------------------------------------------------------------------------------------- generative rows
def _gen_pick(r: GenRow, basis: str, baseline: GenRow | None, tps: float | None = None) -> Pick | None:
    cost = r.cost(basis, "output", tps)
    if cost is None:
        return None
    low, high = r.cost_interval(basis) if tps is None else r.answer_cost_interval(basis)
    base = None
    if baseline is not None and (tps is None or baseline.answer_tps):  # the baseline at the same objective
        base = baseline.cost(basis, "output", None if tps is None else baseline.answer_tps)
    quote = r.prices.get(basis)
    return Pick(
        r.target,
        r.precision,
        r.status,
        _owned(quote.basis if quote else None),
        cost,
        low,
        high,
        None if not base else cost / base,
        baseline is not None and baseline.status == "projected",
    )


def _cheapest(picks: list[Pick]) -> Pick | None:
    return min(picks, key=lambda p: (p.usd_per_million, p.status != "measured", p.target), default=None)


def _generative_lines(gen: GenerativeReport, baseline_id: str) -> list[Line]:
    lines = []
    basis = gen.price_basis
    objective = f"output tokens at TTFT p99 ≤ {gen.ttft_ms:g} ms, TPOT p99 ≤ {gen.tpot_ms:g} ms"
    for model in sorted({r.model for r in gen.rows}):
        rows = [r for r in gen.rows if r.model == model]
        bases = {r.precision: r for r in rows if r.target == baseline_id}
        at_objective = [
            p for r in rows if r.capacity is not None and (p := _gen_pick(r, basis, bases.get(r.precision)))
        ]
        lines.append(
            Line(
                model,
                objective,
                _cheapest(at_objective),
                _cheapest([p for p in at_objective if p.status == "measured"]),
            )
        )
        if gen.min_tokens_per_user is None:
            continue
        at_user = [
            p
            for r in rows
            if r.answer_tps and (p := _gen_pick(r, basis, bases.get(r.precision), r.answer_tps))
        ]
        lines.append(
            Line(
                model,
                f"output tokens at {gen.min_tokens_per_user:g} tok/s per user, TTFT p99 ≤ {gen.ttft_ms:g} ms",
                _cheapest(at_user),
                _cheapest([p for p in at_user if p.status == "measured"]),
            )
        )
    return lines


def headline(data: ReportData) -> Headline:
    """Every model's line: the request-based rows, then the generative ones."""
    lines = _request_lines(data)
    if data.generative is not None:
        lines += _generative_lines(data.generative, data.baseline_id)
    owned = any(p is not None and p.owned for line in lines for p in (line.best, line.best_measured))
    note = ""
    if owned:
        o = data.options
        years = (
            f"{o.amortization_years:g} years" if o.amortization_years else "the catalog's amortization period"
        )
        note = (
            f"priced as its purchase price over {years} plus power at ${o.usd_per_kwh:g}/kWh (assumptions, see "
            "Settings), where the others are hourly rentals."
        )
    return Headline(lines, data.baseline_id, note)
