"""The job queue in the database: submit a campaign, claim atomically, heartbeat, finish, expire leases.

Claiming is the one place two agents race. On PostgreSQL the candidate rows are read ``FOR UPDATE SKIP LOCKED``
(a second claimer skips a row the first one holds instead of waiting for it); on SQLite the claim runs in a
``BEGIN IMMEDIATE`` transaction, which takes the database's single write lock before reading, so claims run
one after another. On both, the update is conditional on the row still being queued, so even a claim that
somehow read a stale row cannot take a job twice. Expired leases are reaped lazily, before every claim and
every read of a campaign, so no background thread is needed and a restarted server just carries on.

A claim's answer can be lost on its way (a link that drops during the long poll) after the claim committed.
Two things keep such a job from sitting ``running`` for a runner that never heard of it: a runner that claims
again gets back the job it holds (with a fresh lease secret), and a claim stays an *offer* (``offered_at``)
until the runner's first heartbeat; one unanswered for a heartbeat interval is withdrawn (back to the queue,
the attempt not counted).
"""

from __future__ import annotations

import json
from datetime import datetime
from typing import TYPE_CHECKING, Any, cast

import sqlalchemy as sa

from accelbench.service import jobs
from accelbench.service.campaign_models import Campaign, Job, JobDocument, JobLabel, JobResult, Runner
from accelbench.service.models import Result, aware, utcnow

if TYPE_CHECKING:
    from sqlalchemy import Engine
    from sqlalchemy.orm import Session

    from accelbench.experiment.spec import ExperimentSpec


class JobLost(Exception):
    """The job is not this runner's any more (its lease expired and it was requeued, or it finished)."""


def label_rows(labels: dict[str, str]) -> list[str]:
    """A label set as the "key=value" strings ``job_labels`` holds and a claim matches."""
    return [f"{k}={v}" for k, v in sorted(labels.items())]


def create_campaign(
    session: Session,
    spec: ExperimentSpec,
    spec_text: str,
    *,
    created_by: str,
    lease_s: float,
    max_attempts: int,
    labels: dict[str, str],
    time_limit_s: float | None = jobs.DEFAULT_TIME_LIMIT_S,
) -> Campaign:
    """One campaign, one queued job per measured target of ``spec`` (a validated ExperimentSpec). Commits."""
    campaign = Campaign(
        name=spec.name,
        spec=spec_text,
        projected=[t.id for t in spec.projected_targets],
        created_by=created_by,
        created_at=utcnow(),
    )
    session.add(campaign)
    session.flush()
    for target in spec.measured_targets:
        job = Job(
            campaign_id=campaign.id,
            target=target.id,
            labels=dict(labels),
            status=jobs.QUEUED,
            attempts=0,
            max_attempts=max_attempts,
            lease_s=lease_s,
            log_tail="",
            history=[],
            time_limit_s=time_limit_s,
        )
        session.add(job)
        session.flush()
        session.add_all(JobLabel(job_id=job.id, label=label) for label in label_rows(labels))
    session.commit()
    return campaign


class NameTaken(Exception):
    """The runner name belongs to another runner (registered with another token, and no secret of it given)."""


class NotYours(Exception):
    """The call does not prove it comes from the runner holding the job (wrong runner or lease secret): 403."""


RUNNER_SECRET_PREFIX, LEASE_SECRET_PREFIX = "abr_", "abl_"


def new_secret(prefix: str) -> tuple[str, str]:
    """(secret, its sha256): the secret is returned once, only the hash is stored."""
    import secrets

    from accelbench.service.auth import hash_token

    secret = prefix + secrets.token_urlsafe(32)
    return secret, hash_token(secret)


def same_hash(stored: str | None, secret: str | None) -> bool:
    import hmac

    from accelbench.service.auth import hash_token

    return bool(stored) and bool(secret) and hmac.compare_digest(stored or "", hash_token(secret or ""))


