"""Every error the API returns is one line of JSON, ``{"error": "..."}``, with the status that says why.

FastAPI's own errors (request validation, unknown routes, wrong methods) are rewritten into the same shape,
and anything unexpected becomes a logged 500 with one line, never a traceback in the response.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from typing import Any

log = logging.getLogger("accelbench.service")


class ApiError(Exception):
    """Raised by routes and dependencies; ``message`` is one line the client can act on."""

    def __init__(self, status: int, message: str, headers: dict[str, str] | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.message = " ".join(str(message).split())
        self.headers = headers or {}


def error_response(status: int, message: str, headers: dict[str, str] | None = None) -> Any:
    from fastapi.responses import Response

    body = json.dumps({"error": " ".join(str(message).split())}, ensure_ascii=False) + "\n"
    return Response(body, status_code=status, media_type="application/json", headers=headers)


def _field(loc: Any) -> str:
    parts = [str(p) for p in loc if p not in ("body", "query", "path", "header")]
    return ".".join(parts) or "request"


def validation_message(errors: list[dict[str, Any]]) -> str:
    """Pydantic/FastAPI errors → 'field steps.0.offered: Field required' (the first few, on one line)."""
    parts = [f"{_field(e.get('loc', ()))}: {e.get('msg', 'invalid')}" for e in errors[:3]]
    more = f" (and {len(errors) - 3} more)" if len(errors) > 3 else ""
    return "invalid " + "; ".join(parts) + more


class RefuseNul:
    """ASGI middleware: a NUL character in the path or a query value is 422 before any route runs.

    PostgreSQL cannot compare or store NUL in text (psycopg raises DataError: a 500), SQLite can; no model,
    target or id contains one, so both databases refuse it the same way, in one line."""

    def __init__(self, app: Any) -> None:
        self.app = app

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        if scope["type"] == "http" and (
            b"%00" in scope.get("query_string", b"") or "\x00" in scope.get("path", "")
        ):
            response = error_response(422, "a NUL character (%00) is not allowed in a path or query value")
            await response(scope, receive, send)
            return
        await self.app(scope, receive, send)


def install(app: Any, page_error: Callable[[Any, ApiError], Any] | None = None) -> None:
    """Register the handlers that keep every error response in the one-line shape. ``page_error(request,
    err)`` may answer a browser with a page instead (``web.page_error``), or None for the JSON line."""
    from fastapi.exceptions import RequestValidationError
    from starlette.exceptions import HTTPException

    app.add_middleware(RefuseNul)

    @app.exception_handler(ApiError)
    async def _api_error(request, err: ApiError):
        page = page_error(request, err) if page_error is not None else None
        return page or error_response(err.status, err.message, err.headers)

    @app.exception_handler(RequestValidationError)
    async def _validation(_request, err: RequestValidationError):
        return error_response(422, validation_message(list(err.errors())))

    @app.exception_handler(HTTPException)
    async def _http(_request, err: HTTPException):
        text = err.detail if isinstance(err.detail, str) else json.dumps(err.detail)
        return error_response(err.status_code, text, getattr(err, "headers", None))

    from sqlalchemy.exc import InterfaceError, OperationalError

    @app.exception_handler(OperationalError)
    @app.exception_handler(InterfaceError)
    async def _database_down(request, err: Exception):
        # a lost database is the server's condition, not a bug: 503 tells a pusher to retry later
        log.warning("database error on %s %s: %s", request.method, request.url.path, str(err).splitlines()[0])
        return error_response(503, "the database is not reachable; retry later")

    @app.exception_handler(RecursionError)
    async def _too_deep(request, _err: Exception):
        return error_response(400, "the request nests too deeply to parse")

    @app.exception_handler(ValueError)
    async def _bad_value(request, err: Exception):
        # e.g. a JSON integer over Python's digit limit in a body FastAPI parses: the client's input
        log.warning("ValueError on %s %s: %s", request.method, request.url.path, str(err)[:200])
        return error_response(400, f"the request is not acceptable: {' '.join(str(err).split())[:200]}")

    @app.exception_handler(Exception)
    async def _unexpected(request, err: Exception):
        log.exception("unexpected error on %s %s", request.method, request.url.path)
        return error_response(500, f"internal error ({type(err).__name__}); the server log has the details")
