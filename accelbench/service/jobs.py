"""The job state machine of a campaign, and lease arithmetic: pure, no database, no clock of its own.

    queued ──claim──▶ running ──done──▶ done
      ▲                 │  │
      │   release/      │  └──fail──▶ failed          (the agent said why: one line)
      └── lease expired ┘
          (attempts < max)   lease expired, attempts == max ──▶ expired

An admin may ``cancel`` a queued or running job (``cancelled``; a running one's agent is told to stop at its
next call) and ``requeue`` a running, failed, expired or cancelled one (attempts start again). A running job
past its time limit (from its claim; heartbeats do not extend it) is revoked like an expired lease.

A claim is an offer until the runner's first heartbeat acknowledges it: one not acknowledged within a heartbeat
interval (a third of the lease) went to a runner that never saw the answer, and the job goes back to the
queue without counting the attempt. A runner that claims while it holds a job gets that job again (a retried
claim whose first answer was lost), with a fresh lease secret.

A job is claimed by one runner at a time; its lease runs ``lease_s`` seconds from the last heartbeat. A lease
that runs out puts the job back in the queue until it has been tried ``max_attempts`` times; then it is
``expired``, like a job a runner gave up on. A released job (the agent was told to stop) goes back to the
queue without counting against its attempts.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta

from accelbench.answers import heartbeat_interval_s

QUEUED, RUNNING, DONE, FAILED, EXPIRED = "queued", "running", "done", "failed", "expired"
CANCELLED = "cancelled"
STATES = (QUEUED, RUNNING, DONE, FAILED, EXPIRED, CANCELLED)
FINAL = (DONE, FAILED, EXPIRED, CANCELLED)
DEFAULT_LEASE_S = 120.0
DEFAULT_TIME_LIMIT_S = 6 * 3600.0  # the server's default for a job from its claim (--job-time-limit)
DEFAULT_MAX_ATTEMPTS = 3

# event -> (states it may happen in, the state after it)
_TRANSITIONS = {
    "claim": ((QUEUED,), RUNNING),
    "heartbeat": ((RUNNING,), RUNNING),
    "done": ((RUNNING,), DONE),
    "fail": ((RUNNING,), FAILED),
    "release": ((RUNNING,), QUEUED),
    "cancel": ((QUEUED, RUNNING), CANCELLED),  # an admin: the agent is told to stop at its next call
    "requeue": ((RUNNING, FAILED, EXPIRED, CANCELLED), QUEUED),  # an admin: a fresh set of attempts
}


class TransitionError(ValueError):
    """An event that the job's state does not allow (a stale agent reporting on a job it lost)."""


def next_state(state: str, event: str) -> str:
    """The state after ``event``; TransitionError names both when the event is not allowed."""
    if event not in _TRANSITIONS:
        raise TransitionError(f"unknown job event {event!r}")
    allowed, after = _TRANSITIONS[event]
    if state not in allowed:
        raise TransitionError(f"a {state} job cannot take {event!r} (only a {'/'.join(allowed)} job can)")
    return after


def after_expiry(attempts: int, max_attempts: int) -> str:
    """Where a job goes when its lease ran out: back to the queue, or ``expired`` after its last attempt."""
    return QUEUED if attempts < max_attempts else EXPIRED


def past_time_limit(claimed_at: datetime | None, time_limit_s: float | None, now: datetime) -> bool:
    """A running job claimed longer ago than its time limit: revoked even while heartbeats arrive."""
    if claimed_at is None or time_limit_s is None:
        return False
    return _naive(claimed_at) + timedelta(seconds=time_limit_s) <= _naive(now)


def offer_unanswered(offered_at: datetime | None, lease_s: float, now: datetime) -> bool:
    """A claim not acknowledged (by the runner's first heartbeat) within one heartbeat interval: its answer
    never reached the runner, and the job goes back to the queue without counting the attempt."""
    if offered_at is None:
        return False
    return _naive(offered_at) + timedelta(seconds=heartbeat_interval_s(lease_s)) <= _naive(now)


def lease_until(now: datetime, lease_s: float) -> datetime:
    return now + timedelta(seconds=lease_s)


def lease_expired(until: datetime | None, now: datetime) -> bool:
    """A running job whose lease end is past; a job without a lease never expires by itself."""
    return until is not None and _naive(until) <= _naive(now)


def _naive(when: datetime) -> datetime:
    # SQLite hands datetimes back without a zone; the service stores UTC everywhere
    return when.replace(tzinfo=None)


def labels_match(wanted: Mapping[str, str], offered: Mapping[str, str]) -> bool:
    """A runner may take a job when it offers every label the job asks for (extra labels are fine)."""
    return all(offered.get(k) == v for k, v in wanted.items())


@dataclass(frozen=True)
class Summary:
    """How far a campaign is: counts per state; it is finished when no job is queued or running."""

    counts: Mapping[str, int]

    @property
    def finished(self) -> bool:
        return not self.counts.get(QUEUED) and not self.counts.get(RUNNING)

    @property
    def status(self) -> str:
        if not self.finished:
            return RUNNING if self.counts.get(RUNNING) or self.counts.get(DONE) else QUEUED
        return DONE if all(self.counts.get(s, 0) == 0 for s in (FAILED, EXPIRED, CANCELLED)) else FAILED


def summarize(states: list[str]) -> Summary:
    return Summary({s: states.count(s) for s in STATES if s in states})
