"""The reports stage's entry points: documents + catalog + options → the report, in every format.

``render_report`` takes result documents from any source (folders, the service's database) and no paths, so
the CLI and the server render the same bytes from the same documents; ``make_report`` is the CLI's
folder-to-folder wrapper around it.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from accelbench.documents import ResultDocument
from accelbench.hardware.catalog import Catalog
from accelbench.reports.build import ReportData, build_report
from accelbench.reports.efficiency import RooflineFn
from accelbench.reports.generative_table import json_table
from accelbench.reports.inputs import load_documents
from accelbench.reports.llm_report import generative_files
from accelbench.reports.options import ReportOptions
from accelbench.reports.plan import plan_rows
from accelbench.reports.table import flat_rows, table_files, to_json_text
from accelbench.util import atomic_write_bytes

FORMATS = ("md", "html", "csv", "parquet")  # the table as JSON is always there (RenderedReport.json_text)


@dataclass
class RenderedReport:
    data: ReportData
    table: list[dict[str, Any]]  # the classic flat rows (results.csv's)
    outputs: dict[str, bytes]  # path relative to the report folder → content (report.md, plots/x.svg, …)

    @property
    def json_rows(self) -> list[dict[str, Any]]:
        """The classic rows, then the generative ones (reports/generative_table.py): what --json prints."""
        return json_table(self.table, self.data.generative)

    @property
    def json_text(self) -> str:
        """The table as JSON: what ``accelbench report --json`` prints and the service's report API returns."""
        return to_json_text(self.json_rows)


@dataclass
class ReportOutput:
    data: ReportData
    table: list[dict[str, Any]]  # the classic flat rows (results.csv's)
    files: list[Path]

    @property
    def json_rows(self) -> list[dict[str, Any]]:
        """The classic rows, then the generative ones: what ``accelbench report --json`` prints."""
        return json_table(self.table, self.data.generative)


def render_report(
    documents: Iterable[ResultDocument],
    catalog: Catalog,
    options: ReportOptions,
    roofline: RooflineFn | None = None,
    formats: Iterable[str] = FORMATS,
    leave_out_unknown_targets: bool = False,
) -> RenderedReport:
    """The report over ``documents`` in ``formats`` (a subset of FORMATS); the same documents in any order
    give the same bytes. ``leave_out_unknown_targets``: see ``build_report``."""
    formats = tuple(formats)
    unknown = sorted(set(formats) - set(FORMATS))
    if unknown:
        raise ValueError(f"unknown report formats {unknown}; known: {FORMATS}")
    data = build_report(documents, catalog, options, roofline, leave_out_unknown_targets)
    return render_data(data, formats)


def render_data(data: ReportData, formats: Iterable[str] = FORMATS) -> RenderedReport:
    """A built report (``build_report``'s, or ``accelbench project``'s with no measurement) in ``formats``."""
    formats = tuple(formats)
    table = flat_rows(data.rows)
    outputs: dict[str, bytes] = {}
    if "md" in formats or "html" in formats:
        outputs.update(_pages(data, formats))
    if data.generative is not None and ("csv" in formats or "md" in formats or "html" in formats):
        outputs.update(generative_files(data.generative))
    if "csv" in formats or "parquet" in formats:
        files = table_files(table)
        outputs.update(
            {name: files[name] for name in ("results.csv", "results.parquet") if name[8:] in formats}
        )
    return RenderedReport(data, table, outputs)


def _pages(data: ReportData, formats: tuple[str, ...]) -> dict[str, bytes]:
    from accelbench.reports.plots import all_plots
    from accelbench.reports.render_html import render_html
    from accelbench.reports.render_md import render_markdown

    opts = data.options
    plan = (
        plan_rows(data.rows, data.targets, opts.target_qps, opts.headroom, data.graph_costs)
        if opts.target_qps
        else None
    )
    plots = all_plots(data)
    out: dict[str, bytes] = {}
    if "md" in formats:
        out.update({f"plots/{name}.svg": svg.encode("utf-8") for name, svg in plots.items()})
        plot_files = {name: f"plots/{name}.svg" for name in plots}
        out["report.md"] = render_markdown(data, plan, plot_files).encode("utf-8")
    if "html" in formats:
        out["report.html"] = render_html(data, plan, plots).encode("utf-8")
    return out


def make_report(
    result_paths: list[str] | tuple[str, ...],
    catalog: Catalog,
    options: ReportOptions,
    out_dir: str | Path | None,
    roofline: RooflineFn | None = None,
) -> ReportOutput:
    """Load the documents under ``result_paths``; when ``out_dir`` is given write report.md, report.html,
    plots/, results.csv/.parquet there."""
    formats = FORMATS if out_dir is not None else ()
    rendered = render_report(load_documents(result_paths), catalog, options, roofline, formats)
    files = write_outputs(rendered.outputs, Path(out_dir)) if out_dir is not None else []
    return ReportOutput(rendered.data, rendered.table, files)


def write_outputs(outputs: dict[str, bytes], out: Path) -> list[Path]:
    """Write each rendered file atomically under ``out``; returns their paths in render order."""
    files = []
    for name, data in outputs.items():
        atomic_write_bytes(out / name, data)
        files.append(out / name)
    return files
