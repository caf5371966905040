"""Server-rendered pages (Jinja2, no JavaScript, no build step): dashboard, report, result, history, login.

The report page shows the same report.html ``accelbench report`` writes (its body, embedded) under a GET form
of the options, so changing the SLO is a plain form submit; ``/report.html`` serves the file byte for byte.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import date, datetime, time, timedelta, timezone
from pathlib import Path
from time import monotonic
from typing import Annotated, Any, Literal
from urllib.parse import urlencode

from fastapi import APIRouter, Depends, Form, Query, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response
from fastapi.templating import Jinja2Templates
from markupsafe import Markup

from accelbench.reports import formatting
from accelbench.reports.options import ReportOptions
from accelbench.reports.rows import ReportRow
from accelbench.service import history as hist
from accelbench.service import queries, query_options, tables
from accelbench.service.auth import (
    COOKIE,
    LOGIN_SCOPES,
    SECURE_COOKIE,
    SESSION_MAX_AGE_S,
    LoginThrottle,
    Principal,
    end_session,
    lookup,
    require,
    session_cookie,
    start_session,
)
from accelbench.service.build_process import problem_line
from accelbench.service.deps import DbSession
from accelbench.service.errors import ApiError, log
from accelbench.service.models import Result
from accelbench.service.state import service

router = APIRouter(include_in_schema=False)
templates = Jinja2Templates(directory=str(Path(__file__).parent / "templates"))
templates.env.filters.update(formatting.FILTERS)
Reader = Annotated[Principal, Depends(require("read", public=True))]
Options = Annotated[ReportOptions, Depends(query_options.report_options)]
PERCENTILES = ("50", "90", "95", "99", "99.9")
Format = Annotated[Literal["html", "csv"], Query(description="csv: download the table named by `table`")]
TableId = Annotated[str, Query(max_length=40, description="which table of the page to download as CSV")]
PER_PAGE = 50


def _page(request: Request, name: str, **context: Any) -> HTMLResponse:
    page = templates.TemplateResponse(request, name, context)
    assert isinstance(page, HTMLResponse)  # Starlette's _TemplateResponse
    return page


def _csv(page_tables: list[tables.PageTable], table: str, name: str) -> Response:
    """One of a page's tables as CSV, every digit kept; an unknown table id → 404."""
    found = next((t for t in page_tables if t.id == table), None)
    if found is None:
        known = ", ".join(t.id for t in page_tables)
        raise ApiError(404, f"no table {table[:40]!r} on this page (tables: {known})")
    return Response(
        found.csv(),
        media_type="text/csv; charset=utf-8",
        headers={"Content-Disposition": f'attachment; filename="{name}-{found.id}.csv"'},
    )


def _host_labels(rows: list[Result]) -> dict[str, str]:
    """Content hash → the host as people read it (CPU, GPUs): the label of its probe, copied out at ingest."""
    return {row.content_hash: row.host_label for row in rows if row.host_label}


@dataclass(frozen=True)
class ModelOverview:
    """One model on the dashboard: where it is measured and projected, and the cheapest row at the defaults."""

    model: str
    measured: list[str] = field(default_factory=list)  # target ids
    projected: list[str] = field(default_factory=list)
    best: ReportRow | None = None  # rank 1
    problem: str | None = None  # why its report could not be built (one line)

    @classmethod
    def of(cls, model: str, rows: list[ReportRow]) -> ModelOverview:
        return cls(
            model,
            measured=sorted({r.target for r in rows if r.status == "measured"}),
            projected=sorted({r.target for r in rows if r.status == "projected"}),
            best=next((r for r in rows if r.rank == 1), None),
        )


