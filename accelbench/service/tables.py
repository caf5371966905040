"""The pages' tables, each built once: cells for people (formatting helpers) and raw values for its CSV.

Every table on a page is a ``PageTable`` with an id; the page's URL with ``format=csv&table=ID`` downloads
it with every digit (``web.py``). A cell is text or a ``Cell`` with a link.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from accelbench.reports import formatting as f


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
    rows: list[list[Any]] = field(default_factory=list)  # str or Cell, as shown
    raw_headers: list[str] = field(default_factory=list)
    raw: list[list[Any]] = field(default_factory=list)  # the download: numbers unrounded, units in headers
    row_classes: list[str] = field(default_factory=list)

    def csv(self) -> str:
        return f.csv_text(self.raw_headers or self.headers, self.raw)


def results_table(rows: list[Any], labels: dict[str, str]) -> PageTable:
    """The stored results list (``queries.summary`` dicts); ``labels`` maps a content hash to its host label."""
    table = PageTable("results", "Result documents", ["created", "model", "target", "precision", "host", "origin",
                      "steps", "verdicts", "result"],
                      raw_headers=["created_at", "model", "target", "precision", "host", "origin", "steps",
                                   "verdicts", "run_id", "content_hash", "url"])  # fmt: skip
    for r in rows:
        verdicts = ", ".join(f"{n} {v}" for v, n in sorted((r.get("verdicts") or {}).items()))
        table.rows.append([f.when(r["created_at"]), r["model"], r["target"] or "—", r["precision"] or "—",
                           labels.get(r["id"], r["host"] or "—"), r["origin"] or "—", str(r["steps"] or 0),
                           verdicts or "—", Cell(r["run_id"], f"/results/{r['id']}")])  # fmt: skip
        table.raw.append([r["created_at"], r["model"], r["target"], r["precision"], labels.get(r["id"], r["host"]),
                          r["origin"], r["steps"], verdicts, r["run_id"], r["id"], r["url"]])  # fmt: skip
    return table


def _step_cells(step: Any) -> tuple[list[str], list[Any]]:
    """A step's figures with their intervals, for people and for the download."""
    from accelbench.documents import to_dict
    from accelbench.reports.capacity import step_latency_interval, step_throughput_interval

    thr = step_throughput_interval(step) or {}
    p50 = step_latency_interval(step, "p50") if thr else (_lat(step, "p50"), None, None)
    p99 = step_latency_interval(step, "p99") if thr else (_lat(step, "p99"), None, None)
    offered = f.offered_text(to_dict(step.offered))
    shown = [offered, step.verdict, f.with_interval(step.throughput_rps, thr.get("low"), thr.get("high"), unit="req/s"),
             f.latency_ms(*p50), f.latency_ms(*p99), f.percent(step.error_rate),
             f.num(step.statistics.n if step.statistics and step.statistics.n is not None else step.requests),
             "; ".join(step.reasons or []) or "—"]  # fmt: skip
    raw = [offered, step.verdict, step.throughput_rps, thr.get("low"), thr.get("high"), *p50, *p99,
           step.error_rate, step.requests, "; ".join(step.reasons or [])]  # fmt: skip
    return shown, raw


def _lat(step: Any, key: str) -> float | None:
    return step.latency_us.at(key) if step.latency_us else None


_STEP_RAW = ["offered", "verdict", "throughput_rps", "throughput_low_rps", "throughput_high_rps", "p50_us",
             "p50_low_us", "p50_high_us", "p99_us", "p99_low_us", "p99_high_us", "error_rate", "requests",
             "reasons"]  # fmt: skip


def steps_table(steps: list[Any]) -> PageTable:
    """Every step as used: its figures with 95 % intervals, verdict, reasons and how many attempts it took."""
    table = PageTable("steps", "Load steps", ["#", "offered", "verdict", "throughput", "p50", "p99", "errors",
                      "requests", "reasons", "attempts"], raw_headers=["index", *_STEP_RAW, "attempt"])  # fmt: skip
    for step in steps:
        shown, raw = _step_cells(step)
        table.rows.append([str(step.index), *shown, f.attempts_text(step, reasons=False)])
        table.raw.append([step.index, *raw, step.attempt or 1])
        table.row_classes.append(f"verdict-{step.verdict.lower()}")
    return table


def attempts_table(steps: list[Any]) -> PageTable:
    """The earlier attempts of steps measured again (``--retries``), each with its own figures and reasons."""
    table = PageTable("attempts", "Earlier attempts (measured again)", ["#", "attempt", "offered", "verdict",
                      "throughput", "p50", "p99", "errors", "requests", "reasons"],
                      raw_headers=["index", "attempt", *_STEP_RAW])  # fmt: skip
    for step in steps:
        for i, earlier in enumerate(step.earlier_attempts or []):
            shown, raw = _step_cells(earlier)
            table.rows.append([str(step.index), str(earlier.attempt or i + 1), *shown])
            table.raw.append([step.index, earlier.attempt or i + 1, *raw])
            table.row_classes.append(f"verdict-{earlier.verdict.lower()}")
    return table


