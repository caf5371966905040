"""The pages' tables, each built once: cells for people (formatting helpers) and raw values for its CSV.

Every table on a page is a ``PageTable`` with an id; the page's URL with ``format=csv&table=ID`` downloads
it with every digit (``web.py``). A cell is text or a ``Cell`` with a link.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from accelbench.documents import Step
from accelbench.reports import formatting as f
from accelbench.reports.rows import ReportRow

if TYPE_CHECKING:
    from accelbench.answers import ResultSummary
    from accelbench.service.history import HistoryRun


@dataclass(frozen=True)
class Cell:
    text: str
    href: str | None = None
    cls: str = ""


@dataclass
class PageTable:
    id: str
    caption: str
    headers: list[str]
    rows: list[list[str | Cell]] = field(default_factory=list)  # as shown
    raw_headers: list[str] = field(default_factory=list)
    raw: list[list[Any]] = field(default_factory=list)  # the download: numbers unrounded, units in headers
    row_classes: list[str] = field(default_factory=list)

    def csv(self) -> str:
        return f.csv_text(self.raw_headers or self.headers, self.raw)


def results_table(rows: list[ResultSummary], labels: Mapping[str, str]) -> PageTable:
    """The stored results list; ``labels`` maps a content hash to its host label."""
    table = PageTable(
        "results",
        "Result documents",
        ["created", "model", "target", "precision", "host", "origin", "steps", "verdicts", "result"],
        raw_headers=[
            "created_at",
            "model",
            "target",
            "precision",
            "host",
            "origin",
            "steps",
            "verdicts",
            "run_id",
            "content_hash",
            "url",
        ],
    )
    for r in rows:
        verdicts = ", ".join(f"{n} {v}" for v, n in sorted((r.verdicts or {}).items()))
        table.rows.append(
            [
                f.when(r.created_at),
                r.model,
                r.target or "—",
                r.precision or "—",
                labels.get(r.id, r.host or "—"),
                r.origin or "—",
                str(r.steps or 0),
                verdicts or "—",
                Cell(r.run_id, f"/results/{r.id}"),
            ]
        )
        table.raw.append(
            [
                r.created_at,
                r.model,
                r.target,
                r.precision,
                labels.get(r.id, r.host),
                r.origin,
                r.steps,
                verdicts,
                r.run_id,
                r.id,
                r.url,
            ]
        )
    return table


def _step_cells(step: Step) -> tuple[list[str], list[Any]]:
    """A step's figures with their intervals, for people and for the download."""
    from accelbench.documents import to_dict
    from accelbench.reports.capacity import step_latency_interval, step_throughput_interval

    thr = step_throughput_interval(step) or {}
    p50 = step_latency_interval(step, "p50") if thr else (_lat(step, "p50"), None, None)
    p99 = step_latency_interval(step, "p99") if thr else (_lat(step, "p99"), None, None)
    offered = f.offered_text(to_dict(step.offered))
    shown = [
        offered,
        step.verdict,
        f.with_interval(step.throughput_rps, thr.get("low"), thr.get("high"), unit="req/s"),
        f.latency_ms(*p50),
        f.latency_ms(*p99),
        f.percent(step.error_rate),
        f.num(step.statistics.n if step.statistics and step.statistics.n is not None else step.requests),
        "; ".join(step.reasons or []) or "—",
    ]
    raw = [
        offered,
        step.verdict,
        step.throughput_rps,
        thr.get("low"),
        thr.get("high"),
        *p50,
        *p99,
        step.error_rate,
        step.requests,
        "; ".join(step.reasons or []),
    ]
    return shown, raw


def _lat(step: Step, key: str) -> float | None:
    return step.latency_us.at(key) if step.latency_us else None


_STEP_RAW = [
    "offered",
    "verdict",
    "throughput_rps",
    "throughput_low_rps",
    "throughput_high_rps",
    "p50_us",
    "p50_low_us",
    "p50_high_us",
    "p99_us",
    "p99_low_us",
    "p99_high_us",
    "error_rate",
    "requests",
    "reasons",
]


def steps_table(steps: list[Step]) -> PageTable:
    """Every step as used: its figures with 95 % intervals, verdict, reasons and how many attempts it took."""
    table = PageTable(
        "steps",
        "Load steps",
        ["#", "offered", "verdict", "throughput", "p50", "p99", "errors", "requests", "reasons", "attempts"],
        raw_headers=["index", *_STEP_RAW, "attempt"],
    )
    for step in steps:
        shown, raw = _step_cells(step)
        table.rows.append([str(step.index), *shown, f.attempts_text(step, reasons=False)])
        table.raw.append([step.index, *raw, step.attempt or 1])
        table.row_classes.append(f"verdict-{step.verdict.lower()}")
    return table


