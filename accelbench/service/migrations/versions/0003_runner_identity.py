"""Runner identity: a per-runner secret (hashed) and the token that registered the runner; a per-lease
secret (hashed) on each claimed job.

Revision ID: 0003_runner_identity
Revises: 0002_campaigns
Create Date: 2026-12-01
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0003_runner_identity"
down_revision = "0002_campaigns"
branch_labels = None
depends_on = None


def upgrade() -> None:
    # runners registered before this revision have no secret: they must register again (the agent does)
    with op.batch_alter_table("runners") as batch:
        batch.add_column(sa.Column("secret_hash", sa.String(64), nullable=True))
        batch.add_column(sa.Column("token_id", sa.Integer, nullable=True))
    with op.batch_alter_table("jobs") as batch:
        batch.add_column(sa.Column("lease_hash", sa.String(64), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("jobs") as batch:
        batch.drop_column("lease_hash")
    with op.batch_alter_table("runners") as batch:
        batch.drop_column("token_id")
        batch.drop_column("secret_hash")