def register_runner(
    session: Session,
    *,
    name: str,
    target: str,
    labels: dict[str, str],
    probe: dict[str, Any],
    version: str,
    token_name: str,
    token_id: int | None,
    secret: str | None = None,
) -> tuple[Runner, str | None]:
    """Create or refresh the runner called ``name``; returns (runner, new secret or None). Commits.

    A new name gets a runner secret (returned once, stored hashed). An existing name is refreshed when the
    call carries that runner's secret (an agent restarting), or gets a new secret (the old one stops working)
    when it comes with the registration token that created the runner (the agent lost its secret); any other
    caller gets NameTaken: one runner cannot take over another's name, labels or jobs.
    """
    from sqlalchemy.exc import IntegrityError

    now = utcnow()
    for _ in range(2):  # two agents registering the same new name at once: the loser sees the winner's row
        runner = session.execute(sa.select(Runner).where(Runner.name == name)).scalar_one_or_none()
        issued: str | None = None
        if runner is None:
            runner = Runner(name=name, registered_at=now, token_id=token_id)
            session.add(runner)
            issued, runner.secret_hash = new_secret(RUNNER_SECRET_PREFIX)
        elif not same_hash(runner.secret_hash, secret):
            if runner.token_id is None or runner.token_id != token_id:
                raise NameTaken(f"runner name {name!r} belongs to another runner: choose another --name")
            issued, runner.secret_hash = new_secret(RUNNER_SECRET_PREFIX)
        runner.target, runner.labels, runner.probe = target, labels, probe
        runner.version, runner.token_name, runner.last_seen = version, token_name, now
        try:
            session.commit()
            return runner, issued
        except IntegrityError:
            session.rollback()
    raise JobLost(f"runner name {name!r} is being registered concurrently; try again")


def authenticate_runner(session: Session, runner_id: int, secret: str | None) -> Runner:
    """The runner if ``secret`` is its runner secret; NotYours otherwise (an unknown id says the same)."""
    runner = session.get(Runner, runner_id)
    if runner is not None and secret and not same_hash(runner.secret_hash, secret):
        # a secret this runner had: the usual cause is a second agent registered under the same name, whose
        # registration replaced it (the default name, HOST-TARGET, is the same for two agents on one host)
        raise NotYours(
            f"runner {runner_id}: its runner secret was replaced: another agent registered as "
            f"{runner.name!r} (two agents on one host for one target share the default name HOST-TARGET): "
            "give each agent its own --name"
        )
    if runner is None or not same_hash(runner.secret_hash, secret):
        raise NotYours(f"runner {runner_id}: wrong or missing runner secret (register again to get one)")
    return runner


def reap_expired(session: Session, started_at: datetime, now: datetime | None = None) -> int:
    """Requeue (or expire, after its last attempt) every running job whose lease ran out. Commits.

    A lease that ran out while the server itself was down is not the agent's fault: after a (re)start at
    ``started_at`` (``state.Service.started_at``) every lease gets one full period for the agent's next heartbeat
    to arrive before it can expire."""
    now = now or utcnow()
    rows = session.execute(
        sa.select(
            Job.id,
            Job.attempts,
            Job.max_attempts,
            Job.lease_until,
            Job.runner_id,
            Job.history,
            Job.lease_s,
            Job.claimed_at,
            Job.time_limit_s,
            Job.offered_at,
        ).where(
            Job.status == jobs.RUNNING,
            sa.or_(Job.lease_until <= now, Job.time_limit_s.is_not(None), Job.offered_at.is_not(None)),
        )
    ).all()
    changed = 0
    for (
        job_id,
        attempts,
        max_attempts,
        until,
        runner_id,
        history,
        lease_s,
        claimed_at,
        limit_s,
        offered,
    ) in rows:
        if jobs.offer_unanswered(offered, lease_s, now) and jobs.offer_unanswered(started_at, lease_s, now):
            changed += _withdraw_offer(session, job_id, attempts, runner_id, history, offered, now)
            continue
        over = jobs.past_time_limit(claimed_at, limit_s, now)
        if not over and not jobs.lease_expired(until, now):
            continue
        if not over and now < jobs.lease_until(started_at, lease_s):
            continue  # the server was down while this lease ran out: give the agent one period to check in
        after = jobs.after_expiry(attempts, max_attempts)
        what = f"time limit of {limit_s:g} s passed" if over else "lease expired"
        reason = None if after == jobs.QUEUED else f"{what} on the last of {attempts} attempts"
        if not over and after != jobs.QUEUED:
            reason = f"lease expired on each of {attempts} attempts"
        entry = {
            "attempt": attempts,
            "runner": runner_names(session, {runner_id}).get(runner_id),
            "outcome": what,
            "reason": None,
            "at": now.isoformat(),
        }
        update = (
            sa.update(Job)
            .where(Job.id == job_id, Job.status == jobs.RUNNING, Job.lease_until == until)
            .values(
                status=after,
                runner_id=None,
                lease_until=None,
                lease_hash=None,
                reason=reason,
                history=[*history, entry],
                finished_at=now if after == jobs.EXPIRED else None,
            )
        )
        done = cast("sa.CursorResult[Any]", session.execute(update))  # an UPDATE's result: its rowcount
        changed += done.rowcount or 0
    session.commit()
    return changed