def attempts_table(steps: list[Step]) -> PageTable:
    """The earlier attempts of steps measured again (``--retries``), each with its own figures and reasons."""
    table = PageTable(
        "attempts",
        "Earlier attempts (measured again)",
        ["#", "attempt", "offered", "verdict", "throughput", "p50", "p99", "errors", "requests", "reasons"],
        raw_headers=["index", "attempt", *_STEP_RAW],
    )
    for step in steps:
        for i, earlier in enumerate(step.earlier_attempts or []):
            shown, raw = _step_cells(earlier)
            table.rows.append([str(step.index), str(earlier.attempt or i + 1), *shown])
            table.raw.append([step.index, earlier.attempt or i + 1, *raw])
            table.row_classes.append(f"verdict-{earlier.verdict.lower()}")
    return table


def accuracy_table(accuracy: Mapping[str, Any] | None) -> PageTable:
    table = PageTable("accuracy", "Accuracy", ["metric", "value", "threshold", "verdict"])
    for row in f.accuracy_rows(accuracy):
        table.rows.append([*row])
    a = accuracy or {}
    if a:
        table.raw.append([a.get("metric"), a.get("value"), a.get("tolerance"), a.get("verdict")])
    return table


def probe_table(probe: Mapping[str, Any] | None) -> PageTable:
    table = PageTable("probe", "Full host probe", ["field", "value"])
    table.rows = [[*r] for r in f.flatten(probe or {})]
    table.raw = [list(r) for r in f.flatten(probe or {})]
    return table


def ranking_table(rows: list[ReportRow], links: Mapping[tuple[str, str], str]) -> PageTable:
    """The report's rows for one model, ranked; each links to the list of the result documents behind it."""
    table = PageTable(
        "ranking",
        "Ranking",
        ["rank", "target", "precision", "status", "USD per 1M requests", "capacity", "note", "results"],
        raw_headers=[
            "rank",
            "target",
            "precision",
            "status",
            "cost_per_million_usd",
            "cost_low",
            "cost_high",
            "capacity_rps",
            "capacity_low",
            "capacity_high",
            "reason",
        ],
    )
    for r in rows:
        kind = "projected" if r.status == "projected" else "measured"
        cost = f.with_interval(r.cost_per_million_usd, r.cost_low, r.cost_high, kind=kind, prefix="$")
        capacity = f.with_interval(r.capacity_rps, r.capacity_low, r.capacity_high, kind=kind, unit="req/s")
        href = links.get((r.target, r.precision))
        table.rows.append(
            [
                str(r.rank) if r.rank is not None else "—",
                r.target,
                r.precision,
                r.status,
                cost,
                capacity,
                r.reason or "",
                Cell("result documents", href) if href else "none (projected)",
            ]
        )
        table.raw.append(
            [
                r.rank,
                r.target,
                r.precision,
                r.status,
                r.cost_per_million_usd,
                r.cost_low,
                r.cost_high,
                r.capacity_rps,
                r.capacity_low,
                r.capacity_high,
                r.reason,
            ]
        )
        table.row_classes.append(r.status)
    return table


def history_table(runs: list[HistoryRun]) -> PageTable:
    table = PageTable(
        "runs",
        "Runs",
        ["created", "host", "capacity", "latency at capacity", "change", "result"],
        raw_headers=[
            "created_at",
            "host",
            "capacity_rps",
            "capacity_low",
            "capacity_high",
            "latency_us",
            "latency_low_us",
            "latency_high_us",
            "regression",
            "flags",
            "run_id",
            "content_hash",
        ],
    )
    for r in runs:
        judged = r.change.judgement if r.change else None
        text: str | Cell
        if judged is None:
            text = "first run"
        elif judged.regression:
            text = Cell("moved: " + "; ".join(judged.flags), cls="flag")
        elif judged.judged:
            # the between-run rule's verdict (reports/compare.judge_change)
            text = judged.verdict or "ok"
            if judged.capacity_ratio:
                text += (
                    f" (capacity × {f.num(judged.capacity_ratio, 3)}, 95 % "
                    f"{f.num(judged.capacity_ratio_low, 3)}–{f.num(judged.capacity_ratio_high, 3)})"
                )
        else:
            text = judged.verdict or "not judged (no intervals)"
        host = r.host_label or r.result.host
        capacity = f.with_interval(r.capacity_rps, r.capacity_low, r.capacity_high, unit="req/s")
        if r.capacity_rps is None and r.reason:  # why this run has no capacity at the SLO, not a bare dash
            capacity = f"— ({r.reason})"
        table.rows.append(
            [
                f.when(r.result.created_at or r.result.received_at),
                host or "—",
                capacity,
                f.latency_ms(r.latency_us, r.latency_low_us, r.latency_high_us),
                text,
                Cell(r.result.run_id, f"/results/{r.result.id}"),
            ]
        )
        table.raw.append(
            [
                r.result.created_at,
                host,
                r.capacity_rps,
                r.capacity_low,
                r.capacity_high,
                r.latency_us,
                r.latency_low_us,
                r.latency_high_us,
                r.regression,
                "; ".join(judged.flags if judged else ()),
                r.result.run_id,
                r.result.id,
            ]
        )
    return table
