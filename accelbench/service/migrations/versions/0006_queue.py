"""The queue, matched in SQL: one row per label a job asks for (``job_labels``, "key=value"), so a claim
selects the oldest job whose every label the runner offers in one query; and a job time limit.

Revision ID: 0006_queue
Revises: 0005_web_sessions
Create Date: 2026-12-01
"""

from __future__ import annotations

import json

import sqlalchemy as sa
from alembic import op

revision = "0006_queue"
down_revision = "0005_web_sessions"
branch_labels = None
depends_on = None


def upgrade() -> None:
    labels = op.create_table(
        "job_labels",
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("job_id", sa.Integer, sa.ForeignKey("jobs.id"), nullable=False, index=True),
        sa.Column("label", sa.String(301), nullable=False),
    )
    with op.batch_alter_table("jobs") as batch:
        batch.add_column(sa.Column("time_limit_s", sa.Float, nullable=True))
    conn = op.get_bind()
    rows = conn.execute(sa.text("SELECT id, labels FROM jobs")).all()
    copied = []
    for job_id, value in rows:
        wanted = json.loads(value) if isinstance(value, str) else dict(value or {})
        copied += [{"job_id": job_id, "label": f"{k}={v}"} for k, v in sorted(wanted.items())]
    if copied:
        op.bulk_insert(labels, copied)


def downgrade() -> None:
    with op.batch_alter_table("jobs") as batch:
        batch.drop_column("time_limit_s")
    op.drop_table("job_labels")
