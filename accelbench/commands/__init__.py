"""Thin click commands, one module per pipeline stage; ``accelbench.cli`` registers them all."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from accelbench.hardware.catalog import Catalog


def catalog_of(ctx: Any) -> Catalog:
    """The hardware catalog of this command line: the built-in one, with the root's ``--catalog`` file
    (or ACCELBENCH_CATALOG) over it."""
    from accelbench.hardware.catalog import load_catalog

    return load_catalog((ctx.find_root().obj or {}).get("catalog_path"))


SERVER_ENV, TOKEN_ENV = "ACCELBENCH_SERVER", "ACCELBENCH_TOKEN"


def token_option(scope: str) -> Any:
    """``--token`` of a command that talks to a results server: the option, else $ACCELBENCH_TOKEN."""
    import click

    return click.option(
        "--token",
        envvar=TOKEN_ENV,
        show_envvar=True,
        default=None,
        metavar="TOKEN",
        help=f"API token with the {scope} scope.",
    )


def server_options(scope: str) -> Any:
    """``--server URL`` and ``--token TOKEN``, the same for every command that talks to a results server
    (push, submit, agent, job, result; ``run --push URL`` takes ``--token`` alone): an option on the command
    line wins, else $ACCELBENCH_SERVER and $ACCELBENCH_TOKEN (docs/service.md)."""
    import click

    server = click.option(
        "--server",
        envvar=SERVER_ENV,
        show_envvar=True,
        required=True,
        metavar="URL",
        help="The results server, e.g. http://127.0.0.1:8080",
    )

    def decorate(command: Any) -> Any:
        return server(token_option(scope)(command))

    return decorate
