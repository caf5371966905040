"""Validate pushed documents with the one typed definition (``accelbench.documents``); an invalid document is
a 422 whose one line names the field (``result: field 'steps[3].latency_us.p99': must be a number``)."""

from __future__ import annotations

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
        return load_result(doc, name=name)
    except BadInputError as err:
        raise ApiError(422, str(err)) from None


def check_variant(doc: object, name: str = "variant") -> VariantManifest:
    """The ``VariantManifest`` for ``doc``, or ApiError 422."""
    if not isinstance(doc, dict):
        raise ApiError(422, f"{name}: not an {VARIANT_SCHEMA} document (not a JSON object)")
    try:
        return load_manifest(doc, name=name)
    except BadInputError as err:
        raise ApiError(422, str(err)) from None
