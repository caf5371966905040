"""CLI commands for the reports stage. Thin: parse options, call the library, print."""

from __future__ import annotations

from typing import Any

import click

from accelbench.commands import catalog_of
from accelbench.hardware.catalog_schema import PRECISIONS
from accelbench.reports.options import CLASSIC, GENERATIVE, OptionSpec, option_specs, options_from


def _click_option(spec: OptionSpec):
    """One report option as a click option, from its definition in reports/options.py."""
    m = spec.meta
    kwargs: dict[str, Any] = {"help": spec.help or None}  # m["aliases"]: report_options adds them
    if m.get("is_flag"):
        kwargs["is_flag"] = True
    elif m.get("multiple"):
        kwargs.update(multiple=True, metavar=m.get("metavar"))
    else:
        kwargs.update(default=spec.default, show_default=spec.default is not None)
        if "choices" in m:
            kwargs["type"] = click.Choice(list(m["choices"]))
        elif "low" in m or "high" in m:
            kind = click.IntRange if m.get("integer") else click.FloatRange
            kwargs["type"] = kind(
                min=m.get("low"),
                max=m.get("high"),
                min_open=m.get("low_open", False),
                max_open=m.get("high_open", False),
            )
    return click.option(spec.flag, spec.name, **kwargs)


def _alias_option(spec: OptionSpec, alias: str):
    """A deprecated spelling of an option: hidden, arriving as ``<field>__<alias>`` (``take_aliases`` folds it
    into the field with a one-line warning)."""
    kwargs: dict[str, Any] = {"hidden": True, "default": None}
    if "low" in spec.meta or "high" in spec.meta:
        kwargs["type"] = click.FloatRange(
            min=spec.meta.get("low"), max=spec.meta.get("high"), min_open=spec.meta.get("low_open", False)
        )
    return click.option(alias, _alias_key(spec.name, alias), **kwargs)


def _alias_key(name: str, alias: str) -> str:
    return f"{name}__{alias.lstrip('-').replace('-', '_')}"


def report_options(group: str, exclude: tuple[str, ...] = ()):
    """A decorator adding every report option of ``group`` (CLASSIC or GENERATIVE) but the fields in ``exclude``
    to a command, in the order reports/options.py declares them; each arrives as a keyword argument named as its
    ReportOptions field (a deprecated alias as its own argument: pass the arguments through ``take_aliases``)."""
    specs = [s for s in option_specs(group) if s.name not in exclude]

    def decorate(func):
        for spec in reversed(specs):
            for alias in spec.meta.get("aliases", ()):
                func = _alias_option(spec, alias)(func)
            func = _click_option(spec)(func)
        return func

    return decorate


def take_aliases(given: dict[str, Any]) -> dict[str, Any]:
    """``given`` with each deprecated alias folded into its option, warning once on stderr per alias used;
    the option and its alias both given is a usage error."""
    out = dict(given)
    for spec in option_specs():
        for alias in spec.meta.get("aliases", ()):
            value = out.pop(_alias_key(spec.name, alias), None)
            if value is None:
                continue
            if out.get(spec.name) is not None:
                raise click.UsageError(f"{alias} is the old spelling of {spec.flag}: give one of them")
            click.echo(f"warning: {alias} is deprecated, use {spec.flag}", err=True)
            out[spec.name] = value
    return out


@click.command("report")
@click.argument("results", nargs=-1, type=click.Path())
@report_options(CLASSIC)
@click.option(
    "--out",
    "out_dir",
    type=click.Path(file_okay=False),
    default=None,
    help="Folder for report.md, report.html, plots/, results.csv/.parquet [default: report; none with --json].",
)
@click.option(
    "--json",
    "as_json",
    is_flag=True,
    help="Print the table (or the comparison) as JSON: the classic rows, then the generative ones "
    '(marked "table": "generative", with their objectives and frontier points).',
)
@report_options(GENERATIVE)
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
def report_cmd(ctx, results, out_dir, as_json, compare, history, **given) -> None:
    """Cost per million requests at the latency SLO, against the baseline: report.md, report.html, results.csv/.parquet."""
    options = options_from(take_aliases(given))
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
        click.echo(to_json_text(out.json_rows), nl=False)
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
    func = click.option("--precision", default="fp32", show_default=True, type=click.Choice(PRECISIONS))(func)
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
    @click.option(
        "--precision",
        required=True,
        type=click.Choice((*PRECISIONS, "int4")),
        help="Weight precision the server ran.",
    )
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
