"""POST /api/v1/results: read the body under a size limit, validate it, store it once (by content hash).

The body is a result document, or ``{"result": RESULT, "variant": MANIFEST, "source": FILE_NAME}`` when the
variant manifest it references (``provenance.manifest_hash``) comes along. The content hash is the sha256 of
the canonical JSON (sorted keys), the same hash ``accelbench report`` prints as a result's source, so the same
measurement pushed twice, however it was formatted, is stored once: 201 the first time, 200 after.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any

from accelbench.service.errors import ApiError
from accelbench.service.validate import check_result, check_variant

DEFAULT_MAX_BODY_BYTES = 8 * 1024 * 1024  # a long sweep with stability windows is ~1 MB
MAX_JSON_DEPTH = 64  # a result document nests 6 deep; 100,000 nested lists would exhaust the recursion
_STRING = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"')
_NOT_BRACKET = re.compile(r"[^\[\]{}]+")


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a number JSON allows (numbers must be finite)")


def json_depth(text: str) -> int:
    """How deep the brackets of a JSON text nest (strings skipped); cheap: only the brackets are walked."""
    depth = deepest = 0
    for char in _NOT_BRACKET.sub("", _STRING.sub("", text)):
        depth += 1 if char in "[{" else -1
        deepest = max(deepest, depth)
    return deepest


def parse_json(body: bytes | str) -> Any:
    """The parsed body, or ApiError 400 with one line: not UTF-8, not JSON, nested deeper than MAX_JSON_DEPTH,
    NaN/Infinity (``parse_constant``), or a number too long to convert (Python's int digit limit)."""
    try:
        text = body.decode("utf-8") if isinstance(body, bytes) else body
    except UnicodeDecodeError:
        raise ApiError(400, "body is not UTF-8 text") from None
    if (depth := json_depth(text)) > MAX_JSON_DEPTH:
        raise ApiError(400, f"body nests {depth} levels deep; the limit is {MAX_JSON_DEPTH}")
    try:
        return json.loads(text, parse_constant=_reject_constant)
    except json.JSONDecodeError as err:
        raise ApiError(
            400, f"body is not valid JSON: {err.msg} at line {err.lineno} column {err.colno}"
        ) from None
    except RecursionError:
        raise ApiError(400, "body nests too deeply to parse") from None
    except ValueError as err:  # NaN/Infinity, or an integer over Python's digit limit
        raise ApiError(400, f"body is not acceptable JSON: {' '.join(str(err).split())[:200]}") from None


async def read_body(request: Any, limit: int) -> bytes:
    """The request body, refused with 413 as soon as it is (or says it will be) larger than ``limit``."""
    declared = request.headers.get("content-length")
    if declared is not None:
        try:
            size = int(declared)
        except ValueError:
            raise ApiError(400, f"Content-Length {declared!r} is not a number") from None
        if size > limit:
            raise ApiError(413, f"body of {size} bytes is over the limit of {limit} bytes")
    chunks, total = [], 0
    async for chunk in request.stream():  # a chunked body has no Content-Length: count what arrives
        total += len(chunk)
        if total > limit:
            raise ApiError(413, f"body is over the limit of {limit} bytes")
        chunks.append(chunk)
    return b"".join(chunks)


# a JSON \u0000 escape, not preceded by an escaped backslash (``\\u0000`` is the six characters, not NUL)
_NUL_ESCAPE = re.compile(r"(?<!\\)(?:\\\\)*\\u0000")


def refuse_nul(text: str) -> None:
    """422 when a JSON body holds a NUL character: PostgreSQL's text and jsonb cannot, SQLite can; refused on
    both, so every store takes the same documents."""
    if _NUL_ESCAPE.search(text):
        raise ApiError(
            422, "the document contains a NUL character (\\u0000), which the results database cannot store"
        )


@dataclass
class Submission:
    result: Any  # accelbench.documents.ResultDocument
    result_text: str  # verbatim when the body was the bare document
    variant: Any  # VariantManifest | None
    source: str
    content_hash: str = ""  # sha256 of the canonical document (computed once, from the one to_dict)


def parse_submission(body: bytes) -> Submission:
    """Bytes → the documents, or ApiError 400 (not JSON) / 422 (wrong shape, naming the field)."""
    return submission_of(parse_json(body), body.decode("utf-8"))


def submission_of(obj: Any, text: str | None = None) -> Submission:
    """A parsed body (a bare document, kept verbatim as ``text`` when given, or the envelope) → Submission."""
    if not isinstance(obj, dict):
        raise ApiError(422, "body must be a JSON object: a result document or {result, variant, source}")
    if text is not None:
        refuse_nul(text)
    if "result" in obj and "schema" not in obj:
        unknown = sorted(set(obj) - {"result", "variant", "source"})
        if unknown:
            raise ApiError(422, f"field '{unknown[0]}': not allowed (expected result, variant, source)")
        result, variant, source = obj.get("result"), obj.get("variant"), obj.get("source")
        result_text = ""  # filled from the validated document below
    else:
        result, variant, source, result_text = obj, None, None, text or ""
    result = check_result(result, "result" if "result" in obj and "schema" not in obj else "body")
    if variant is not None:
        variant = check_variant(variant, "variant")
        expected = result.provenance.manifest_hash
        if expected and variant.manifest_hash != expected:
            raise ApiError(
                422, "variant: field 'manifest_hash': differs from the result's provenance.manifest_hash"
            )
    if source is not None and (not isinstance(source, str) or "/" in source or not source.strip()
                               or len(source) > 300):  # fmt: skip
        raise ApiError(422, "field 'source': must be a file name (no folders, at most 300 characters)")
    import hashlib

    from accelbench.documents import to_dict
    from accelbench.util import canonical_json_text

    # once: the content hash is the sha256 of this canonical text, and a document that came in the envelope
    # is stored as it (compact, sorted keys: json's C encoder; an indented dump runs the pure-Python one)
    canonical = canonical_json_text(to_dict(result))
    content_hash = hashlib.sha256(canonical.encode("utf-8")).hexdigest()
    return Submission(result, result_text or canonical + "\n", variant, source or f"{result.run_id}.json",
                      content_hash)  # fmt: skip


def _created_at(value: Any) -> datetime | None:
    try:
        when = datetime.fromisoformat(str(value).replace("Z", "+00:00"))
    except ValueError:
        return None
    return when if when.tzinfo else when.replace(tzinfo=timezone.utc)


def columns(doc: Any) -> dict[str, Any]:
    """The indexed columns copied out of a ``ResultDocument``."""
    prov = doc.provenance
    host = prov.host or {}
    verdicts: dict[str, int] = {}
    for s in doc.steps:
        verdicts[str(s.verdict)] = verdicts.get(str(s.verdict), 0) + 1
    return {
        "schema": doc.schema_id, "run_id": doc.run_id, "model": doc.model, "variant": doc.variant,
        "target": doc.target or "", "precision": doc.precision or "", "manifest_hash": prov.manifest_hash,
        "host": str(host.get("hostname") or host.get("name") or host.get("cpu") or "")[:200] or None,
        "accelbench_version": ((prov.packages or {}).get("accelbench") or "")[:40] or None, "origin": doc.origin,
        "created_at": _created_at(prov.created_at) if prov.created_at else None,
        "summary": {"steps": len(doc.steps), "verdicts": verdicts, "complete": doc.complete},
    }  # fmt: skip


def store(session: Any, sub: Submission) -> tuple[Any, bool]:
    """Insert the result (and its variant) unless already stored; returns (row, created). Commits."""
    import sqlalchemy as sa
    from sqlalchemy.exc import IntegrityError

    from accelbench.service.models import Result

    content_hash = sub.content_hash or sub.result.content_hash()
    existing = session.execute(
        sa.select(Result).where(Result.content_hash == content_hash)
    ).scalar_one_or_none()
    if existing is not None:
        return existing, False
    variant_id = None
    if sub.variant is not None:
        variant_id = _store_variant(session, sub.variant)
    row = Result(content_hash=content_hash, source=sub.source, document=sub.result_text, variant_id=variant_id,
                 **columns(sub.result))  # fmt: skip
    session.add(row)
    try:
        session.commit()  # acknowledged only after this: a killed server loses nothing it answered 201 for
    except IntegrityError:  # the same document arrived concurrently and the other request won
        session.rollback()
        return session.execute(
            sa.select(Result).where(Result.content_hash == content_hash)
        ).scalar_one(), False
    return row, True


MAX_BATCH = 500


def parse_batch(body: bytes) -> list[Submission]:
    """``{"results": [DOCUMENT | {result, variant, source}, …]}`` → submissions; 422 names the item."""
    obj = parse_json(body)
    if not isinstance(obj, dict) or set(obj) != {"results"} or not isinstance(obj["results"], list):
        raise ApiError(422, 'body must be {"results": [result document or {result, variant, source}, ...]}')
    if not 1 <= len(obj["results"]) <= MAX_BATCH:
        raise ApiError(422, f"field 'results': 1 to {MAX_BATCH} documents per batch")
    refuse_nul(body.decode("utf-8"))
    out = []
    for index, item in enumerate(obj["results"]):
        try:
            out.append(submission_of(item))
        except ApiError as err:
            raise ApiError(err.status, f"results[{index}]: {err.message}") from None
    return out


def store_many(session: Any, subs: list[Submission]) -> list[tuple[str, bool]]:
    """Store a batch in one transaction: (content hash, created) per submission, in order. Commits."""
    import sqlalchemy as sa
    from sqlalchemy.exc import IntegrityError

    from accelbench.service.models import Result

    hashes = [s.content_hash or s.result.content_hash() for s in subs]
    known = set(
        session.execute(sa.select(Result.content_hash).where(Result.content_hash.in_(set(hashes)))).scalars()
    )
    out, seen = [], set()
    for sub, content_hash in zip(subs, hashes, strict=True):
        created = content_hash not in known and content_hash not in seen
        if created:
            seen.add(content_hash)
            variant_id = _store_variant(session, sub.variant) if sub.variant is not None else None
            session.add(Result(content_hash=content_hash, source=sub.source, document=sub.result_text,
                               variant_id=variant_id, **columns(sub.result)))  # fmt: skip
        out.append((content_hash, created))
    try:
        session.commit()
    except IntegrityError:  # one of them arrived concurrently: store one by one, each once
        session.rollback()
        return [(row.content_hash, created) for row, created in (store(session, sub) for sub in subs)]
    return out


def _store_variant(session: Any, manifest: Any) -> int:
    import sqlalchemy as sa
    from sqlalchemy.exc import IntegrityError

    from accelbench.documents import dump_json
    from accelbench.service.models import Variant

    def find() -> Any:
        return session.execute(
            sa.select(Variant.id).where(Variant.manifest_hash == manifest.manifest_hash)
        ).scalar_one_or_none()

    found = find()
    if found is not None:
        return found
    try:
        with session.begin_nested():
            row = Variant(
                manifest_hash=manifest.manifest_hash, name=manifest.name, document=dump_json(manifest)
            )
            session.add(row)
        return row.id
    except IntegrityError:
        return find()
