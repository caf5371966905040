"""Validate pushed documents with the one typed definition (``accelbench.documents``); an invalid document is
a 422 whose one line names the field (``result: field 'steps[3].latency_us.p99': must be a number``)."""

from __future__ import annotations

import math
import unicodedata
from datetime import datetime, timezone
from typing import Any

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

# No measurement, count or size a document records comes near 1e18 (a byte count of 1 EB, 31,700 years in
# microseconds); below it the reports' sums, products and squares stay finite and fit a 64-bit integer column.
MEASURE_MAX = 1e18


def out_of_bounds(value: Any, path: str = "") -> str | None:
    """The path of the first number in a parsed JSON ``value`` beyond ±``MEASURE_MAX`` or not finite, or None."""
    stack: list[tuple[str, Any]] = [(path, value)]
    while stack:
        where, item = stack.pop()
        if isinstance(item, dict):
            stack.extend((f"{where}.{k}" if where else str(k), v) for k, v in item.items())
        elif isinstance(item, list):
            stack.extend((f"{where}[{i}]", v) for i, v in enumerate(item))
        elif isinstance(item, (int, float)) and not isinstance(item, bool) and not _measurable(item):
            return where or "(the value)"
    return None


def _measurable(number: float) -> bool:
    return (isinstance(number, int) or math.isfinite(number)) and abs(number) <= MEASURE_MAX


def unmeasurable(where: str) -> str:
    """What a number at ``where`` that no measurement can be is told (see ``MEASURE_MAX``)."""
    return f"field '{where}': must be a finite number within ±{MEASURE_MAX:.0e}"


def check_numbers(value: Any, name: str) -> None:
    """ApiError 422 naming the field of the first number no measurement can be (see ``MEASURE_MAX``)."""
    if (where := out_of_bounds(value)) is not None:
        raise ApiError(422, f"{name}: {unmeasurable(where)}")


def check_result(doc: object, name: str) -> ResultDocument:
    """The ``ResultDocument`` for ``doc``, or ApiError 422."""
    name = name or "body"
    if not isinstance(doc, dict):
        raise ApiError(422, f"{name}: not an {RESULT_SCHEMA} document (not a JSON object)")
    check_numbers(doc, name)
    try:
        result = load_result(doc, name=name)
    except BadInputError as err:
        raise ApiError(422, str(err)) from None
    _check_created_at(result.provenance.created_at, name)
    for field in NAME_FIELDS:
        _check_name(getattr(result, field), f"{name}: field '{field}'")
    return result


NAME_FIELDS = ("run_id", "model", "variant", "target", "precision")  # the indexed names pages group by
_INVISIBLE = ("Cc", "Cf", "Co", "Cn", "Zl", "Zp")  # controls, format (U+200B), private, unassigned, breaks


def _check_name(value: object, where: str) -> None:
    """A name that would make a second row reading like the first (``resnet50\\u200b``, a full-width
    letter, a trailing space) is refused: it must be NFKC-normal, trimmed and free of invisible characters."""
    if not isinstance(value, str) or not value:
        return
    odd = next((c for c in value if unicodedata.category(c) in _INVISIBLE), None)
    if odd is not None:
        raise ApiError(422, f"{where}: holds an invisible character (U+{ord(odd):04X})")
    if value != value.strip() or unicodedata.normalize("NFKC", value) != value:
        raise ApiError(422, f"{where}: must be trimmed and in Unicode NFKC form ({value!r})")


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
    check_numbers(doc, name)
    try:
        return load_manifest(doc, name=name)
    except BadInputError as err:
        raise ApiError(422, str(err)) from None
