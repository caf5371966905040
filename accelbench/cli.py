"""The ``accelbench`` command: parses options, calls one library function, prints the result.

This module and the thin command modules in ``accelbench/commands/`` (one per stage) are the only
code that imports more than one stage. Library code raises ``accelbench.errors`` exceptions; here they
become one line on stderr and the exit code the error class carries. Never a traceback for bad input.
"""

from __future__ import annotations

import sys

import click

from accelbench import __version__
from accelbench.commands.console import library_output
from accelbench.errors import AccelbenchError

# click >= 8.2 raises this (a UsageError) for a bare group, to print its help; click 8.1 has no such class.
_NO_ARGS_HELP = getattr(click.exceptions, "NoArgsIsHelpError", ())


def _usage_line(err: click.UsageError, ctx: click.Context) -> None:
    # click prints usage errors as Usage/Try/Error lines; accelbench's contract is one line on stderr.
    where = (err.ctx or ctx).command_path
    click.echo(f"accelbench: error: {err.format_message().rstrip('.')} (see '{where} --help')", err=True)


class _Group(click.Group):
    """Turns accelbench's own errors and click's usage errors into one line on stderr and an exit code."""

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        try:
            return super().parse_args(ctx, args)
        except _NO_ARGS_HELP:
            raise  # a bare group prints its help
        except click.UsageError as err:  # a bad top-level option
            _usage_line(err, ctx)
            ctx.exit(err.exit_code)

    def invoke(self, ctx: click.Context):
        try:
            return super().invoke(ctx)
        except _NO_ARGS_HELP:
            raise
        except click.UsageError as err:  # bad options/arguments of a subcommand, an unknown command
            _usage_line(err, ctx)
            ctx.exit(err.exit_code)
        except AccelbenchError as err:
            click.echo(f"accelbench: error: {err}", err=True)
            ctx.exit(err.exit_code)
        except KeyboardInterrupt:
            click.echo("accelbench: interrupted; finished work is kept", err=True)
            ctx.exit(130)
        except OSError as err:  # a file we could not read/write that the library did not anticipate
            click.echo(
                f"accelbench: error: {err.strerror or err}: {err.filename or ''}".rstrip(": "), err=True
            )
            ctx.exit(2)


@click.group(cls=_Group, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="accelbench")
@click.option(
    "--catalog",
    "catalog_path",
    envvar="ACCELBENCH_CATALOG",
    type=click.Path(dir_okay=False),
    default=None,
    help="A user catalog TOML that overrides or adds hardware targets (also ACCELBENCH_CATALOG).",
)
@click.option("-q", "--quiet", is_flag=True, help="Only results, warnings and errors: no progress lines.")
@click.option(
    "-v",
    "--verbose",
    is_flag=True,
    help="Also the stages' debug messages and, in `run`, each measured window.",
)
@click.pass_context
def main(ctx: click.Context, catalog_path: str | None, quiet: bool, verbose: bool) -> None:
    """Which accelerator serves my model cheapest at my latency target?

    Quantize a model per hardware target, serve it on NVIDIA Triton, load-test it with Locust,
    and report cost per million requests against an A100 baseline.
    """
    ctx.ensure_object(dict)
    ctx.obj["catalog_path"] = catalog_path
    ctx.obj["quiet"], ctx.obj["verbose"] = quiet, verbose
    if quiet and verbose:
        raise click.UsageError("--quiet and --verbose contradict each other: give one")
    library_output(quiet=quiet, verbose=verbose)


def _register_commands() -> None:
    # Each stage's commands live in their own thin module; importing them here keeps `accelbench --help`
    # fast because heavy libraries (onnxruntime, locust, torch) are imported inside the commands.
    from accelbench.commands import (
        campaigns,
        hardware,
        loadtests,
        models,
        project,
        quantize,
        reports,
        run,
        service,
        serving,
    )

    for module in (hardware, models, quantize, serving, loadtests, reports, project, run, service, campaigns):
        module.register(main)


_register_commands()


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
