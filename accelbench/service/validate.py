"""Validate pushed documents with the one typed definition (``accelbench.documents``); an invalid document is
a 422 whose one line names the field (``result: field 'steps[3].latency_us.p99': must be a number``)."""

from __future__ import annotations

from datetime import datetime, timezone

from accelbench.documents import (
    RESULT_SCHEMA,
    VARIANT_SCHEMA,
    ResultDocument,
    VariantManifest,
    load_manifest,
    load_result,
)
from accelbench.errors import BadInputError
from accelbench.service.errors import ApiError


def check_result(doc: object, name: str) -> ResultDocument:
    """The ``ResultDocument`` for ``doc``, or ApiError 422."""
    name = name or "body"
    if not isinstance(doc, dict):
        raise ApiError(422, f"{name}: not an {RESULT_SCHEMA} document (not a JSON object)")
    try:
        result = load_result(doc, name=name)
    except BadInputError as err:
        raise ApiError(422, str(err)) from None
    _check_created_at(result.provenance.created_at, name)
    return result


def created_at(value: object) -> datetime | None:
    """A ``provenance.created_at`` as an aware datetime (UTC where it gives no offset); None where it does not
    parse (such a result is stored without a time)."""
    try:
        when = datetime.fromisoformat(str(value).replace("Z", "+00:00"))
    except ValueError:
        return None
    return when if when.tzinfo else when.replace(tzinfo=timezone.utc)


def _check_created_at(value: object, name: str) -> None:
    """A ``provenance.created_at`` that is valid ISO 8601 but lies outside years 1-9999 once in UTC
    (``9999-12-31T23:59:59-14:00``) is refused: stored, PostgreSQL could not hand it back to Python, and
    every listing would answer 500 (issue 40)."""
    when = created_at(value) if value else None
    if when is None:
        return
    try:
        when.astimezone(timezone.utc)
    except (OverflowError, ValueError):
        raise ApiError(
            422, f"{name}: field 'provenance.created_at': {value!r} lies outside years 1-9999 in UTC"
        ) from None


def check_variant(doc: object, name: str = "variant") -> VariantManifest:
    """The ``VariantManifest`` for ``doc``, or ApiError 422."""
    if not isinstance(doc, dict):
        raise ApiError(422, f"{name}: not an {VARIANT_SCHEMA} document (not a JSON object)")
    try:
        return load_manifest(doc, name=name)
    except BadInputError as err:
        raise ApiError(422, str(err)) from None
