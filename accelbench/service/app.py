"""The app factory: ``create_app(Settings(...))`` → a FastAPI app bound to one migrated database."""

from __future__ import annotations

from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

from accelbench import __version__
from accelbench.service.ingest import DEFAULT_MAX_BODY_BYTES


@dataclass(frozen=True)
class Settings:
    db_url: str
    public_read: bool = False
    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES
    catalog_path: str | None = None
    request_timeout_s: float = 120.0  # limits.REQUEST_TIMEOUT_S
    job_time_limit_s: float = 6 * 3600.0  # jobs.DEFAULT_TIME_LIMIT_S: a campaign's jobs unless it says
    behind_proxy: bool = False  # a TLS reverse proxy in front: trust its X-Forwarded-Proto/-Host


def create_app(settings: Settings, engine: Any = None) -> Any:
    """Open (and migrate) the database, load the catalog, mount the API and the pages.

    Routers of other service modules (campaigns) are added by ``include_router`` on the returned app, or
    listed in ``ROUTERS`` below so that ``accelbench server`` serves them.
    """
    from fastapi import FastAPI

    from accelbench.hardware.catalog import load_catalog
    from accelbench.service import api, db, errors, web
    from accelbench.service.models import utcnow
    from accelbench.service.views import Reports

    engine = engine or db.open_database(settings.db_url)

    @asynccontextmanager
    async def lifespan(app: Any):
        yield
        app.state.reports.close()
        engine.dispose()

    app = FastAPI(
        title="accelbench results service",
        version=__version__,
        description="Collects accelbench result documents from every host and serves the comparison reports.",
        lifespan=lifespan,
    )
    app.state.settings = settings
    app.state.engine = engine
    app.state.sessions = db.sessionmaker_for(engine)
    app.state.catalog = load_catalog(settings.catalog_path)
    app.state.reports = Reports(engine, app.state.catalog, settings.catalog_path)
    # a lease that ran out while the server was down is not the agent's fault (queue.reap_expired)
    app.state.started_at = utcnow()
    errors.install(app, web.page_error)
    from accelbench.service.limits import Limits
    from accelbench.service.security import Security

    app.add_middleware(Security, behind_proxy=settings.behind_proxy)
    app.add_middleware(
        Limits, documents_limit=settings.max_body_bytes, timeout_s=settings.request_timeout_s
    )  # added last: runs first, before auth
    for router in (api.router, web.router, *extra_routers()):
        app.include_router(router)
    _add_document_schemas(app, api.document_components())
    return app


def _add_document_schemas(app: Any, components: dict[str, Any]) -> None:
    """Put the documents' schemas into the generated OpenAPI (the ingest route's body refers to them)."""
    generate = app.openapi

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is None:
            schema = generate()
            schemas = schema.setdefault("components", {}).setdefault("schemas", {})
            if clash := sorted(set(schemas) & set(components)):
                raise RuntimeError(f"OpenAPI components named twice: {', '.join(clash)}")
            schemas.update(components)
        return app.openapi_schema

    app.openapi = openapi


def extra_routers() -> list[Any]:
    """Routers of later service modules; each is imported here so the server composes them in one place."""
    from accelbench.service import campaign_pages, campaigns

    return [campaigns.router, campaign_pages.router]
