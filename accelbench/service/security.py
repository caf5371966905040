"""Browser-facing defences (ASGI middleware): security headers on every answer, and a cross-site check on
every unsafe method.

- Headers: ``Content-Security-Policy`` (no script at all on the pages, styles and SVG inline as the report
  has them, no framing, forms only to this origin), ``X-Frame-Options: DENY``, ``X-Content-Type-Options:
  nosniff``, ``Referrer-Policy: same-origin`` (a page's query names models and prices: no other site sees it;
  ``no-referrer`` would make a browser send ``Origin: null`` on the pages' own forms), ``Cache-Control:
  no-store`` (unless a route set its own), and ``Strict-Transport-Security`` over TLS. The ``/docs`` page runs
  Swagger UI from this server (``app._mount_docs``): it gets a policy allowing its script, nothing else does.
  A campaign page frames its own report: that page may frame this origin, and that report be framed by it.
  Outermost middleware: the limits' 413/400/503 answers carry the headers too.
- CSRF: a POST/PUT/PATCH/DELETE is refused (403) when ``Sec-Fetch-Site`` says cross-site/same-site or
  ``Origin`` names another origin than the one the request was sent to, whatever other headers it carries. The cookie is also SameSite=Strict and never accepted on /api.
"""

from __future__ import annotations

import re
from urllib.parse import urlsplit

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from accelbench.service.errors import error_response

CSP = (
    "default-src 'none'; style-src 'unsafe-inline'; img-src 'self' data:; form-action 'self'; "
    "frame-ancestors 'none'; base-uri 'none'"
)
DOCS_CSP = (
    "default-src 'none'; script-src 'self' 'unsafe-inline'; style-src 'self' 'unsafe-inline'; "
    "img-src 'self' data:; connect-src 'self'; frame-ancestors 'none'; base-uri 'none'"
)
_HEADERS = [(b"x-content-type-options", b"nosniff"), (b"referrer-policy", b"same-origin")]
HSTS = b"max-age=31536000"
UNSAFE = ("POST", "PUT", "PATCH", "DELETE")
_CAMPAIGN_PAGE = re.compile(r"^/campaigns/\d+/?$")  # shows its report in an <iframe>
_CAMPAIGN_REPORT = re.compile(r"^/campaigns/\d+/report/?$")  # the framed report, framed by this origin only


def policy(path: str) -> tuple[str, str]:
    """(Content-Security-Policy, X-Frame-Options) for a path."""
    if path in ("/docs", "/docs/oauth2-redirect") or path.startswith("/docs/"):
        return DOCS_CSP, "DENY"
    if _CAMPAIGN_PAGE.match(path):
        return CSP + "; frame-src 'self'", "DENY"
    if _CAMPAIGN_REPORT.match(path):
        return CSP.replace("frame-ancestors 'none'", "frame-ancestors 'self'"), "SAMEORIGIN"
    return CSP, "DENY"


def cross_site(method: str, headers: dict[bytes, bytes], behind_proxy: bool) -> str | None:
    """Why an unsafe browser request is refused as cross-site, or None. An ``Authorization`` header does not
    exempt a request: a page can make a browser send ``Authorization: Basic`` with the session cookie, and no
    API client sends ``Origin`` or ``Sec-Fetch-Site`` (issue 40, MEDIUM 8)."""
    if method not in UNSAFE:
        return None
    fetch_site = headers.get(b"sec-fetch-site", b"").decode("latin-1").lower()
    if fetch_site and fetch_site not in ("same-origin", "none"):
        return f"a {fetch_site} request (Sec-Fetch-Site) may not change anything here"
    origin = headers.get(b"origin", b"").decode("latin-1")
    if origin and origin != "null":
        host = headers.get(
            b"x-forwarded-host" if behind_proxy and b"x-forwarded-host" in headers else b"host", b""
        )
        if urlsplit(origin).netloc.lower() != host.decode("latin-1").lower():
            return f"a request from {origin} may not change anything here (Origin is another site)"
    elif origin == "null":
        return "a request from an opaque origin (Origin: null) may not change anything here"
    return None


class Security:
    def __init__(self, app: ASGIApp, behind_proxy: bool = False) -> None:
        self.app, self.behind_proxy = app, behind_proxy

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        csp, frame = policy(scope.get("path", ""))
        extra = [(b"content-security-policy", csp.encode()), (b"x-frame-options", frame.encode()), *_HEADERS]
        if scope.get("scheme") == "https":  # over TLS (or a TLS proxy that says so): never plain HTTP again
            extra.append((b"strict-transport-security", HSTS))

        async def with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = list(message.get("headers", []))
                if not any(k.lower() == b"cache-control" for k, _ in headers):
                    headers.append((b"cache-control", b"no-store"))  # pages hold what only a token may read
                message["headers"] = [*headers, *extra]
            await send(message)

        why = cross_site(scope.get("method", "GET"), dict(scope.get("headers") or []), self.behind_proxy)
        if why:
            await error_response(403, why)(scope, receive, with_headers)
            return
        await self.app(scope, receive, with_headers)
