"""Server-rendered pages of campaigns and runners (no JavaScript needed; a running campaign's page refreshes
itself when asked to, ``?live=1``: a page that reloads on its own is a barrier unless the reader chose it).

/campaigns              every campaign, and the form that submits a spec
/campaigns/{id}         every job (status, runner, attempts, last heartbeat, log tail) and the live report
/campaigns/{id}/report  the campaign's report.html, rendered from its stored results with the spec's options
/runners                every agent: labels, host probe, accelbench version, last seen; offline marked
"""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Depends, Query, Request
from fastapi import Path as PathParam
from fastapi.responses import HTMLResponse, RedirectResponse, Response

from accelbench.service import jobs, queue
from accelbench.service.auth import Principal, require
from accelbench.service.deps import get_session
from accelbench.service.errors import ApiError

router = APIRouter()
OFFLINE_AFTER_S = 120.0  # an agent polls every few seconds; two minutes of silence means it is gone
TEMPLATES = Path(__file__).parent / "templates"


def _render(name: str, status: int = 200, **context: Any) -> HTMLResponse:
    from jinja2 import Environment, FileSystemLoader, select_autoescape

    from accelbench.reports.formatting import FILTERS

    env = Environment(loader=FileSystemLoader(TEMPLATES), autoescape=select_autoescape(["html"]))
    env.filters.update(FILTERS)
    return HTMLResponse(env.get_template(name).render(**context), status_code=status)


def _probe_summary(probe: dict[str, Any]) -> dict[str, str]:
    """What the runners page shows of a host probe: catalog match, accelerator, driver, toolchain versions."""
    nvidia, neuron, jetson = probe.get("nvidia") or {}, probe.get("neuron") or {}, probe.get("jetson") or {}
    gpus = nvidia.get("gpus") or []
    if gpus:
        accelerator = f"{len(gpus)}× {gpus[0].get('name')}"
    elif jetson.get("present"):
        accelerator = str(jetson.get("model"))
    elif neuron.get("present"):
        accelerator = f"{len(neuron.get('devices') or [])} Neuron device(s)"
    else:
        accelerator = f"CPU: {(probe.get('cpu') or {}).get('model', '?')}"
    packages = probe.get("packages") or {}
    toolchains = ", ".join(f"{k} {v}" for k, v in sorted(packages.items())
                           if v and k in ("onnxruntime", "onnxruntime-gpu", "tensorrt", "torch-neuronx"))  # fmt: skip
    driver = nvidia.get("driver_version") or (jetson.get("l4t") if jetson.get("present") else None)
    return {"catalog_match": str((probe.get("catalog_match") or {}).get("id", "?")), "accelerator": accelerator,
            "driver": str(driver or "—"), "toolchains": toolchains or "—"}  # fmt: skip


def runner_rows(session: Any) -> list[dict[str, Any]]:
    import sqlalchemy as sa

    from accelbench.service.campaign_models import Runner
    from accelbench.service.models import aware, utcnow

    now = utcnow()
    rows = session.execute(sa.select(Runner).order_by(Runner.name)).scalars()
    return [
        {"id": r.id, "name": r.name, "target": r.target, "labels": r.labels, "version": r.version,
         "last_seen": aware(r.last_seen).isoformat(), "token": r.token_name,
         "online": now - aware(r.last_seen) < timedelta(seconds=OFFLINE_AFTER_S), **_probe_summary(r.probe or {})}
        for r in rows
    ]  # fmt: skip


@router.get("/campaigns", response_class=HTMLResponse, include_in_schema=False)
def campaigns_page(
    session: Annotated[Any, Depends(get_session)], _who: Annotated[Principal, Depends(require("read"))]
) -> HTMLResponse:
    return _campaigns(session)


def _campaigns(session: Any, error: str | None = None, spec: str = "", status: int = 200) -> HTMLResponse:
    import sqlalchemy as sa

    from accelbench.service.campaign_models import Campaign
    from accelbench.service.campaigns import campaign_json

    queue.reap_expired(session)
    rows = session.execute(sa.select(Campaign).order_by(Campaign.id.desc()).limit(200)).scalars()
    return _render("campaigns.html", status, campaigns=[campaign_json(session, c) for c in rows], error=error,
                   spec=spec, lease_s=jobs.DEFAULT_LEASE_S, max_attempts=jobs.DEFAULT_MAX_ATTEMPTS)  # fmt: skip


