"""Reports from stored documents: the same builder and renderers as ``accelbench report``, fed by the database.

The documents come out of the database exactly as pushed, so the JSON and the HTML the server renders are
byte-identical to what ``accelbench report`` renders from the result folders they were pushed from.

Building a report over hundreds of runs takes up to a second of CPU (the builder goes over every step; the
plots are written directly as SVG), so the server keeps what it built, per app (``Reports``,
``state.Service.reports``), and builds off the request process: in a build process of its own (spawned,
niced: a build in a thread would hold the GIL the request handlers need), scheduled on every push for the
pushed models' default page and dashboard row. A page shows the last build for its query until the fresh one
is in; the JSON report and ``/report.html`` wait for a build of exactly what is stored (the request waits; the
server does not).

The build process itself is ``build_process``; the query options are ``query_options``.
"""

from __future__ import annotations

import re
import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable
from concurrent.futures import Future, ProcessPoolExecutor
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, TypeVar, cast

from markupsafe import Markup

from accelbench.errors import BadInputError
from accelbench.reports.options import ReportOptions
from accelbench.reports.report import RenderedReport, render_report
from accelbench.service import queries
from accelbench.service.build_process import (
    Answer,
    BuiltReport,
    Problem,
    build_in_child,
    parse_documents,
    problem_line,
    start_builder,
)
from accelbench.service.errors import ApiError, log
from accelbench.service.models import Result
from accelbench.service.queries import Fingerprint
from accelbench.service.query_options import default_page_options

if TYPE_CHECKING:
    from sqlalchemy import Engine
    from sqlalchemy.orm import Session

    from accelbench.documents import ResultDocument
    from accelbench.hardware.catalog import Catalog

SMALL = 50  # a report over fewer results is built in the request process (tens of ms, no plots queued)
RENDERED_MAX = 64  # reports kept per app, least recently used out
MEMO_MAX = 64
PAGES_KEPT = 8  # rendered pages per built report (one per URL: the default query and a few others)
BUILD_PROCESSES = 2  # one for the builds scheduled on ingest, one free for a request waiting on its report
DEBOUNCE_S = 0.5  # pushes come in bursts: a scheduled build starts after the burst, not once per push


Built = RenderedReport | BuiltReport  # built here, or in a build process
Key = tuple[str | None, str, tuple[str, ...]]  # a report's query: (model, repr(options), formats)
T = TypeVar("T")


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
    def exact(
        self, session: Session, options: ReportOptions, model: str | None, formats: tuple[str, ...] = ()
    ) -> Built:
        """The report of exactly what is stored (``render_report``, what ``accelbench report`` calls): unknown
        model → 404, a bad option (unknown target id, percentile) → 422. Built once per (query, what is stored):
        (how many, the newest id, the sum of ids) of the visible results changes with a push or a hide."""
        return self._exact(session, options, model, formats).report

    def _exact(
        self, session: Session, options: ReportOptions, model: str | None, formats: tuple[str, ...]
    ) -> _Entry:
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

    def _build_here(
        self, session: Session, options: ReportOptions, model: str | None, formats: tuple[str, ...]
    ) -> RenderedReport:
        rows = queries.stored_rows(session, model=model)
        try:
            return render_report(
                self.documents(session, rows),
                self.catalog,
                options,
                formats=formats,
                leave_out_unknown_targets=True,
            )
        except BadInputError as err:
            raise ApiError(422, str(err)) from None
        except Exception as err:  # noqa: BLE001 - a stored document the report cannot take: one line, logged
            raise ApiError(422, problem_line(err, model or "(all)")) from None

    def for_page(
        self,
        session: Session,
        options: ReportOptions,
        model: str | None,
        formats: tuple[str, ...] = (),
        wait: bool = True,
    ) -> PageReport:
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

    def _submit(
        self, options: ReportOptions, model: str | None, formats: tuple[str, ...], debounce_s: float
    ) -> tuple[ProcessPoolExecutor, Future[Answer]]:
        """(the pool, the future of ``build_in_child``) in a build process."""
        with self.lock:
            if self.closed:
                raise ApiError(503, "the server is stopping")
            if self.pool is None:
                import multiprocessing

                self.pool = ProcessPoolExecutor(
                    max_workers=BUILD_PROCESSES,
                    mp_context=multiprocessing.get_context("spawn"),
                    initializer=start_builder,
                    initargs=(self.db_url, self.catalog_path),
                )
            pool = self.pool
        try:
            return pool, pool.submit(build_in_child, options, model, formats, debounce_s)
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
