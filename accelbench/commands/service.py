"""CLI commands for the results service: server, token create/revoke, push, result hide/unhide. Thin, and lazy: the service
extra (FastAPI, SQLAlchemy) is imported inside the commands, and its absence is one line."""

from __future__ import annotations

import click

from accelbench.client.http import RETRY_S
from accelbench.commands import server_options
from accelbench.errors import ToolchainMissingError

_DB_HELP = "Database URL: sqlite:///PATH or postgresql+psycopg://USER@HOST/DB [default: results.db in the user data dir]."


def _need_service_extra() -> None:
    try:
        import alembic  # noqa: F401
        import fastapi  # noqa: F401
        import sqlalchemy  # noqa: F401
        import uvicorn  # noqa: F401
    except ImportError as err:
        raise ToolchainMissingError(
            f"the results service needs the 'service' extra ({err.name} is missing): pip install 'accelbench[service]'"
        ) from None


def _db_url(db: str | None) -> str:
    from accelbench.service.db import default_db_url

    return db or default_db_url()


@click.command("server")
@click.option("--db", default=None, envvar="ACCELBENCH_DB", help=_DB_HELP + " Also ACCELBENCH_DB.")
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to bind (0.0.0.0 to share it).")
@click.option("--port", type=click.IntRange(0, 65535), default=8080, show_default=True)
@click.option(
    "--public-read",
    is_flag=True,
    help="Let anyone read results and reports without a token (campaigns, runners and jobs still need one).",
)
@click.option(
    "--max-body-mb",
    type=click.FloatRange(min=0, min_open=True),
    default=8.0,
    show_default=True,
    help="Refuse (413) a pushed document larger than this.",
)
@click.option(
    "--request-timeout",
    "request_timeout_s",
    type=click.FloatRange(min=1),
    default=120.0,
    show_default=True,
    help="Answer 503 to a request (its body included) not answered within this many seconds.",
)
@click.option(
    "--head-timeout",
    "head_timeout_s",
    type=click.FloatRange(min=0.1),
    default=10.0,
    show_default=True,
    help="Close a connection whose request head is not complete this many seconds after it opened (or after the last answer).",
)
@click.option(
    "--body-timeout",
    "body_timeout_s",
    type=click.FloatRange(min=0.1),
    default=30.0,
    show_default=True,
    help="Close a connection whose request body stops arriving for this many seconds.",
)
@click.option(
    "--max-connections",
    type=click.IntRange(min=0),
    default=0,
    help="Connections open at once; one past it evicts the oldest still sending its head [default: 0, the descriptor limit less a reserve].",
)
@click.option(
    "--ssl-certfile",
    type=click.Path(exists=True, dir_okay=False),
    default=None,
    help="Serve HTTPS with this certificate (PEM); session cookies are then __Host- and Secure.",
)
@click.option(
    "--ssl-keyfile",
    type=click.Path(exists=True, dir_okay=False),
    default=None,
    help="The certificate's key (PEM).",
)
@click.option(
    "--behind-proxy",
    is_flag=True,
    help="A TLS reverse proxy is in front: trust its X-Forwarded-Proto/-Host (then let only the proxy reach the port).",
)
@click.option(
    "--job-time-limit",
    "job_time_limit_s",
    type=click.FloatRange(min=1),
    default=6 * 3600.0,
    show_default=True,
    help="Seconds a campaign job may run from its claim unless its campaign says (submit --time-limit-s).",
)
@click.option(
    "--allowed-host",
    "allowed_hosts",
    multiple=True,
    metavar="NAME",
    help="Answer only requests whose Host is this name (repeat for more; *.example.com allowed): a DNS-rebinding page then cannot read the server. Default: any.",
)
@click.pass_context
def server_cmd(
    ctx: click.Context,
    db: str | None,
    host: str,
    port: int,
    public_read: bool,
    max_body_mb: float,
    request_timeout_s: float,
    head_timeout_s: float,
    body_timeout_s: float,
    max_connections: int,
    ssl_certfile: str | None,
    ssl_keyfile: str | None,
    behind_proxy: bool,
    job_time_limit_s: float,
    allowed_hosts: tuple[str, ...],
) -> None:
    """Collect result documents from every host and serve the comparison reports (API and web pages)."""
    _need_service_extra()
    from accelbench.service.connections import ConnectionPolicy
    from accelbench.service.server import serve
    from accelbench.service.state import Settings

    settings = Settings(
        db_url=_db_url(db),
        public_read=public_read,
        max_body_bytes=int(max_body_mb * 1024 * 1024),
        catalog_path=(ctx.obj or {}).get("catalog_path"),
        request_timeout_s=request_timeout_s,
        behind_proxy=behind_proxy,
        job_time_limit_s=job_time_limit_s,
        allowed_hosts=allowed_hosts,
    )
    if bool(ssl_certfile) != bool(ssl_keyfile):
        from accelbench.errors import BadInputError

        raise BadInputError("give --ssl-certfile and --ssl-keyfile together")
    policy = ConnectionPolicy(
        head_timeout_s=head_timeout_s, body_timeout_s=body_timeout_s, max_connections=max_connections
    )
    serve(settings, host=host, port=port, ssl_certfile=ssl_certfile, ssl_keyfile=ssl_keyfile, policy=policy)