def _withdraw_offer(
    session: Session,
    job_id: int,
    attempts: int,
    runner_id: int | None,
    history: list[dict[str, Any]],
    offered: datetime,
    now: datetime,
) -> int:
    """Back to the queue, the attempt not counted: the runner never acknowledged the claim (its answer was
    lost on the way). Its history entry makes a late call of that runner a 409 (drop it), not a 403."""
    entry = {
        "attempt": attempts,
        "runner": runner_names(session, {runner_id} if runner_id else set()).get(runner_id or 0),
        "outcome": "claim not acknowledged",
        "reason": None,
        "at": now.isoformat(),
    }
    update = (
        sa.update(Job)
        .where(Job.id == job_id, Job.status == jobs.RUNNING, Job.offered_at == offered)
        .values(
            status=jobs.QUEUED,
            runner_id=None,
            attempts=max(0, attempts - 1),
            lease_until=None,  # lease_hash stays: the offer's own late acknowledgement may still take it
            offered_at=None,
            history=[*history, entry],
        )
    )
    return cast("sa.CursorResult[Any]", session.execute(update)).rowcount or 0


def acknowledge_late(session: Session, job_id: int, runner: Runner, attempt: int, lease_secret: str) -> bool:
    """The first heartbeat of an offer withdrawn before it arrived (a link slower than a heartbeat interval
    each way) takes the job after all, when it is still queued and no other claim has been made since (the
    lease secret is still that offer's). True when it did. Commits."""
    job = session.get(Job, job_id)
    if job is None or job.status != jobs.QUEUED or job.attempts + 1 != attempt or not job.history:
        return False
    last = job.history[-1]
    if last.get("outcome") != "claim not acknowledged" or last.get("runner") != runner.name:
        return False
    if not same_hash(job.lease_hash, lease_secret):
        return False
    now = utcnow()
    done = session.execute(
        sa.update(Job)
        .where(Job.id == job_id, Job.status == jobs.QUEUED, Job.lease_hash == job.lease_hash)
        .values(
            status=jobs.RUNNING,
            runner_id=runner.id,
            attempts=attempt,
            claimed_at=now,
            heartbeat_at=now,
            lease_until=jobs.lease_until(now, job.lease_s),
            offered_at=None,
            history=[*job.history[:-1], {**last, "outcome": "claim acknowledged late"}],
        )
    )
    session.commit()
    session.expire_all()
    return cast("sa.CursorResult[Any]", done).rowcount == 1


