"""Alembic environment: runs on the connection ``accelbench.service.db.migrate`` hands over (online only).

``render_as_batch`` lets later migrations alter tables on SQLite too (it copies the table), so one set of
scripts serves SQLite and PostgreSQL.
"""

from __future__ import annotations

from alembic import context

from accelbench.service import models

connection = context.config.attributes.get("connection")
if connection is None:  # pragma: no cover - the alembic CLI is not how accelbench migrates
    raise RuntimeError("run migrations through accelbench.service.db.migrate (it passes the connection)")
context.configure(connection=connection, target_metadata=models.Base.metadata, render_as_batch=True)
with context.begin_transaction():
    context.run_migrations()
