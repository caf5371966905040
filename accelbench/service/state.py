"""What one app holds, typed: its settings, database, catalog, reports and start time (``app.state.service``).

Routes and dependencies read it with ``service(request)``; nothing is kept per process.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING

from fastapi import Request

from accelbench.service.ingest import DEFAULT_MAX_BODY_BYTES

if TYPE_CHECKING:
    from sqlalchemy import Engine
    from sqlalchemy.orm import Session, sessionmaker

    from accelbench.hardware.catalog import Catalog
    from accelbench.service.report_cache import Reports


@dataclass(frozen=True)
class Settings:
    db_url: str
    public_read: bool = False
    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES
    catalog_path: str | None = None
    request_timeout_s: float = 120.0  # limits.REQUEST_TIMEOUT_S
    job_time_limit_s: float = 6 * 3600.0  # jobs.DEFAULT_TIME_LIMIT_S: a campaign's jobs unless it says
    behind_proxy: bool = False  # a TLS reverse proxy in front: trust its X-Forwarded-Proto/-Host
    allowed_hosts: tuple[str, ...] = ()  # Host header names answered (--allowed-host); empty: any


@dataclass(frozen=True)
class Service:
    """One app's parts (``app.create_app`` makes it)."""

    settings: Settings
    engine: Engine
    sessions: sessionmaker[Session]
    catalog: Catalog
    reports: Reports  # built reports, parsed documents and the build processes (report_cache.py)
    started_at: datetime  # a lease that ran out while the server was down is not the agent's fault (queue.py)


def service(request: Request) -> Service:
    """The app's ``Service`` (``app.state.service``)."""
    found = request.app.state.service
    if not isinstance(found, Service):
        raise TypeError("app.state.service is not set: make the app with accelbench.service.app.create_app")
    return found
