"""``accelbench project``: the report's projected rows for a model on catalog targets, without a measurement."""

from __future__ import annotations

from pathlib import Path

import click

from accelbench.commands import catalog_of
from accelbench.commands.reports import report_options, take_aliases
from accelbench.reports.options import CLASSIC, GENERATIVE, options_from, split_ids

# report options that speak of measured results, not of a projection
NOT_HERE = ("project", "include_failed", "max_error_rate", "fit_models")


@click.command("project")
@click.argument("model")
@click.option(
    "--isl", type=click.IntRange(min=1), default=None, help="Input tokens per request (generative)."
)
@click.option(
    "--osl", type=click.IntRange(min=1), default=None, help="Output tokens per request (generative)."
)
@click.option(
    "--trace",
    type=click.Path(dir_okay=False),
    default=None,
    help="A request trace (Mooncake JSONL, BurstGPT CSV) instead of --isl/--osl: its mean ISL and OSL.",
)
@click.option(
    "--precision",
    "precisions",
    multiple=True,
    metavar="P",
    help="Weight precisions (repeatable or comma-separated) [default: fp16,fp8 generative; fp16 classic].",
)
@click.option(
    "--target",
    "targets",
    multiple=True,
    metavar="ID",
    help="Catalog targets (repeatable or comma-separated) [default: every target that runs the precision].",
)
@report_options(CLASSIC, exclude=NOT_HERE)
@report_options(GENERATIVE, exclude=NOT_HERE)
@click.option("--json", "as_json", is_flag=True, help="Print the rows as JSON (as `report --json`).")
@click.option(
    "--out",
    "out_dir",
    type=click.Path(file_okay=False),
    default=None,
    help="Folder for report.md, report.html, generative.csv/.json [default: print Markdown to stdout].",
)
@click.pass_context
def project_cmd(ctx, model, isl, osl, trace, precisions, targets, as_json, out_dir, **given) -> None:
    """Project a model's cost on catalog targets without measuring it: capacity at the objective, cost per
    million tokens (generative, at --isl/--osl) or requests (classic), every row labelled projected."""
    from accelbench.reports.ask import Ask, ask
    from accelbench.reports.report import render_data, write_outputs
    from accelbench.reports.table import to_json_text

    options = options_from(take_aliases(given))
    request = Ask(model, isl, osl, split_ids(precisions), split_ids(targets), trace)
    formats = ("md", "html", "csv") if out_dir else ("md",) if not as_json else ()
    rendered = render_data(ask(request, catalog_of(ctx), options), formats)
    if as_json:
        click.echo(to_json_text(rendered.json_rows), nl=False)
    if out_dir:
        outputs = {**rendered.outputs, "table.json": rendered.json_text.encode("utf-8")}
        for path in write_outputs(outputs, Path(out_dir)):
            click.echo(str(path), err=as_json)
    elif not as_json:
        click.echo(rendered.outputs["report.md"].decode("utf-8"), nl=False)


def register(group: click.Group) -> None:
    """Add this stage's commands to the top-level group."""
    group.add_command(project_cmd)
