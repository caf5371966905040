"""Browser sessions: the login cookie holds a random session id (stored hashed here), never the API token.

Revision ID: 0005_web_sessions
Revises: 0004_hidden_results
Create Date: 2026-12-01
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0005_web_sessions"
down_revision = "0004_hidden_results"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "web_sessions",
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("session_hash", sa.String(64), nullable=False, unique=True),
        sa.Column("token_id", sa.Integer, sa.ForeignKey("tokens.id"), nullable=False, index=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("expires_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("ended_at", sa.DateTime(timezone=True), nullable=True),
    )


def downgrade() -> None:
    op.drop_table("web_sessions")
