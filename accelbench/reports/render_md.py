"""report.md: the answer first, then the tables, then provenance and method."""

from __future__ import annotations

from typing import TYPE_CHECKING

from accelbench.reports import llm_sections
from accelbench.reports import sections as sec
from accelbench.reports.capacity import percentile_key
from accelbench.reports.headline import headline
from accelbench.reports.rows import PlanRow

if TYPE_CHECKING:
    from accelbench.reports.build import ReportData

PLOT_TITLES = {
    "latency_vs_throughput": "Latency vs throughput per target, with the SLO line",
    "cost_vs_baseline": "Cost per million requests vs the baseline",
    "roofline": "Roofline with measured and projected points",
    "frontier": "Generative frontier: output tokens/s per accelerator vs tokens/s per user",
}


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def table_md(table: sec.Table) -> list[str]:
    lines = ["| " + " | ".join(_cell(h) for h in table.headers) + " |", "|" + "---|" * len(table.headers)]
    lines += ["| " + " | ".join(_cell(c) for c in row) + " |" for row in table.rows]
    if not table.rows:
        lines.append("| " + " | ".join(["(none)"] + [""] * (len(table.headers) - 1)) + " |")
    return lines


def section_md(section: sec.Section, level: int = 2) -> list[str]:
    lines = [f"{'#' * level} {section.title}", ""]
    for para in section.paragraphs:
        lines += [para, ""]
    lines += [f"- {b}" for b in section.bullets]
    if section.bullets:
        lines.append("")
    for table in section.tables:
        lines += [f"{'#' * (level + 1)} {table.title}", ""] + table_md(table) + [""]
        if table.note:
            lines += [table.note, ""]
    return lines


def report_title(data: ReportData) -> str:
    """The report's title: requests at the latency SLO, tokens at the TTFT/TPOT objective, or both."""
    key = percentile_key(data.options.percentile)
    classic = f"cost per million requests at {key} ≤ {data.options.slo_ms:g} ms"
    gen = data.generative
    if gen is None:
        return f"accelbench report: {classic}"
    tokens = f"cost per million tokens at TTFT p99 ≤ {gen.ttft_ms:g} ms, TPOT p99 ≤ {gen.tpot_ms:g} ms"
    return f"accelbench report: {tokens}" + (f"; {classic}" if data.rows else "")


def headline_md(data: ReportData) -> list[str]:
    """The first screen: the headline table, a sentence per line, the footnotes (reports/headline.py)."""
    head = headline(data)
    if not head.lines:
        return []
    table = sec.Table("", head.headers, head.rows)
    lines = ["## The answer at a glance", ""] + table_md(table) + [""]
    lines += [f"- {line.sentence}" for line in head.lines] + [""]
    lines += [" ".join(head.footnotes), ""]
    return lines


def render_markdown(data: ReportData, plan: list[PlanRow] | None, plot_files: dict[str, str]) -> str:
    lines = [f"# {report_title(data)}", ""]
    lines += headline_md(data)
    lines += ['Figures marked "(proj)" are roofline projections, not measurements; see Method.', ""]
    lines += section_md(sec.settings_section(data))
    results = sec.Section(
        "Results",
        paragraphs=[f"The answer in full: {sec.answer(data)}"] if data.rows else [],
        tables=[sec.results_table(data, m) for m in sorted({r.model for r in data.rows})],
    )
    if data.rows or data.generative is None:
        lines += section_md(results)
    if data.generative is not None:  # generative results: token economics (reports/llm_sections.py)
        for section in llm_sections.sections(data.generative, data.options):
            lines += section_md(section)
    if plan is not None:
        lines += section_md(sec.plan_section(data, plan))
    lines += ["## Plots", ""]
    lines += [f"- [{PLOT_TITLES[name]}]({path})" for name, path in plot_files.items()]
    lines.append("")
    lines += section_md(sec.steps_section(data))
    lines += section_md(sec.reading_section(data))
    lines += section_md(sec.provenance_section(data))
    lines += section_md(sec.method_section(data))
    lines += [
        "The same table is in results.csv and results.parquet (one row per model × precision × target).",
        "",
    ]
    return "\n".join(lines).rstrip("\n") + "\n"
