"""API tokens: prefixed, shown once, stored as sha256, scoped, revocable (Bencher's pattern).

Scopes and what each grants (a route asks for one scope; ``admin`` passes every check)::

    read    GET the API and the pages (open to anyone with --public-read)
    push    POST results
    runner  what a runner agent does: claim jobs, and push and read results
    admin   everything, including campaigns and tokens

Use in a route: ``principal: Principal = Depends(require("push"))``.

Browsers: ``/login`` takes a read or admin token (never a runner or push token) and sets a session cookie that
holds a random session id, stored hashed in ``web_sessions`` with an expiry; the token never reaches the
browser's cookie jar. The cookie is accepted on the pages only, never on ``/api`` routes, and unsafe methods
are checked for a foreign Origin/Sec-Fetch-Site (``security.py``).
"""

from __future__ import annotations

import hashlib
import secrets
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, cast

from fastapi import Depends, Request
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer

from accelbench.errors import BadInputError
from accelbench.service.errors import ApiError
from accelbench.service.state import service

if TYPE_CHECKING:
    from sqlalchemy.orm import Session

PREFIX = "abk_"
SCOPES = ("push", "read", "runner", "admin")
GRANTS: dict[str, frozenset[str]] = {
    "read": frozenset({"read"}),
    "push": frozenset({"push"}),
    "runner": frozenset({"runner", "push", "read"}),
    "admin": frozenset(SCOPES),
}


@dataclass(frozen=True)
class Principal:
    """Who is calling: a token's name and scope, or the anonymous reader of a --public-read server."""

    name: str
    scope: str
    token_id: int | None = None

    def can(self, scope: str) -> bool:
        return scope in GRANTS.get(self.scope, frozenset())


ANONYMOUS_READER = Principal("anonymous", "read")
SESSION_PREFIX = "abs_"
SESSION_MAX_AGE_S = 12 * 3600
COOKIE = "accelbench_session"  # over plain HTTP: a __Host- cookie must be Secure, which HTTP cannot carry
SECURE_COOKIE = "__Host-accelbench_session"  # over TLS (or behind a TLS proxy): Secure, Path=/, no Domain
LOGIN_SCOPES = ("read", "admin")  # runner and push tokens are for machines, not for a browser session
_CHALLENGE = {"WWW-Authenticate": "Bearer"}


def hash_token(token: str) -> str:
    return hashlib.sha256(token.encode("utf-8")).hexdigest()


def create_token(session: Session, name: str, scope: str) -> str:
    """A new token (returned once, never stored); its hash goes into the ``tokens`` table."""
    from accelbench.service.models import Token

    if scope not in SCOPES:
        raise BadInputError(f"unknown scope {scope!r}: use one of {', '.join(SCOPES)}")
    if not name.strip():
        raise BadInputError("a token needs a --name (who or what uses it)")
    token = PREFIX + secrets.token_urlsafe(32)
    session.add(Token(name=name, scope=scope, prefix=token[:12], token_hash=hash_token(token)))
    session.flush()
    return token


def revoke_tokens(session: Session, name: str | None = None, token: str | None = None) -> int:
    """Revoke by name (every active token of that name) or by the token itself; returns how many."""
    import sqlalchemy as sa

    from accelbench.service.models import Token, utcnow

    if bool(name) == bool(token):
        raise BadInputError("give exactly one of --name NAME or --token TOKEN to revoke")
    query = sa.update(Token).where(Token.revoked_at.is_(None))
    query = (
        query.where(Token.name == name) if name else query.where(Token.token_hash == hash_token(token or ""))
    )
    done = cast("sa.CursorResult[Any]", session.execute(query.values(revoked_at=utcnow())))  # an UPDATE's
    return done.rowcount or 0


def lookup(session: Session, token: str) -> Principal | None:
    import sqlalchemy as sa

    from accelbench.service.models import Token

    row = session.execute(
        sa.select(Token).where(Token.token_hash == hash_token(token), Token.revoked_at.is_(None))
    ).scalar_one_or_none()
    return Principal(row.name, row.scope, row.id) if row else None


MAX_SESSIONS_PER_TOKEN = 20  # a browser or two per person: a script logging in in a loop fills no table


def start_session(session: Session, principal: Principal) -> str:
    """A new browser session for ``principal``'s token; returns the session id (only its hash is stored).
    Expired and ended sessions are deleted here, and a token's oldest live sessions beyond
    ``MAX_SESSIONS_PER_TOKEN`` are ended with them."""
    from datetime import timedelta

    import sqlalchemy as sa

    from accelbench.service.models import WebSession, utcnow

    sid = SESSION_PREFIX + secrets.token_urlsafe(32)
    now = utcnow()
    session.execute(
        sa.delete(WebSession).where(sa.or_(WebSession.expires_at <= now, WebSession.ended_at.is_not(None)))
    )
    kept = (
        sa.select(WebSession.id)
        .where(WebSession.token_id == principal.token_id)
        .order_by(WebSession.created_at.desc(), WebSession.id.desc())
        .limit(MAX_SESSIONS_PER_TOKEN - 1)
    )
    session.execute(
        sa.delete(WebSession).where(
            WebSession.token_id == principal.token_id, WebSession.id.not_in(kept.scalar_subquery())
        )
    )
    session.add(
        WebSession(
            session_hash=hash_token(sid),
            token_id=principal.token_id,
            created_at=now,
            expires_at=now + timedelta(seconds=SESSION_MAX_AGE_S),
        )
    )
    session.commit()
    return sid


