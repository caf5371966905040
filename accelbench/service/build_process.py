"""The report build process: what runs in the niced, spawned processes that build reports off the request
process (``report_cache.Reports`` submits ``build_in_child`` to them), and what they hand back (picklable)."""

from __future__ import annotations

import contextlib
import json
import os
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from accelbench.documents import ResultDocument
from accelbench.errors import BadInputError
from accelbench.reports.options import ReportOptions
from accelbench.reports.report import render_report  # at import: the first push must not pay
from accelbench.reports.rows import ReportRow
from accelbench.service import queries
from accelbench.service.errors import ApiError, log
from accelbench.service.models import Result
from accelbench.service.queries import Fingerprint

if TYPE_CHECKING:
    from sqlalchemy import Engine
    from sqlalchemy.orm import Session

    from accelbench.hardware.catalog import Catalog

PARSED_MAX = 20000  # parsed documents kept per app (a stored document never changes)
NICE = 10  # the build processes yield the cores to the request handlers


def parse_documents(
    cache: dict[str, ResultDocument], session: Session, rows: list[Result]
) -> list[ResultDocument]:
    """Stored rows → ResultDocuments, each parsed once into ``cache`` (by content hash); the texts of those not
    parsed yet are read in one query per chunk (``results`` rows do not carry their documents)."""
    from accelbench.documents import load_result

    found = {r.content_hash: doc for r in rows if (doc := cache.get(r.content_hash)) is not None}
    missing = [r for r in rows if r.content_hash not in found]
    for start in range(0, len(missing), 500):
        chunk = missing[start : start + 500]
        texts = queries.document_texts(session, [r.id for r in chunk])
        if len(cache) + len(chunk) > PARSED_MAX:
            cache.clear()  # another thread may be reading it: each keeps what it found in ``found``
        for row in chunk:
            found[row.content_hash] = cache[row.content_hash] = load_result(
                json.loads(texts[row.id]), name=row.source
            )
    return [found[r.content_hash] for r in rows]


@dataclass(frozen=True)
class ReportData:
    rows: list[ReportRow]
    baseline_id: str


@dataclass(frozen=True)
class BuiltReport:
    """What a build process hands back (picklable): what the routes read of a RenderedReport."""

    data: ReportData
    outputs: dict[str, bytes]
    json_text: str


@dataclass(frozen=True)
class Problem:
    """A report that could not be built: the status and the one line the page or the API answers with."""

    status: int
    message: str


Answer = tuple[Fingerprint, BuiltReport | Problem]  # what a build process hands back


@dataclass
class _Builder:
    """A build process's own engine, catalog and parsed documents."""

    engine: Engine
    catalog: Catalog
    parsed: dict[str, ResultDocument] = field(default_factory=dict)


_BUILDER: _Builder | None = None  # in a build process only


def start_builder(db_url: str, catalog_path: str | None) -> None:
    """A build process starts: lower priority than the server's, its own engine and catalog."""
    from accelbench.hardware.catalog import load_catalog
    from accelbench.service import db

    global _BUILDER
    with contextlib.suppress(OSError):
        os.nice(NICE)
    _BUILDER = _Builder(db.make_engine(db_url), load_catalog(catalog_path))


def build_in_child(
    options: ReportOptions, model: str | None, formats: tuple[str, ...], debounce_s: float
) -> Answer:
    """In a build process: (fingerprint, the report) or (fingerprint, the problem)."""
    import time

    from accelbench.service import db

    time.sleep(debounce_s)
    builder = _BUILDER
    assert builder is not None, "start_builder runs first in every build process"
    with db.sessionmaker_for(builder.engine)() as session:
        fingerprint = queries.fingerprint(session, model)
        if not fingerprint[0]:
            return fingerprint, Problem(
                404, f"no results stored for model {model!r}" if model else "no results"
            )
        try:
            docs = parse_documents(builder.parsed, session, queries.stored_rows(session, model=model))
            rendered = render_report(
                docs, builder.catalog, options, formats=formats, leave_out_unknown_targets=True
            )
        except BadInputError as err:
            return fingerprint, Problem(422, str(err))
        except Exception as err:  # noqa: BLE001 - shown as the page's one line; the traceback to the log
            return fingerprint, Problem(422, problem_line(err, model or "(all)"))
    data = ReportData(list(rendered.data.rows), rendered.data.baseline_id)
    return fingerprint, BuiltReport(data, dict(rendered.outputs), rendered.json_text)


def problem_line(err: Exception, model: str) -> str:
    """The one line a page shows where one model's report could not be built (unexpected errors are logged)."""
    if isinstance(err, ApiError):
        return err.message
    log.exception("the report of model %r could not be built", model)
    return f"this model's report could not be built ({type(err).__name__}); the server log has the details"
