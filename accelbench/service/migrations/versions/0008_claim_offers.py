"""A claim is an offer until the runner acknowledges it: ``jobs.offered_at`` is set when a job is claimed (or
handed again to the runner that holds it) and cleared by the runner's first heartbeat. A job offered for
longer than one heartbeat interval (a third of its lease) went to a runner that never heard of it: its claim
answer was lost. It goes back to the queue, not counted as an attempt (issue 50).

Revision ID: 0008_claim_offers
Revises: 0007_listing_indexes
Create Date: 2026-12-06
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0008_claim_offers"
down_revision = "0007_listing_indexes"
branch_labels = None
depends_on = None


# plain ALTER TABLE on both databases (SQLite has ADD and DROP COLUMN since 3.35): a batch operation would
# copy ``jobs`` into a new table, and SQLite's foreign keys (job_results, job_labels, job_documents) refuse
# the DROP TABLE of that copy


def upgrade() -> None:
    op.add_column("jobs", sa.Column("offered_at", sa.DateTime(timezone=True), nullable=True))


def downgrade() -> None:
    op.drop_column("jobs", "offered_at")
