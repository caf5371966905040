"""Limits that hold before any route or token check runs (ASGI middleware, outermost):

- a body limit per route: 8 MiB (``--max-body-mb``) for the routes that take result documents, 512 KiB for a
  campaign spec, 256 KiB for a runner's registration (its host probe), 64 KiB for everything else (login, job
  calls, hide). A declared Content-Length over it is 413 before a byte of the body is read; a chunked body is
  counted as it arrives and cut off at the limit with the same 413.
- a JSON nesting limit (``ingest.MAX_JSON_DEPTH``) on every body that looks like JSON: 400, before a parser
  can recurse into it.
- a request time limit (``REQUEST_TIMEOUT_S``; longer than the longest long poll): 503 when no answer started
  by then, so a slow or stalled client cannot hold a worker forever.
"""

from __future__ import annotations

import re

import anyio
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from accelbench.service.errors import error_response, log

KIB = 1024
SMALL_BODY = 64 * KIB
RUNNER_BODY = 256 * KIB
SPEC_BODY = 512 * KIB
REQUEST_TIMEOUT_S = 120.0  # a claim long-polls up to 60 s (campaigns.MAX_WAIT_S)
_DOCUMENT_ROUTES = (
    ("POST", re.compile(r"^/api/v1/results(/batch)?/?$")),
    ("PUT", re.compile(r"^/api/v1/jobs/[^/]+/documents/?$")),
    ("POST", re.compile(r"^/api/v1/jobs/[^/]+/results/?$")),
)


def body_limit(method: str, path: str, documents_limit: int) -> int:
    """How many body bytes a request to ``path`` may carry."""
    if any(method == m and rx.match(path) for m, rx in _DOCUMENT_ROUTES):
        return documents_limit
    if path.rstrip("/") in ("/api/v1/campaigns", "/campaigns"):
        return SPEC_BODY
    if path.rstrip("/") == "/api/v1/runners":
        return RUNNER_BODY
    return SMALL_BODY


class Limits:
    """See the module docstring. ``documents_limit`` is the server's --max-body-mb in bytes."""

    def __init__(self, app: ASGIApp, documents_limit: int, timeout_s: float = REQUEST_TIMEOUT_S) -> None:
        self.app, self.documents_limit, self.timeout_s = app, documents_limit, timeout_s

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = False

        async def tracked_send(message: Message) -> None:
            nonlocal started
            if message["type"] == "http.response.start":
                started = True
            await send(message)

        async def answer(status: int, text: str) -> None:
            if not started:
                await error_response(status, text, {"Connection": "close"})(scope, receive, tracked_send)

        try:
            with anyio.fail_after(self.timeout_s):  # asyncio.timeout is Python 3.11's
                replay = await self._read_body(scope, receive)
                if isinstance(replay, tuple):
                    await answer(*replay)
                    return
                await self.app(scope, replay, tracked_send)
        except TimeoutError:
            log.warning(
                "request %s %s ran past %.0f s", scope.get("method"), scope.get("path"), self.timeout_s
            )
            await answer(503, f"the request took longer than {self.timeout_s:.0f} s")

    async def _read_body(self, scope: Scope, receive: Receive) -> Receive | tuple[int, str]:
        """A receive that replays the whole (bounded, depth-checked) body, or (status, message) to answer."""
        from accelbench.service.ingest import MAX_JSON_DEPTH, json_depth

        method, path = scope.get("method", "GET"), scope.get("path", "")
        limit = body_limit(method, path, self.documents_limit)
        headers = dict(scope.get("headers") or [])
        declared = headers.get(b"content-length")
        if declared is not None:
            try:
                size = int(declared)
            except ValueError:
                return 400, "Content-Length is not a number"
            if size > limit:
                return 413, f"body of {size} bytes is over the limit of {limit} bytes for {path}"
        elif method in ("GET", "HEAD", "OPTIONS") and b"transfer-encoding" not in headers:
            return receive
        chunks: list[bytes] = []
        total = 0
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                return 400, "the client went away before sending its body"
            body = message.get("body", b"")
            total += len(body)
            if total > limit:
                return 413, f"body is over the limit of {limit} bytes for {path}"
            chunks.append(body)
            if not message.get("more_body"):
                break
        data = b"".join(chunks)
        head = data[:64].lstrip()
        if head[:1] in (b"[", b"{") and (depth := json_depth(data)) > MAX_JSON_DEPTH:
            return 400, f"body nests {depth} levels deep; the limit is {MAX_JSON_DEPTH}"
        sent = False

        async def replay() -> Message:
            nonlocal sent
            if not sent:
                sent = True
                return {"type": "http.request", "body": data, "more_body": False}
            return await receive()

        return replay