def _offer_again(conn: sa.Connection, runner_id: int, now: datetime, lease_hash: str) -> int | None:
    """The running job ``runner_id`` holds, handed to it again under a new lease secret; None if it holds
    none. An agent claims only when it runs no job, so a job it holds is one whose claim answer it lost
    (or one it gave up on while the server was unreachable): the retried claim gets it back."""
    held = conn.execute(
        sa.select(Job.id, Job.lease_s)
        .where(Job.status == jobs.RUNNING, Job.runner_id == runner_id)
        .order_by(Job.id)
        .limit(1)
    ).first()
    if held is None:
        return None
    done = conn.execute(
        sa.update(Job)
        .where(Job.id == held.id, Job.status == jobs.RUNNING, Job.runner_id == runner_id)
        .values(
            lease_hash=lease_hash,
            offered_at=now,
            heartbeat_at=now,
            lease_until=jobs.lease_until(now, held.lease_s),
        )
    )
    return held.id if done.rowcount == 1 else None


def claim(
    engine: Engine, runner_id: int, target: str, labels: dict[str, str], now: datetime | None = None
) -> tuple[int, str] | None:
    """Atomically take the job this runner holds already (a retried claim: ``_offer_again``), else the oldest
    queued job for ``target`` whose labels the runner offers: (its id, the new lease's secret), or None. The
    claim is an offer until the runner's first heartbeat (``reap_expired`` withdraws one left unanswered)."""
    now = now or utcnow()
    lease_secret, lease_hash = new_secret(LEASE_SECRET_PREFIX)
    sqlite = engine.dialect.name == "sqlite"
    with engine.connect() as conn:
        if sqlite:
            conn.exec_driver_sql("BEGIN IMMEDIATE")  # the write lock first: no other claim reads meanwhile
        again = _offer_again(conn, runner_id, now, lease_hash)
        if again is not None:
            conn.commit()
            return again, lease_secret
        unmet = sa.select(JobLabel.id).where(JobLabel.job_id == Job.id)  # a label the runner does not offer
        if labels:
            unmet = unmet.where(JobLabel.label.not_in(label_rows(labels)))
        query = (
            sa.select(Job.id, Job.lease_s)
            .where(Job.status == jobs.QUEUED, Job.target == target, ~sa.exists(unmet))
            .order_by(Job.id)
            .limit(1)
        )
        if not sqlite:  # the oldest row no other claim holds; a locked one is skipped, not waited for
            query = query.with_for_update(skip_locked=True, of=Job)
        picked = conn.execute(query).first()
        if picked is None:
            conn.rollback()
            return None
        done = conn.execute(
            sa.update(Job)
            .where(Job.id == picked.id, Job.status == jobs.QUEUED)
            .values(
                status=jobs.RUNNING,
                runner_id=runner_id,
                attempts=Job.attempts + 1,
                claimed_at=now,
                heartbeat_at=now,
                lease_until=jobs.lease_until(now, picked.lease_s),
                reason=None,
                lease_hash=lease_hash,
                offered_at=now,
            )
        )
        if done.rowcount != 1:
            conn.rollback()
            return None
        conn.commit()
        return picked.id, lease_secret


def owned_job(session: Session, job_id: int, runner: Runner, attempt: int, lease_secret: str | None) -> Job:
    """The job if ``runner`` (already authenticated) holds it on this attempt with this lease secret.

    LookupError: no such job. JobLost (409): the runner did hold this attempt but the job moved on (its lease
    expired, it finished, it was cancelled): the agent drops it. NotYours (403): the runner never held this
    attempt, or the lease secret is wrong."""
    job = session.get(Job, job_id)
    if job is None:
        raise LookupError(f"no job {job_id}")
    if job.status == jobs.RUNNING and job.runner_id == runner.id and job.attempts == attempt:
        if not same_hash(job.lease_hash, lease_secret):
            raise NotYours(f"job {job_id}: wrong or missing lease secret")
        return job
    if held_before(job, runner, attempt):
        raise JobLost(f"job {job_id} is {job.status} and no longer held by this runner (attempt {attempt})")
    raise NotYours(f"job {job_id} (attempt {attempt}) is not held by runner {runner.name!r}")