@router.post("/campaigns", include_in_schema=False)
async def submit_form(request: Request, who: Annotated[Principal, Depends(require("admin"))]) -> Response:
    """The web form: a spec's TOML text, a lease and attempts; a bad spec re-renders the form with its line."""
    from fastapi.concurrency import run_in_threadpool

    from accelbench.service.campaigns import parse_campaign_spec

    form = await request.form()
    text = str(form.get("spec") or "")

    def write() -> Response:
        with request.app.state.sessions() as session:
            try:
                lease_s, attempts = float(form.get("lease_s") or 0), int(form.get("max_attempts") or 0)
                if not (0 < lease_s <= 86400 and 1 <= attempts <= 100):
                    raise ApiError(422, "lease (s) must be in (0, 86400] and attempts in 1..100")
                spec = parse_campaign_spec(text, request.app.state.catalog)
            except (ApiError, ValueError) as err:
                return _campaigns(session, getattr(err, "message", str(err)), text, status=422)
            campaign = queue.create_campaign(session, spec, text, created_by=who.name, lease_s=lease_s,
                                             max_attempts=attempts, labels={},
                                             time_limit_s=request.app.state.settings.job_time_limit_s)  # fmt: skip
            return RedirectResponse(f"/campaigns/{campaign.id}", status_code=303)

    return await run_in_threadpool(write)


@router.get("/campaigns/{campaign_id}", response_class=HTMLResponse, include_in_schema=False)
def campaign_page(
    campaign_id: Annotated[int, PathParam(ge=1, le=2**31 - 1)],
    session: Annotated[Any, Depends(get_session)],
    _who: Annotated[Principal, Depends(require("read"))],
    fmt: Annotated[Literal["html", "csv"], Query(alias="format", description="csv: the jobs table")] = "html",
    live: Annotated[bool, Query(description="reload the page every 5 s while the campaign runs")] = False,
) -> Response:
    from accelbench.service.campaigns import _campaign, campaign_json

    queue.reap_expired(session)
    data = campaign_json(session, _campaign(session, campaign_id))
    if fmt == "csv":
        return _jobs_csv(campaign_id, data["jobs"])
    for job in data["jobs"]:
        job["log_lines"] = job["log_tail"].splitlines()[-15:]
    return _render("campaign.html", campaign=data, finished=data["status"] not in (jobs.QUEUED, jobs.RUNNING),
                   live=live)  # fmt: skip


def _jobs_csv(campaign_id: int, jobs_: list[dict[str, Any]]) -> Response:
    from accelbench.reports.formatting import csv_text

    keys = ["id", "target", "status", "runner", "attempts", "max_attempts", "heartbeat_at", "reason"]
    return Response(csv_text(keys, [[j.get(k) for k in keys] for j in jobs_]), media_type="text/csv; charset=utf-8",
                    headers={"Content-Disposition": f'attachment; filename="campaign-{campaign_id}-jobs.csv"'})  # fmt: skip


def campaign_report(session: Any, catalog: Any, campaign_id: int, formats: tuple[str, ...] = ()) -> Any:
    """The report over the campaign's stored results with its spec's SLO, prices, baseline and projections
    (``render_report``, what ``accelbench report`` calls): ``.json_text``, ``.outputs["report.html"]``."""
    from accelbench.errors import BadInputError
    from accelbench.experiment.pipeline import _report_options
    from accelbench.experiment.spec import parse_spec
    from accelbench.reports.report import render_report
    from accelbench.service.campaigns import _campaign
    from accelbench.service.views import documents

    campaign = _campaign(session, campaign_id)
    rows = queue.campaign_result_rows(session, campaign_id)
    if not rows:
        raise ApiError(404, f"campaign {campaign_id} has no results yet")
    try:
        options = _report_options(parse_spec(campaign.spec, f"campaign {campaign_id}"))
        return render_report(documents(rows), catalog, options, formats=formats)
    except BadInputError as err:
        raise ApiError(422, str(err)) from None


@router.get("/campaigns/{campaign_id}/report", response_class=HTMLResponse, include_in_schema=False)
def campaign_report_page(
    campaign_id: Annotated[int, PathParam(ge=1, le=2**31 - 1)],
    request: Request,
    session: Annotated[Any, Depends(get_session)],
    _who: Annotated[Principal, Depends(require("read"))],
) -> Response:
    rendered = campaign_report(session, request.app.state.catalog, campaign_id, formats=("html",))
    return Response(rendered.outputs["report.html"], media_type="text/html; charset=utf-8")


@router.get("/runners", response_class=HTMLResponse, include_in_schema=False)
def runners_page(
    session: Annotated[Any, Depends(get_session)], _who: Annotated[Principal, Depends(require("read"))]
) -> HTMLResponse:
    return _render("runners.html", runners=runner_rows(session), offline_after_s=OFFLINE_AFTER_S)