def end_session(session: Session, sid: str) -> None:
    import sqlalchemy as sa

    from accelbench.service.models import WebSession, utcnow

    session.execute(
        sa.update(WebSession).where(WebSession.session_hash == hash_token(sid)).values(ended_at=utcnow())
    )
    session.commit()


def session_principal(session: Session, sid: str) -> Principal | None:
    """The token behind a live (not ended, not expired) session whose token is not revoked."""
    import sqlalchemy as sa

    from accelbench.service.models import Token, WebSession, utcnow

    row = session.execute(
        sa.select(Token)
        .join(WebSession, WebSession.token_id == Token.id)
        .where(
            WebSession.session_hash == hash_token(sid),
            WebSession.ended_at.is_(None),
            WebSession.expires_at > utcnow(),
            Token.revoked_at.is_(None),
        )
    ).scalar_one_or_none()
    return Principal(row.name, row.scope, row.id) if row else None


class LoginThrottle:
    """Failed logins per client address in a sliding window: after ``limit`` failures in ``window_s`` the
    address is refused (429) until the oldest leaves the window. Pure bookkeeping, the clock passed in; at
    most ``max_addresses`` are tracked (the oldest forgotten first), so a flood of addresses is bounded too."""

    def __init__(self, limit: int = 10, window_s: float = 60.0, max_addresses: int = 10_000) -> None:
        self.limit, self.window_s, self.max_addresses = limit, window_s, max_addresses
        self._failures: dict[str, list[float]] = {}

    def wait_s(self, address: str, now: float) -> float:
        """Seconds until ``address`` may try again; 0 when it may now."""
        recent = [t for t in self._failures.get(address, []) if now - t < self.window_s]
        if recent:
            self._failures[address] = recent
        else:
            self._failures.pop(address, None)
        return self.window_s - (now - recent[0]) if len(recent) >= self.limit else 0.0

    def failed(self, address: str, now: float) -> None:
        self._failures.setdefault(address, []).append(now)
        while len(self._failures) > self.max_addresses:
            self._failures.pop(next(iter(self._failures)))

    def succeeded(self, address: str) -> None:
        self._failures.pop(address, None)


def session_cookie(request: Request) -> str:
    """The session id a browser sent. Over TLS only the ``__Host-`` cookie counts: a plain one could have been
    set by a man in the middle of any plain HTTP page of the domain, which the prefix exists to rule out."""
    if request.url.scheme == "https":
        return request.cookies.get(SECURE_COOKIE) or ""
    return request.cookies.get(COOKIE) or ""


def require(scope: str, public: bool = False) -> Callable[..., Principal]:
    """A FastAPI dependency that lets the request through only with a token granting ``scope``.

    No or unknown token → 401; a valid token without the scope → 403. A ``read`` route marked ``public``
    (results and reports) is open when the server runs with --public-read; campaigns, runners and jobs are
    not. A page (not ``/api``) also takes the browser session cookie.
    """
    if scope not in SCOPES:
        raise ValueError(f"unknown scope {scope!r}")
    bearer = HTTPBearer(auto_error=False, description="An accelbench API token: accelbench token create")

    def dependency(
        request: Request,
        creds: HTTPAuthorizationCredentials | None = Depends(bearer),  # noqa: B008 (bearer is local: no Annotated)
    ) -> Principal:
        # a browser without JavaScript cannot send a header: the pages' login form sets a session cookie,
        # which the /api routes never take (a cookie is what a cross-site request carries along)
        token = creds.credentials if creds is not None else ""
        sid = "" if token or request.url.path.startswith("/api/") else session_cookie(request)
        if not token and not sid:
            if scope == "read" and public and service(request).settings.public_read:
                return ANONYMOUS_READER
            raise ApiError(401, "missing API token: send Authorization: Bearer TOKEN", _CHALLENGE)
        with service(request).sessions() as session:
            principal = lookup(session, token) if token else session_principal(session, sid)
        if principal is None:
            if sid:
                raise ApiError(401, "the login session ended or expired: log in again", _CHALLENGE)
            raise ApiError(401, "invalid or revoked API token", _CHALLENGE)
        if not principal.can(scope):
            raise ApiError(403, f"token {principal.name!r} (scope {principal.scope}) may not {scope}")
        return principal

    return dependency