@router.get("/", response_class=HTMLResponse)
def dashboard(
    request: Request,
    session: DbSession,
    _who: Reader,
    fmt: Annotated[Format, Query(alias="format")] = "html",
    table: TableId = "latest",
) -> Response:
    """Models, targets, the latest results, and per model what is measured and what is projected."""
    models, targets = queries.models_and_targets(session)
    latest_rows, total = queries.list_results(session, {}, 20, 0)
    latest = tables.results_table([queries.summary(r) for r in latest_rows], _host_labels(latest_rows))
    latest.id, latest.caption = "latest", "Latest results"
    if fmt == "csv":
        return _csv([latest], table, "dashboard")
    overview = []
    for model in models:
        try:  # each model in its own guard: one bad series is one error line, never a 500 for the page
            # precomputed on ingest (Reports.after_push) or being built now; only a small model is built here
            rendered = service(request).reports.for_page(session, ReportOptions(), model, wait=False).rendered
            if rendered is None:
                raise ApiError(503, "its report is being prepared; reload in a moment")
        except Exception as err:  # noqa: BLE001 - e.g. only results without a target; logged when unexpected
            overview.append(ModelOverview(model, problem=problem_line(err, model)))
            continue
        overview.append(ModelOverview.of(model, rendered.data.rows))
    # a history is one (model, target, precision) series; results without a target have none
    series = queries.series(session)
    return _page(
        request, "dashboard.html", models=overview, targets=targets, latest=latest, total=total, series=series
    )