def held_before(job: Job, runner: Runner, attempt: int) -> bool:
    """Whether ``runner`` held ``attempt`` of the job (its history, or it holds it still)."""
    if job.runner_id == runner.id and job.attempts == attempt:
        return True
    return any(e.get("attempt") == attempt and e.get("runner") == runner.name for e in job.history or [])


def heartbeat(session: Session, job: Job, log_tail: str) -> datetime:
    """Extend the lease from now; returns the new lease end. Commits."""
    now = utcnow()
    job.heartbeat_at, job.offered_at = now, None  # the first beat acknowledges the claim
    job.lease_until = until = jobs.lease_until(now, job.lease_s)
    job.log_tail = log_tail[-8000:].replace("\x00", "")  # PostgreSQL text holds no NUL
    _touch_runner(session, job.runner_id, now)
    session.commit()
    return until


def _touch_runner(session: Session, runner_id: int | None, now: datetime) -> None:
    if runner_id is not None:
        session.execute(sa.update(Runner).where(Runner.id == runner_id).values(last_seen=now))


def touch_runner(session: Session, runner_id: int) -> None:
    """A polling agent is alive: the runners page shows when it was last heard from. Commits."""
    _touch_runner(session, runner_id, utcnow())
    session.commit()


def remove_runner(session: Session, runner: Runner) -> int | None:
    """Delete ``runner``, its finished jobs unlinked from it; the id of a running job it holds instead (then
    nothing changes). Commits."""
    running = session.execute(
        sa.select(Job.id).where(Job.runner_id == runner.id, Job.status == jobs.RUNNING)
    ).scalar()
    if running is not None:
        return running
    session.execute(sa.update(Job).where(Job.runner_id == runner.id).values(runner_id=None))
    session.delete(runner)
    session.commit()
    return None


MAX_JOB_DOCUMENTS = 32  # one per (model, precision, profile) sweep of a job: far more than a spec plans
MAX_JOB_DOCUMENT_BYTES = 32 * 1024 * 1024  # all of a job's partial documents: every later claim gets them


class TooMuch(Exception):
    """A job's partial documents would exceed MAX_JOB_DOCUMENTS or MAX_JOB_DOCUMENT_BYTES."""


def put_document(session: Session, job: Job, doc: dict[str, Any], text: str) -> None:
    """Keep the latest partial copy of one result document of this job (replaced at each step). Commits.
    TooMuch when the job's partial documents would go beyond their bounds (issue 40: unbounded before)."""
    row = session.execute(
        sa.select(JobDocument).where(JobDocument.job_id == job.id, JobDocument.run_id == doc["run_id"])
    ).scalar_one_or_none()
    count, size = session.execute(
        sa.select(
            sa.func.count(JobDocument.id),
            sa.func.coalesce(sa.func.sum(sa.func.length(JobDocument.document)), 0),
        ).where(JobDocument.job_id == job.id, JobDocument.run_id != doc["run_id"])
    ).one()
    if count + 1 > MAX_JOB_DOCUMENTS or size + len(text) > MAX_JOB_DOCUMENT_BYTES:
        session.rollback()
        raise TooMuch(
            f"job {job.id} may hold {MAX_JOB_DOCUMENTS} partial documents of "
            f"{MAX_JOB_DOCUMENT_BYTES // (1024 * 1024)} Mi characters in all; it holds {count} of {size}"
        )
    if row is None:
        row = JobDocument(job_id=job.id, run_id=doc["run_id"])
        session.add(row)
    row.document, row.steps, row.updated_at = text, len(doc.get("steps") or []), utcnow()
    session.commit()


def documents(session: Session, job_id: int) -> list[dict[str, Any]]:
    """The partial documents pushed for a job: what a requeued attempt resumes from."""
    rows = session.execute(
        sa.select(JobDocument).where(JobDocument.job_id == job_id).order_by(JobDocument.run_id)
    )
    return [json.loads(r.document) for r in rows.scalars()]


