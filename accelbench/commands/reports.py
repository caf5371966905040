"""CLI commands for the reports stage. Thin: parse options, call the library, print."""

from __future__ import annotations

import click

from accelbench.commands import catalog_of
from accelbench.hardware.catalog_schema import PRECISIONS


def _split(values: tuple[str, ...]) -> tuple[str, ...]:
    """``--project l4 --project l40s,inf2-xlarge`` → ("l4", "l40s", "inf2-xlarge")."""
    return tuple(v.strip() for item in values for v in item.split(",") if v.strip())


@click.command("report")
@click.argument("results", nargs=-1, type=click.Path())
@click.option(
    "--slo-p99-ms",
    "slo_ms",
    type=click.FloatRange(min=0, min_open=True),
    default=100.0,
    show_default=True,
    help="Latency SLO in ms for the chosen percentile (--percentile).",
)
@click.option(
    "--percentile", default="99", show_default=True, help="Percentile the SLO applies to: 50 90 95 99 99.9."
)
@click.option(
    "--baseline", default=None, help="Target id to compare against (default: the catalog baseline)."
)
@click.option(
    "--price-basis",
    type=click.Choice(["on-demand", "spot", "reserved"]),
    default="on-demand",
    show_default=True,
)
@click.option(
    "--price",
    "prices",
    multiple=True,
    metavar="ID=USD",
    help="Override a target's price per accelerator-hour, e.g. --price cpu-local=0.05 (repeatable).",
)
@click.option(
    "--target-qps",
    type=click.FloatRange(min=0, min_open=True),
    default=None,
    help="Plan replicas and the monthly bill for this request rate.",
)
@click.option(
    "--headroom",
    type=click.FloatRange(0, 1, max_open=True),
    default=0.3,
    show_default=True,
    help="Fraction of capacity kept free when planning replicas.",
)
@click.option(
    "--project",
    "project",
    multiple=True,
    metavar="ID",
    help="Also project these targets from the roofline (repeatable or comma-separated).",
)
@click.option("--include-failed", is_flag=True, help="Rank variants whose accuracy check FAILed.")
@click.option("--max-error-rate", type=click.FloatRange(0, 1), default=0.01, show_default=True)
@click.option(
    "--amortization-years",
    type=click.FloatRange(min=0, min_open=True),
    default=None,
    help="Owned devices (Jetson): years to spread the purchase over (default: catalog, else 3).",
)
@click.option(
    "--usd-per-kwh",
    type=click.FloatRange(min=0),
    default=0.15,
    show_default=True,
    help="Owned devices: electricity price (an assumption; stated in the report).",
)
@click.option(
    "--out",
    "out_dir",
    type=click.Path(file_okay=False),
    default=None,
    help="Folder for report.md, report.html, plots/, results.csv/.parquet [default: report; none with --json].",
)
@click.option("--json", "as_json", is_flag=True, help="Print the table (or the comparison) as JSON.")
@click.option(
    "--slo-ttft-ms",
    type=click.FloatRange(min=0, min_open=True),
    default=None,
    help="Generative results: TTFT p99 objective in ms [default: the workload's, else MLPerf's 2000].",
)
@click.option(
    "--slo-tpot-ms",
    type=click.FloatRange(min=0, min_open=True),
    default=None,
    help="Generative results: TPOT p99 objective in ms [default: the workload's, else MLPerf's 100].",
)
@click.option(
    "--min-tokens-per-user",
    type=click.FloatRange(min=0, min_open=True),
    default=None,
    help="Generative results: the cheapest target at this interactivity (tokens/s per user) on the frontier.",
)
@click.option(
    "--target-tokens-per-s",
    type=click.FloatRange(min=0, min_open=True),
    default=None,
    help="Generative results: plan replicas and the monthly bill for this output-token rate.",
)
@click.option(
    "--fit-model",
    "fit_models",
    multiple=True,
    metavar="CARD",
    help="Generative: a model card (packaged name such as llama-3.1-8b, or a TOML) for the memory-fit table.",
)
@click.option(
    "--context",
    "fit_context",
    type=click.IntRange(min=1),
    default=None,
    help="Context length in tokens for the memory-fit table [default: 8192].",
)
@click.option(
    "--compare",
    nargs=2,
    type=click.Path(),
    default=None,
    metavar="OLD NEW",
    help="Compare two result folders instead of reporting one set.",
)
@click.option(
    "--history",
    multiple=True,
    type=click.Path(exists=True),
    metavar="DIR",
    help="With --compare: earlier runs of the same configurations (repeatable); their spread is the between-run "
    "variance the change is judged against (docs/statistics.md).",
)
@click.pass_context
def report_cmd(ctx, results, slo_ms, percentile, baseline, price_basis, prices, target_qps, headroom, project,
               include_failed, max_error_rate, amortization_years, usd_per_kwh, out_dir, as_json, slo_ttft_ms,
               slo_tpot_ms, min_tokens_per_user, target_tokens_per_s, fit_models, fit_context, compare,
               history) -> None:  # fmt: skip
    """Cost per million requests at the latency SLO, against the baseline: report.md, report.html, results.csv/.parquet."""
    from accelbench.reports.build import ReportOptions
    from accelbench.reports.cost import parse_price_overrides

    options = ReportOptions(
        slo_ms=slo_ms, percentile=percentile, baseline=baseline, price_basis=price_basis,
        price_overrides=parse_price_overrides(prices), target_qps=target_qps, headroom=headroom,
        project=_split(project), include_failed=include_failed, max_error_rate=max_error_rate,
        amortization_years=amortization_years, usd_per_kwh=usd_per_kwh, slo_ttft_ms=slo_ttft_ms,
        slo_tpot_ms=slo_tpot_ms, min_tokens_per_user=min_tokens_per_user, target_tokens_per_s=target_tokens_per_s,
        fit_models=tuple(fit_models), fit_context=fit_context,
    )  # fmt: skip
    if out_dir is None and not as_json:
        out_dir = "report"
    if compare:
        from accelbench.reports.run_compare import run_compare

        text = run_compare(compare[0], compare[1], catalog_of(ctx), options, out_dir, as_json, history)
        click.echo(text, nl=False)
        return
    from accelbench.reports.report import make_report
    from accelbench.reports.table import to_json_text

    if not results:
        raise click.UsageError("give one or more result files or folders (or --compare OLD NEW)")
    out = make_report(results, catalog_of(ctx), options, out_dir)
    if as_json:
        click.echo(to_json_text(out.table), nl=False)
    else:
        for path in out.files:
            click.echo(str(path))


