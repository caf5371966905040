"""POST /api/v1/results: read the body under a size limit, validate it, store it once (by content hash).

The body is a result document, or ``{"result": RESULT, "variant": MANIFEST, "source": FILE_NAME}`` when the
variant manifest it references (``provenance.manifest_hash``) comes along. The content hash is the sha256 of
the canonical JSON (sorted keys), the same hash ``accelbench report`` prints as a result's source, so the same
measurement pushed twice, however it was formatted, is stored once: 201 the first time, 200 after.
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass
from itertools import accumulate
from typing import TYPE_CHECKING, Any, NoReturn, cast

from fastapi import Request

from accelbench.documents import ResultDocument, VariantManifest, to_dict
from accelbench.reports.formatting import host_label
from accelbench.service.errors import ApiError
from accelbench.service.validate import check_result, check_variant, created_at
from accelbench.util import canonical_json_text

if TYPE_CHECKING:
    from sqlalchemy.orm import Session

DEFAULT_MAX_BODY_BYTES = 8 * 1024 * 1024  # a long sweep with stability windows is ~1 MB
MAX_JSON_DEPTH = 64  # a result document nests 6 deep; 100,000 nested lists would exhaust the recursion


def _reject_constant(name: str) -> NoReturn:
    raise ValueError(f"{name} is not a number JSON allows (numbers must be finite)")


_STEP = {ord("["): 1, ord("{"): 1, ord("]"): -1, ord("}"): -1}
_NOT_BRACKET_OR_QUOTE = bytes(sorted(set(range(256)) - set(b'[]{}"')))


def json_depth(data: bytes | str) -> int:
    """How deep the brackets of a JSON text nest (strings skipped); cheap: only the brackets are walked, in C,
    in time linear in the text whatever it holds (it runs on the event loop before auth, on any body).

    Escapes go first: ``\\\\`` pairs (a run of n backslashes leaves n mod 2, and removing a pair never
    joins two runs), then ``\\"``. What is left of the quotes then each delimits a string, so of the text's
    brackets and quotes (``bytes.translate``) those between an even and an odd quote lie outside strings.
    (UTF-8 continuation bytes are never brackets, quotes or backslashes.) A regex that matched the strings
    one by one was quadratic on an unterminated string of escaped quotes (issue 40): 31 KiB took 2.6 s."""
    raw = data.encode("utf-8", "surrogatepass") if isinstance(data, str) else data
    if b"\\" in raw:
        raw = raw.replace(b"\\\\", b"").replace(b'\\"', b"")
    kept = raw.translate(None, _NOT_BRACKET_OR_QUOTE)
    return max(accumulate(map(_STEP.__getitem__, b"".join(kept.split(b'"')[0::2]))), default=0)


def parse_json(body: bytes | str) -> object:
    """The parsed body, or ApiError 400 with one line: not UTF-8, not JSON, nested deeper than MAX_JSON_DEPTH,
    NaN/Infinity (``parse_constant``), or a number too long to convert (Python's int digit limit)."""
    try:
        text = body.decode("utf-8") if isinstance(body, bytes) else body
    except UnicodeDecodeError:
        raise ApiError(400, "body is not UTF-8 text") from None
    if (depth := json_depth(body)) > MAX_JSON_DEPTH:
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


async def read_body(request: Request, limit: int) -> bytes:
    """The request body, refused with 413 as soon as it is (or says it will be) larger than ``limit``."""
    declared = request.headers.get("content-length")
    if declared is not None:
        try:
            size = int(declared)
        except ValueError:
            raise ApiError(400, f"Content-Length {declared!r} is not a number") from None
        if size > limit:
            raise ApiError(413, f"body of {size} bytes is over the limit of {limit} bytes")
    chunks: list[bytes] = []
    total = 0
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
    both, so every store takes the same documents. (The substring test first: the regex is only needed, and
    only paid for, when the six characters are there at all.)"""
    if "\\u0000" in text and _NUL_ESCAPE.search(text):
        raise ApiError(
            422, "the document contains a NUL character (\\u0000), which the results database cannot store"
        )


@dataclass
class Submission:
    result: ResultDocument
    result_text: str  # verbatim when the body was the bare document
    variant: VariantManifest | None
    source: str
    content_hash: str  # sha256 of the canonical document (computed once, from the one to_dict)


def parse_submission(body: bytes) -> Submission:
    """Bytes → the documents, or ApiError 400 (not JSON) / 422 (wrong shape, naming the field)."""
    return submission_of(parse_json(body), body.decode("utf-8"))


def submission_of(obj: object, text: str | None = None) -> Submission:
    """A parsed body (a bare document, kept verbatim as ``text`` when given, or the envelope) → Submission."""
    if not isinstance(obj, dict):
        raise ApiError(422, "body must be a JSON object: a result document or {result, variant, source}")
    if text is not None:
        refuse_nul(text)
    if "result" in obj and "schema" not in obj:
        unknown = sorted(set(obj) - {"result", "variant", "source"})
        if unknown:
            raise ApiError(422, f"field '{unknown[0]}': not allowed (expected result, variant, source)")
        raw, raw_variant, source = obj.get("result"), obj.get("variant"), obj.get("source")
        result_text = ""  # filled from the validated document below
    else:
        raw, raw_variant, source, result_text = obj, None, None, text or ""
    result = check_result(raw, "result" if "result" in obj and "schema" not in obj else "body")
    variant = None
    if raw_variant is not None:
        variant = check_variant(raw_variant, "variant")
        expected = result.provenance.manifest_hash
        if expected and variant.manifest_hash != expected:
            raise ApiError(
                422, "variant: field 'manifest_hash': differs from the result's provenance.manifest_hash"
            )
    if source is not None and (
        not isinstance(source, str) or "/" in source or not source.strip() or len(source) > 300
    ):
        raise ApiError(422, "field 'source': must be a file name (no folders, at most 300 characters)")
    # once: the content hash is the sha256 of this canonical text, and a document that came in the envelope
    # is stored as it (compact, sorted keys: json's C encoder; an indented dump runs the pure-Python one)
    canonical = canonical_json_text(to_dict(result))
    content_hash = hashlib.sha256(canonical.encode("utf-8")).hexdigest()
    return Submission(
        result,
        result_text or canonical + "\n",
        variant,
        source or f"{result.run_id[:295]}.json",
        content_hash,
    )


def columns(doc: ResultDocument) -> dict[str, Any]:
    """The indexed columns copied out of a ``ResultDocument``."""
    prov = doc.provenance
    host = prov.host or {}
    verdicts: dict[str, int] = {}
    for s in doc.steps:
        verdicts[str(s.verdict)] = verdicts.get(str(s.verdict), 0) + 1
    return {
        "schema": doc.schema_id,
        "run_id": doc.run_id,
        "model": doc.model,
        "variant": doc.variant,
        "target": doc.target or "",
        "precision": doc.precision or "",
        "manifest_hash": prov.manifest_hash,
        "host": str(host.get("hostname") or host.get("name") or host.get("cpu") or "")[:200] or None,
        "accelbench_version": ((prov.packages or {}).get("accelbench") or "")[:40] or None,
        "origin": doc.origin,
        "created_at": created_at(prov.created_at) if prov.created_at else None,
        "summary": {"steps": len(doc.steps), "verdicts": verdicts, "complete": doc.complete},
        "host_label": host_label(prov.host)[:300],
    }


@dataclass(frozen=True)
class Stored:
    """What storing one submission did: the result's row id and content hash, and whether it is new."""

    id: int
    content_hash: str
    created: bool


def store(session: Session, sub: Submission) -> Stored:
    """Insert the result (and its variant) unless already stored. Commits."""
    return store_many(session, [sub])[0]


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


def store_many(session: Session, subs: list[Submission]) -> list[Stored]:
    """Store a batch in one transaction, each document once: one multi-row INSERT of the rows and one of their
    documents (``executemany``; rows come back in order with their ids), then one commit, acknowledged only
    after it (a killed server loses nothing it answered for). One ``Stored`` per submission, in order: the
    first of a content hash in the batch is ``created`` when it was not stored before."""
    import sqlalchemy as sa
    from sqlalchemy.exc import IntegrityError

    from accelbench.service.models import Result, StoredDocument, utcnow

    hashes = [s.content_hash for s in subs]
    stored = sa.select(Result.content_hash, Result.id).where(Result.content_hash.in_(set(hashes)))
    ids: dict[str, int] = {r.content_hash: r.id for r in session.execute(stored)}
    new: dict[str, Submission] = {}
    for sub, content_hash in zip(subs, hashes, strict=True):
        if content_hash not in ids:
            new.setdefault(content_hash, sub)
    if new:
        now, variants, rows = utcnow(), dict[str, int | None](), []
        for content_hash, sub in new.items():
            variant_id = None
            if sub.variant is not None:
                known = sub.variant.manifest_hash
                variant_id = variants.get(known) or variants.setdefault(
                    known, _store_variant(session, sub.variant)
                )
            rows.append(
                {
                    "content_hash": content_hash,
                    "source": sub.source,
                    "variant_id": variant_id,
                    "received_at": now,
                    **columns(sub.result),
                }
            )
        try:
            # Core statements on the tables: none of the ORM's bulk machinery per call
            results, documents = cast(sa.Table, Result.__table__), cast(sa.Table, StoredDocument.__table__)
            inserted = (
                session.execute(
                    sa.insert(results).returning(results.c.id, sort_by_parameter_order=True), rows
                )
                .scalars()
                .all()
            )
            texts = [
                {"result_id": i, "document": sub.result_text}
                for i, sub in zip(inserted, new.values(), strict=True)
            ]
            session.execute(sa.insert(documents), texts)
            session.commit()
        except IntegrityError:  # one of them arrived concurrently and the other request won
            session.rollback()
            if len(subs) > 1:  # one by one, each once
                return [stored for sub in subs for stored in store_many(session, [sub])]
            found = session.execute(sa.select(Result.id).where(Result.content_hash == hashes[0])).scalar_one()
            return [Stored(found, hashes[0], False)]
        ids.update(zip(new, inserted, strict=True))
    out = []
    for content_hash in hashes:
        out.append(Stored(ids[content_hash], content_hash, content_hash in new))
        new.pop(content_hash, None)  # a second copy in the same batch is not new
    return out


def _store_variant(session: Session, manifest: VariantManifest) -> int:
    import sqlalchemy as sa
    from sqlalchemy.exc import IntegrityError

    from accelbench.documents import dump_json
    from accelbench.service.models import Variant

    def find() -> int | None:
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
    except IntegrityError:  # stored meanwhile by another request
        found = find()
        if found is None:
            raise
        return found
