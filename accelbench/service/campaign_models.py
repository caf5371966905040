"""ORM tables of campaigns, their jobs and the runner agents (portable types; migration ``0002_campaigns``).

A campaign is an experiment spec submitted once; it has one job per measured target. A job's partial result
documents (``job_documents``, the latest copy per run id, replaced at every step) let a requeued job resume
after the steps already pushed; finished sweeps are stored once in ``results`` and linked by ``job_results``.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

import sqlalchemy as sa
from sqlalchemy.orm import Mapped, mapped_column

from accelbench.service.models import Base, utcnow


class Campaign(Base):
    __tablename__ = "campaigns"

    id: Mapped[int] = mapped_column(primary_key=True, autoincrement=True)
    name: Mapped[str] = mapped_column(sa.String(200))
    spec: Mapped[str] = mapped_column(sa.Text)  # the TOML as submitted
    projected: Mapped[list[str]] = mapped_column(sa.JSON)  # target ids the report projects, not queued
    created_by: Mapped[str] = mapped_column(sa.String(200))
    created_at: Mapped[datetime] = mapped_column(sa.DateTime(timezone=True), default=utcnow)


class Runner(Base):
    __tablename__ = "runners"

    id: Mapped[int] = mapped_column(primary_key=True, autoincrement=True)
    name: Mapped[str] = mapped_column(sa.String(200), unique=True)
    target: Mapped[str] = mapped_column(sa.String(100), index=True)
    labels: Mapped[dict[str, str]] = mapped_column(sa.JSON)
    probe: Mapped[dict[str, Any]] = mapped_column(sa.JSON)  # accelbench.hardware.probe.probe_host()
    version: Mapped[str] = mapped_column(sa.String(40))
    token_name: Mapped[str] = mapped_column(sa.String(200))
    secret_hash: Mapped[str | None] = mapped_column(sa.String(64))  # sha256 of the runner secret
    token_id: Mapped[int | None] = mapped_column(sa.Integer)  # the registration token that made it
    registered_at: Mapped[datetime] = mapped_column(sa.DateTime(timezone=True), default=utcnow)
    last_seen: Mapped[datetime] = mapped_column(sa.DateTime(timezone=True), default=utcnow)


class Job(Base):
    __tablename__ = "jobs"
    __table_args__ = (sa.Index("ix_jobs_status_target", "status", "target"),)

    id: Mapped[int] = mapped_column(primary_key=True, autoincrement=True)
    campaign_id: Mapped[int] = mapped_column(sa.ForeignKey("campaigns.id"), index=True)
    target: Mapped[str] = mapped_column(sa.String(100))
    labels: Mapped[dict[str, str]] = mapped_column(sa.JSON)
    status: Mapped[str] = mapped_column(sa.String(20))
    attempts: Mapped[int] = mapped_column(sa.Integer, default=0)
    max_attempts: Mapped[int] = mapped_column(sa.Integer)
    lease_s: Mapped[float] = mapped_column(sa.Float)
    runner_id: Mapped[int | None] = mapped_column(sa.ForeignKey("runners.id"))
    claimed_at: Mapped[datetime | None] = mapped_column(sa.DateTime(timezone=True))
    heartbeat_at: Mapped[datetime | None] = mapped_column(sa.DateTime(timezone=True))
    lease_until: Mapped[datetime | None] = mapped_column(sa.DateTime(timezone=True))
    finished_at: Mapped[datetime | None] = mapped_column(sa.DateTime(timezone=True))
    reason: Mapped[str | None] = mapped_column(sa.Text)  # one line: why it failed or expired
    log_tail: Mapped[str] = mapped_column(sa.Text, default="")
    history: Mapped[list[dict[str, Any]]] = mapped_column(sa.JSON)  # one entry per attempt: runner, outcome
    lease_hash: Mapped[str | None] = mapped_column(sa.String(64))  # sha256 of the current lease's secret
    time_limit_s: Mapped[float | None] = mapped_column(
        sa.Float
    )  # from its claim; heartbeats do not extend it
    # set by a claim, cleared by the runner's first heartbeat: a job offered longer than a heartbeat interval
    # went to a runner that never saw the answer (queue.reap_expired puts it back)
    offered_at: Mapped[datetime | None] = mapped_column(sa.DateTime(timezone=True))


class JobLabel(Base):
    """One label a job asks for, as "key=value": what the claim's SQL matches against the runner's labels."""

    __tablename__ = "job_labels"

    id: Mapped[int] = mapped_column(primary_key=True, autoincrement=True)
    job_id: Mapped[int] = mapped_column(sa.ForeignKey("jobs.id"), index=True)
    label: Mapped[str] = mapped_column(sa.String(301))


class JobDocument(Base):
    __tablename__ = "job_documents"
    __table_args__ = (sa.UniqueConstraint("job_id", "run_id", name="uq_job_documents_job_run"),)

    id: Mapped[int] = mapped_column(primary_key=True, autoincrement=True)
    job_id: Mapped[int] = mapped_column(sa.ForeignKey("jobs.id"), index=True)
    run_id: Mapped[str] = mapped_column(sa.String(300))
    steps: Mapped[int] = mapped_column(sa.Integer)
    document: Mapped[str] = mapped_column(sa.Text)
    updated_at: Mapped[datetime] = mapped_column(sa.DateTime(timezone=True), default=utcnow)


class JobResult(Base):
    __tablename__ = "job_results"
    __table_args__ = (sa.UniqueConstraint("job_id", "result_id", name="uq_job_results_job_result"),)

    id: Mapped[int] = mapped_column(primary_key=True, autoincrement=True)
    job_id: Mapped[int] = mapped_column(sa.ForeignKey("jobs.id"), index=True)
    result_id: Mapped[int] = mapped_column(sa.ForeignKey("results.id"))
