"""Reports from stored documents: the same builder and renderers as ``accelbench report``, fed by the database.

The documents come out of the database exactly as pushed, so the JSON and the HTML the server renders are
byte-identical to what ``accelbench report`` renders from the result folders they were pushed from.

Building a report over hundreds of runs takes up to a second of CPU (the builder goes over every step; the
plots are written directly as SVG), so the server keeps what it built, per app (``Reports``, ``state.Service.reports``), and builds off the
request process: in a build process of its own (spawned, niced: a build in a thread would hold the GIL the
request handlers need), scheduled on every push for the pushed models' default page and dashboard row. A page
shows the last build for its query until the fresh one is in; the JSON report and ``/report.html`` wait for
a build of exactly what is stored (the request waits; the server does not).
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable
from concurrent.futures import Future, ProcessPoolExecutor
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Annotated, Literal, TypeVar, cast

from fastapi import Query
from markupsafe import Markup

from accelbench.documents import ResultDocument
from accelbench.errors import BadInputError
from accelbench.reports.cost import PRICE_BASES, parse_price_overrides
from accelbench.reports.options import DEFAULTS, ReportOptions, options_from
from accelbench.reports.report import RenderedReport, render_report  # at import: the first push must not pay
from accelbench.reports.rows import ReportRow
from accelbench.service import queries
from accelbench.service.errors import ApiError, log
from accelbench.service.models import Result
from accelbench.service.queries import Fingerprint

if TYPE_CHECKING:
    from sqlalchemy import Engine
    from sqlalchemy.orm import Session

    from accelbench.hardware.catalog import Catalog

if TYPE_CHECKING:
    PriceBasis = str  # mypy reads no Literal made from a tuple; FastAPI checks the values at run time
else:
    PriceBasis = Literal[PRICE_BASES]


def report_options(
    slo_p99_ms: Annotated[
        float, Query(gt=0, le=1e7, allow_inf_nan=False, description="latency SLO, ms")
    ] = DEFAULTS.slo_ms,
    percentile: Annotated[str, Query(max_length=10, description="50 90 95 99 99.9")] = DEFAULTS.percentile,
    baseline: Annotated[
        str | None, Query(max_length=100, description="target id to compare against")
    ] = DEFAULTS.baseline,
    price_basis: PriceBasis = DEFAULTS.price_basis,
    price: Annotated[list[str], Query(description="ID=USD per accelerator-hour, repeatable")] = [],  # noqa: B006
    project: Annotated[list[str], Query(description="also project these target ids")] = [],  # noqa: B006
    target_qps: Annotated[float | None, Query(gt=0, le=1e9, allow_inf_nan=False)] = DEFAULTS.target_qps,
    headroom: Annotated[float, Query(ge=0, lt=1, allow_inf_nan=False)] = DEFAULTS.headroom,
    include_failed: bool = DEFAULTS.include_failed,
    max_error_rate: Annotated[float, Query(ge=0, le=1, allow_inf_nan=False)] = DEFAULTS.max_error_rate,
    amortization_years: Annotated[
        float | None, Query(gt=0, le=100, allow_inf_nan=False)
    ] = DEFAULTS.amortization_years,
    usd_per_kwh: Annotated[float, Query(ge=0, le=1e3, allow_inf_nan=False)] = DEFAULTS.usd_per_kwh,
    # generative results; strings so that an empty form field means "not set" (the default)
    slo_ttft_p99_ms: Annotated[
        str | None, Query(max_length=20, description="generative: a step's TTFT p99 objective, ms")
    ] = None,
    slo_tpot_p99_ms: Annotated[
        str | None, Query(max_length=20, description="generative: a step's TPOT p99 objective, ms")
    ] = None,
    slo_ttft_ms: Annotated[
        str | None, Query(max_length=20, deprecated=True, description="old spelling of slo_ttft_p99_ms")
    ] = None,
    slo_tpot_ms: Annotated[
        str | None, Query(max_length=20, deprecated=True, description="old spelling of slo_tpot_p99_ms")
    ] = None,
    min_tokens_per_user: Annotated[
        str | None, Query(max_length=20, description="generative: tokens/s per user")
    ] = None,
) -> ReportOptions:
    """The options of ``accelbench report`` as query parameters: the same names, and the defaults of the one
    definition both read (reports/options.py); the HTTP bounds are the API's own."""
    try:
        overrides = parse_price_overrides(tuple(price))
    except BadInputError as err:
        raise ApiError(422, f"field price: {err}") from None
    return options_from({
        "slo_ms": slo_p99_ms, "percentile": percentile, "baseline": baseline, "price_basis": price_basis,
        "price_overrides": overrides, "target_qps": target_qps, "headroom": headroom, "project": project,
        "include_failed": include_failed, "max_error_rate": max_error_rate, "amortization_years": amortization_years,
        "usd_per_kwh": usd_per_kwh, "slo_ttft_p99_ms": _objective("slo_ttft_p99_ms", slo_ttft_p99_ms, "slo_ttft_ms", slo_ttft_ms),
        "slo_tpot_p99_ms": _objective("slo_tpot_p99_ms", slo_tpot_p99_ms, "slo_tpot_ms", slo_tpot_ms),
        "min_tokens_per_user": _positive("min_tokens_per_user", min_tokens_per_user),
    })  # fmt: skip