@click.group("import")
def import_group() -> None:
    """Turn perf_analyzer, Locust, AIPerf, GuideLLM or vLLM bench results into accelbench result documents."""


def _import_options(func):
    func = click.option(
        "--out", "out_dir", type=click.Path(file_okay=False), default="results", show_default=True
    )(func)
    func = click.option("--batch-size", type=click.IntRange(min=1), default=1, show_default=True)(func)
    func = click.option("--precision", default="fp32", show_default=True,
                        type=click.Choice(PRECISIONS))(func)  # fmt: skip
    func = click.option("--model", required=True, help="Model name, e.g. minilm-l6.")(func)
    func = click.option("--target", required=True, help="Catalog target id the numbers were measured on.")(
        func
    )
    return func


@import_group.command("perf-analyzer")
@click.argument("csv_file", type=click.Path())
@_import_options
@click.pass_context
def import_perf_analyzer_cmd(ctx, csv_file, target, model, precision, batch_size, out_dir) -> None:
    """perf_analyzer -f CSV (plain or --verbose-csv; latencies in µs) → a result document."""
    from accelbench.reports.importers import import_perf_analyzer, write_imported

    catalog_of(ctx).get(target)  # unknown target: one clear line, exit 2
    doc = import_perf_analyzer(csv_file, target, model, precision, batch_size)
    click.echo(str(write_imported(doc, out_dir)))


@import_group.command("locust")
@click.argument("stats_csv", type=click.Path())
@_import_options
@click.option(
    "--users", type=click.IntRange(min=1), default=None, help="Locust users (-u) of that run, if known."
)
@click.pass_context
def import_locust_cmd(ctx, stats_csv, target, model, precision, batch_size, out_dir, users) -> None:
    """Locust --csv *_stats.csv (ms, bucketed percentiles) → a single-step result document."""
    from accelbench.reports.importers import import_locust, write_imported

    catalog_of(ctx).get(target)
    doc = import_locust(stats_csv, target, model, precision, batch_size, users)
    click.echo(str(write_imported(doc, out_dir)))


def _generative_import(tool: str, what: str):
    """``accelbench import TOOL FILE --target ID --model NAME --precision P``: a generative result document."""

    @import_group.command(tool, help=f"{what} → a generative result document the report prices (tokens).")
    @click.argument("file", type=click.Path())
    @click.option("--target", required=True, help="Catalog target id the numbers were measured on.")
    @click.option(
        "--model", required=True, help="Model name, e.g. llama-3.1-8b (a card name gives projections)."
    )
    @click.option("--precision", required=True, type=click.Choice((*PRECISIONS, "int4")),
                  help="Weight precision the server ran.")  # fmt: skip
    @click.option("--out", "out_dir", type=click.Path(file_okay=False), default="results", show_default=True)
    @click.pass_context
    def cmd(ctx, file, target, model, precision, out_dir) -> None:
        from accelbench.reports.importers import write_imported
        from accelbench.reports.llm_importers import IMPORTERS

        catalog_of(ctx).get(target)  # unknown target: one clear line, exit 2
        doc = IMPORTERS[tool](file, target, model, precision)
        click.echo(str(write_imported(doc, out_dir)))

    return cmd


_generative_import("aiperf", "NVIDIA AIPerf profile_export_aiperf.json")
_generative_import("guidellm", "GuideLLM benchmarks.json (one step per load level)")
_generative_import("vllm-bench", "`vllm bench serve --save-result` JSON")


def register(group: click.Group) -> None:
    """Add this stage's commands to the top-level group."""
    group.add_command(report_cmd)
    group.add_command(import_group)
