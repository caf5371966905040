"""The JSON API under /api/v1: health, ingest, results, report, history. OpenAPI at /openapi.json."""

from __future__ import annotations

from collections.abc import Callable
from typing import Annotated, Any

import sqlalchemy as sa
from fastapi import APIRouter, Depends, Query, Request
from fastapi import Path as FastPath
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import Response
from pydantic import BaseModel, Field

from accelbench import __version__
from accelbench.answers import (
    BatchStored,
    Error,
    Health,
    HideAnswer,
    History,
    ResultDetail,
    ResultList,
    Stored,
)
from accelbench.reports.options import ReportOptions
from accelbench.service import history, ingest, queries, query_options
from accelbench.service.auth import Principal, require
from accelbench.service.deps import DbSession
from accelbench.service.errors import ApiError
from accelbench.service.state import service

router = APIRouter(prefix="/api/v1")
ERRORS: dict[int | str, dict[str, Any]] = {
    code: {"description": why, "model": Error, "content": {"application/json": {"example": {"error": why}}}}
    for code, why in (
        (400, "malformed JSON"),
        (401, "no or invalid token"),
        (403, "token lacks the scope"),
        (404, "no such result or model"),
        (413, "body over the size limit"),
        (422, "invalid document or parameter, naming the field"),
    )
}


@router.get("/health", tags=["service"])
def health(request: Request) -> Health:
    """200 when the database answers a query; 503 otherwise."""
    engine = service(request).engine
    try:
        with engine.connect() as conn:
            conn.execute(sa.text("SELECT 1"))
    except sa.exc.SQLAlchemyError:
        raise ApiError(503, f"database {engine.url.get_backend_name()} is not reachable") from None
    return Health(status="ok", database=engine.url.get_backend_name(), version=__version__)


RESULT_REF = {"$ref": "#/components/schemas/ResultDocument"}  # components: see document_components
# what comes with a result: ``{result, variant, source}`` (ingest.parse_submission; the job route adds its call)
SUBMISSION_PROPERTIES = {
    "result": RESULT_REF,
    "variant": {"$ref": "#/components/schemas/VariantManifest"},
    "source": {"type": "string", "description": "the result's file name (no folders)"},
}
_RESULT_BODY: dict[str, Any] = {
    "required": True,
    "content": {
        "application/json": {
            "schema": {
                "description": "A result document (schema accelbench.result/1), or {result, variant, source} "
                "when the variant manifest it references comes along.",
                "oneOf": [
                    RESULT_REF,
                    {
                        "type": "object",
                        "required": ["result"],
                        "additionalProperties": False,
                        "properties": SUBMISSION_PROPERTIES,
                    },
                ],
            }
        }
    },
}


def document_components() -> dict[str, Any]:
    """The result document's and variant manifest's JSON Schemas (documents.py, the same as docs/schema/)
    as OpenAPI components, their definitions beside them, so that POST /results shows and validates
    against the real document. The route reads the raw body itself (content hash, one-line 422)."""
    from accelbench.documents import ResultDocument, VariantManifest

    out: dict[str, Any] = {}
    for cls in (ResultDocument, VariantManifest):
        schema = cls.model_json_schema(by_alias=True, ref_template="#/components/schemas/{model}")
        for name, definition in {**schema.pop("$defs", {}), cls.__name__: schema}.items():
            if out.setdefault(name, definition) != definition:
                raise RuntimeError(f"two document schemas named {name} differ")
    return out


@router.post(
    "/results",
    tags=["results"],
    status_code=201,
    openapi_extra={"requestBody": _RESULT_BODY},
    responses={200: {"description": "already stored (same content hash)", "model": Stored}, **ERRORS},
)
async def post_result(
    request: Request, response: Response, _who: Annotated[Principal, Depends(require("push"))]
) -> Stored:
    """Store a result document once by content hash: 201 when new, 200 when it was already stored."""
    body = await ingest.read_body(request, service(request).settings.max_body_bytes)
    sub = await run_in_threadpool(ingest.parse_submission, body)  # CPU work off the event loop

    def write() -> ingest.Stored:
        with service(request).sessions() as session:
            return ingest.store(session, sub)

    return stored_answer(request, response, sub, await run_in_threadpool(write))


def stored_answer(
    request: Request, response: Response, sub: ingest.Submission, stored: ingest.Stored
) -> Stored:
    """201 with the result's id and URL when it is new (its model's reports are rebuilt), 200 when it was
    already stored (``response``: the route's, whose status this sets)."""
    if stored.created:
        service(request).reports.after_push([sub.result.model])
    response.status_code = 201 if stored.created else 200
    return Stored(
        id=stored.content_hash, created=stored.created, url=f"/api/v1/results/{stored.content_hash}"
    )


_BATCH_BODY = {
    "required": True,
    "content": {
        "application/json": {
            "schema": {
                "type": "object",
                "required": ["results"],
                "additionalProperties": False,
                "properties": {
                    "results": {
                        "type": "array",
                        "minItems": 1,
                        "maxItems": ingest.MAX_BATCH,
                        "items": _RESULT_BODY["content"]["application/json"]["schema"],
                    }
                },
            }
        }
    },
}


