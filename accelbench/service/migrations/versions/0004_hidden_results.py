"""Hidden results: an admin can hide a result (who, when, why are recorded) and unhide it; a hidden result
is left out of every listing, page and report, but kept.

Revision ID: 0004_hidden_results
Revises: 0003_runner_identity
Create Date: 2026-12-01
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0004_hidden_results"
down_revision = "0003_runner_identity"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("results") as batch:
        batch.add_column(sa.Column("hidden_at", sa.DateTime(timezone=True), nullable=True))
        batch.add_column(sa.Column("hidden_by", sa.String(200), nullable=True))
        batch.add_column(sa.Column("hidden_reason", sa.String(500), nullable=True))
        batch.add_column(sa.Column("hidden_log", sa.JSON, nullable=True))  # every hide/unhide: who, when, why
        batch.create_index("ix_results_hidden_at", ["hidden_at"])


def downgrade() -> None:
    with op.batch_alter_table("results") as batch:
        batch.drop_index("ix_results_hidden_at")
        for name in ("hidden_log", "hidden_reason", "hidden_by", "hidden_at"):
            batch.drop_column(name)
