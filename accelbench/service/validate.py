"""Validate pushed documents; an invalid one is a 422 naming the first bad field."""

from __future__ import annotations

from typing import Any

from accelbench.service.errors import ApiError

RESULT_SCHEMA = "accelbench.result/1"
VARIANT_SCHEMA = "accelbench.variant/1"


def _name(prefix: str, field: str) -> str:
    return f"{prefix}.{field}" if prefix else field


def check_result(doc: Any, prefix: str = "") -> dict[str, Any]:
    if not isinstance(doc, dict):
        raise ApiError(422, f"field {prefix or 'body'}: must be a result document (a JSON object)")
    if doc.get("schema") != RESULT_SCHEMA:
        raise ApiError(
            422, f"field {_name(prefix, 'schema')}: must be {RESULT_SCHEMA!r}, got {doc.get('schema')!r}"
        )
    for key in ("run_id", "model", "target", "precision"):
        if not isinstance(doc.get(key), str) or not doc[key]:
            raise ApiError(422, f"field {_name(prefix, key)}: required, a non-empty string")
    if not isinstance(doc.get("steps"), list) or not all(isinstance(s, dict) for s in doc["steps"]):
        raise ApiError(422, f"field {_name(prefix, 'steps')}: required, a list of step objects")
    return doc


def check_variant(doc: Any, prefix: str = "variant") -> dict[str, Any]:
    if not isinstance(doc, dict):
        raise ApiError(422, f"field {prefix}: must be a variant manifest (a JSON object)")
    if doc.get("schema") != VARIANT_SCHEMA:
        raise ApiError(422, f"field {prefix}.schema: must be {VARIANT_SCHEMA!r}, got {doc.get('schema')!r}")
    if not isinstance(doc.get("manifest_hash"), str) or len(doc["manifest_hash"]) != 64:
        raise ApiError(422, f"field {prefix}.manifest_hash: required, a sha256 hex string")
    return doc