@click.group("token")
def token_group() -> None:
    """Create and revoke API tokens of the results service."""


@token_group.command("create")
@click.option("--db", default=None, envvar="ACCELBENCH_DB", help=_DB_HELP)
@click.option("--scope", type=click.Choice(["push", "read", "runner", "admin"]), required=True)
@click.option("--name", required=True, help="Who or what uses the token (a host, a person, an agent).")
def token_create_cmd(db: str | None, scope: str, name: str) -> None:
    """Print a new token (only the token, on stdout); it is stored hashed and cannot be shown again."""
    _need_service_extra()
    from accelbench.service.auth import create_token
    from accelbench.service.db import open_database, session_scope

    engine = open_database(_db_url(db))
    try:
        with session_scope(engine) as session:
            token = create_token(session, name, scope)
    finally:
        engine.dispose()
    click.echo(token)


@token_group.command("revoke")
@click.option("--db", default=None, envvar="ACCELBENCH_DB", help=_DB_HELP)
@click.option("--name", default=None, help="Revoke every active token of this name.")
@click.option("--token", "token", default=None, help="Revoke this token.")
def token_revoke_cmd(db: str | None, name: str | None, token: str | None) -> None:
    """Revoke tokens by name or by value; a revoked token is refused (401) from the next request on."""
    _need_service_extra()
    from accelbench.errors import BadInputError
    from accelbench.service.auth import revoke_tokens
    from accelbench.service.db import open_database, session_scope

    engine = open_database(_db_url(db))
    try:
        with session_scope(engine) as session:
            count = revoke_tokens(session, name=name, token=token)
    finally:
        engine.dispose()
    if count == 0:
        raise BadInputError(f"no active token {'named ' + repr(name) if name else 'with that value'}")
    click.echo(f"revoked {count} token(s)", err=True)


@click.command("push")
@click.argument("results", nargs=-1, required=True, type=click.Path())
@server_options("push")
@click.option(
    "--retry-s",
    type=click.FloatRange(min=0),
    default=RETRY_S,
    show_default=True,
    help="Keep retrying a server that does not answer for this long (0: fail at once), like the agent.",
)
def push_cmd(results: tuple[str, ...], server: str, token: str | None, retry_s: float) -> None:
    """Send result documents (files or folders) to a results server; already-stored ones are skipped."""
    from accelbench.client.push import push_paths

    click.echo(push_paths(list(results), server, token, retry_s).line(server))


@click.group("result")
def result_group() -> None:
    """Hide or unhide a stored result on a results server (admin token)."""


def _hide_call(result_id: str, server: str, token: str | None, action: str, reason: str) -> None:
    from accelbench.answers import HideAnswer
    from accelbench.client.http import ServerClient

    with ServerClient(server, token, retry_s=10.0, scope="admin") as api:
        answer = api.answer(HideAnswer, "POST", f"/results/{result_id}/{action}", {"reason": reason})
    click.echo(f"result {answer.id}: {'hidden' if answer.hidden else 'shown'} on {server}")


@result_group.command("hide")
@click.argument("result_id")
@server_options("admin")
@click.option("--reason", required=True, help="Why (kept with who and when in the result's hide log).")
def result_hide_cmd(result_id: str, server: str, token: str | None, reason: str) -> None:
    """Hide RESULT_ID (its content hash) from every page, listing and report; it is kept and can be shown again."""
    _hide_call(result_id, server, token, "hide", reason)


@result_group.command("unhide")
@click.argument("result_id")
@server_options("admin")
@click.option("--reason", default="", help="Why it is shown again (recorded).")
def result_unhide_cmd(result_id: str, server: str, token: str | None, reason: str) -> None:
    """Show a hidden RESULT_ID again."""
    _hide_call(result_id, server, token, "unhide", reason)


def register(group: click.Group) -> None:
    """Add the service's commands to the top-level group."""
    group.add_command(server_cmd)
    group.add_command(token_group)
    group.add_command(push_cmd)
    group.add_command(result_group)
