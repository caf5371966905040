"""The campaign job state machine and lease arithmetic (pure): tables of cases, and every refusal."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest

from accelbench.service import jobs

NOW = datetime(2026, 12, 1, 9, 0, 0, tzinfo=timezone.utc)


@pytest.mark.parametrize(
    "state,event,after",
    [
        ("queued", "claim", "running"),
        ("running", "heartbeat", "running"),
        ("running", "done", "done"),
        ("running", "fail", "failed"),
        ("running", "release", "queued"),
    ],
)
def test_allowed_transitions(state, event, after):
    assert jobs.next_state(state, event) == after


@pytest.mark.parametrize(
    "state,event",
    [("queued", "done"), ("queued", "heartbeat"), ("done", "claim"), ("failed", "release"), ("expired", "done"),
     ("running", "claim"), ("done", "fail")],
)  # fmt: skip
def test_refused_transitions_name_the_state_and_event(state, event):
    with pytest.raises(jobs.TransitionError, match=f"a {state} job cannot take '{event}'"):
        jobs.next_state(state, event)


def test_unknown_event():
    with pytest.raises(jobs.TransitionError, match="unknown job event 'explode'"):
        jobs.next_state("running", "explode")


@pytest.mark.parametrize("attempts,max_attempts,after", [(1, 3, "queued"), (2, 3, "queued"), (3, 3, "expired"),
                                                         (1, 1, "expired")])  # fmt: skip
def test_expiry_requeues_until_the_last_attempt(attempts, max_attempts, after):
    assert jobs.after_expiry(attempts, max_attempts) == after


def test_lease_math_across_aware_and_naive_datetimes():
    until = jobs.lease_until(NOW, 30)
    assert until - NOW == timedelta(seconds=30)
    assert not jobs.lease_expired(until, NOW + timedelta(seconds=29.9))
    assert jobs.lease_expired(until, NOW + timedelta(seconds=30))
    assert jobs.lease_expired(until.replace(tzinfo=None), NOW + timedelta(seconds=31))  # as SQLite returns it
    assert not jobs.lease_expired(None, NOW + timedelta(days=9))


@pytest.mark.parametrize(
    "wanted,offered,ok",
    [({}, {}, True), ({}, {"gpu": "l4"}, True), ({"zone": "lab"}, {"zone": "lab", "x": "1"}, True),
     ({"zone": "lab"}, {}, False), ({"zone": "lab"}, {"zone": "cloud"}, False)],
)  # fmt: skip
def test_labels_match(wanted, offered, ok):
    assert jobs.labels_match(wanted, offered) is ok


def test_parse_labels_and_a_malformed_one():
    from accelbench.client.agent import parse_labels

    assert parse_labels(["zone=lab", " rack = 3 "]) == {"zone": "lab", "rack": "3"}
    with pytest.raises(ValueError, match="--label 'zone': write KEY=VALUE"):
        parse_labels(["zone"])
    with pytest.raises(ValueError, match="write KEY=VALUE"):
        parse_labels(["=x"])


@pytest.mark.parametrize(
    "states,finished,status",
    [(["queued", "queued"], False, "queued"), (["running", "queued"], False, "running"),
     (["done", "queued"], False, "running"), (["done", "done"], True, "done"),
     (["done", "failed"], True, "failed"), (["expired", "done"], True, "failed")],
)  # fmt: skip
def test_campaign_summary(states, finished, status):
    summary = jobs.summarize(states)
    assert summary.finished is finished and summary.status == status
    assert sum(summary.counts.values()) == len(states)
