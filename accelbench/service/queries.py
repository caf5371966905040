"""Reading stored results: filtered listings, one result with provenance, documents for the report builder."""

from __future__ import annotations

import json
from collections.abc import Mapping
from datetime import datetime
from typing import Any, TypeVar

import sqlalchemy as sa
from sqlalchemy.orm import Session

from accelbench.answers import HideAnswer, ResultDetail, ResultSummary
from accelbench.service.errors import ApiError
from accelbench.service.models import Result, StoredDocument, Variant, aware

FILTERS = ("model", "target", "precision", "variant", "host")
Filters = Mapping[str, str | datetime | None]  # FILTERS' columns, and the results page's origin, since, until
Select = TypeVar("Select", bound=sa.Select[Any])

VISIBLE = Result.hidden_at.is_(None)  # a hidden result is in no listing, page or report


def _where(query: Select, filters: Filters) -> Select:
    query = query.where(VISIBLE)
    for name in FILTERS:
        value = filters.get(name)
        if value:
            query = query.where(getattr(Result, name) == value)
    return query


def _between(query: Select, filters: Filters) -> Select:
    """The results page's extra filters: origin, and a range of creation dates (inclusive, UTC days)."""
    if filters.get("origin"):
        query = query.where(Result.origin == filters["origin"])
    if filters.get("since"):
        query = query.where(Result.created_at >= filters["since"])
    if filters.get("until"):
        query = query.where(Result.created_at < filters["until"])
    return query


def listing_query(filters: Filters, limit: int, offset: int) -> sa.Select[Result]:
    """One page of visible results, newest first: the order is the ``(hidden_at, created_at, id)`` index's,
    so a page costs an index walk of ``offset + limit`` rows, not a sort of every visible row."""
    query = _between(_where(sa.select(Result), filters), filters)
    return query.order_by(Result.created_at.desc(), Result.id.desc()).limit(limit).offset(offset)


def list_results(session: Session, filters: Filters, limit: int, offset: int) -> tuple[list[Result], int]:
    """One page of results (``listing_query``) and how many match."""
    total = session.execute(
        _between(_where(sa.select(sa.func.count(Result.id)), filters), filters)
    ).scalar_one()
    return list(session.execute(listing_query(filters, limit, offset)).scalars()), total


def filter_choices(session: Session) -> dict[str, list[Any]]:
    """The values each filter's select offers: the distinct values of the indexed columns (each an index
    scan) and the known origins; a host comes with the id of one of its results, whose probe names it."""
    from accelbench.documents import ORIGINS

    out: dict[str, list[Any]] = {"origin": list(ORIGINS)}  # a closed set
    for name in ("model", "target", "precision"):
        column = getattr(Result, name)
        values = session.execute(
            sa.select(column).where(VISIBLE, column.is_not(None)).distinct().order_by(column)
        )
        out[name] = list(values.scalars())
    hosts = session.execute(
        sa.select(Result.host, sa.func.min(Result.id))
        .where(VISIBLE, Result.host.is_not(None))
        .group_by(Result.host)
    )
    out["host"] = sorted(tuple(h) for h in hosts.all())
    return out


def rows_by_id(session: Session, ids: list[int]) -> dict[int, Result]:
    if not ids:
        return {}
    return {r.id: r for r in session.execute(sa.select(Result).where(Result.id.in_(ids))).scalars()}


def rows_by_hash(session: Session, hashes: list[str]) -> dict[str, Result]:
    if not hashes:
        return {}
    query = sa.select(Result).where(Result.content_hash.in_(hashes))
    return {r.content_hash: r for r in session.execute(query).scalars()}


def series(session: Session) -> list[tuple[str, str, str]]:
    """Every (model, target, precision) with a visible result: what has a history (indexed columns only)."""
    query = sa.select(Result.model, Result.target, Result.precision).where(
        VISIBLE, Result.target != "", Result.precision != ""
    )
    return sorted({(r.model, r.target, r.precision) for r in session.execute(query.distinct())})


def iso(value: datetime | None) -> str | None:
    """A stored time as ISO 8601 with its zone (SQLite hands times back without one: they are UTC)."""
    return aware(value).isoformat() if value is not None else None