@router.get("/results", response_class=HTMLResponse)
def results_page(
    request: Request,
    session: DbSession,
    _who: Reader,
    fmt: Annotated[Format, Query(alias="format")] = "html",
    table: TableId = "results",
    model: Annotated[str | None, Query(max_length=200)] = None,
    target: Annotated[str | None, Query(max_length=100)] = None,
    precision: Annotated[str | None, Query(max_length=20)] = None,
    host: Annotated[str | None, Query(max_length=200)] = None,
    origin: Annotated[str | None, Query(max_length=60)] = None,
    since: Annotated[date | None, Query(description="created on or after this day (UTC)")] = None,
    until: Annotated[date | None, Query(description="created on or before this day (UTC)")] = None,
    page: Annotated[int, Query(ge=1, le=10**6)] = 1,
    per_page: Annotated[int, Query(ge=1, le=500)] = PER_PAGE,
) -> Response:
    """Every stored result, newest first, filtered and paged (the ``created_at`` index keeps a page cheap at
    any size); each row links to its result page. ``format=csv`` downloads the page's rows."""
    chosen = {"model": model, "target": target, "precision": precision, "host": host, "origin": origin}
    filters: queries.Filters = {
        **chosen,
        "since": _day(since),
        "until": _day(until + timedelta(days=1)) if until and until < date.max else None,
    }
    rows, total = queries.list_results(session, filters, per_page, (page - 1) * per_page)
    listing = tables.results_table([queries.summary(r) for r in rows], _host_labels(rows))
    if fmt == "csv":
        return _csv([listing], table, "results")
    choices = queries.filter_choices(session)
    host_rows = queries.rows_by_id(session, [i for _, i in choices["host"]])
    hosts = [(value, host_rows[i].host_label or value) for value, i in choices["host"] if i in host_rows]
    kept = {k: v for k, v in {**chosen, "since": since, "until": until}.items() if v}
    pages = max(1, -(-total // per_page))

    def link(n: int) -> str:
        return "/results?" + urlencode(
            {**kept, "page": n, **({"per_page": per_page} if per_page != PER_PAGE else {})}
        )

    return _page(
        request,
        "results.html",
        listing=listing,
        total=total,
        page=page,
        pages=pages,
        link=link,
        chosen={**chosen, "since": since, "until": until},
        choices=choices,
        hosts=hosts,
    )


def _day(day: date | None) -> datetime | None:
    return datetime.combine(day, time(0), tzinfo=timezone.utc) if day else None


@router.get("/report", response_class=HTMLResponse)
def report_page(
    request: Request,
    session: DbSession,
    _who: Reader,
    options: Options,
    model: Annotated[str, Query(min_length=1, max_length=200)],
    fmt: Annotated[Format, Query(alias="format")] = "html",
    table: TableId = "ranking",
) -> Response:
    """One model's report with SLO, percentile, price-basis and baseline controls (a GET form). Each ranking
    row links to the result documents behind it; ``format=csv&table=results`` is the report's results.csv.
    After a push it shows the report built before it until the background build with the new results is ready."""
    page = service(request).reports.for_page(session, options, model, formats=("html",))
    rendered = page.rendered
    assert rendered is not None  # for_page waits for a report never built before
    ranked = sorted(
        (r for r in rendered.data.rows if r.model == model),
        key=lambda r: (r.rank is None, r.rank or 0, r.target, r.precision),
    )
    links = {
        (r.target, r.precision): "/results?"
        + urlencode({"model": model, "target": r.target, "precision": r.precision})
        for r in ranked
        if r.status == "measured"
    }
    ranking = tables.ranking_table(ranked, links)
    if fmt == "csv":
        if table == "results":
            from accelbench.reports.capacity import percentile_key
            from accelbench.reports.table import flat_rows, to_csv_text

            flat = flat_rows(ranked, options.slo_ms, percentile_key(options.percentile))  # as results.csv is
            return Response(
                to_csv_text(flat),
                media_type="text/csv; charset=utf-8",
                headers={"Content-Disposition": 'attachment; filename="results.csv"'},
            )
        return _csv([ranking], table, "report")

    def render() -> bytes:
        style, body = page.parts()
        return bytes(
            _page(
                request,
                "report.html",
                model=model,
                options=options,
                ranking=ranking,
                style=style,
                body=body,
                baseline_id=rendered.data.baseline_id,
                percentiles=PERCENTILES,
                targets=sorted(service(request).catalog.targets),
                query=request.url.query,
                stale=page.stale,
            ).body
        )

    return HTMLResponse(page.page(str(request.url), render))


@router.get("/report.html")
def report_file(
    request: Request,
    session: DbSession,
    _who: Reader,
    options: Options,
    model: Annotated[str | None, Query(max_length=200)] = None,
) -> Response:
    """Exactly the report.html ``accelbench report`` writes for the same documents and options."""
    rendered = service(request).reports.exact(session, options, model, formats=("html",))
    return Response(rendered.outputs["report.html"], media_type="text/html; charset=utf-8")


@router.get("/results/{content_hash}", response_class=HTMLResponse)
def result_page(
    request: Request,
    content_hash: str,
    session: DbSession,
    _who: Reader,
    fmt: Annotated[Format, Query(alias="format")] = "html",
    table: TableId = "steps",
) -> Response:
    """One result: host summary (the full probe behind a disclosure), provenance, accuracy, every step with
    its intervals, verdict, reasons and attempts, and the variant manifest when it was pushed."""
    row = queries.get_result(session, content_hash)
    detail = queries.detail(row, session)
    doc = service(request).reports.documents(session, [row])[0]
    page_tables = [
        tables.steps_table(doc.steps),
        tables.attempts_table(doc.steps),
        tables.accuracy_table(detail.document.get("accuracy")),
        tables.probe_table(detail.provenance.get("host")),
    ]
    if fmt == "csv":
        return _csv(page_tables, table, f"result-{content_hash[:12]}")
    return _page(
        request,
        "result.html",
        r=detail,
        doc=detail.document,
        tables={t.id: t for t in page_tables},
        host=formatting.host_summary(detail.provenance.get("host")),
        provenance=formatting.provenance_items(detail.provenance),
    )


@router.get("/history", response_class=HTMLResponse)
def history_page(
    request: Request,
    session: DbSession,
    _who: Reader,
    options: Options,
    model: Annotated[str, Query(min_length=1, max_length=200)],
    target: Annotated[str, Query(min_length=1, max_length=100)],
    precision: Annotated[str, Query(min_length=1, max_length=20)],
    fmt: Annotated[Format, Query(alias="format")] = "html",
    table: TableId = "runs",
) -> Response:
    """Every run of one (model, target, precision) at the SLO, with a trend plot flagging big moves."""
    from accelbench.reports.capacity import percentile_key
    from accelbench.reports.plots import trend_chart

    reports = service(request).reports
    data = hist.history(reports, session, options, model, target, precision)
    runs = tables.history_table(data.runs)
    if fmt == "csv":
        return _csv([runs], table, "history")
    points = [
        {
            "label": r.label,
            "capacity_rps": r.capacity_rps,
            "latency_us": r.latency_us,
            "flagged": r.regression,
        }
        for r in data.runs
    ]
    key = percentile_key(options.percentile)
    gen = [(r, r.generative) for r in data.runs if r.generative is not None]
    if gen:  # a generative series: output tokens/s and TTFT / TPOT p99 per run
        gen_points = [
            {
                "label": r.label,
                "capacity_rps": g.output_tokens_per_s,
                "latency_us": (g.ttft_p99_ms or 0) * 1000,
                "tpot_us": (g.tpot_p99_ms or 0) * 1000,
                "flagged": False,
            }
            for r, g in gen
        ]
        first = gen[0][1]
        title = (
            f"{model} on {target} at {precision}: TTFT p99 ≤ {first.ttft_objective_ms:g} ms, "
            f"TPOT p99 ≤ {first.tpot_objective_ms:g} ms"
        )
        svg = reports.memo(
            "trend",
            (title, repr(gen_points)),
            lambda: trend_chart(title, gen_points, "TTFT p99", generative=True),
        )
        return _page(request, "history.html", h=data, plot=Markup(svg), options=options, runs=runs)
    title = f"{model} on {target} at {precision}: {key} ≤ {options.slo_ms:g} ms"
    if not any(p["capacity_rps"] is not None for p in points):  # empty axes say nothing: the table says why
        return _page(request, "history.html", h=data, plot=None, options=options, runs=runs, key=key)
    # the plot of the same points is written once per set of points (hundreds of runs: tens of ms each time)
    svg = reports.memo("trend", (title, key, repr(points)), lambda: trend_chart(title, points, key))
    return _page(request, "history.html", h=data, plot=Markup(svg), options=options, runs=runs)


@router.get("/login", response_class=HTMLResponse)
def login_form(request: Request) -> HTMLResponse:
    return _page(request, "login.html", error=None)


@router.post("/login", response_class=HTMLResponse)
def login(request: Request, token: Annotated[str, Form(max_length=200)]) -> Response:
    """Check a read or admin token and start a server-side session: the cookie holds the session id (HttpOnly,
    SameSite=Strict, Max-Age; ``__Host-`` and Secure over TLS), never the token. Runner and push tokens are
    refused: they belong to machines, and a browser session must not be able to act as one."""
    throttle: LoginThrottle = request.app.state.login_throttle
    address = request.client.host if request.client else "?"
    if (wait := throttle.wait_s(address, monotonic())) > 0:
        log.warning("login refused for %s: too many failed logins", address)
        raise ApiError(
            429,
            f"too many failed logins; try again in {wait:.0f} s",
            {"Retry-After": str(max(1, round(wait)))},
        )
    with service(request).sessions() as session:
        principal = lookup(session, token.strip())
        if principal is None:
            throttle.failed(address, monotonic())
            log.warning("failed login from %s: unknown or revoked token", address)
        else:
            throttle.succeeded(address)
        if principal is None or principal.scope not in LOGIN_SCOPES:
            why = (
                "that token is unknown, revoked, or may not read"
                if principal is None
                else f"a {principal.scope} token is for agents and pushes, not for the pages: use a read or admin token"
            )
            page = _page(request, "login.html", error=why)
            page.status_code = 401 if principal is None else 403
            return page
        sid = start_session(session, principal)
    response = RedirectResponse("/", status_code=303)
    secure = request.url.scheme == "https"
    response.set_cookie(
        SECURE_COOKIE if secure else COOKIE,
        sid,
        max_age=SESSION_MAX_AGE_S,
        path="/",
        secure=secure,
        httponly=True,
        samesite="strict",
    )
    return response


@router.post("/logout")
def logout(request: Request) -> Response:
    """End the session on the server (the id is dead even if the cookie were kept) and drop the cookie."""
    sid = session_cookie(request)
    if sid:
        with service(request).sessions() as session:
            end_session(session, sid)
    response = RedirectResponse("/login", status_code=303)
    response.delete_cookie(COOKIE, path="/")
    response.delete_cookie(SECURE_COOKIE, path="/", secure=True, httponly=True, samesite="strict")
    return response


@router.get("/favicon.ico")
def favicon() -> Response:
    return Response(status_code=204)  # browsers ask for it; there is none, and a 404 is console noise


def page_error(request: Request, err: ApiError) -> Response | None:
    """A browser asking for a page gets a readable page for an error (the login form for a missing token);
    API clients keep the JSON line."""
    if request.url.path.startswith("/api/") or "text/html" not in request.headers.get("accept", ""):
        return None
    if err.status == 401 and request.method == "GET":
        return RedirectResponse("/login", status_code=303)
    page = _page(request, "error.html", status=err.status, message=err.message)
    page.status_code = err.status
    return page