def _objective(name: str, text: str | None, old_name: str, old_text: str | None) -> float | None:
    """An objective given by its name or by its deprecated spelling (not both, unless one is empty)."""
    value, old = _positive(name, text), _positive(old_name, old_text)
    if value is not None and old is not None:
        raise ApiError(422, f"field {old_name}: the old spelling of {name}; give one of them")
    return value if value is not None else old


def _positive(name: str, text: str | None) -> float | None:
    """An optional positive number from a query string; empty means not set, anything else is a 422."""
    if text is None or not text.strip():
        return None
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not (0 < value <= 1e7):
        raise ApiError(422, f"field {name}: must be a number in (0, 1e7], got {text!r}")
    return value


SMALL = 50  # a report over fewer results is built in the request process (tens of ms, no plots queued)
RENDERED_MAX = 64  # reports kept per app, least recently used out
PARSED_MAX = 20000  # parsed documents kept per app (a stored document never changes)
MEMO_MAX = 64
PAGES_KEPT = 8  # rendered pages per built report (one per URL: the default query and a few others)
BUILD_PROCESSES = 2  # one for the builds scheduled on ingest, one free for a request waiting on its report
DEBOUNCE_S = 0.5  # pushes come in bursts: a scheduled build starts after the burst, not once per push
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
class _Data:
    rows: list[ReportRow]
    baseline_id: str


@dataclass(frozen=True)
class BuiltReport:
    """What a build process hands back (picklable): what the routes read of a RenderedReport."""

    data: _Data
    outputs: dict[str, bytes]
    json_text: str


Built = RenderedReport | BuiltReport  # built here, or in a build process
Key = tuple[str | None, str, tuple[str, ...]]  # a report's query: (model, repr(options), formats)
T = TypeVar("T")


@dataclass(frozen=True)
class Problem:
    """A report that could not be built: the status and the one line the page or the API answers with."""

    status: int
    message: str


Answer = tuple[Fingerprint, BuiltReport | Problem]  # what a build process hands back


@dataclass
class _Entry:
    fingerprint: Fingerprint
    report: Built
    parts: tuple[Markup, Markup] | None = None  # report.html's style and body, split once when a page asks
    pages: OrderedDict[tuple[str, bool], bytes] = field(default_factory=OrderedDict)  # PageReport.page's


@dataclass(frozen=True)
class PageReport:
    """What a page shows: the report (None while the first one is being built) and whether newer results are
    still being added to it in the background."""

    rendered: Built | None
    stale: bool
    entry: _Entry | None = field(default=None, repr=False)

    def parts(self) -> tuple[Markup, Markup]:
        """The report.html's <style> and <body> content, to embed it unchanged under the page's controls; split
        once per build (a report over hundreds of runs is MBs)."""
        if self.entry is None:
            if self.rendered is None:
                return Markup(""), Markup("")
            return report_parts(self.rendered.outputs["report.html"])
        if self.entry.parts is None:
            self.entry.parts = report_parts(self.entry.report.outputs["report.html"])
        return self.entry.parts

    def page(self, url: str, render: Callable[[], bytes]) -> bytes:
        """The page shown at ``url`` (the page depends on nothing else but this report), rendered once
        per build by ``render()``: a page embeds the report's MBs, and templating them costs more than the rest
        of a view."""
        if self.entry is None:
            return render()
        key = (url, self.stale)
        found = self.entry.pages.get(key)
        if found is None:
            found = self.entry.pages[key] = render()
            while len(self.entry.pages) > PAGES_KEPT:
                self.entry.pages.popitem(last=False)
        return found