def summary_fields(row: Result) -> dict[str, Any]:
    """A stored result's columns as listings show them (``ResultSummary``'s fields, and the start of the
    answers that extend it)."""
    return dict(
        id=row.content_hash,
        run_id=row.run_id,
        source=row.source,
        model=row.model,
        variant=row.variant,
        target=row.target,
        precision=row.precision,
        manifest_hash=row.manifest_hash,
        host=row.host,
        accelbench_version=row.accelbench_version,
        origin=row.origin,
        created_at=iso(row.created_at),
        received_at=iso(row.received_at),
        steps=row.summary.get("steps"),
        verdicts=row.summary.get("verdicts"),
        url=f"/api/v1/results/{row.content_hash}",
    )


def summary(row: Result) -> ResultSummary:
    """A stored result as listings show it (what ``GET /api/v1/results`` lists)."""
    return ResultSummary(**summary_fields(row))


def get_result(session: Session, content_hash: str, hidden_too: bool = False) -> Result:
    query = sa.select(Result).where(Result.content_hash == content_hash)
    row = session.execute(query if hidden_too else query.where(VISIBLE)).scalar_one_or_none()
    if row is None:
        raise ApiError(404, f"no result with id {content_hash[:80]!r}")
    return row


def document_texts(session: Session, ids: list[int]) -> dict[int, str]:
    """Result id → its stored document text."""
    if not ids:
        return {}
    query = sa.select(StoredDocument.result_id, StoredDocument.document).where(
        StoredDocument.result_id.in_(ids)
    )
    return {r.result_id: r.document for r in session.execute(query)}


def detail(row: Result, session: Session) -> ResultDetail:
    """One result as ``GET /api/v1/results/{id}`` answers: its summary, provenance, the document as pushed and
    the variant manifest when it came along."""
    variant = session.get(Variant, row.variant_id) if row.variant_id else None
    doc = json.loads(document_texts(session, [row.id])[row.id])
    return ResultDetail(
        **summary_fields(row),
        provenance=doc.get("provenance") or {},
        document=doc,
        variant_manifest=json.loads(variant.document) if variant else None,
    )


def stored_rows(
    session: Session, model: str | None = None, target: str | None = None, precision: str | None = None
) -> list[Result]:
    query = _where(sa.select(Result), {"model": model, "target": target, "precision": precision})
    return list(session.execute(query.order_by(Result.id)).scalars())


Fingerprint = tuple[int, int, int]  # (how many, the newest id, the sum of ids) of the visible results


def fingerprint(session: Session, model: str | None = None) -> Fingerprint:
    """(how many visible results, the newest id, the sum of their ids) for one model or all: changes when a
    result is added, hidden or unhidden."""
    query = sa.select(sa.func.count(Result.id), sa.func.max(Result.id), sa.func.sum(Result.id)).where(VISIBLE)
    if model:
        query = query.where(Result.model == model)
    count, newest, total = session.execute(query).one()
    return int(count or 0), int(newest or 0), int(total or 0)


def models_and_targets(session: Session) -> tuple[list[str], list[str]]:
    models = session.execute(
        sa.select(Result.model).where(VISIBLE).distinct().order_by(Result.model)
    ).scalars()
    targets = session.execute(
        sa.select(Result.target).where(VISIBLE, Result.target.is_not(None)).distinct().order_by(Result.target)
    ).scalars()
    return list(models), list(targets)


def set_hidden(session: Session, content_hash: str, hidden: bool, who: str, reason: str) -> Result:
    """Hide (or unhide) one result, recording who, when and why in its ``hidden_log``. Commits."""
    from accelbench.service.models import utcnow

    row = get_result(session, content_hash, hidden_too=True)
    now = utcnow()
    entry = {"action": "hide" if hidden else "unhide", "by": who, "at": now.isoformat(), "reason": reason}
    row.hidden_log = [*(row.hidden_log or []), entry]
    row.hidden_at, row.hidden_by, row.hidden_reason = (now, who, reason) if hidden else (None, None, None)
    session.commit()
    return row


def hide_answer(row: Result) -> HideAnswer:
    """What hide and unhide answer: the result's id, whether it is hidden now, its hide log."""
    return HideAnswer.model_validate(
        {"id": row.content_hash, "hidden": row.hidden_at is not None, "log": row.hidden_log or []}
    )
