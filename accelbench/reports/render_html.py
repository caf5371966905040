"""report.html: one self-contained file (inline CSS and SVG; no scripts, no external URLs)."""

from __future__ import annotations

import html
from typing import TYPE_CHECKING, Any

from accelbench.reports import llm_sections
from accelbench.reports import sections as sec
from accelbench.reports.headline import headline
from accelbench.reports.render_md import PLOT_TITLES, report_title
from accelbench.reports.rows import PlanRow

if TYPE_CHECKING:
    from accelbench.reports.build import ReportData

_CSS = """
body { font-family: system-ui, sans-serif; margin: 2em auto; max-width: 78em; color: #222; line-height: 1.4; }
table { border-collapse: collapse; margin: 0.5em 0 1.5em; font-size: 0.85em; }
th, td { border: 1px solid #ccc; padding: 0.25em 0.5em; text-align: left; vertical-align: top; }
th { background: #f0f0f0; }
tr.projected td { font-style: italic; background: #fafaf0; }
.answer { font-size: 1.1em; background: #eef6ee; padding: 0.8em 1em; border-left: 4px solid #3a3; }
.headline { background: #eef6ee; padding: 0.4em 1em 0.2em; border-left: 4px solid #3a3; margin-bottom: 1em; }
.headline h2 { margin: 0.3em 0; font-size: 1.2em; } .headline table { font-size: 0.95em; margin: 0.3em 0; }
.headline td:nth-child(3), .headline td:nth-child(4) { font-weight: bold; }
.headline ul { margin: 0.3em 0; } .legend { font-size: 0.85em; color: #444; }
details summary { cursor: pointer; color: #245; } td details { max-width: 32em; }
figure { margin: 1em 0 2em; } figcaption { font-weight: bold; margin-bottom: 0.3em; }
svg { max-width: 100%; height: auto; }
"""


def _e(text: Any) -> str:
    return html.escape(str(text), quote=True)


def _bold(text: str) -> str:
    """The answer paragraph uses **bold** like the Markdown; convert it after escaping."""
    parts = _e(text).split("**")
    return "".join(f"<strong>{p}</strong>" if i % 2 else p for i, p in enumerate(parts))


LONG = 90  # a note longer than this folds into <details>: its first words show, the rest on a click
_FOLDED = ("note", "why", "reasons", "how", "versions", "result files")


def _td(header: str, cell: str) -> str:
    if header in _FOLDED and len(cell) > LONG:
        summary = cell[: cell.rfind(" ", 0, 60) if " " in cell[:60] else 60]
        return f"<td><details><summary>{_e(summary)} …</summary>{_e(cell)}</details></td>"
    return f"<td>{_e(cell)}</td>"


def table_html(table: sec.Table, title_level: int = 3) -> list[str]:
    out = [f"<h{title_level}>{_e(table.title)}</h{title_level}>"] if table.title else []
    out.append("<table>")
    out.append("<tr>" + "".join(f'<th scope="col">{_e(h)}</th>' for h in table.headers) + "</tr>")
    status_col = table.headers.index("status") if "status" in table.headers else None
    for row in table.rows:
        cls = ' class="projected"' if status_col is not None and row[status_col] == "projected" else ""
        cells = "".join(_td(h, c) for h, c in zip(table.headers, row, strict=True))
        out.append(f"<tr{cls}>{cells}</tr>")
    out.append("</table>")
    if table.note:
        out.append(f'<p class="legend">{_e(table.note)}</p>')
    return out


def headline_html(data: ReportData) -> list[str]:
    """The first screen: the headline table, a sentence per line, the footnotes (reports/headline.py)."""
    head = headline(data)
    if not head.lines:
        return []
    out = [
        '<section class="headline" aria-labelledby="at-a-glance">',
        '<h2 id="at-a-glance">The answer at a glance</h2>',
    ]
    out += table_html(sec.Table("", head.headers, head.rows))
    out += ["<ul>"] + [f"<li>{_e(line.sentence)}</li>" for line in head.lines] + ["</ul>"]
    out += [f'<p class="legend">{_e(n)}</p>' for n in head.footnotes]
    return [*out, "</section>"]


def section_html(section: sec.Section) -> list[str]:
    out = [f"<h2>{_e(section.title)}</h2>"]
    out += [f"<p>{_e(p)}</p>" for p in section.paragraphs]
    if section.bullets:
        out += ["<ul>"] + [f"<li>{_e(b)}</li>" for b in section.bullets] + ["</ul>"]
    for table in section.tables:
        out += table_html(table)
    return out


def render_html(data: ReportData, plan: list[PlanRow] | None, plots: dict[str, str]) -> str:
    title = report_title(data)
    out = [
        "<!DOCTYPE html>",
        '<html lang="en">',
        "<head>",
        '<meta charset="utf-8">',
        f"<title>{_e(title)}</title>",
        f"<style>{_CSS}</style>",
        "</head>",
        "<body>",
        f"<h1>{_e(title)}</h1>",
        *headline_html(data),
        "<p>Figures marked “(proj)” (italic rows) are roofline projections, not measurements; see Method.</p>",
    ]
    out += section_html(sec.settings_section(data))
    if data.rows or data.generative is None:
        out.append("<h2>Results</h2>")
    if data.rows:
        out.append(
            f"<details><summary>The answer in full</summary><p>{_bold(sec.answer(data))}</p></details>"
        )
    for model in sorted({r.model for r in data.rows}):
        out += table_html(sec.results_table(data, model))
    if data.generative is not None:  # generative results: token economics (reports/llm_sections.py)
        for section in llm_sections.sections(data.generative, data.options):
            answer, section.paragraphs = section.paragraphs if section.tables else [], []
            out += section_html(section)[:1] + [f'<p class="answer">{_bold(a)}</p>' for a in answer]
            out += section_html(section)[1:]
    if plan is not None:
        out += section_html(sec.plan_section(data, plan))
    out.append("<h2>Plots</h2>")
    for name, svg in plots.items():
        out += [
            f'<figure id="plot-{name}">',
            f"<figcaption>{_e(PLOT_TITLES[name])}</figcaption>",
            svg,
            "</figure>",
        ]
    out += section_html(sec.steps_section(data))
    out += section_html(sec.reading_section(data))
    out += section_html(sec.provenance_section(data))
    out += section_html(sec.method_section(data))
    out += ["</body>", "</html>"]
    return "\n".join(out) + "\n"