def report_parts(html: bytes) -> tuple[Markup, Markup]:
    text = html.decode("utf-8")
    style = re.search(r"<style>(.*?)</style>", text, re.S)
    body = re.search(r"<body>\n?(.*)</body>", text, re.S)
    return Markup(style.group(1) if style else ""), Markup(body.group(1) if body else text)


class Reports:
    """One app's reports: parsed documents, built reports by query, and the build processes. On
    ``state.Service.reports``; ``close()`` when the app stops."""

    def __init__(self, engine: Engine, catalog: Catalog, catalog_path: str | None) -> None:
        from accelbench.service import db

        self.sessions, self.catalog, self.catalog_path = db.sessionmaker_for(engine), catalog, catalog_path
        self.db_url = engine.url.render_as_string(hide_password=False)  # what a build process connects to
        self.parsed: dict[str, ResultDocument] = {}
        self.rendered: OrderedDict[Key, _Entry] = OrderedDict()
        self.pending: set[Key] = set()  # queries being built for the cache
        self.memos: dict[str, OrderedDict[Hashable, object]] = {}  # memo(): per kind, least recently used out
        self.lock = threading.Lock()
        self.pool: ProcessPoolExecutor | None = None
        self.closed = False

    # -- documents and fingerprints ------------------------------------------------------------------------
    def documents(self, session: Session, rows: list[Result]) -> list[ResultDocument]:
        """Stored rows → ResultDocuments, each parsed once per app."""
        return parse_documents(self.parsed, session, rows)

    @staticmethod
    def fingerprint(session: Session, model: str | None) -> Fingerprint:
        found = queries.fingerprint(session, model)
        if not found[0]:
            raise ApiError(
                404, f"no results stored for model {model!r}" if model else "no results stored yet"
            )
        return found

    def memo(self, kind: str, key: Hashable, compute: Callable[[], T], keep: int = MEMO_MAX) -> T:
        """``compute()`` once per ``key`` of ``kind`` (the ``keep`` latest kept): what depends only on stored
        documents, which never change (a history's per-run figures, its plot for the same points). One kind
        always computes values of one type."""
        with self.lock:
            memo = self.memos.setdefault(kind, OrderedDict())
            if key in memo:
                memo.move_to_end(key)
                return cast(T, memo[key])  # what compute() returned for this kind
        value = compute()
        with self.lock:
            memo[key] = value
            while len(memo) > keep:
                memo.popitem(last=False)
        return value

    # -- the cache -----------------------------------------------------------------------------------------
    def _get(self, key: Key) -> _Entry | None:
        with self.lock:
            entry = self.rendered.get(key)
            if entry is not None:
                self.rendered.move_to_end(key)
            return entry

    def _put(self, key: Key, fingerprint: Fingerprint, report: Built) -> _Entry:
        with self.lock:
            entry = self.rendered.get(key)
            if entry is None or entry.fingerprint != fingerprint:
                entry = self.rendered[key] = _Entry(fingerprint, report)
            self.rendered.move_to_end(key)
            while len(self.rendered) > RENDERED_MAX:
                self.rendered.popitem(last=False)
            return entry

    # -- building --------------------------------------------------------------------------------------------
    def exact(self, session: Session, options: ReportOptions, model: str | None,
              formats: tuple[str, ...] = ()) -> Built:  # fmt: skip
        """The report of exactly what is stored (``render_report``, what ``accelbench report`` calls): unknown
        model → 404, a bad option (unknown target id, percentile) → 422. Built once per (query, what is stored):
        (how many, the newest id, the sum of ids) of the visible results changes with a push or a hide."""
        return self._exact(session, options, model, formats).report

    def _exact(self, session: Session, options: ReportOptions, model: str | None,
               formats: tuple[str, ...]) -> _Entry:  # fmt: skip
        fingerprint = self.fingerprint(session, model)
        key: Key = (model, repr(options), formats)
        entry = self._get(key)
        if entry is not None and entry.fingerprint == fingerprint:
            return entry
        if fingerprint[0] >= SMALL:  # in a build process: this thread waits, the others keep serving
            from concurrent.futures.process import BrokenProcessPool

            pool, future = self._submit(options, model, formats, 0.0)
            try:
                built_at, built = future.result()
            except BrokenProcessPool:  # a build process died (killed, out of memory): build here instead
                log.warning("a report build process died; building the report of %r in the server", model)
                self._drop_pool(pool)
            else:
                if isinstance(built, Problem):
                    raise ApiError(built.status, built.message)
                return self._put(key, built_at, built)
        return self._put(key, fingerprint, self._build_here(session, options, model, formats))

    def _build_here(self, session: Session, options: ReportOptions, model: str | None,
                    formats: tuple[str, ...]) -> RenderedReport:  # fmt: skip
        rows = queries.stored_rows(session, model=model)
        try:
            return render_report(self.documents(session, rows), self.catalog, options, formats=formats)
        except BadInputError as err:
            raise ApiError(422, str(err)) from None
        except Exception as err:  # noqa: BLE001 - a stored document the report cannot take: one line, logged
            raise ApiError(422, problem_line(err, model or "(all)")) from None

    def for_page(self, session: Session, options: ReportOptions, model: str | None,
                 formats: tuple[str, ...] = (), wait: bool = True) -> PageReport:  # fmt: skip
        """The pages' report: the fresh one when built; else the last one built for the same query (``stale``)
        while a build process builds the fresh one, so no page view waits for a rebuild after a push; with
        nothing built yet, built now (``wait``, or a small model) or in the background (``rendered`` None)."""
        fingerprint = self.fingerprint(session, model)
        key: Key = (model, repr(options), formats)
        entry = self._get(key)
        if entry is not None and entry.fingerprint == fingerprint:
            return PageReport(entry.report, False, entry)
        if entry is not None or not (wait or fingerprint[0] < SMALL):
            self.schedule(options, model, formats)
            return PageReport(entry.report if entry else None, True, entry)
        entry = self._exact(session, options, model, formats)
        return PageReport(entry.report, False, entry)

    def _submit(self, options: ReportOptions, model: str | None, formats: tuple[str, ...],
                debounce_s: float) -> tuple[ProcessPoolExecutor, Future[Answer]]:  # fmt: skip
        """(the pool, the future of ``_build_in_child``) in a build process."""
        with self.lock:
            if self.closed:
                raise ApiError(503, "the server is stopping")
            if self.pool is None:
                import multiprocessing

                self.pool = ProcessPoolExecutor(
                    max_workers=BUILD_PROCESSES, mp_context=multiprocessing.get_context("spawn"),
                    initializer=_start_builder, initargs=(self.db_url, self.catalog_path),
                )  # fmt: skip
            pool = self.pool
        try:
            return pool, pool.submit(_build_in_child, options, model, formats, debounce_s)
        except Exception:  # a broken pool (a build process died): the next build starts a new one
            self._drop_pool(pool)
            raise

    def _drop_pool(self, pool: ProcessPoolExecutor) -> None:
        """Forget a broken pool so that the next build starts a new one."""
        with self.lock:
            if self.pool is pool:
                self.pool = None
        pool.shutdown(wait=False, cancel_futures=True)

    def schedule(self, options: ReportOptions, model: str | None, formats: tuple[str, ...]) -> None:
        """Build this query's report in a build process (once at a time per query; again when results arrived
        during the build), and keep it where ``for_page`` finds it."""
        key: Key = (model, repr(options), formats)
        with self.lock:
            if key in self.pending or self.closed:
                return
            self.pending.add(key)
        try:
            pool, future = self._submit(options, model, formats, DEBOUNCE_S)
        except Exception:  # noqa: BLE001 - stopping, or a broken pool: the next view schedules it again
            with self.lock:
                self.pending.discard(key)
            return

        def done(fut: Future[Answer]) -> None:
            with self.lock:
                self.pending.discard(key)
                closed = self.closed
            if closed or fut.cancelled():
                return
            try:
                fingerprint, built = fut.result()
            except Exception as err:  # noqa: BLE001
                from concurrent.futures.process import BrokenProcessPool

                log.warning("background report of %r failed: %s", model, " ".join(str(err).split())[:300])
                if isinstance(err, BrokenProcessPool):
                    self._drop_pool(pool)
                return
            if not isinstance(built, Problem):
                self._put(key, fingerprint, built)
            with self.sessions() as session:
                if queries.fingerprint(session, model) != fingerprint:
                    self.schedule(options, model, formats)

        future.add_done_callback(done)

    def after_push(self, models: list[str]) -> None:
        """Precompute on ingest: the pushed models' report pages and dashboard rows at the default options."""
        for model in models:
            self.schedule(ReportOptions(), model, ())
            self.schedule(default_page_options(), model, ("html",))

    def forget(self, model: str) -> None:
        """A result of ``model`` was hidden or shown again: drop the reports that show (or lack) it, so that no
        page goes on showing a hidden result while the new build is made, and schedule that build."""
        with self.lock:
            for key in [k for k in self.rendered if k[0] in (model, None)]:
                del self.rendered[key]
        self.after_push([model])

    def close(self) -> None:
        """Stop the build processes (the server is stopping): a build in progress is abandoned, not waited for."""
        with self.lock:
            pool, self.pool, self.closed = self.pool, None, True
        if pool is not None:
            for proc in list((getattr(pool, "_processes", None) or {}).values()):  # a private map: may go
                proc.terminate()
            pool.shutdown(wait=False, cancel_futures=True)


