"""Reports from stored documents: the same builder and renderers as ``accelbench report``, fed by the database.

The documents come out of the database exactly as pushed, so the JSON and the HTML the server renders are
byte-identical to what ``accelbench report`` renders from the result folders they were pushed from.
"""

from __future__ import annotations

import json
import threading
from collections import OrderedDict
from dataclasses import dataclass
from typing import Annotated, Any, Literal

from fastapi import Query

from accelbench.errors import BadInputError
from accelbench.reports.cost import PRICE_BASES, parse_price_overrides
from accelbench.reports.options import DEFAULTS, options_from
from accelbench.service import queries
from accelbench.service.errors import ApiError


def report_options(
    slo_p99_ms: Annotated[
        float, Query(gt=0, le=1e7, allow_inf_nan=False, description="latency SLO, ms")
    ] = DEFAULTS.slo_ms,
    percentile: Annotated[str, Query(max_length=10, description="50 90 95 99 99.9")] = DEFAULTS.percentile,
    baseline: Annotated[
        str | None, Query(max_length=100, description="target id to compare against")
    ] = DEFAULTS.baseline,
    price_basis: Literal[PRICE_BASES] = DEFAULTS.price_basis,
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
    slo_ttft_ms: Annotated[
        str | None, Query(max_length=20, description="generative: TTFT p99 objective, ms")
    ] = None,
    slo_tpot_ms: Annotated[
        str | None, Query(max_length=20, description="generative: TPOT p99 objective, ms")
    ] = None,
    min_tokens_per_user: Annotated[
        str | None, Query(max_length=20, description="generative: tokens/s per user")
    ] = None,
) -> Any:
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
        "usd_per_kwh": usd_per_kwh, "slo_ttft_ms": _positive("slo_ttft_ms", slo_ttft_ms),
        "slo_tpot_ms": _positive("slo_tpot_ms", slo_tpot_ms),
        "min_tokens_per_user": _positive("min_tokens_per_user", min_tokens_per_user),
    })  # fmt: skip


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


_PARSED: dict[str, Any] = {}  # content hash → ResultDocument; stored documents never change
_PARSED_MAX = 20000


def documents(rows: list[Any]) -> list[Any]:
    """Stored rows → ResultDocuments, parsed once per process (a document never changes once stored)."""
    from accelbench.documents import load_result

    out = []
    for row in rows:
        doc = _PARSED.get(row.content_hash)
        if doc is None:
            doc = load_result(json.loads(row.document), name=row.source)
            if len(_PARSED) >= _PARSED_MAX:
                _PARSED.clear()
            _PARSED[row.content_hash] = doc
        out.append(doc)
    return out


_RENDERED: OrderedDict[tuple, tuple[tuple, Any]] = OrderedDict()  # query → (what it was built from, report)
_RENDERED_MAX = 64
_LOCK = threading.Lock()
_PENDING: set[tuple] = set()  # queries a background thread is rendering
_WORKER: Any = None  # one thread renders in the background: a report build is CPU-bound


def _key(session: Any, catalog: Any, options: Any, model: str | None, formats: tuple[str, ...]) -> tuple:
    bind = session.get_bind()  # one process may serve several databases (tests): they must not share entries
    return (str(bind.url), id(bind), model, repr(options), formats, id(catalog))


def render(
    session: Any, catalog: Any, options: Any, model: str | None = None, formats: tuple[str, ...] = ()
) -> Any:
    """``render_report`` over every stored result (or one model's): the function ``accelbench report`` calls,
    exactly for what is stored now. Unknown model → 404, a bad option (unknown target id, percentile) → 422.

    (how many, the newest id, the sum of ids) of the visible results identifies what a report was built from:
    a rendered report is reused until a push (or a hide) changes that (conbench#1616).
    """
    fingerprint = queries.fingerprint(session, model)
    if not fingerprint[0]:
        raise ApiError(404, f"no results stored for model {model!r}" if model else "no results stored yet")
    key = _key(session, catalog, options, model, formats)
    with _LOCK:
        hit = _RENDERED.get(key)
        if hit is not None and hit[0] == fingerprint:
            _RENDERED.move_to_end(key)
            return hit[1]
    return _build(session, catalog, options, model, formats, key, fingerprint)


def _build(session: Any, catalog: Any, options: Any, model: str | None, formats: tuple[str, ...], key: tuple,
           fingerprint: tuple) -> Any:  # fmt: skip
    from accelbench.reports.report import render_report

    rows = queries.stored_rows(session, model=model)
    try:
        rendered = render_report(documents(rows), catalog, options, formats=formats)
    except BadInputError as err:
        raise ApiError(422, str(err)) from None
    except Exception as err:  # noqa: BLE001 - a stored document the report cannot take: one line, logged
        raise ApiError(422, problem_line(err, model or "(all)")) from None
    with _LOCK:
        _RENDERED[key] = (fingerprint, rendered)
        _RENDERED.move_to_end(key)
        while len(_RENDERED) > _RENDERED_MAX:
            _RENDERED.popitem(last=False)
    return rendered


@dataclass(frozen=True)
class PageReport:
    """What a page shows: the report (None while the first one is being built) and whether newer results are
    still being added to it in the background."""

    rendered: Any
    stale: bool