def accuracy_table(accuracy: dict[str, Any] | None) -> PageTable:
    table = PageTable("accuracy", "Accuracy", ["metric", "value", "threshold", "verdict"])
    for row in f.accuracy_rows(accuracy):
        table.rows.append(list(row))
    a = accuracy or {}
    if a:
        table.raw.append([a.get("metric"), a.get("value"), a.get("tolerance"), a.get("verdict")])
    return table


def probe_table(probe: dict[str, Any] | None) -> PageTable:
    table = PageTable("probe", "Full host probe", ["field", "value"])
    table.rows = [list(r) for r in f.flatten(probe or {})]
    table.raw = [list(r) for r in f.flatten(probe or {})]
    return table


def ranking_table(rows: list[dict[str, Any]], links: dict[tuple[str, str], str]) -> PageTable:
    """The report's rows for one model, ranked; each links to the list of the result documents behind it."""
    table = PageTable("ranking", "Ranking", ["rank", "target", "precision", "status", "USD per 1M requests",
                      "capacity", "note", "results"],
                      raw_headers=["rank", "target", "precision", "status", "cost_per_million_usd", "cost_low",
                                   "cost_high", "capacity_rps", "capacity_low", "capacity_high", "reason"])  # fmt: skip
    for r in rows:
        kind = "projected" if r["status"] == "projected" else "measured"
        cost = f.with_interval(r["cost_per_million_usd"], r.get("cost_low"), r.get("cost_high"), kind=kind,
                               prefix="$")  # fmt: skip
        capacity = f.with_interval(r["capacity_rps"], r.get("capacity_low"), r.get("capacity_high"), kind=kind,
                                   unit="req/s")  # fmt: skip
        href = links.get((r["target"], r["precision"]))
        table.rows.append([str(r["rank"]) if r["rank"] is not None else "—", r["target"], r["precision"],
                           r["status"], cost, capacity, r["reason"] or "",
                           Cell("result documents", href) if href else "none (projected)"])  # fmt: skip
        table.raw.append([r["rank"], r["target"], r["precision"], r["status"], r["cost_per_million_usd"],
                          r.get("cost_low"), r.get("cost_high"), r["capacity_rps"], r.get("capacity_low"),
                          r.get("capacity_high"), r["reason"]])  # fmt: skip
        table.row_classes.append(r["status"])
    return table


def history_table(runs: list[dict[str, Any]]) -> PageTable:
    table = PageTable("runs", "Runs", ["created", "host", "capacity", "latency at capacity", "change", "result"],
                      raw_headers=["created_at", "host", "capacity_rps", "capacity_low", "capacity_high", "latency_us",
                                   "latency_low_us", "latency_high_us", "regression", "flags", "run_id",
                                   "content_hash"])  # fmt: skip
    for r in runs:
        change = r.get("change")
        if not change:
            text = "first run"
        elif change.get("regression"):
            text = Cell("moved: " + "; ".join(change.get("flags") or []), cls="flag")
        elif change.get("judged"):
            # the between-run rule's verdict (reports/compare.judge_change)
            text = change.get("verdict") or "ok"
            if change.get("capacity_ratio"):
                text += (f" (capacity × {f.num(change['capacity_ratio'], 3)}, 95 % "
                         f"{f.num(change['capacity_ratio_low'], 3)}–{f.num(change['capacity_ratio_high'], 3)})")  # fmt: skip
        else:
            text = change.get("verdict") or "not judged (no intervals)"
        table.rows.append([f.when(r.get("created_at") or r.get("received_at")), r.get("host_label") or r.get("host") or "—",
                           f.with_interval(r["capacity_rps"], r.get("capacity_low"), r.get("capacity_high"), unit="req/s"),
                           f.latency_ms(r["latency_us"], r.get("latency_low_us"), r.get("latency_high_us")), text,
                           Cell(r["run_id"], f"/results/{r['id']}")])  # fmt: skip
        table.raw.append([r.get("created_at"), r.get("host_label") or r.get("host"), r["capacity_rps"],
                          r.get("capacity_low"), r.get("capacity_high"), r["latency_us"], r.get("latency_low_us"),
                          r.get("latency_high_us"), bool(change and change.get("regression")),
                          "; ".join((change or {}).get("flags") or []), r["run_id"], r["id"]])  # fmt: skip
    return table