@router.post("/results/batch", tags=["results"], openapi_extra={"requestBody": _BATCH_BODY}, responses=ERRORS)
async def post_results_batch(
    request: Request, _who: Annotated[Principal, Depends(require("push"))]
) -> BatchStored:
    """Store up to 500 documents in one transaction (what ``accelbench push`` sends): each once by content
    hash; one invalid document refuses the batch with 422 naming it (``results[3]: …``)."""
    body = await ingest.read_body(request, service(request).settings.max_body_bytes)
    subs = await run_in_threadpool(ingest.parse_batch, body)  # CPU work off the event loop

    def write() -> list[ingest.Stored]:
        with service(request).sessions() as session:
            return ingest.store_many(session, subs)

    stored = await run_in_threadpool(write)
    service(request).reports.after_push(
        sorted({sub.result.model for sub, one in zip(subs, stored, strict=True) if one.created})
    )
    created = sum(one.created for one in stored)
    return BatchStored(
        created=created, existing=len(stored) - created, ids=[one.content_hash for one in stored]
    )


@router.get("/results", tags=["results"], responses=ERRORS)
def list_results(
    session: DbSession,
    _who: Annotated[Principal, Depends(require("read", public=True))],
    model: str | None = None,
    target: str | None = None,
    precision: str | None = None,
    variant: str | None = None,
    host: str | None = None,
    limit: Annotated[int, Query(ge=1, le=1000)] = 100,
    offset: Annotated[int, Query(ge=0, le=10**9)] = 0,
) -> ResultList:
    """Stored results, newest first, filtered by the indexed columns."""
    filters = {"model": model, "target": target, "precision": precision, "variant": variant, "host": host}
    rows, total = queries.list_results(session, filters, limit, offset)
    return ResultList(total=total, results=[queries.summary(r) for r in rows])


@router.get("/results/{content_hash}", tags=["results"], responses=ERRORS)
def get_result(
    content_hash: str,
    session: DbSession,
    _who: Annotated[Principal, Depends(require("read", public=True))],
) -> ResultDetail:
    """One result: its indexed columns, the document as pushed, and the variant manifest when known."""
    return queries.detail(queries.get_result(session, content_hash), session)


class HideIn(BaseModel):
    reason: str = Field("", max_length=500, description="why (shown in the result's hide log)")


def _hide(hidden: bool) -> Callable[..., HideAnswer]:
    def endpoint(
        request: Request,
        content_hash: Annotated[str, FastPath(max_length=64)],
        body: HideIn,
        session: DbSession,
        who: Annotated[Principal, Depends(require("admin"))],
    ) -> HideAnswer:
        if hidden and not body.reason.strip():
            raise ApiError(422, "field reason: say why the result is hidden (one line)")
        reason = " ".join(body.reason.replace("\x00", "").split())
        row = queries.set_hidden(session, content_hash, hidden, who.name, reason)
        service(request).reports.forget(row.model)
        return queries.hide_answer(row)

    endpoint.__doc__ = (
        "Hide a result from every listing, page and report (kept, and recorded: who, when, why)."
        if hidden
        else "Show a hidden result again (recorded like the hide)."
    )
    return endpoint


for _hidden in (True, False):
    router.add_api_route(
        f"/results/{{content_hash}}/{'hide' if _hidden else 'unhide'}",
        _hide(_hidden),
        methods=["POST"],
        tags=["results"],
        responses=ERRORS,
        name="hide_result" if _hidden else "unhide_result",
    )


# a report is ``accelbench report --json``'s bytes: its rows belong to the report writer, not to a service model
REPORT_ROWS: dict[int | str, dict[str, Any]] = {
    200: {
        "description": "the report's rows: the classic ones, then the generative ones (table: generative)",
        "content": {"application/json": {"schema": {"type": "array", "items": {"type": "object"}}}},
    }
}


@router.get("/report", tags=["reports"], responses={**ERRORS, **REPORT_ROWS})
def get_report(
    request: Request,
    session: DbSession,
    _who: Annotated[Principal, Depends(require("read", public=True))],
    options: Annotated[ReportOptions, Depends(query_options.report_options)],
    model: Annotated[str | None, Query(max_length=200)] = None,
) -> Response:
    """The report table, byte for byte what ``accelbench report --json`` prints for the same documents."""
    rendered = service(request).reports.exact(session, options, model)
    return Response(rendered.json_text, media_type="application/json")


@router.get("/history", tags=["reports"], responses=ERRORS)
def get_history(
    request: Request,
    session: DbSession,
    _who: Annotated[Principal, Depends(require("read", public=True))],
    options: Annotated[ReportOptions, Depends(query_options.report_options)],
    model: Annotated[str, Query(min_length=1, max_length=200)],
    target: Annotated[str, Query(min_length=1, max_length=100)],
    precision: Annotated[str, Query(min_length=1, max_length=20)],
) -> History:
    """Every stored run of one (model, target, precision), oldest first, flagged when it moved beyond
    its intervals from the run before (the --compare rule)."""
    return history.history(service(request).reports, session, options, model, target, precision).answer()
