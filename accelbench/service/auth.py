"""API tokens: prefixed, shown once, stored as sha256, scoped, revocable (Bencher's pattern).

Scopes and what each grants (a route asks for one scope; ``admin`` passes every check)::

    read    GET the API and the pages (open to anyone with --public-read)
    push    POST results
    runner  what a runner agent does: claim jobs, and push and read results
    admin   everything, including campaigns and tokens

Use in a route: ``principal: Principal = Depends(require("push"))``.
"""

from __future__ import annotations

import hashlib
import secrets
from dataclasses import dataclass
from typing import Any

from fastapi import Depends, Request
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer

from accelbench.errors import BadInputError
from accelbench.service.errors import ApiError

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
COOKIE = "accelbench_token"
_CHALLENGE = {"WWW-Authenticate": "Bearer"}


def hash_token(token: str) -> str:
    return hashlib.sha256(token.encode("utf-8")).hexdigest()


def create_token(session: Any, name: str, scope: str) -> str:
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


def revoke_tokens(session: Any, name: str | None = None, token: str | None = None) -> int:
    """Revoke by name (every active token of that name) or by the token itself; returns how many."""
    import sqlalchemy as sa

    from accelbench.service.models import Token, utcnow

    if bool(name) == bool(token):
        raise BadInputError("give exactly one of --name NAME or --token TOKEN to revoke")
    query = sa.update(Token).where(Token.revoked_at.is_(None))
    query = (
        query.where(Token.name == name) if name else query.where(Token.token_hash == hash_token(token or ""))
    )
    return session.execute(query.values(revoked_at=utcnow())).rowcount or 0


def lookup(session: Any, token: str) -> Principal | None:
    import sqlalchemy as sa

    from accelbench.service.models import Token

    row = session.execute(
        sa.select(Token).where(Token.token_hash == hash_token(token), Token.revoked_at.is_(None))
    ).scalar_one_or_none()
    return Principal(row.name, row.scope, row.id) if row else None


def require(scope: str) -> Any:
    """A FastAPI dependency that lets the request through only with a token granting ``scope``.

    No or unknown token → 401; a valid token without the scope → 403. A ``read`` route is open when the
    server runs with --public-read.
    """
    if scope not in SCOPES:
        raise ValueError(f"unknown scope {scope!r}")
    bearer = HTTPBearer(auto_error=False, description="An accelbench API token: accelbench token create")

    def dependency(
        request: Request,
        creds: HTTPAuthorizationCredentials | None = Depends(bearer),  # noqa: B008 (bearer is local: no Annotated)
    ) -> Principal:
        # a browser without JavaScript cannot send a header: the pages' login form sets this cookie instead
        token = creds.credentials if creds is not None else request.cookies.get(COOKIE, "")
        if not token:
            if scope == "read" and request.app.state.settings.public_read:
                return ANONYMOUS_READER
            raise ApiError(401, "missing API token: send Authorization: Bearer TOKEN", _CHALLENGE)
        with request.app.state.sessions() as session:
            principal = lookup(session, token)
        if principal is None:
            raise ApiError(401, "invalid or revoked API token", _CHALLENGE)
        if not principal.can(scope):
            raise ApiError(403, f"token {principal.name!r} (scope {principal.scope}) may not {scope}")
        return principal

    return dependency
