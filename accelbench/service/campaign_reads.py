"""What both campaign routers read: campaigns and their jobs as JSON, runners as rows, a campaign's report,
and a spec checked against the catalog. Below ``campaigns`` (the API) and ``campaign_pages`` (the pages),
which import this and not each other."""

from __future__ import annotations

import sys
from datetime import timedelta
from typing import TYPE_CHECKING, Any

import sqlalchemy as sa
from pydantic import ValidationError

from accelbench import answers
from accelbench.service import jobs, queue
from accelbench.service.campaign_models import Campaign, Job, Runner
from accelbench.service.errors import ApiError
from accelbench.service.models import aware, utcnow
from accelbench.service.queries import iso
from accelbench.service.runner_probe import HostProbe
from accelbench.service.validate import check_numbers

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

if TYPE_CHECKING:
    from sqlalchemy.orm import Session

    from accelbench.experiment.spec import ExperimentSpec
    from accelbench.hardware.catalog import Catalog
    from accelbench.reports.report import RenderedReport
    from accelbench.service.report_cache import Reports

OFFLINE_AFTER_S = 120.0  # an agent polls every few seconds; two minutes of silence means it is gone


def parse_campaign_spec(text: str, catalog: Catalog) -> ExperimentSpec:
    """The spec, validated against the catalog, with at least one target to queue; ApiError 422 otherwise."""
    from accelbench.errors import BadInputError
    from accelbench.experiment.spec import check_against_catalog, parse_spec

    _check_spec_values(text)
    try:
        spec = parse_spec(text, "spec")
        check_against_catalog(spec, catalog)
    except BadInputError as err:
        raise ApiError(422, f"field {err}") from None
    if not spec.measured_targets:
        raise ApiError(422, "field spec: no measured target (mode 'local' or 'url') to queue a job for")
    return spec


def _check_spec_values(text: str) -> None:
    """A NUL character (a TOML escape ``\\u0000``: PostgreSQL text cannot hold it) or a number no measurement
    can be anywhere in the spec is a 422 naming the field; TOML errors are parse_spec's."""
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError:
        return
    check_numbers(data, "spec")
    stack: list[tuple[str, Any]] = [("", data)]
    while stack:
        where, item = stack.pop()
        if isinstance(item, dict):
            for key, value in item.items():
                path = f"{where}.{key}" if where else str(key)
                if "\x00" in key:
                    raise ApiError(422, f"field spec: key {path!r} holds a NUL character")
                stack.append((path, value))
        elif isinstance(item, list):
            stack.extend((f"{where}[{i}]", v) for i, v in enumerate(item))
        elif isinstance(item, str) and "\x00" in item:
            raise ApiError(422, f"field spec: '{where}' holds a NUL character")


def get_campaign(session: Session, campaign_id: int) -> Campaign:
    campaign = session.get(Campaign, campaign_id)
    if campaign is None:
        raise ApiError(404, f"no campaign {campaign_id}")
    return campaign


def recent_campaigns(session: Session, limit: int = 200) -> list[Campaign]:
    return list(session.execute(sa.select(Campaign).order_by(Campaign.id.desc()).limit(limit)).scalars())


def campaign_answer(session: Session, campaign: Campaign) -> answers.Campaign:
    job_rows = queue.campaign_jobs(session, campaign.id)
    names = queue.runner_names(session, {j.runner_id for j in job_rows if j.runner_id})
    summary = jobs.summarize([j.status for j in job_rows])
    return answers.Campaign(
        id=campaign.id,
        name=campaign.name,
        status=summary.status,
        counts=dict(summary.counts),
        projected=campaign.projected,
        created_by=campaign.created_by,
        created_at=iso(campaign.created_at),
        url=f"/campaigns/{campaign.id}",
        results=[r.content_hash for r in queue.campaign_result_rows(session, campaign.id)],
        jobs=[
            answers.Job.model_validate(job_fields(j, names.get(j.runner_id) if j.runner_id else None))
            for j in job_rows
        ],
    )


def job_answer(job: Job, runner: str | None) -> answers.Job:
    return answers.Job.model_validate(job_fields(job, runner))


def job_fields(job: Job, runner: str | None) -> dict[str, Any]:
    """A job's fields as the API shows them (``answers.Job``; a claim adds its own)."""
    return {
        "id": job.id,
        "target": job.target,
        "labels": job.labels,
        "status": job.status,
        "runner": runner,
        "attempts": job.attempts,
        "max_attempts": job.max_attempts,
        "lease_s": job.lease_s,
        "heartbeat_at": iso(job.heartbeat_at),
        "lease_until": iso(job.lease_until),
        "finished_at": iso(job.finished_at),
        "reason": job.reason,
        "log_tail": job.log_tail,
        "history": job.history,
        "time_limit_s": job.time_limit_s,
    }


def _probe_summary(probe: dict[str, Any]) -> dict[str, str]:
    """What the runners page shows of a host probe: catalog match, accelerator, driver, toolchain versions.
    A probe stored before it was typed (``runner_probe``) that does not fit is one line, not a 500."""
    try:
        HostProbe.model_validate(probe)
    except ValidationError:
        unread = "? (the stored probe is malformed)"
        return {"catalog_match": "?", "accelerator": unread, "driver": "—", "toolchains": "—"}
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
    toolchains = ", ".join(
        f"{k} {v}"
        for k, v in sorted(packages.items())
        if v and k in ("onnxruntime", "onnxruntime-gpu", "tensorrt", "torch-neuronx")
    )
    driver = nvidia.get("driver_version") or (jetson.get("l4t") if jetson.get("present") else None)
    return {
        "catalog_match": str((probe.get("catalog_match") or {}).get("id", "?")),
        "accelerator": accelerator,
        "driver": str(driver or "—"),
        "toolchains": toolchains or "—",
    }


def runner_rows(session: Session) -> list[answers.Runner]:
    now = utcnow()
    rows = session.execute(sa.select(Runner).order_by(Runner.name)).scalars()
    return [
        answers.Runner.model_validate(
            {
                "id": r.id,
                "name": r.name,
                "target": r.target,
                "labels": r.labels,
                "version": r.version,
                "last_seen": aware(r.last_seen).isoformat(),
                "token": r.token_name,
                "online": now - aware(r.last_seen) < timedelta(seconds=OFFLINE_AFTER_S),
                **_probe_summary(r.probe or {}),
            }
        )
        for r in rows
    ]


def campaign_report(
    reports: Reports, session: Session, campaign_id: int, formats: tuple[str, ...] = ()
) -> RenderedReport:
    """The report over the campaign's stored results with its spec's SLO, prices, baseline and projections
    (``render_report``, what ``accelbench report`` calls): ``.json_text``, ``.outputs["report.html"]``.
    ``reports`` (``report_cache.Reports``) parses each document once per app."""
    from accelbench.errors import BadInputError
    from accelbench.experiment.pipeline import report_options
    from accelbench.experiment.spec import parse_spec
    from accelbench.reports.report import render_report

    campaign = get_campaign(session, campaign_id)
    rows = queue.campaign_result_rows(session, campaign_id)
    if not rows:
        raise ApiError(404, f"campaign {campaign_id} has no results yet")
    try:
        options = report_options(parse_spec(campaign.spec, f"campaign {campaign_id}"))
        return render_report(
            reports.documents(session, rows),
            reports.catalog,
            options,
            formats=formats,
            leave_out_unknown_targets=True,
        )
    except BadInputError as err:
        raise ApiError(422, str(err)) from None
