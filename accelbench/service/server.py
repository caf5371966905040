"""``accelbench server``: migrate the database, say where it is, serve the app with uvicorn."""

from __future__ import annotations

import sys
from dataclasses import replace

from accelbench.service.connections import ConnectionPolicy
from accelbench.service.state import Settings

LOOPBACK = ("127.0.0.1", "::1", "localhost")


def exposure_warning(host: str, tls: bool, behind_proxy: bool) -> str | None:
    """The one line printed when the server listens beyond loopback with neither TLS nor a stated proxy."""
    if host in LOOPBACK or host.startswith("127.") or tls or behind_proxy:
        return None
    return (
        f"accelbench server: warning: listening on {host} over plain HTTP: tokens and session cookies "
        "cross the network in clear; give --ssl-certfile/--ssl-keyfile, or --behind-proxy for a TLS proxy"
    )


def serve(
    settings: Settings,
    host: str = "127.0.0.1",
    port: int = 8080,
    log_level: str = "warning",
    ssl_certfile: str | None = None,
    ssl_keyfile: str | None = None,
    policy: ConnectionPolicy | None = None,
) -> None:
    """Run until SIGINT/SIGTERM. Migrations are applied before the port opens. ``policy`` without
    ``max_connections`` (0): the cap follows the descriptor limit, raised first where allowed."""
    import uvicorn

    from accelbench.errors import ServerError
    from accelbench.service import db
    from accelbench.service.app import create_app
    from accelbench.service.connections import TimedH11Protocol, connection_cap, raise_descriptor_limit

    _check_bindable(host, port)
    engine = db.open_database(settings.db_url)
    app = create_app(settings, engine=engine)
    print(f"accelbench server: database {db.describe(settings.db_url)}", file=sys.stderr, flush=True)
    warning = exposure_warning(host, bool(ssl_certfile), settings.behind_proxy)
    if warning:
        print(warning, file=sys.stderr, flush=True)
    scheme = "https" if ssl_certfile else "http"
    descriptors = raise_descriptor_limit()
    policy = policy or ConnectionPolicy(max_connections=0)
    if policy.max_connections <= 0 or policy.max_connections > connection_cap(descriptors):
        policy = replace(policy, max_connections=connection_cap(descriptors))
    print(
        f"accelbench server: listening on {scheme}://{host}:{port} (at most {policy.max_connections} connections,"
        f" descriptor limit {descriptors}; request head within {policy.head_timeout_s:g} s)",
        file=sys.stderr,
        flush=True,
    )
    proxy = (
        {"proxy_headers": True, "forwarded_allow_ips": "*"}
        if settings.behind_proxy
        else {"proxy_headers": False}
    )
    config = uvicorn.Config(
        app,
        host=host,
        port=port,
        log_level=log_level,
        access_log=False,
        ssl_certfile=ssl_certfile,
        ssl_keyfile=ssl_keyfile,
        http=TimedH11Protocol.bound(policy),
        timeout_keep_alive=int(policy.keep_alive_s),
        **proxy,
    )
    server = uvicorn.Server(config)
    try:
        server.run()
    except (OSError, SystemExit):  # uvicorn logs a bind error and calls sys.exit
        if server.started:
            raise
        raise ServerError(
            f"cannot listen on {host}:{port} (in use, or not an address of this host)"
        ) from None


def _check_bindable(host: str, port: int) -> None:
    """Fail with one line before printing anything when the port is taken (uvicorn would log and exit)."""
    import socket

    from accelbench.errors import ServerError

    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as uvicorn binds
        try:
            sock.bind((host, port))
        except OSError as err:
            raise ServerError(f"cannot listen on {host}:{port}: {err.strerror or err}") from None
