"""FastAPI dependencies shared by the API and the pages: a database session per request."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Annotated

from fastapi import Depends, Request
from sqlalchemy.orm import Session

from accelbench.service.state import service


def get_session(request: Request) -> Iterator[Session]:
    """One SQLAlchemy session per request, closed after the response (routes commit what they write)."""
    with service(request).sessions() as session:
        yield session


DbSession = Annotated[Session, Depends(get_session)]  # a route's session parameter
