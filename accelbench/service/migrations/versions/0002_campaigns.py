"""Campaigns, their jobs (the queue), runner agents, partial documents and job → result links.

Revision ID: 0002_campaigns
Revises: 0001_results
Create Date: 2026-12-01
"""

from __future__ import annotations

from datetime import datetime

import sqlalchemy as sa
from alembic import op

revision = "0002_campaigns"
down_revision = "0001_results"
branch_labels = None
depends_on = None


def _when(name: str, nullable: bool = True) -> sa.Column[datetime]:
    return sa.Column(name, sa.DateTime(timezone=True), nullable=nullable)


def upgrade() -> None:
    op.create_table(
        "campaigns",
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("name", sa.String(200), nullable=False),
        sa.Column("spec", sa.Text, nullable=False),
        sa.Column("projected", sa.JSON, nullable=False),
        sa.Column("created_by", sa.String(200), nullable=False),
        _when("created_at", nullable=False),
    )
    op.create_table(
        "runners",
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("name", sa.String(200), nullable=False, unique=True),
        sa.Column("target", sa.String(100), nullable=False, index=True),
        sa.Column("labels", sa.JSON, nullable=False),
        sa.Column("probe", sa.JSON, nullable=False),
        sa.Column("version", sa.String(40), nullable=False),
        sa.Column("token_name", sa.String(200), nullable=False),
        _when("registered_at", nullable=False),
        _when("last_seen", nullable=False),
    )
    op.create_table(
        "jobs",
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("campaign_id", sa.Integer, sa.ForeignKey("campaigns.id"), nullable=False, index=True),
        sa.Column("target", sa.String(100), nullable=False),
        sa.Column("labels", sa.JSON, nullable=False),
        sa.Column("status", sa.String(20), nullable=False),
        sa.Column("attempts", sa.Integer, nullable=False),
        sa.Column("max_attempts", sa.Integer, nullable=False),
        sa.Column("lease_s", sa.Float, nullable=False),
        sa.Column("runner_id", sa.Integer, sa.ForeignKey("runners.id"), nullable=True),
        _when("claimed_at"),
        _when("heartbeat_at"),
        _when("lease_until"),
        _when("finished_at"),
        sa.Column("reason", sa.Text, nullable=True),
        sa.Column("log_tail", sa.Text, nullable=False),
        sa.Column("history", sa.JSON, nullable=False),
    )
    op.create_index("ix_jobs_status_target", "jobs", ["status", "target"])
    op.create_table(
        "job_documents",
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("job_id", sa.Integer, sa.ForeignKey("jobs.id"), nullable=False, index=True),
        sa.Column("run_id", sa.String(300), nullable=False),
        sa.Column("steps", sa.Integer, nullable=False),
        sa.Column("document", sa.Text, nullable=False),
        _when("updated_at", nullable=False),
        sa.UniqueConstraint("job_id", "run_id", name="uq_job_documents_job_run"),
    )
    op.create_table(
        "job_results",
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("job_id", sa.Integer, sa.ForeignKey("jobs.id"), nullable=False, index=True),
        sa.Column("result_id", sa.Integer, sa.ForeignKey("results.id"), nullable=False),
        sa.UniqueConstraint("job_id", "result_id", name="uq_job_results_job_result"),
    )


def downgrade() -> None:
    for table in ("job_results", "job_documents"):
        op.drop_table(table)
    op.drop_index("ix_jobs_status_target", table_name="jobs")
    for table in ("jobs", "runners", "campaigns"):
        op.drop_table(table)
