"""Every error the API returns is one line of JSON, ``{"error": "..."}``, with the status that says why.

FastAPI's own errors (request validation, unknown routes, wrong methods) are rewritten into the same shape,
and anything unexpected becomes a logged 500 with one line, never a traceback in the response.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from fastapi import FastAPI, Request
from fastapi.responses import Response
from pydantic import ValidationError
from starlette.types import ASGIApp, HTTPExceptionHandler, Receive, Scope, Send

from accelbench.documents import describe_error

log = logging.getLogger("accelbench.service")


class ApiError(Exception):
    """Raised by routes and dependencies; ``message`` is one line the client can act on."""

    def __init__(self, status: int, message: str, headers: Mapping[str, str] | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.message = " ".join(str(message).split())
        self.headers = dict(headers or {})


def error_response(status: int, message: str, headers: Mapping[str, str] | None = None) -> Response:
    body = json.dumps({"error": " ".join(str(message).split())}, ensure_ascii=False) + "\n"
    return Response(body, status_code=status, media_type="application/json", headers=headers)


REQUEST_PARTS = ("body", "query", "path", "header", "cookie")  # where FastAPI says a value came from


def validation_message(err: ValidationError | Sequence[Mapping[str, Any]]) -> str:
    """Pydantic's or FastAPI's errors → ``field 'steps[0].offered': Field required (and 2 more)``: the
    documents' one formatter (``documents.describe_error``), FastAPI's location prefix left out."""
    return describe_error(err, skip=REQUEST_PARTS, whole="request")


class RefuseNul:
    """ASGI middleware: a NUL character in the path or a query value is 422 before any route runs.

    PostgreSQL cannot compare or store NUL in text (psycopg raises DataError: a 500), SQLite can; no model,
    target or id contains one, so both databases refuse it the same way, in one line."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and (
            b"%00" in scope.get("query_string", b"") or "\x00" in scope.get("path", "")
        ):
            response = error_response(422, "a NUL character (%00) is not allowed in a path or query value")
            await response(scope, receive, send)
            return
        await self.app(scope, receive, send)


PageError = Callable[[Request, ApiError], Response | None]


def install(app: FastAPI, page_error: PageError | None = None) -> None:
    """Register the handlers that keep every error response in the one-line shape. ``page_error(request,
    err)`` may answer a browser with a page instead (``web.page_error``), or None for the JSON line."""
    from fastapi.exceptions import RequestValidationError
    from sqlalchemy.exc import InterfaceError, OperationalError
    from starlette.exceptions import HTTPException

    app.add_middleware(RefuseNul)

    async def api_error(request: Request, err: Exception) -> Response:
        assert isinstance(err, ApiError)  # registered for ApiError only
        page = page_error(request, err) if page_error is not None else None
        return page or error_response(err.status, err.message, err.headers)

    async def validation(_request: Request, err: Exception) -> Response:
        assert isinstance(err, RequestValidationError)
        return error_response(422, validation_message(err.errors()))

    async def http(_request: Request, err: Exception) -> Response:
        assert isinstance(err, HTTPException)
        text = err.detail if isinstance(err.detail, str) else json.dumps(err.detail)
        return error_response(err.status_code, text, err.headers)

    async def database_down(request: Request, err: Exception) -> Response:
        # a lost database is the server's condition, not a bug: 503 tells a pusher to retry later
        log.warning("database error on %s %s: %s", request.method, request.url.path, str(err).splitlines()[0])
        return error_response(503, "the database is not reachable; retry later")

    async def too_deep(_request: Request, _err: Exception) -> Response:
        return error_response(400, "the request nests too deeply to parse")

    async def bad_value(request: Request, err: Exception) -> Response:
        # e.g. a JSON integer over Python's digit limit in a body FastAPI parses: the client's input
        log.warning("ValueError on %s %s: %s", request.method, request.url.path, str(err)[:200])
        return error_response(400, f"the request is not acceptable: {' '.join(str(err).split())[:200]}")

    async def unexpected(request: Request, err: Exception) -> Response:
        log.exception("unexpected error on %s %s", request.method, request.url.path)
        return error_response(500, f"internal error ({type(err).__name__}); the server log has the details")

    handlers: list[tuple[type[Exception], HTTPExceptionHandler]] = [
        (ApiError, api_error),
        (RequestValidationError, validation),
        (HTTPException, http),
        (OperationalError, database_down),
        (InterfaceError, database_down),
        (RecursionError, too_deep),
        (ValueError, bad_value),
        (Exception, unexpected),
    ]
    for kind, handler in handlers:
        app.add_exception_handler(kind, handler)
