"""Results, variant manifests and API tokens.

Revision ID: 0001_results
Revises:
Create Date: 2026-12-01
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0001_results"
down_revision = None
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "variants",
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("manifest_hash", sa.String(64), nullable=False, unique=True),
        sa.Column("name", sa.String(200), nullable=False, index=True),
        sa.Column("document", sa.Text, nullable=False),
        sa.Column("received_at", sa.DateTime(timezone=True), nullable=False),
    )
    op.create_table(
        "results",
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("content_hash", sa.String(64), nullable=False, unique=True),
        sa.Column("schema", sa.String(40), nullable=False),
        sa.Column("run_id", sa.String(300), nullable=False, index=True),
        sa.Column("source", sa.String(300), nullable=False),
        sa.Column("model", sa.String(200), nullable=False, index=True),
        sa.Column("variant", sa.String(300), nullable=True, index=True),
        sa.Column("target", sa.String(100), nullable=False, index=True),
        sa.Column("precision", sa.String(20), nullable=False, index=True),
        sa.Column("manifest_hash", sa.String(64), nullable=True, index=True),
        sa.Column("host", sa.String(200), nullable=True, index=True),
        sa.Column("accelbench_version", sa.String(40), nullable=True, index=True),
        sa.Column("origin", sa.String(60), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=True, index=True),
        sa.Column("received_at", sa.DateTime(timezone=True), nullable=False, index=True),
        sa.Column("summary", sa.JSON, nullable=False),
        sa.Column("document", sa.Text, nullable=False),
        sa.Column("variant_id", sa.Integer, sa.ForeignKey("variants.id"), nullable=True),
    )
    op.create_index("ix_results_model_target_precision", "results", ["model", "target", "precision"])
    op.create_table(
        "tokens",
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("name", sa.String(200), nullable=False, index=True),
        sa.Column("scope", sa.String(20), nullable=False),
        sa.Column("prefix", sa.String(16), nullable=False),
        sa.Column("token_hash", sa.String(64), nullable=False, unique=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("revoked_at", sa.DateTime(timezone=True), nullable=True),
    )


def downgrade() -> None:
    op.drop_table("tokens")
    op.drop_index("ix_results_model_target_precision", table_name="results")
    op.drop_table("results")
    op.drop_table("variants")
