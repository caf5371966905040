"""ORM tables (SQLAlchemy 2, portable types only: the same models run on SQLite and PostgreSQL).

The raw document is kept verbatim in ``result_documents`` (text, one row per result) and the columns the API
filters on are copied out of it into ``results`` at ingest, so a listing reads small rows. Alembic owns the schema (``migrations/``): a change here needs a new revision there.
Other service modules (campaigns) declare their tables on the same ``Base``.
"""

from __future__ import annotations

from datetime import datetime, timezone
from typing import Any, overload

import sqlalchemy as sa
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column


def utcnow() -> datetime:
    return datetime.now(timezone.utc)


@overload
def aware(value: datetime) -> datetime: ...
@overload
def aware(value: None) -> None: ...
@overload
def aware(value: datetime | None) -> datetime | None: ...
def aware(value: datetime | None) -> datetime | None:
    """SQLite returns naive datetimes; every time the service stores is UTC."""
    return value.replace(tzinfo=timezone.utc) if value is not None and value.tzinfo is None else value


class Base(DeclarativeBase):
    pass


class Variant(Base):
    __tablename__ = "variants"

    id: Mapped[int] = mapped_column(primary_key=True, autoincrement=True)
    manifest_hash: Mapped[str] = mapped_column(sa.String(64), unique=True)
    name: Mapped[str] = mapped_column(sa.String(200), index=True)
    document: Mapped[str] = mapped_column(sa.Text)
    received_at: Mapped[datetime] = mapped_column(sa.DateTime(timezone=True), default=utcnow)


class Result(Base):
    """One stored result: its indexed columns (the document itself is in ``StoredDocument``). Every page asks
    for visible results (``hidden_at IS NULL``), so the indexes its listings filter, group and sort by lead with
    ``hidden_at`` (migration 0007); SQLite adds the row id to each, which makes the fingerprint and the filter
    choices index-only reads."""

    __tablename__ = "results"
    __table_args__ = (
        sa.Index("ix_results_visible_created", "hidden_at", "created_at", "id"),
        sa.Index("ix_results_visible_series", "hidden_at", "model", "target", "precision"),
        sa.Index("ix_results_model_visible", "model", "hidden_at", "created_at", "id"),
        sa.Index("ix_results_visible_target", "hidden_at", "target", "created_at", "id"),
        sa.Index("ix_results_visible_precision", "hidden_at", "precision", "created_at", "id"),
        sa.Index("ix_results_visible_host", "hidden_at", "host", "created_at", "id"),
        sa.Index("ix_results_visible_origin", "hidden_at", "origin", "created_at", "id"),
    )

    id: Mapped[int] = mapped_column(primary_key=True, autoincrement=True)
    content_hash: Mapped[str] = mapped_column(sa.String(64), unique=True)
    schema: Mapped[str] = mapped_column(sa.String(40))
    run_id: Mapped[str] = mapped_column(sa.String(300), index=True)
    source: Mapped[str] = mapped_column(sa.String(300))  # the file name the host wrote it under
    model: Mapped[str] = mapped_column(sa.String(200))
    variant: Mapped[str | None] = mapped_column(sa.String(300), index=True)
    target: Mapped[str] = mapped_column(sa.String(100))
    precision: Mapped[str] = mapped_column(sa.String(20))
    manifest_hash: Mapped[str | None] = mapped_column(sa.String(64), index=True)
    host: Mapped[str | None] = mapped_column(sa.String(200))
    host_label: Mapped[str | None] = mapped_column(sa.String(300))  # formatting.host_label, copied at ingest
    accelbench_version: Mapped[str | None] = mapped_column(sa.String(40), index=True)
    origin: Mapped[str | None] = mapped_column(sa.String(60))
    created_at: Mapped[datetime | None] = mapped_column(sa.DateTime(timezone=True), index=True)
    received_at: Mapped[datetime] = mapped_column(sa.DateTime(timezone=True), default=utcnow, index=True)
    summary: Mapped[dict[str, Any]] = mapped_column(sa.JSON)  # steps, verdicts: what listings show
    variant_id: Mapped[int | None] = mapped_column(sa.ForeignKey("variants.id"))
    hidden_at: Mapped[datetime | None] = mapped_column(sa.DateTime(timezone=True))
    hidden_by: Mapped[str | None] = mapped_column(sa.String(200))
    hidden_reason: Mapped[str | None] = mapped_column(sa.String(500))
    hidden_log: Mapped[list[dict[str, Any]] | None] = mapped_column(sa.JSON)  # every hide and unhide


class StoredDocument(Base):
    """A result's document as stored: the bare document byte for byte as pushed, or, from an envelope, its
    canonical compact JSON. Apart from ``results`` so that a listing never reads (on SQLite: walks past) it."""

    __tablename__ = "result_documents"

    result_id: Mapped[int] = mapped_column(sa.ForeignKey("results.id"), primary_key=True, autoincrement=False)
    document: Mapped[str] = mapped_column(sa.Text)


class Token(Base):
    __tablename__ = "tokens"

    id: Mapped[int] = mapped_column(primary_key=True, autoincrement=True)
    name: Mapped[str] = mapped_column(sa.String(200), index=True)
    scope: Mapped[str] = mapped_column(sa.String(20))
    prefix: Mapped[str] = mapped_column(sa.String(16))  # shown in listings; the token itself is never stored
    token_hash: Mapped[str] = mapped_column(sa.String(64), unique=True)
    created_at: Mapped[datetime] = mapped_column(sa.DateTime(timezone=True), default=utcnow)
    revoked_at: Mapped[datetime | None] = mapped_column(sa.DateTime(timezone=True))


class WebSession(Base):
    """A browser login: the cookie holds the session id (its sha256 is kept here), never the token."""

    __tablename__ = "web_sessions"

    id: Mapped[int] = mapped_column(primary_key=True, autoincrement=True)
    session_hash: Mapped[str] = mapped_column(sa.String(64), unique=True)
    token_id: Mapped[int] = mapped_column(sa.ForeignKey("tokens.id"), index=True)
    created_at: Mapped[datetime] = mapped_column(sa.DateTime(timezone=True), default=utcnow)
    expires_at: Mapped[datetime] = mapped_column(sa.DateTime(timezone=True))
    ended_at: Mapped[datetime | None] = mapped_column(sa.DateTime(timezone=True))
