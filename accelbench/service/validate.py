"""Validate pushed documents with the one typed definition (``accelbench.documents``); an invalid document is
a 422 whose one line names the field (``result: field 'steps[3].latency_us.p99': must be a number``)."""

from __future__ import annotations

from typing import Any

from accelbench.errors import BadInputError
from accelbench.service.errors import ApiError


def check_result(doc: Any, name: str) -> Any:
    """The ``ResultDocument`` for ``doc``, or ApiError 422."""
    from accelbench.documents import load_result

    try:
        return load_result(doc if isinstance(doc, dict) else [], name=name or "body")
    except BadInputError as err:
        raise ApiError(422, str(err)) from None


def check_variant(doc: Any, name: str = "variant") -> Any:
    """The ``VariantManifest`` for ``doc``, or ApiError 422."""
    from accelbench.documents import load_manifest

    try:
        return load_manifest(doc if isinstance(doc, dict) else [], name=name)
    except BadInputError as err:
        raise ApiError(422, str(err)) from None