def result_of_run(session: Session, job_id: int, run_id: str) -> Result | None:
    """The result the job already stored for ``run_id``, if any.

    A job measures each of its runs (variant, load profile, repeat: the run id) once. A second result of the
    same job and run is the same result delivered again: an attempt that resumed after its predecessor's
    answer was lost and only completed (or, on another host, measured again) a sweep already stored. It is
    answered as the stored one, never linked as a second run (docs/service.md, "Exactly once")."""
    query = (
        sa.select(Result)
        .join(JobResult, JobResult.result_id == Result.id)
        .where(JobResult.job_id == job_id, Result.run_id == run_id)
        .order_by(Result.id)
        .limit(1)
    )
    return session.execute(query).scalar_one_or_none()


def link_result(session: Session, job: Job, result_id: int) -> None:
    from sqlalchemy.exc import IntegrityError

    exists = session.execute(
        sa.select(JobResult.id).where(JobResult.job_id == job.id, JobResult.result_id == result_id)
    ).first()
    if exists is None:
        session.add(JobResult(job_id=job.id, result_id=result_id))
        try:
            session.commit()
        except IntegrityError:  # the same push retried concurrently
            session.rollback()


def finish(session: Session, job: Job, event: str, reason: str | None = None) -> None:
    """done, fail (with its one-line reason) or release (back to the queue, not counted). Commits."""
    now = utcnow()
    after = jobs.next_state(job.status, event)
    runner = session.get(Runner, job.runner_id) if job.runner_id else None
    job.history = [
        *job.history,
        {
            "attempt": job.attempts,
            "runner": runner.name if runner else None,
            "outcome": event,
            "reason": reason,
            "at": now.isoformat(),
        },
    ]
    job.status, job.reason = after, (" ".join(reason.replace("\x00", "").split())[:500] if reason else None)
    job.lease_until = None
    if event == "release":
        job.runner_id, job.attempts, job.lease_hash = None, max(0, job.attempts - 1), None
    else:
        job.finished_at = now
    _touch_runner(session, runner.id if runner else None, now)
    session.commit()


def admin_change(session: Session, job: Job, event: str, who: str) -> None:
    """``cancel`` or ``requeue`` by an admin (recorded in the history). Commits. TransitionError if the
    job's state does not allow it."""
    now = utcnow()
    after = jobs.next_state(job.status, event)
    runner = session.get(Runner, job.runner_id) if job.runner_id else None
    job.history = [
        *job.history,
        {
            "attempt": job.attempts,
            "runner": runner.name if runner else None,
            "outcome": f"{ {'cancel': 'cancelled', 'requeue': 'requeued'}[event] } by {who}",
            "reason": None,
            "at": now.isoformat(),
        },
    ]
    job.status, job.lease_until, job.lease_hash = after, None, None
    if event == "cancel":
        job.finished_at, job.reason = now, f"cancelled by {who}"
    else:
        job.runner_id, job.attempts, job.finished_at, job.reason = None, 0, None, None
    session.commit()


def campaign_jobs(session: Session, campaign_id: int) -> list[Job]:
    return list(
        session.execute(sa.select(Job).where(Job.campaign_id == campaign_id).order_by(Job.id)).scalars()
    )


def campaign_result_rows(session: Session, campaign_id: int) -> list[Result]:
    """The stored results of a campaign's jobs, each once."""
    ids = (
        sa.select(JobResult.result_id)
        .join(Job, Job.id == JobResult.job_id)
        .where(Job.campaign_id == campaign_id)
    )
    query = (
        sa.select(Result).where(Result.id.in_(ids), Result.hidden_at.is_(None)).order_by(Result.id)
    )  # no DISTINCT: PostgreSQL's json
    return list(session.execute(query).scalars())


def runner_names(session: Session, ids: set[int]) -> dict[int, str]:
    if not ids:
        return {}
    return {
        r.id: r.name for r in session.execute(sa.select(Runner.id, Runner.name).where(Runner.id.in_(ids)))
    }


def lease_left_s(job: Job, now: datetime | None = None) -> float | None:
    until = aware(job.lease_until)
    return None if until is None else (until - (now or utcnow())).total_seconds()
