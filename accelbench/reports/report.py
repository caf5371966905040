"""The reports stage's entry point: results folders + catalog + options → report files and the table."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from accelbench.reports.build import ReportData, ReportOptions, build_report
from accelbench.reports.inputs import load_results
from accelbench.reports.plan import plan_rows
from accelbench.reports.table import flat_rows, write_tables
from accelbench.util import atomic_write_text


@dataclass
class ReportOutput:
    data: ReportData
    table: list[dict[str, Any]]  # the flat rows (what --json prints)
    files: list[Path]


def make_report(
    result_paths: list[str] | tuple[str, ...],
    catalog: Any,
    options: ReportOptions,
    out_dir: str | Path | None,
    roofline: Any = None,
) -> ReportOutput:
    """Build the table; when ``out_dir`` is given write report.md, report.html, plots/, results.csv/.parquet."""
    data = build_report(load_results(result_paths), catalog, options, roofline)
    table = flat_rows(data.rows, options.slo_ms, data_percentile(data))
    files: list[Path] = []
    if out_dir is not None:
        files = write_report_files(data, table, Path(out_dir))
    return ReportOutput(data, table, files)


def data_percentile(data: ReportData) -> str:
    from accelbench.reports.capacity import percentile_key

    return percentile_key(data.options.percentile)


def write_report_files(data: ReportData, table: list[dict[str, Any]], out: Path) -> list[Path]:
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
    files: list[Path] = []
    plot_files: dict[str, str] = {}
    for name, svg in plots.items():
        path = out / "plots" / f"{name}.svg"
        atomic_write_text(path, svg)
        files.append(path)
        plot_files[name] = f"plots/{name}.svg"
    md, page = out / "report.md", out / "report.html"
    atomic_write_text(md, render_markdown(data, plan, plot_files))
    atomic_write_text(page, render_html(data, plan, plots))
    files += [md, page] + write_tables(table, out)
    return files