# -- the build process -------------------------------------------------------------------------------------------
@dataclass
class _Builder:
    """A build process's own engine, catalog and parsed documents."""

    engine: Engine
    catalog: Catalog
    parsed: dict[str, ResultDocument] = field(default_factory=dict)


_BUILDER: _Builder | None = None  # in a build process only


def _start_builder(db_url: str, catalog_path: str | None) -> None:
    """A build process starts: lower priority than the server's, its own engine and catalog."""
    from accelbench.hardware.catalog import load_catalog
    from accelbench.service import db

    global _BUILDER
    with contextlib.suppress(OSError):
        os.nice(NICE)
    _BUILDER = _Builder(db.make_engine(db_url), load_catalog(catalog_path))


def _build_in_child(options: ReportOptions, model: str | None, formats: tuple[str, ...],
                    debounce_s: float) -> Answer:  # fmt: skip
    """In a build process: (fingerprint, the report) or (fingerprint, the problem)."""
    import time

    from accelbench.service import db

    time.sleep(debounce_s)
    builder = _BUILDER
    assert builder is not None, "_start_builder runs first in every build process"
    with db.sessionmaker_for(builder.engine)() as session:
        fingerprint = queries.fingerprint(session, model)
        if not fingerprint[0]:
            return fingerprint, Problem(
                404, f"no results stored for model {model!r}" if model else "no results"
            )
        try:
            docs = parse_documents(builder.parsed, session, queries.stored_rows(session, model=model))
            rendered = render_report(docs, builder.catalog, options, formats=formats)
        except BadInputError as err:
            return fingerprint, Problem(422, str(err))
        except Exception as err:  # noqa: BLE001 - shown as the page's one line; the traceback to the log
            return fingerprint, Problem(422, problem_line(err, model or "(all)"))
    data = _Data(list(rendered.data.rows), rendered.data.baseline_id)
    return fingerprint, BuiltReport(data, dict(rendered.outputs), rendered.json_text)


def default_page_options() -> ReportOptions:
    """The options the report page has with no query (``report_options``' defaults)."""
    return report_options(price=[], project=[])


def problem_line(err: Exception, model: str) -> str:
    """The one line a page shows where one model's report could not be built (unexpected errors are logged)."""
    if isinstance(err, ApiError):
        return err.message
    log.exception("the report of model %r could not be built", model)
    return f"this model's report could not be built ({type(err).__name__}); the server log has the details"
