"""Server-rendered pages (Jinja2, no JavaScript, no build step): dashboard, report, result, history, login.

The report page shows the same report.html ``accelbench report`` writes (its body, embedded) under a GET form
of the options, so changing the SLO is a plain form submit; ``/report.html`` serves the file byte for byte.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Form, Query, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response
from fastapi.templating import Jinja2Templates
from markupsafe import Markup

from accelbench.service import history as hist
from accelbench.service import queries, views
from accelbench.service.auth import COOKIE, Principal, lookup, require
from accelbench.service.deps import get_session
from accelbench.service.errors import ApiError

router = APIRouter(include_in_schema=False)
templates = Jinja2Templates(directory=str(Path(__file__).parent / "templates"))
Reader = Annotated[Principal, Depends(require("read"))]
Session = Annotated[Any, Depends(get_session)]
Options = Annotated[Any, Depends(views.report_options)]
PERCENTILES = ("50", "90", "95", "99", "99.9")


def _page(request: Request, name: str, **context: Any) -> HTMLResponse:
    return templates.TemplateResponse(request, name, context)


@router.get("/", response_class=HTMLResponse)
def dashboard(request: Request, session: Session, _who: Reader) -> HTMLResponse:
    """Models, targets, the latest results, and per model what is measured and what is projected."""
    from accelbench.reports.build import ReportOptions

    models, targets = queries.models_and_targets(session)
    latest, total = queries.list_results(session, {}, 20, 0)
    overview = []
    for model in models:
        try:
            rendered = views.render(session, request.app.state.catalog, ReportOptions(), model)
        except ApiError as err:  # e.g. only results without a target: one model must not hide the others
            overview.append(
                {"model": model, "measured": [], "projected": [], "best": None, "problem": err.message}
            )
            continue
        rows = rendered.data.rows
        best = next((r for r in rows if r["rank"] == 1), None)
        overview.append({"model": model, "measured": sorted({r["target"] for r in rows if r["status"] == "measured"}),
                         "projected": sorted({r["target"] for r in rows if r["status"] == "projected"}),
                         "best": best})  # fmt: skip
    # a history is one (model, target, precision) series; results without a target have none
    series = sorted(
        {(r.model, r.target, r.precision) for r in queries.stored_rows(session) if r.target and r.precision}
    )
    return _page(request, "dashboard.html", models=overview, targets=targets, latest=latest, total=total,
                 series=series)  # fmt: skip


def _report_body(html: str) -> tuple[Markup, Markup]:
    """The report page's <style> and <body> content, to embed it unchanged under the controls."""
    style = re.search(r"<style>(.*?)</style>", html, re.S)
    body = re.search(r"<body>\n?(.*)</body>", html, re.S)
    return Markup(style.group(1) if style else ""), Markup(body.group(1) if body else html)


@router.get("/report", response_class=HTMLResponse)
def report_page(request: Request, session: Session, _who: Reader, options: Options,
                model: Annotated[str, Query(min_length=1, max_length=200)]) -> HTMLResponse:  # fmt: skip
    """One model's report with SLO, percentile, price-basis and baseline controls (a GET form)."""
    rendered = views.render(session, request.app.state.catalog, options, model, formats=("html",))
    style, body = _report_body(rendered.outputs["report.html"].decode("utf-8"))
    ranking = sorted((r for r in rendered.data.rows if r["model"] == model),
                     key=lambda r: (r["rank"] is None, r["rank"] or 0, r["target"], r["precision"]))  # fmt: skip
    return _page(request, "report.html", model=model, options=options, ranking=ranking, style=style,
                 body=body, baseline_id=rendered.data.baseline_id, percentiles=PERCENTILES,
                 targets=sorted(request.app.state.catalog.targets), query=request.url.query)  # fmt: skip


