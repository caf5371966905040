"""FastAPI dependencies shared by the API and the pages: a database session per request."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from fastapi import Request


def get_session(request: Request) -> Iterator[Any]:
    """One SQLAlchemy session per request, closed after the response (routes commit what they write)."""
    with request.app.state.sessions() as session:
        yield session
