"""The app factory: ``create_app(Settings(...))`` → a FastAPI app bound to one migrated database."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any

from fastapi import APIRouter, FastAPI

from accelbench import __version__
from accelbench.service.state import Service, Settings

if TYPE_CHECKING:
    from sqlalchemy import Engine


def create_app(settings: Settings, engine: Engine | None = None) -> FastAPI:
    """Open (and migrate) the database, load the catalog, mount the API and the pages.

    Routers of other service modules (campaigns) are added by ``include_router`` on the returned app, or
    listed in ``extra_routers`` below so that ``accelbench server`` serves them.
    """
    from accelbench.hardware.catalog import load_catalog
    from accelbench.service import api, db, errors, web
    from accelbench.service.models import utcnow
    from accelbench.service.report_cache import Reports

    engine = engine or db.open_database(settings.db_url)
    catalog = load_catalog(settings.catalog_path)
    service = Service(
        settings,
        engine,
        db.sessionmaker_for(engine),
        catalog,
        Reports(engine, catalog, settings.catalog_path),
        started_at=utcnow(),
    )

    @asynccontextmanager
    async def lifespan(_app: FastAPI) -> AsyncIterator[None]:
        yield
        service.reports.close()
        service.engine.dispose()

    app = FastAPI(
        title="accelbench results service",
        version=__version__,
        description="Collects accelbench result documents from every host and serves the comparison reports.",
        lifespan=lifespan,
        docs_url=None,  # served by _mount_docs from the installed Swagger UI, not a CDN
        redoc_url=None,  # ReDoc has no offline package: the Swagger UI page and /openapi.json remain
    )
    app.state.service = service  # what routes read: state.service(request)
    from accelbench.service.auth import LoginThrottle

    app.state.login_throttle = LoginThrottle()  # failed /login attempts per client address
    errors.install(app, web.page_error)
    from accelbench.service.limits import Limits
    from accelbench.service.security import Security

    app.add_middleware(
        Limits, documents_limit=settings.max_body_bytes, timeout_s=settings.request_timeout_s
    )  # before auth and every route
    if settings.allowed_hosts:  # DNS rebinding: a foreign name resolving to this address reads nothing
        from starlette.middleware.trustedhost import TrustedHostMiddleware

        app.add_middleware(TrustedHostMiddleware, allowed_hosts=list(settings.allowed_hosts))
    app.add_middleware(Security, behind_proxy=settings.behind_proxy)  # added last: outermost, headers on all
    for router in (api.router, web.router, *extra_routers()):
        app.include_router(router)
    _add_document_schemas(app, api.document_components())
    _mount_docs(app)
    return app


DOCS_ASSETS = "/docs/assets"


def _mount_docs(app: FastAPI) -> None:
    """``/docs``: Swagger UI from the ``swagger-ui-bundle`` package (offline hosts have no CDN, and a CDN
    script without integrity runs whatever the CDN serves)."""
    import swagger_ui_bundle
    from fastapi.openapi.docs import get_swagger_ui_html
    from fastapi.responses import HTMLResponse
    from fastapi.staticfiles import StaticFiles

    app.mount(DOCS_ASSETS, StaticFiles(directory=swagger_ui_bundle.swagger_ui_path), name="docs-assets")

    @app.get("/docs", include_in_schema=False)
    def docs() -> HTMLResponse:
        return get_swagger_ui_html(
            openapi_url=app.openapi_url or "/openapi.json",
            title=f"{app.title} API",
            swagger_js_url=f"{DOCS_ASSETS}/swagger-ui-bundle.js",
            swagger_css_url=f"{DOCS_ASSETS}/swagger-ui.css",
            swagger_favicon_url=f"{DOCS_ASSETS}/favicon-32x32.png",
        )


def _add_document_schemas(app: FastAPI, components: dict[str, Any]) -> None:
    """Put the documents' schemas into the generated OpenAPI (the ingest route's body refers to them)."""
    generate = app.openapi

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is not None:
            return app.openapi_schema
        schema = generate()  # kept by FastAPI as app.openapi_schema
        schemas = schema.setdefault("components", {}).setdefault("schemas", {})
        if clash := sorted(set(schemas) & set(components)):
            raise RuntimeError(f"OpenAPI components named twice: {', '.join(clash)}")
        schemas.update(components)
        return schema

    app.openapi = openapi  # type: ignore[method-assign]  # FastAPI's documented way to extend its schema


def extra_routers() -> list[APIRouter]:
    """Routers of later service modules; each is imported here so the server composes them in one place."""
    from accelbench.service import campaign_pages, campaigns

    return [campaigns.router, campaign_pages.router]