@router.get("/report.html")
def report_file(request: Request, session: Session, _who: Reader, options: Options,
                model: Annotated[str | None, Query(max_length=200)] = None) -> Response:  # fmt: skip
    """Exactly the report.html ``accelbench report`` writes for the same documents and options."""
    rendered = views.render(session, request.app.state.catalog, options, model, formats=("html",))
    return Response(rendered.outputs["report.html"], media_type="text/html; charset=utf-8")


@router.get("/results/{content_hash}", response_class=HTMLResponse)
def result_page(request: Request, content_hash: str, session: Session, _who: Reader) -> HTMLResponse:
    """One result: its steps and verdicts, provenance, host, and the variant manifest when it was pushed."""
    detail = queries.detail(queries.get_result(session, content_hash), session)
    return _page(request, "result.html", r=detail, doc=detail["document"])


@router.get("/history", response_class=HTMLResponse)
def history_page(request: Request, session: Session, _who: Reader, options: Options,
                 model: Annotated[str, Query(min_length=1, max_length=200)],
                 target: Annotated[str, Query(min_length=1, max_length=100)],
                 precision: Annotated[str, Query(min_length=1, max_length=20)]) -> HTMLResponse:  # fmt: skip
    """Every run of one (model, target, precision) at the SLO, with a trend plot flagging big moves."""
    from accelbench.reports.capacity import percentile_key
    from accelbench.reports.plots import trend_chart

    data = hist.history(session, request.app.state.catalog, options, model, target, precision)
    runs = [{"label": (r["created_at"] or r["received_at"] or "")[:16].replace("T", " "),
             "capacity_rps": r["capacity_rps"], "latency_us": r["latency_us"],
             "flagged": bool(r["change"] and r["change"]["regression"])} for r in data["runs"]]  # fmt: skip
    key = percentile_key(options.percentile)
    gen = [r["generative"] for r in data["runs"] if r.get("generative")]
    if gen:  # a generative series: output tokens/s and TTFT / TPOT p99 per run
        runs = [{"label": (r["created_at"] or r["received_at"] or "")[:16].replace("T", " "),
                 "capacity_rps": g["output_tokens_per_s"], "latency_us": (g["ttft_p99_ms"] or 0) * 1000,
                 "tpot_us": (g["tpot_p99_ms"] or 0) * 1000, "flagged": False}
                for r, g in ((r, r["generative"]) for r in data["runs"] if r.get("generative"))]  # fmt: skip
        svg = trend_chart(f"{model} on {target} at {precision}: TTFT p99 ≤ {gen[0]['ttft_objective_ms']:g} ms, "
                          f"TPOT p99 ≤ {gen[0]['tpot_objective_ms']:g} ms", runs, "TTFT p99",
                          generative=True)  # fmt: skip
        return _page(request, "history.html", h=data, plot=Markup(svg), options=options)
    svg = trend_chart(f"{model} on {target} at {precision}: {key} ≤ {options.slo_ms:g} ms", runs, key)
    return _page(request, "history.html", h=data, plot=Markup(svg), options=options)


@router.get("/login", response_class=HTMLResponse)
def login_form(request: Request) -> HTMLResponse:
    return _page(request, "login.html", error=None)


@router.post("/login", response_class=HTMLResponse)
def login(request: Request, token: Annotated[str, Form(max_length=200)]) -> Response:
    """Check the token and keep it in an HttpOnly cookie: pages then work without JavaScript."""
    with request.app.state.sessions() as session:
        principal = lookup(session, token.strip())
    if principal is None or not principal.can("read"):
        page = _page(request, "login.html", error="that token is unknown, revoked, or may not read")
        page.status_code = 401
        return page
    response = RedirectResponse("/", status_code=303)
    response.set_cookie(COOKIE, token.strip(), httponly=True, samesite="strict")
    return response


@router.get("/logout")
def logout() -> Response:
    response = RedirectResponse("/login", status_code=303)
    response.delete_cookie(COOKIE)
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
