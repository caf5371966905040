"""Server-rendered pages of campaigns and runners (no JavaScript needed; a running campaign's page refreshes
itself when asked to, ``?live=1``: a page that reloads on its own is a barrier unless the reader chose it).

/campaigns              every campaign, and the form that submits a spec
/campaigns/{id}         every job (status, runner, attempts, last heartbeat, log tail) and the live report
/campaigns/{id}/report  the campaign's report.html, rendered from its stored results with the spec's options
/runners                every agent: labels, host probe, accelbench version, last seen; offline marked
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Depends, Query, Request
from fastapi import Path as PathParam
from fastapi.responses import HTMLResponse, RedirectResponse, Response
from sqlalchemy.orm import Session

from accelbench.service import campaign_reads as reads
from accelbench.service import jobs, queue
from accelbench.service.auth import Principal, require
from accelbench.service.deps import DbSession
from accelbench.service.errors import ApiError
from accelbench.service.state import service

router = APIRouter()
TEMPLATES = Path(__file__).parent / "templates"


def _render(name: str, status: int = 200, **context: Any) -> HTMLResponse:
    from jinja2 import Environment, FileSystemLoader, select_autoescape

    from accelbench.reports.formatting import FILTERS

    env = Environment(loader=FileSystemLoader(TEMPLATES), autoescape=select_autoescape(["html"]))
    env.filters.update(FILTERS)
    return HTMLResponse(env.get_template(name).render(**context), status_code=status)


@router.get("/campaigns", response_class=HTMLResponse, include_in_schema=False)
def campaigns_page(
    request: Request,
    session: DbSession,
    _who: Annotated[Principal, Depends(require("read"))],
) -> HTMLResponse:
    return _campaigns(request, session)


def _campaigns(
    request: Request, session: Session, error: str | None = None, spec: str = "", status: int = 200
) -> HTMLResponse:
    queue.reap_expired(session, service(request).started_at)
    campaigns = [reads.campaign_answer(session, c).model_dump() for c in reads.recent_campaigns(session)]
    return _render(
        "campaigns.html",
        status,
        campaigns=campaigns,
        error=error,
        spec=spec,
        lease_s=jobs.DEFAULT_LEASE_S,
        max_attempts=jobs.DEFAULT_MAX_ATTEMPTS,
    )


@router.post("/campaigns", include_in_schema=False)
async def submit_form(request: Request, who: Annotated[Principal, Depends(require("admin"))]) -> Response:
    """The web form: a spec's TOML text, a lease and attempts; a bad spec re-renders the form with its line."""
    from fastapi.concurrency import run_in_threadpool

    form = await request.form()
    text = str(form.get("spec") or "")

    parts = service(request)

    def write() -> Response:
        with parts.sessions() as session:
            try:
                lease_s, attempts = (
                    float(str(form.get("lease_s") or 0)),
                    int(str(form.get("max_attempts") or 0)),
                )
                if not (0 < lease_s <= 86400 and 1 <= attempts <= 100):
                    raise ApiError(422, "lease (s) must be in (0, 86400] and attempts in 1..100")
                spec = reads.parse_campaign_spec(text, parts.catalog)
            except ApiError as err:
                return _campaigns(request, session, err.message, text, status=422)
            except ValueError as err:
                return _campaigns(request, session, str(err), text, status=422)
            campaign = queue.create_campaign(
                session,
                spec,
                text,
                created_by=who.name,
                lease_s=lease_s,
                max_attempts=attempts,
                labels={},
                time_limit_s=parts.settings.job_time_limit_s,
            )
            return RedirectResponse(f"/campaigns/{campaign.id}", status_code=303)

    return await run_in_threadpool(write)


@router.get("/campaigns/{campaign_id}", response_class=HTMLResponse, include_in_schema=False)
def campaign_page(
    campaign_id: Annotated[int, PathParam(ge=1, le=2**31 - 1)],
    request: Request,
    session: DbSession,
    _who: Annotated[Principal, Depends(require("read"))],
    fmt: Annotated[Literal["html", "csv"], Query(alias="format", description="csv: the jobs table")] = "html",
    live: Annotated[bool, Query(description="reload the page every 5 s while the campaign runs")] = False,
) -> Response:
    queue.reap_expired(session, service(request).started_at)
    data = reads.campaign_answer(session, reads.get_campaign(session, campaign_id)).model_dump()
    if fmt == "csv":
        return _jobs_csv(campaign_id, data["jobs"])
    for job in data["jobs"]:
        job["log_lines"] = job["log_tail"].splitlines()[-15:]
    return _render(
        "campaign.html", campaign=data, finished=data["status"] not in (jobs.QUEUED, jobs.RUNNING), live=live
    )


def _jobs_csv(campaign_id: int, jobs_: list[dict[str, Any]]) -> Response:
    from accelbench.reports.formatting import csv_text

    keys = ["id", "target", "status", "runner", "attempts", "max_attempts", "heartbeat_at", "reason"]
    return Response(
        csv_text(keys, [[j.get(k) for k in keys] for j in jobs_]),
        media_type="text/csv; charset=utf-8",
        headers={"Content-Disposition": f'attachment; filename="campaign-{campaign_id}-jobs.csv"'},
    )


@router.get("/campaigns/{campaign_id}/report", response_class=HTMLResponse, include_in_schema=False)
def campaign_report_page(
    campaign_id: Annotated[int, PathParam(ge=1, le=2**31 - 1)],
    request: Request,
    session: DbSession,
    _who: Annotated[Principal, Depends(require("read"))],
) -> Response:
    rendered = reads.campaign_report(service(request).reports, session, campaign_id, formats=("html",))
    return Response(rendered.outputs["report.html"], media_type="text/html; charset=utf-8")


@router.get("/runners", response_class=HTMLResponse, include_in_schema=False)
def runners_page(session: DbSession, _who: Annotated[Principal, Depends(require("read"))]) -> HTMLResponse:
    return _render(
        "runners.html",
        runners=[r.model_dump() for r in reads.runner_rows(session)],
        offline_after_s=reads.OFFLINE_AFTER_S,
    )
