"""The campaign and queue API under /api/v1: submit campaigns, register runners, claim and work jobs.

What an agent does, in order (every call with a ``runner`` token)::

    POST /api/v1/runners                      register (name, target, labels, host probe) → runner id and
                                              its runner secret (once; the agent keeps it)
    POST /api/v1/jobs/claim                   long-poll for a job of its target → job, spec, partial documents
    POST /api/v1/jobs/{id}/heartbeat          every lease/3 seconds: extends the lease, carries the log tail
    PUT  /api/v1/jobs/{id}/documents          the partial result document after each step (resume point)
    POST /api/v1/jobs/{id}/results            each finished sweep (stored once, by content hash)
    POST /api/v1/jobs/{id}/done | fail | release

A claim carries the runner secret and returns a lease secret; every job call carries both (``runner_secret``,
``lease_secret``). A call without them, or from a runner that never held the job, is 403: a runner token
cannot act for another runner. A call about a job the runner held but no longer holds (its lease expired and
the job went to another agent) is 409, and the agent drops the job.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Path, Request
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import Response
from pydantic import AfterValidator, BaseModel, Field, ValidationError
from sqlalchemy.orm import Session

from accelbench import answers
from accelbench.service import api, ingest, jobs, queue
from accelbench.service import campaign_reads as reads
from accelbench.service.auth import Principal, require
from accelbench.service.campaign_models import Job, Runner
from accelbench.service.deps import DbSession
from accelbench.service.errors import ApiError, validation_message
from accelbench.service.queries import iso
from accelbench.service.runner_probe import check_probe
from accelbench.service.state import service

# every route's refusals, each one line {"error": ...} (answers.Error), instead of FastAPI's own 422 shape
ERRORS: dict[int | str, dict[str, Any]] = {
    code: {"description": why, "model": answers.Error}
    for code, why in (
        (401, "no or invalid token"),
        (403, "token lacks the scope, or not this runner's job"),
        (404, "no such campaign, job or runner"),
        (409, "the job is no longer this runner's, or its state does not allow it"),
        (413, "body over the size limit"),
        (422, "invalid body or parameter, naming the field"),
    )
}
router = APIRouter(prefix="/api/v1", responses=ERRORS)
MAX_WAIT_S = 60.0  # a long poll answers within this; GitHub's runners hold ~50 s
POLL_S = 0.5
MAX_ID = 2**31 - 1  # ids are 32-bit integer columns: a larger one is a 422, not a database error


def _no_nul(value: str) -> str:
    # PostgreSQL text cannot hold NUL; refuse it in what is stored as text
    if "\x00" in value:
        raise ValueError("must not contain NUL characters")
    return value


Text = Annotated[str, AfterValidator(_no_nul)]
LabelKey = Annotated[Text, Field(min_length=1, max_length=100, pattern=r"^[^=]+$")]  # stored as "key=value"
Labels = dict[LabelKey, Annotated[Text, Field(max_length=200)]]
Id = Annotated[int, Field(ge=1, le=MAX_ID)]
PathId = Annotated[int, Path(ge=1, le=MAX_ID)]


class CampaignIn(BaseModel):
    spec: Text = Field(max_length=200_000, description="The experiment spec, TOML text (accelbench init)")
    lease_s: float = Field(jobs.DEFAULT_LEASE_S, gt=0, le=86400, description="lease per heartbeat, seconds")
    max_attempts: int = Field(jobs.DEFAULT_MAX_ATTEMPTS, ge=1, le=100)
    time_limit_s: float | None = Field(
        None,
        gt=0,
        le=30 * 86400,
        description="per job from its claim [default: the server's --job-time-limit]",
    )
    labels: Labels = Field(
        default_factory=dict, max_length=50, description="labels every job asks its runner for"
    )


Secret = Annotated[str, Field(max_length=100)]


class RunnerIn(BaseModel):
    name: Text = Field(min_length=1, max_length=200)
    secret: Secret | None = Field(None, description="this runner's secret, when re-registering (a restart)")
    target: Text = Field(min_length=1, max_length=100)
    labels: Labels = Field(default_factory=dict, max_length=50)
    probe: dict[str, Any] = Field(default_factory=dict, description="accelbench.hardware.probe.probe_host()")
    version: Text = Field("", max_length=40)


class ClaimIn(BaseModel):
    runner_id: Id
    runner_secret: Secret = ""
    wait_s: float = Field(0.0, ge=0, le=MAX_WAIT_S)


class JobCall(BaseModel):
    runner_id: Id
    attempt: int = Field(ge=0, le=MAX_ID)
    runner_secret: Secret = ""
    lease_secret: Secret = ""
    log_tail: str = Field("", max_length=100_000)
    reason: str | None = Field(None, max_length=10_000)


@router.post("/campaigns", tags=["campaigns"], status_code=201)
def post_campaign(
    body: CampaignIn,
    request: Request,
    session: DbSession,
    who: Annotated[Principal, Depends(require("admin"))],
) -> answers.Campaign:
    """Queue one job per measured target of the spec; projected targets are computed by the report."""
    spec = reads.parse_campaign_spec(body.spec, service(request).catalog)
    limit_s = body.time_limit_s or service(request).settings.job_time_limit_s
    campaign = queue.create_campaign(
        session,
        spec,
        body.spec,
        created_by=who.name,
        lease_s=body.lease_s,
        max_attempts=body.max_attempts,
        labels=body.labels,
        time_limit_s=limit_s,
    )
    return reads.campaign_answer(session, campaign)


@router.get("/campaigns", tags=["campaigns"])
def list_campaigns(
    request: Request,
    session: DbSession,
    _who: Annotated[Principal, Depends(require("read"))],
) -> answers.CampaignList:
    queue.reap_expired(session, service(request).started_at)
    return answers.CampaignList(
        campaigns=[reads.campaign_answer(session, c) for c in reads.recent_campaigns(session)]
    )


@router.get("/campaigns/{campaign_id}", tags=["campaigns"])
def get_campaign(
    campaign_id: PathId,
    request: Request,
    session: DbSession,
    _who: Annotated[Principal, Depends(require("read"))],
) -> answers.Campaign:
    """Every job of the campaign (status, runner, attempts, last heartbeat, log tail) and its results."""
    queue.reap_expired(session, service(request).started_at)
    return reads.campaign_answer(session, reads.get_campaign(session, campaign_id))


@router.get("/campaigns/{campaign_id}/report", tags=["campaigns"], responses=api.REPORT_ROWS)
def get_campaign_report(
    campaign_id: PathId,
    request: Request,
    session: DbSession,
    _who: Annotated[Principal, Depends(require("read"))],
) -> Response:
    """The campaign's report with its spec's SLO, prices, baseline and projected targets (the same JSON as
    ``accelbench report --json`` over the campaign's results)."""
    rendered = reads.campaign_report(service(request).reports, session, campaign_id)
    return Response(rendered.json_text, media_type="application/json")


@router.post("/runners", tags=["runners"])
def post_runner(
    body: RunnerIn,
    request: Request,
    session: DbSession,
    who: Annotated[Principal, Depends(require("runner"))],
) -> answers.RunnerRegistered:
    """Register (or refresh) an agent: its id and, for a new runner (or one re-registered by the token that
    made it, without its secret), its runner secret, shown once. Another runner's name is 409."""
    from accelbench.errors import BadInputError

    try:
        service(request).catalog.get(body.target)
    except BadInputError as err:
        raise ApiError(422, f"field target: {err}") from None
    try:
        runner, secret = queue.register_runner(
            session,
            name=body.name,
            target=body.target,
            labels=body.labels,
            probe=check_probe(body.probe),
            version=body.version,
            token_name=who.name,
            token_id=who.token_id,
            secret=body.secret,
        )
    except (queue.JobLost, queue.NameTaken) as err:
        raise ApiError(409, str(err)) from None
    return answers.RunnerRegistered(id=runner.id, name=runner.name, secret=secret)


@router.get("/runners", tags=["runners"])
def list_runners(
    session: DbSession, _who: Annotated[Principal, Depends(require("read"))]
) -> answers.RunnerList:
    return answers.RunnerList(runners=reads.runner_rows(session))


@router.delete("/runners/{runner_id}", tags=["runners"])
def delete_runner(
    runner_id: PathId, session: DbSession, _who: Annotated[Principal, Depends(require("admin"))]
) -> answers.RunnerRemoved:
    """Remove a runner (a host gone for good, or one registered with a bad probe); 409 while it runs a job.
    Its past jobs keep their history; they no longer point at it."""
    runner = session.get(Runner, runner_id)
    if runner is None:
        raise ApiError(404, f"no runner {runner_id}")
    if queue.remove_runner(session, runner) is not None:
        raise ApiError(409, f"runner {runner_id} holds a running job; cancel it first")
    return answers.RunnerRemoved(id=runner_id, removed=True)


def _authenticated(session: Session, runner_id: int, secret: str) -> Runner:
    """The runner, when ``secret`` is its runner secret; 403 otherwise (an unknown id answers the same)."""
    try:
        return queue.authenticate_runner(session, runner_id, secret)
    except queue.NotYours as err:
        raise ApiError(403, str(err)) from None


@router.post(
    "/jobs/claim",
    tags=["jobs"],
    response_model=answers.ClaimedJob,
    responses={204: {"description": "no job within wait_s"}},
)
async def claim_job(
    body: ClaimIn, request: Request, _who: Annotated[Principal, Depends(require("runner"))]
) -> Response | answers.ClaimedJob:
    """Long-poll: the oldest queued job for the runner's target and labels, or 204 after ``wait_s``."""
    parts = service(request)

    def attempt() -> answers.ClaimedJob | None:
        with parts.sessions() as session:
            runner = _authenticated(session, body.runner_id, body.runner_secret)
            queue.touch_runner(session, runner.id)
            queue.reap_expired(session, parts.started_at)
            claimed = queue.claim(parts.engine, runner.id, runner.target, dict(runner.labels or {}))
            if claimed is None:
                return None
            return _claimed(session, claimed[0], claimed[1])

    deadline = time.monotonic() + body.wait_s
    while True:
        found = await run_in_threadpool(attempt)
        if found is not None:
            return found
        if time.monotonic() >= deadline or await request.is_disconnected():
            return Response(status_code=204)
        await asyncio.sleep(POLL_S)


def _claimed(session: Session, job_id: int, lease_secret: str) -> answers.ClaimedJob:
    job = session.get(Job, job_id)
    if job is None:  # claimed a moment ago; jobs are never deleted
        raise ApiError(404, f"no job {job_id}")
    campaign = reads.get_campaign(session, job.campaign_id)
    return answers.ClaimedJob.model_validate(
        {
            **reads.job_fields(job, None),
            "campaign_id": campaign.id,
            "campaign": campaign.name,
            "spec": campaign.spec,
            "attempt": job.attempts,
            "documents": queue.documents(session, job.id),
            "lease_secret": lease_secret,
        }
    )


def _owned(session: Session, job_id: int, call: JobCall) -> Job:
    runner = _authenticated(session, call.runner_id, call.runner_secret)
    try:
        return queue.owned_job(session, job_id, runner, call.attempt, call.lease_secret)
    except LookupError as err:
        raise ApiError(404, str(err)) from None
    except queue.JobLost as err:
        raise ApiError(409, str(err)) from None
    except queue.NotYours as err:
        raise ApiError(403, str(err)) from None


@router.post("/jobs/{job_id}/heartbeat", tags=["jobs"])
def job_heartbeat(
    job_id: PathId,
    call: JobCall,
    request: Request,
    session: DbSession,
    _who: Annotated[Principal, Depends(require("runner"))],
) -> answers.Heartbeat:
    """Extend the lease; 409 (stop) when the lease expired, the time limit passed or an admin cancelled it."""
    queue.reap_expired(session, service(request).started_at)
    runner = _authenticated(session, call.runner_id, call.runner_secret)
    queue.acknowledge_late(session, job_id, runner, call.attempt, call.lease_secret)
    job = _owned(session, job_id, call)
    until = queue.heartbeat(session, job, call.log_tail)
    return answers.Heartbeat(lease_until=iso(until), time_limit_s=job.time_limit_s)


@router.get("/jobs/{job_id}/documents", tags=["jobs"])
def get_job_documents(
    job_id: PathId,
    session: DbSession,
    _who: Annotated[Principal, Depends(require("read"))],
) -> answers.JobDocuments:
    """The partial result documents pushed for a job so far (what a requeued attempt resumes from)."""
    return answers.JobDocuments(documents=queue.documents(session, job_id))


def _job_body(**documents: Any) -> dict[str, Any]:
    """OpenAPI for a runner's JSON body: its JobCall fields (runner_id, attempt) and the documents it carries
    (described by the components the app adds: accelbench.service.api.document_components)."""
    call = JobCall.model_json_schema()["properties"]
    ids = ("runner_id", "attempt", "runner_secret", "lease_secret")
    schema = {
        "type": "object",
        "required": [*ids[:2], *[k for k in documents if k in ("document", "result")]],
        "properties": {**{k: call[k] for k in ids}, **documents},
    }
    return {"requestBody": {"required": True, "content": {"application/json": {"schema": schema}}}}


@router.put("/jobs/{job_id}/documents", tags=["jobs"], openapi_extra=_job_body(document=api.RESULT_REF))
async def put_job_document(
    job_id: PathId, request: Request, _who: Annotated[Principal, Depends(require("runner"))]
) -> answers.DocumentKept:
    """``{runner_id, attempt, document}``: the partial result document as it stands after a step."""
    body = await _json_body(request)
    call, doc = _call_and_document(body)

    def write() -> answers.DocumentKept:
        with service(request).sessions() as session:
            job = _owned(session, job_id, call)
            # compact: the indented dump runs json's pure-Python encoder, and the text is only read back parsed
            text = json.dumps(doc, ensure_ascii=False, separators=(",", ":"))
            try:
                queue.put_document(session, job, doc, text)
            except queue.TooMuch as err:
                raise ApiError(413, str(err)) from None
            return answers.DocumentKept(run_id=doc["run_id"], steps=len(doc.get("steps") or []))

    return await run_in_threadpool(write)


async def _json_body(request: Request) -> dict[str, Any]:
    """The body as a JSON object, parsed once (off the event loop: a document can be MBs)."""
    raw = await ingest.read_body(request, service(request).settings.max_body_bytes)

    def parse() -> dict[str, Any]:
        body = ingest.parse_json(raw)
        if not isinstance(body, dict):
            raise ApiError(422, "body must be a JSON object")
        ingest.refuse_nul(raw.decode("utf-8", "replace"))
        return body

    return await run_in_threadpool(parse)


def _call(body: dict[str, Any]) -> JobCall:
    try:
        return JobCall.model_validate(
            {k: body.pop(k) for k in ("runner_id", "attempt", "runner_secret", "lease_secret") if k in body}
        )
    except ValidationError as err:
        raise ApiError(422, validation_message(err)) from None


def _call_and_document(body: dict[str, Any]) -> tuple[JobCall, dict[str, Any]]:
    from accelbench.service.validate import check_result

    call = _call(body)
    doc = body.get("document")
    check_result(doc, "document")  # 422 naming the field; the document is kept as the agent sent it
    assert isinstance(doc, dict)  # check_result refuses anything else
    return call, doc


@router.post(
    "/jobs/{job_id}/results",
    tags=["jobs"],
    status_code=201,
    responses={200: {"description": "already stored (same content hash)", "model": answers.Stored}},
    openapi_extra=_job_body(**api.SUBMISSION_PROPERTIES),
)
async def post_job_result(
    job_id: PathId,
    request: Request,
    response: Response,
    _who: Annotated[Principal, Depends(require("runner"))],
) -> answers.Stored:
    """``{runner_id, attempt, result, variant?, source?}``: a finished sweep, stored once and linked to the job.
    A result of a run the job stored already (same run id, any attempt) is that result: 200 with its id."""
    body = await _json_body(request)
    call = _call(body)  # what remains is the submission: parsed once, validated once
    sub = await run_in_threadpool(ingest.submission_of, body)

    def write() -> ingest.Stored:
        with service(request).sessions() as session:
            job = _owned(session, job_id, call)
            same = queue.result_of_run(session, job.id, sub.result.run_id)
            if same is not None:  # this job's run, stored already: the same result, not a second one
                return ingest.Stored(id=same.id, content_hash=same.content_hash, created=False)
            stored = ingest.store(session, sub)
            queue.link_result(session, job, stored.id)
            return stored

    return api.stored_answer(request, response, sub, await run_in_threadpool(write))


def _finish(event: str) -> Callable[..., answers.JobStatus]:
    def endpoint(
        job_id: PathId,
        call: JobCall,
        session: DbSession,
        _who: Annotated[Principal, Depends(require("runner"))],
    ) -> answers.JobStatus:
        _authenticated(session, call.runner_id, call.runner_secret)
        done = session.get(Job, job_id)
        if (
            done is not None
            and (done.status, done.runner_id, done.attempts)
            == ({"done": jobs.DONE, "fail": jobs.FAILED}.get(event), call.runner_id, call.attempt)
            and queue.same_hash(done.lease_hash, call.lease_secret)
        ):  # the same call again (its answer was lost on the way): the same answer, not a 409
            return answers.JobStatus(id=done.id, status=done.status)
        job = _owned(session, job_id, call)
        if event == "fail" and not (call.reason or "").strip():
            raise ApiError(422, "field reason: a failed job needs its one-line reason")
        queue.finish(session, job, event, call.reason)
        return answers.JobStatus(id=job.id, status=job.status)

    endpoint.__doc__ = {
        "done": "The job finished: every sweep pushed.",
        "fail": "The job failed; ``reason`` is the one line shown on the campaign page.",
        "release": "Give the job back to the queue (the agent was stopped).",
    }[event]
    return endpoint


def _admin(event: str) -> Callable[..., answers.Job]:
    def endpoint(
        job_id: PathId,
        session: DbSession,
        who: Annotated[Principal, Depends(require("admin"))],
    ) -> answers.Job:
        job = session.get(Job, job_id)
        if job is None:
            raise ApiError(404, f"no job {job_id}")
        try:
            queue.admin_change(session, job, event, who.name)
        except jobs.TransitionError as err:
            raise ApiError(409, f"job {job_id}: {err}") from None
        return reads.job_answer(job, None)

    endpoint.__doc__ = {
        "cancel": "Cancel a queued or running job; a running one's agent is told to stop (409 on "
        "its next call).",
        "requeue": "Put a running, failed, expired or cancelled job back in the queue with a fresh "
        "set of attempts.",
    }[event]
    return endpoint


for _event in ("cancel", "requeue"):
    router.add_api_route(
        f"/jobs/{{job_id}}/{_event}", _admin(_event), methods=["POST"], tags=["jobs"], name=f"job_{_event}"
    )

for _event in ("done", "fail", "release"):
    router.add_api_route(
        f"/jobs/{{job_id}}/{_event}", _finish(_event), methods=["POST"], tags=["jobs"], name=f"job_{_event}"
    )