def render_for_page(app: Any, session: Any, options: Any, model: str | None, formats: tuple[str, ...] = (),
                    wait: bool = True, wait_below: int = 0) -> PageReport:  # fmt: skip
    """The pages' report: the fresh one when built; else the last one built for the same query (``stale``)
    while a background thread builds the fresh one, so no page view waits for a rebuild after a push; with
    nothing built yet, built now (``wait``, or fewer than ``wait_below`` results: a quick build) or in the
    background (``rendered`` None)."""
    catalog = app.state.catalog
    fingerprint = queries.fingerprint(session, model)
    if not fingerprint[0]:
        raise ApiError(404, f"no results stored for model {model!r}" if model else "no results stored yet")
    key = _key(session, catalog, options, model, formats)
    with _LOCK:
        hit = _RENDERED.get(key)
    if hit is not None and hit[0] == fingerprint:
        return PageReport(hit[1], False)
    if hit is not None or not (wait or fingerprint[0] < wait_below):
        schedule(app, options, model, formats)
        return PageReport(hit[1] if hit else None, True)
    return PageReport(_build(session, catalog, options, model, formats, key, fingerprint), False)


@dataclass(frozen=True)
class _Data:
    rows: list[dict[str, Any]]
    baseline_id: str | None


@dataclass(frozen=True)
class BuiltPage:
    """What a background build hands back (picklable): what the pages read of a RenderedReport."""

    data: _Data
    outputs: dict[str, bytes]


_CHILD: dict[str, Any] = {}  # in the build process: engine per URL, catalog per path


def _build_in_child(db_url: str, catalog_path: str | None, options: Any, model: str | None,
                    formats: tuple[str, ...]) -> tuple[tuple, BuiltPage | str]:  # fmt: skip
    """In the build process: (fingerprint, the page's report) or (fingerprint, one-line problem)."""
    import time as _time

    from accelbench.hardware.catalog import load_catalog
    from accelbench.reports.report import render_report
    from accelbench.service import db

    _time.sleep(0.5)  # pushes come in bursts: build once after the burst, not once per push
    engine = _CHILD.get(db_url) or _CHILD.setdefault(db_url, db.make_engine(db_url))
    catalog = _CHILD.get(f"catalog:{catalog_path}") or _CHILD.setdefault(
        f"catalog:{catalog_path}", load_catalog(catalog_path)
    )
    with db.sessionmaker_for(engine)() as session:
        fingerprint = queries.fingerprint(session, model)
        if not fingerprint[0]:
            return fingerprint, "no results"
        try:
            rendered = render_report(documents(queries.stored_rows(session, model=model)), catalog, options,
                                     formats=formats)  # fmt: skip
        except Exception as err:  # noqa: BLE001 - shown as the page's one line when it asks
            return fingerprint, " ".join(str(err).split())[:300] or type(err).__name__
    rows = [dict(r) for r in rendered.data.rows]
    return fingerprint, BuiltPage(_Data(rows, rendered.data.baseline_id), dict(rendered.outputs))


def _pool() -> Any:
    """One build process: a report build is CPU-bound Python; in a thread it would hold the GIL the request
    handlers need, in a process of its own it runs on the other core."""
    global _WORKER
    if _WORKER is None:
        import multiprocessing
        from concurrent.futures import ProcessPoolExecutor

        _WORKER = ProcessPoolExecutor(max_workers=1, mp_context=multiprocessing.get_context("spawn"))
    return _WORKER


def shutdown() -> None:
    """Stop the build process (the server is stopping): a build in progress is abandoned, not waited for."""
    global _WORKER
    with _LOCK:
        worker, _WORKER = _WORKER, None
    if worker is not None:
        for proc in list(getattr(worker, "_processes", {}).values()):
            proc.terminate()
        worker.shutdown(wait=False, cancel_futures=True)


def schedule(app: Any, options: Any, model: str | None, formats: tuple[str, ...]) -> None:
    """Build this query's report in the build process (once at a time per query; again when results arrived
    during the build), and keep it where ``render_for_page`` finds it."""
    engine, catalog = app.state.engine, app.state.catalog
    key = (str(engine.url), id(engine), model, repr(options), formats, id(catalog))
    with _LOCK:
        if key in _PENDING:
            return
        _PENDING.add(key)
    url = engine.url.render_as_string(hide_password=False)
    try:
        future = _pool().submit(
            _build_in_child, url, app.state.settings.catalog_path, options, model, formats
        )
    except Exception:  # noqa: BLE001 - a broken pool (the process died): the next view builds in-process
        with _LOCK:
            _PENDING.discard(key)
        return

    def done(fut: Any) -> None:
        with _LOCK:
            _PENDING.discard(key)
        try:
            fingerprint, built = fut.result()
        except Exception:  # noqa: BLE001
            from accelbench.service.errors import log

            log.warning("background report of %r failed", model, exc_info=True)
            return
        if isinstance(built, BuiltPage):
            with _LOCK:
                old = _RENDERED.get(key)
                if old is None or old[0] != fingerprint:
                    _RENDERED[key] = (fingerprint, built)
                    _RENDERED.move_to_end(key)
                while len(_RENDERED) > _RENDERED_MAX:
                    _RENDERED.popitem(last=False)
        with app.state.sessions() as session:
            if queries.fingerprint(session, model) != fingerprint:
                schedule(app, options, model, formats)

    future.add_done_callback(done)


def after_push(app: Any, models: list[str]) -> None:
    """Precompute on ingest: the pushed models' report pages and dashboard rows at the default options."""
    from accelbench.reports.build import ReportOptions

    for model in models:
        schedule(app, ReportOptions(), model, ())
        schedule(app, default_page_options(), model, ("html",))


def default_page_options() -> Any:
    """The options the report page has with no query (``report_options``' defaults)."""
    return report_options(price=[], project=[])


def problem_line(err: Exception, model: str) -> str:
    """The one line a page shows where one model's report could not be built (unexpected errors are logged)."""
    if isinstance(err, ApiError):
        return err.message
    from accelbench.service.errors import log

    log.exception("the report of model %r could not be built", model)
    return f"this model's report could not be built ({type(err).__name__}); the server log has the details"
