"""Listings and the dashboard read small rows and indexes only.

- The document moves out of ``results`` into ``result_documents`` (one row per result, the text as stored).
  On SQLite a column after a large document (``hidden_*``, a new one) sits behind the document's overflow
  pages, and reading it walks them all: a listing of 50 results of 1 MB read 50 MB. The results row is now
  the indexed columns only, on both databases.
- Each result's host label, as the pages show it (``formatting.host_label`` of its host probe), is a column
  copied out at ingest (backfilled here), so no listing parses a document.
- Every page asks for visible results (``hidden_at IS NULL``), so the indexes its listings filter, group and
  sort by lead with ``hidden_at`` (a listing walks ``(hidden_at, created_at)`` in order instead of sorting
  every visible row), and ``origin`` is indexed.

Revision ID: 0007_listing_indexes
Revises: 0006_queue
Create Date: 2026-12-02
"""

from __future__ import annotations

import json
import sqlite3

import sqlalchemy as sa
from alembic import op

revision = "0007_listing_indexes"
down_revision = "0006_queue"
branch_labels = None
depends_on = None

# (name, columns): the indexes that lead with hidden_at, replacing those that did not
# (a listing filtered by one of them walks its index in created_at order too)
NEW = (
    ("ix_results_visible_created", ["hidden_at", "created_at", "id"]),
    ("ix_results_visible_series", ["hidden_at", "model", "target", "precision"]),
    ("ix_results_model_visible", ["model", "hidden_at", "created_at", "id"]),
    ("ix_results_visible_target", ["hidden_at", "target", "created_at", "id"]),
    ("ix_results_visible_precision", ["hidden_at", "precision", "created_at", "id"]),
    ("ix_results_visible_host", ["hidden_at", "host", "created_at", "id"]),
    ("ix_results_visible_origin", ["hidden_at", "origin", "created_at", "id"]),
)
OLD = (
    ("ix_results_model_target_precision", ["model", "target", "precision"]),
    ("ix_results_model", ["model"]),
    ("ix_results_target", ["target"]),
    ("ix_results_precision", ["precision"]),
    ("ix_results_host", ["host"]),
    ("ix_results_hidden_at", ["hidden_at"]),
)
CHUNK = 200  # documents can be MBs each: the backfill reads them a few at a time


def upgrade() -> None:
    op.create_table(
        "result_documents",
        sa.Column(
            "result_id", sa.Integer, sa.ForeignKey("results.id"), primary_key=True, autoincrement=False
        ),
        sa.Column("document", sa.Text, nullable=False),
    )
    op.execute("INSERT INTO result_documents (result_id, document) SELECT id, document FROM results")
    with op.batch_alter_table("results") as batch:
        batch.add_column(sa.Column("host_label", sa.String(300), nullable=True))
    _backfill_host_labels()
    _drop_column("document")
    for name, _columns in OLD:
        op.drop_index(name, table_name="results")
    for name, columns in NEW:
        op.create_index(name, "results", columns)


def _drop_column(name: str) -> None:
    if op.get_bind().dialect.name == "sqlite" and sqlite3.sqlite_version_info >= (3, 35):
        # SQLite's own DROP COLUMN, not alembic's copy of the table: the copy would DROP TABLE results,
        # which the job_results foreign key refuses while foreign keys are on
        op.execute(f"ALTER TABLE results DROP COLUMN {name}")
    else:
        with op.batch_alter_table("results") as batch:
            batch.drop_column(name)


def _backfill_host_labels() -> None:
    """The label of each stored result's host probe (``formatting.host_label``: what the pages showed)."""
    from accelbench.reports.formatting import host_label

    conn = op.get_bind()
    docs = sa.table("result_documents", sa.column("result_id", sa.Integer), sa.column("document", sa.Text))
    results = sa.table("results", sa.column("id", sa.Integer), sa.column("host_label", sa.String))
    last = 0
    while True:
        rows = conn.execute(
            sa.select(docs.c.result_id, docs.c.document)
            .where(docs.c.result_id > last)
            .order_by(docs.c.result_id)
            .limit(CHUNK)
        ).all()
        if not rows:
            return
        for result_id, text in rows:
            try:
                probe = (json.loads(text).get("provenance") or {}).get("host")
            except (ValueError, AttributeError):
                probe = None
            label = host_label(probe if isinstance(probe, dict) else None)[:300]
            conn.execute(sa.update(results).where(results.c.id == result_id).values(host_label=label))
        last = rows[-1][0]


def downgrade() -> None:
    for name, _columns in NEW:
        op.drop_index(name, table_name="results")
    for name, columns in OLD:
        op.create_index(name, "results", columns)
    with op.batch_alter_table("results") as batch:
        batch.add_column(sa.Column("document", sa.Text, nullable=False, server_default=""))
    op.execute(
        "UPDATE results SET document = "
        "(SELECT d.document FROM result_documents d WHERE d.result_id = results.id)"
    )
    _drop_column("host_label")
    op.drop_table("result_documents")
